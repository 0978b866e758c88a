"""The allow-list of flags benchflow passes from a benchmark file or a suite's SKU
(workflow.backends.iree.allowed_flags): every flag the upstream benchmark files, this
repository's own and its suites use is on it, a SKU may opt out of it and a benchmark
file may not, and (marker `tool`) it matches the installed iree-compile and
iree-benchmark-module, so that an upgrade that renames or drops a flag fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from workflow.backends.iree import allowed_flags as allowed
from workflow.benchfile.flags import (
    OWNED_COMPILE_FLAGS,
    OWNED_FLAGS,
    READ_FLAGS,
    TOOLS,
    flag_paths,
)
from workflow.benchfile.parse import file_problems
from workflow.errors import ConfigError
from workflow.suite.schema import validate_suite

OWNED = {"compile_flags": OWNED_COMPILE_FLAGS, "benchmark_flags": OWNED_FLAGS}
# Flags of the installed tools that write files, run programs or load code: real flags
# (the tool test checks), none of them on the list.
DANGEROUS = {
    "iree-compile": ["--print-changed", "--print-changed-diff-path",
                     "--iree-llvmcpu-wasm-linker-path", "--iree-llvmcpu-system-linker-path",
                     "--iree-llvmcpu-embedded-linker-path", "--iree-flow-dump-dispatch-graph",
                     "--iree-llvmcpu-static-library-output-path", "--iree-load-plugin",
                     "--iree-hal-preprocess-executables-with", "--iree-parameter-export",
                     "--iree-hal-dump-executable-files-to", "--mlir-print-ir-after-all",
                     "--iree-preprocessing-pass-pipeline", "--iree-link-bitcode",
                     "--iree-scheduling-dump-statistics-file"],
    "iree-benchmark-module": ["--flagfile", "--output", "--executable_plugin",
                              "--device_replay_output", "--device_profiling_output",
                              "--hip_dylib_path", "--benchmark_out"],
}


def benchmark_files() -> list[Path]:
    return sorted([*(REPO / "tests" / "data" / "upstream").rglob("benchmarks/*/*.json"),
                   *(REPO / "benchmarks").glob("*/*.json")])


def test_every_flag_of_the_upstream_and_our_own_benchmark_files_passes():
    seen = 0
    for path in benchmark_files():
        data = json.loads(path.read_text())
        for key, tool in TOOLS.items():
            for flag in data.get(key, []):
                if not flag.startswith(OWNED[key]):
                    flag_paths(flag, tool)  # raises ValueError naming a refused flag
                    seen += 1
    assert seen >= 40  # the upstream files of every pinned commit are there


def test_every_sku_flag_of_the_shipped_suites_passes():
    for path in sorted((REPO / "config").glob("*.yaml")):
        raw = yaml.safe_load(path.read_text())
        if path.name == "schema.yaml":
            continue
        for name, sku in (raw.get("skus") or {}).items():
            iree = (sku or {}).get("iree") or {}
            assert allowed.sku_flag_problems(iree, str(path), name) == []


def test_the_lists_are_consistent():
    compile_, bench = allowed.ALLOWED["iree-compile"], allowed.ALLOWED["iree-benchmark-module"]
    # Every flag that reads a file is on a list (or refused by design: none is).
    assert set(READ_FLAGS) <= compile_ | bench
    assert allowed.READ_COMPILE_FLAGS | {"--iree-opt-import-parameters", "--iree-hip-bc-dir"} \
        == {f for f in READ_FLAGS if f.startswith("--iree")}
    assert not allowed.CODEGEN_FLAGS & allowed.RETIRED_COMPILE_FLAGS
    assert not allowed.RUN_FLAGS & allowed.RETIRED_BENCHMARK_FLAGS
    assert all(re.fullmatch(r"--[a-z][a-z0-9_-]*", f) for f in compile_ | bench)
    for tool, names in DANGEROUS.items():
        assert not set(names) & allowed.ALLOWED[tool], tool


def test_a_refusal_names_the_page_that_explains_the_list():
    """A refused flag's line sends the reader to the user guide's page on the allow-list,
    which names the module that holds it (not a design page whose section moved)."""
    line = allowed.refusal("--output=x", "iree-compile")
    page = REPO / allowed.DOCS
    assert f"({allowed.DOCS})" in line
    assert page.is_file() and "backends/iree/allowed_flags.py" in page.read_text()
    assert "## What a file may make the tools do" in page.read_text()


def test_a_sku_may_opt_in_for_its_own_flags(tmp_path):
    def suite(**iree):
        return validate_suite({"suite_name": "s", "skus": {"cpu": {"iree": {
            "target_cpu": "host", **iree}}}, "workloads": [
                {"model": "linear", "shapes": [[4, 8, 8]]}]}, "s.yaml")

    flags = ["--iree-opt-level=O2", "--iree-flow-dump-dispatch-graph",
             f"--iree-flow-dump-dispatch-graph-output-file={tmp_path}/g.dot"]
    with pytest.raises(ConfigError) as err:
        suite(compile_flags=flags)
    assert [p.split(": ")[1] for p in err.value.problems] == [
        "skus.cpu.iree.compile_flags[1]", "skus.cpu.iree.compile_flags[2]"]
    config = suite(compile_flags=flags, allow_any_compile_flags=True)
    assert config["skus"]["cpu"]["iree"]["compile_flags"] == flags
    # A SKU that does not set it is held to the list (the default is false).
    assert suite()["skus"]["cpu"]["iree"]["allow_any_compile_flags"] is False


def test_a_benchmark_file_cannot_opt_in():
    data = {"inputs": ["4xf32=1"], "function_run": "f", "device": "local-task",
            "benchmark_repetitions": 1, "benchmark_min_warmup_time": 0,
            "allow_any_compile_flags": True,
            "compile_flags": ["--iree-flow-dump-dispatch-graph"]}
    problems = file_problems(data, "x.json")
    assert any("allow_any_compile_flags" in p for p in problems), problems


# --- the list against the installed tools ------------------------------------------------

def help_flags(argv: list[str]) -> set[str]:
    """The flag names a tool's help text lists: iree-compile's `  --name=<v>  - text`
    lines, iree-benchmark-module's `--name=default` / `# --name=...` lines and Google
    Benchmark's `[--benchmark_x=...]` usage."""
    from workflow.backends.proc import capture

    out = capture(argv, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout + out.stderr
    return set(re.findall(r"^(?:\s+|# |\s*\[)?(--[A-Za-z0-9_.-]+)", text, re.MULTILINE))


@pytest.mark.tool
def test_the_compile_list_matches_the_installed_iree_compile():
    from workflow.backends.iree.tools import compiler_version
    from workflow.backends.proc import tool_path

    assert (compiler_version() or "").startswith(allowed.MADE_FOR), compiler_version()
    known = help_flags([tool_path("iree-compile"), "--help-list-hidden"])
    assert len(known) > 1000  # the parse found the list
    listed = allowed.CODEGEN_FLAGS | allowed.READ_COMPILE_FLAGS
    assert sorted(listed - known) == [], "listed flags the installed iree-compile lacks"
    # Retired ones are not back (else they belong to the reviewed list, or not at all).
    assert sorted(allowed.RETIRED_COMPILE_FLAGS & known) == []
    assert sorted(set(DANGEROUS["iree-compile"]) - known) == []


@pytest.mark.tool
def test_the_benchmark_list_matches_the_installed_iree_benchmark_module():
    from workflow.backends.iree.tools import benchmark_tool, runtime_version

    assert (runtime_version() or "").startswith(allowed.MADE_FOR), runtime_version()
    known = help_flags([benchmark_tool(), "--help"])
    assert {"--device", "--function", "--benchmark_repetitions"} <= known
    listed = allowed.RUN_FLAGS | allowed.READ_BENCHMARK_FLAGS
    assert sorted(listed - known) == [], "listed flags the installed tool lacks"
    assert sorted(allowed.RETIRED_BENCHMARK_FLAGS & known) == []
    assert sorted(set(DANGEROUS["iree-benchmark-module"]) - known) == []
