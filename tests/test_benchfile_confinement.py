"""A benchmark file reads nothing outside the benchmarks tree and the artifact / external
files directories, each path kind only inside its own (workflow.benchfile.resolve:
Locations.roots, confinement_problems); it passes only flags on the allow-list
(workflow.backends.iree.allowed_flags), and so does a suite's SKU unless it opts in; and
a tool's recorded error is its own diagnostic, not a line of an input file
(workflow.backends.proc.diagnostic_lines).

CASES is a table a docs generator can read: (id, description, how the file is made,
expected). `how` is declarative: `fields` override the base benchmark file
`bench/m/x_cpu.json` (BASE), `files` and `links` are made under the test's directory
(`links`: symlink -> target), `suite` adds `benchmark_files` settings, `sku` adds keys to
the suite's SKU's `iree` section, `env` sets the runner's environment variables
($IREE_TEST_FILES, $PATH_TO_EXTERNAL_FILES; unset otherwise); `{tmp}` stands for the
test's directory, which is also the working directory (relative flag paths are relative
to it). `expected`: `refused: <fragment of the ConfigError>`, `skipped: <fragment of the
skip reason>` or `case` (it runs).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import tiny_suite
from workflow.backends.proc import diagnostic_lines, first_lines, tool_path
from workflow.benchfile.flags import flag_paths
from workflow.benchfile.parse import load_file
from workflow.benchfile.resolve import ARTIFACTS_ENV, EXTERNAL_ENV, OUTSIDE
from workflow.benchfile.select import select
from workflow.errors import ConfigError
from workflow.suite.schema import validate_suite

NO_ENV = {ARTIFACTS_ENV: "", EXTERNAL_ENV: ""}
SECRET = "SECRET_TOKEN=hunter2 root:x:0:0:do-not-copy-into-reports"
NOT_PASSED = "is not a flag benchflow passes from a benchmark file"

BASE = {
    "inputs": ["4xf32=@in.bin"],
    "mlir_file_path": "m/model.mlir",
    "function_run": "f",
    "device": "local-task",
    "benchmark_repetitions": 1,
    "benchmark_min_warmup_time": 0,
}
# Made for every row: the tree, its artifact directory, and a directory beside them.
BASE_FILES = {
    "bench/m/model.mlir": "// placeholder\n",
    "bench/m/in.bin": "0123456789abcdef",
    "bench/m/w.irpa": "weights",
    "artifacts/m_x/.keep": "",
    "outside/secret.txt": SECRET + "\n",
    "outside/w.irpa": SECRET + "\n",
    "outside/lib/lib_cpu.json": json.dumps(BASE),
}

CASES = [
    # --- the MLIR -------------------------------------------------------------------
    ("mlir-absolute", "mlir_file_path is an absolute path outside the tree",
     {"fields": {"mlir_file_path": "{tmp}/outside/secret.txt"}},
     f"refused: mlir_file_path: {OUTSIDE}"),
    ("mlir-dotdot", "mlir_file_path climbs out of the tree with ..",
     {"fields": {"mlir_file_path": "../outside/secret.txt"}},
     f"refused: mlir_file_path: {OUTSIDE}"),
    ("mlir-symlink", "mlir_file_path is a symlink inside the tree to a file outside it",
     {"fields": {"mlir_file_path": "m/link.mlir"},
      "links": {"bench/m/link.mlir": "outside/secret.txt"}},
     f"refused: mlir_file_path: {OUTSIDE}"),
    ("mlir-symlinked-dir", "mlir_file_path goes through a symlinked directory leading out",
     {"fields": {"mlir_file_path": "m/sub/secret.txt"}, "links": {"bench/m/sub": "outside"}},
     f"refused: mlir_file_path: {OUTSIDE}"),
    ("mlir-dangling-symlink", "a symlink in the tree to an absent file outside it (which "
     "could appear before the run)",
     {"fields": {"mlir_file_path": "m/link.mlir"},
      "links": {"bench/m/link.mlir": "outside/not-yet.mlir"}},
     f"refused: mlir_file_path: {OUTSIDE}"),
    ("mlir-file-name-escape", "mlir_file_name climbs out of the external files directory",
     {"fields": {"mlir_file_path": None, "mlir_file_name": "../outside/secret.txt"},
      "files": {"external/.keep": ""}, "suite": {"external_files_dir": "{tmp}/external"}},
     f"refused: mlir_file_name: {OUTSIDE}"),
    ("mlir-default-symlink", "the default <artifacts>/<group>/model.mlir is a symlink out",
     {"fields": {"mlir_file_path": None},
      "links": {"artifacts/m_x/model.mlir": "outside/secret.txt"}},
     f"refused: (the default <artifacts>/<group>/model.mlir): {OUTSIDE}"),
    # --- @ inputs -------------------------------------------------------------------
    ("input-absolute", "an @ input is an absolute path outside the tree",
     {"fields": {"inputs": ["4xf32=@{tmp}/outside/secret.txt"]}},
     f"refused: inputs[0]: {OUTSIDE}"),
    ("input-dotdot", "an @ input (relative to the JSON's folder) climbs out with ..",
     {"fields": {"inputs": ["1xf32=2", "@../../outside/secret.txt"]}},
     f"refused: inputs[1]: {OUTSIDE}"),
    ("input-symlink", "an @ input is a symlink in the tree to a file outside it",
     {"fields": {"inputs": ["4xf32=@in_link.bin"]},
      "links": {"bench/m/in_link.bin": "outside/secret.txt"}},
     f"refused: inputs[0]: {OUTSIDE}"),
    # --- weights --------------------------------------------------------------------
    ("weights-path-dotdot", "real_weights_file_path climbs out of the tree",
     {"fields": {"real_weights_file_path": "../outside/w.irpa"}},
     f"refused: real_weights_file_path: {OUTSIDE}"),
    ("weights-path-absolute", "real_weights_file_path is an absolute path outside",
     {"fields": {"real_weights_file_path": "{tmp}/outside/w.irpa"}},
     f"refused: real_weights_file_path: {OUTSIDE}"),
    ("weights-name-escape", "real_weights_file_name climbs out of <artifacts>/<group>/",
     {"fields": {"real_weights_file_name": "../../outside/w.irpa"}},
     f"refused: real_weights_file_name: {OUTSIDE}"),
    ("weights-default-symlink", "the default real_weights.irpa is a symlink out",
     {"links": {"artifacts/m_x/real_weights.irpa": "outside/w.irpa"}},
     f"refused: (the default <artifacts>/<group>/real_weights.irpa): {OUTSIDE}"),
    # --- modules --------------------------------------------------------------------
    ("module-symlinked-dir", "modules names a benchmark found through a symlinked model "
     "directory leading out of the tree",
     {"fields": {"modules": ["evil_lib"]}, "links": {"bench/evil": "outside/lib"}},
     f"refused: modules[0]: {OUTSIDE}"),
    # --- flags that read files --------------------------------------------------------
    ("flag-parameters-absolute", "--parameters= in benchmark_flags names a file outside",
     {"fields": {"benchmark_flags": ["--parameters=model={tmp}/outside/w.irpa"]}},
     f"refused: benchmark_flags[0]: {OUTSIDE}"),
    ("flag-parameters-relative", "--parameters= relative to the working directory, outside",
     {"fields": {"benchmark_flags": ["--device_allocator=caching",
                                     "--parameters=outside/w.irpa"]}},
     f"refused: benchmark_flags[1]: {OUTSIDE}"),
    ("flag-module", "--module= loads a module from outside",
     {"fields": {"benchmark_flags": ["--module={tmp}/outside/secret.txt"]}},
     f"refused: benchmark_flags[0]: {OUTSIDE}"),
    ("flag-input", "--input=@ reads a file outside",
     {"fields": {"benchmark_flags": ["--input=4xf32=@{tmp}/outside/secret.txt"]}},
     f"refused: benchmark_flags[0]: {OUTSIDE}"),
    ("flag-function-input", "--function_input=@ reads a file outside",
     {"fields": {"benchmark_flags": ["--function_input=@../outside/secret.txt"]}},
     f"refused: benchmark_flags[0]: {OUTSIDE}"),
    ("flag-flagfile", "--flagfile= reads flags from a file (outside): never passed, the "
     "flags in it would pass unchecked",
     {"fields": {"benchmark_flags": ["--flagfile={tmp}/outside/secret.txt"]}},
     f"refused: benchmark_flags[0]: --flagfile {NOT_PASSED}"),
    ("flag-tuning-spec", "an iree-compile flag that reads a file (tuning spec) outside",
     {"fields": {"compile_flags": ["--iree-codegen-tuning-spec-path=outside/secret.txt"]}},
     f"refused: compile_flags[0]: {OUTSIDE}"),
    ("flag-unknown-file", "an unknown flag whose value is a path out of the tree",
     {"fields": {"compile_flags": ["--iree-some-future-file=../outside/secret.txt"]}},
     f"refused: compile_flags[0]: --iree-some-future-file {NOT_PASSED}"),
    ("flag-without-value", "a flag that reads a file given without =FILE (its value would "
     "be the next argument)",
     {"fields": {"compile_flags": ["--iree-codegen-transform-dialect-library"]}},
     "refused: compile_flags[0]: --iree-codegen-transform-dialect-library names a file"),
    ("flag-unknown-without-value", "an unknown flag named like a file flag, without =FILE",
     {"fields": {"compile_flags": ["--iree-some-future-path", "--iree-opt-level=O2"]}},
     f"refused: compile_flags[0]: --iree-some-future-path {NOT_PASSED}"),
    # --- flags not on the allow-list (they may write files, run programs, load code) --
    ("flag-output", "--output= writes a file",
     {"fields": {"benchmark_flags": ["--output=@bench/m/out.npy"]}},
     f"refused: benchmark_flags[0]: --output {NOT_PASSED}"),
    ("flag-linker", "iree-compile runs the linker a flag names",
     {"fields": {"compile_flags": ["--iree-llvmcpu-system-linker-path=/bin/sh"]}},
     f"refused: compile_flags[0]: --iree-llvmcpu-system-linker-path {NOT_PASSED}"),
    ("flag-dump", "iree-compile dumps executables where a flag says",
     {"fields": {"compile_flags": ["--iree-hal-dump-executable-files-to=bench/m"]}},
     f"refused: compile_flags[0]: --iree-hal-dump-executable-files-to {NOT_PASSED}"),
    ("flag-plugin", "iree-benchmark-module loads a plugin library",
     {"fields": {"benchmark_flags": ["--executable_plugin=bench/m/w.irpa"]}},
     f"refused: benchmark_flags[0]: --executable_plugin {NOT_PASSED}"),
    ("flag-print-changed", "iree-compile runs the `diff` program a flag names (the "
     "attack: --print-changed=diff with --print-changed-diff-path= a script in the tree)",
     {"fields": {"compile_flags": ["--iree-opt-level=O2", "--print-changed=diff",
                                   "--print-changed-diff-path=bench/m/x.sh"]},
      "files": {"bench/m/x.sh": "#!/bin/sh\ntouch marker\n"}},
     f"refused: compile_flags[2]: --print-changed-diff-path {NOT_PASSED}"),
    ("flag-print-changed-alone", "--print-changed= prints IR after each pass (onto the "
     "compile log; with =diff it runs a program)",
     {"fields": {"compile_flags": ["--print-changed=diff"]}},
     f"refused: compile_flags[0]: --print-changed {NOT_PASSED}"),
    ("flag-wasm-linker", "iree-compile runs the WebAssembly linker a flag names",
     {"fields": {"compile_flags": ["--iree-llvmcpu-wasm-linker-path=bench/m/x.sh"]}},
     f"refused: compile_flags[0]: --iree-llvmcpu-wasm-linker-path {NOT_PASSED}"),
    ("flag-embedded-linker", "iree-compile runs the embedded-ELF linker a flag names, "
     "even one inside the tree",
     {"fields": {"compile_flags": ["--iree-llvmcpu-embedded-linker-path=bench/m/x.sh"]}},
     f"refused: compile_flags[0]: --iree-llvmcpu-embedded-linker-path {NOT_PASSED}"),
    ("flag-dispatch-graph", "--iree-flow-dump-dispatch-graph (no value) writes a dot file",
     {"fields": {"compile_flags": ["--iree-flow-dump-dispatch-graph"]}},
     f"refused: compile_flags[0]: --iree-flow-dump-dispatch-graph {NOT_PASSED}"),
    ("flag-static-library", "iree-compile writes a static library where a flag says "
     "(inside the tree: still refused)",
     {"fields": {"compile_flags": [
         "--iree-llvmcpu-static-library-output-path=bench/m/lib.o"]}},
     f"refused: compile_flags[0]: --iree-llvmcpu-static-library-output-path {NOT_PASSED}"),
    ("flag-preprocess-with", "iree-compile pipes each executable through a command",
     {"fields": {"compile_flags": ["--iree-hal-preprocess-executables-with=sh -c id"]}},
     f"refused: compile_flags[0]: --iree-hal-preprocess-executables-with {NOT_PASSED}"),
    ("flag-load-plugin", "iree-compile loads a compiler plugin library",
     {"fields": {"compile_flags": ["--iree-load-plugin=bench/m/w.irpa"]}},
     f"refused: compile_flags[0]: --iree-load-plugin {NOT_PASSED}"),
    ("flag-crash-reproducer", "MLIR writes a crash reproducer where a flag says",
     {"fields": {"compile_flags": ["--mlir-pass-pipeline-crash-reproducer=bench/m/r.mlir"]}},
     f"refused: compile_flags[0]: --mlir-pass-pipeline-crash-reproducer {NOT_PASSED}"),
    ("flag-pass-pipeline", "a preprocessing pass pipeline of the file's choosing (passes "
     "may dump)",
     {"fields": {"compile_flags": ["--iree-preprocessing-pass-pipeline=builtin.module()"]}},
     f"refused: compile_flags[0]: --iree-preprocessing-pass-pipeline {NOT_PASSED}"),
    ("flag-substitute-objects", "iree-compile substitutes executables with object files "
     "from a directory",
     {"fields": {"compile_flags": ["--iree-hal-substitute-executable-objects-from=bench/m"]}},
     f"refused: compile_flags[0]: --iree-hal-substitute-executable-objects-from "
     f"{NOT_PASSED}"),
    ("flag-export-parameters", "iree-compile writes a parameter archive",
     {"fields": {"compile_flags": ["--iree-parameter-export=bench/m/p.irpa"]}},
     f"refused: compile_flags[0]: --iree-parameter-export {NOT_PASSED}"),
    ("flag-unknown", "a flag iree-compile does not have",
     {"fields": {"compile_flags": ["--iree-no-such-flag=1"]}},
     f"refused: compile_flags[0]: --iree-no-such-flag {NOT_PASSED}"),
    ("flag-near-miss", "a near miss of an allowed name (--iree-opt-levels for "
     "--iree-opt-level): exact names only",
     {"fields": {"compile_flags": ["--iree-opt-levels=O3"]}},
     f"refused: compile_flags[0]: --iree-opt-levels {NOT_PASSED}"),
    ("flag-case-miss", "an allowed name in other letters' case",
     {"fields": {"compile_flags": ["--IREE-opt-level=O3"]}},
     f"refused: compile_flags[0]: --IREE-opt-level {NOT_PASSED}"),
    ("flag-wrong-tool", "an iree-compile flag in benchmark_flags (each list has its own "
     "tool's list)",
     {"fields": {"benchmark_flags": ["--iree-opt-level=O3"]}},
     f"refused: benchmark_flags[0]: --iree-opt-level {NOT_PASSED}"),
    ("flag-flagfile-inside", "--flagfile= naming a file inside the tree: still refused",
     {"fields": {"benchmark_flags": ["--flagfile=bench/m/in.bin"]}},
     f"refused: benchmark_flags[0]: --flagfile {NOT_PASSED}"),
    ("flag-replay-output", "iree-benchmark-module records a HAL replay to a file",
     {"fields": {"benchmark_flags": ["--device_replay_output=bench/m/r.ireereplay"]}},
     f"refused: benchmark_flags[0]: --device_replay_output {NOT_PASSED}"),
    ("flag-hip-dylib", "iree-benchmark-module loads the HIP library a flag names",
     {"fields": {"benchmark_flags": ["--hip_dylib_path=bench/m/w.irpa"]}},
     f"refused: benchmark_flags[0]: --hip_dylib_path {NOT_PASSED}"),
    ("flag-print-statistics", "iree-benchmark-module prints statistics into the output "
     "benchflow parses",
     {"fields": {"benchmark_flags": ["--print_statistics"]}},
     f"refused: benchmark_flags[0]: --print_statistics {NOT_PASSED}"),
    # --- a suite's SKU compile_flags: the same list, unless the SKU opts in ----------
    ("sku-print-changed", "a suite SKU's compile_flags run a program (the suite is "
     "refused when it loads)",
     {"sku": {"compile_flags": ["--iree-opt-level=O2", "--print-changed=diff",
                                "--print-changed-diff-path=/tmp/x.sh"]}},
     "refused: skus.cpu-host.iree.compile_flags[1]: --print-changed is not a "
     "flag benchflow passes from a suite's SKU"),
    ("sku-dump", "a suite SKU's compile_flags dump dispatch graphs; the message names the "
     "opt-in",
     {"sku": {"compile_flags": ["--iree-flow-dump-dispatch-graph"]}},
     "refused: skus.cpu-host.iree.compile_flags[0]: --iree-flow-dump-dispatch-"
     "graph is not a flag benchflow passes from a suite's SKU (it may write files or run "
     "programs); expected a codegen or input flag of iree-compile 3.x, or "
     "allow_any_compile_flags: true in this SKU's iree section"),
    ("sku-opt-in", "a suite SKU that opts in (iree.allow_any_compile_flags: true) passes "
     "its own flags unchecked: runs",
     {"sku": {"compile_flags": ["--iree-flow-dump-dispatch-graph"],
              "allow_any_compile_flags": True}},
     "case"),
    ("sku-codegen-flags", "a suite SKU's codegen flags: runs",
     {"sku": {"compile_flags": ["--iree-opt-level=O3",
                                "--iree-dispatch-creation-enable-aggressive-fusion=true"]}},
     "case"),
    # --- environment variables: a root of their own lookup only ---------------------
    ("env-external-input", "$PATH_TO_EXTERNAL_FILES=/ does not make @/etc/passwd an "
     "allowed input",
     {"fields": {"inputs": ["@/etc/passwd"]}, "env": {"PATH_TO_EXTERNAL_FILES": "/"}},
     f"refused: inputs[0]: {OUTSIDE}: '@/etc/passwd' is /etc/passwd"),
    ("env-external-flag", "$PATH_TO_EXTERNAL_FILES=/ does not widen what a flag may read",
     {"fields": {"benchmark_flags": ["--parameters=model=/etc/passwd"]},
      "env": {"PATH_TO_EXTERNAL_FILES": "/"}},
     f"refused: benchmark_flags[0]: {OUTSIDE}"),
    ("env-external-mlir-path", "mlir_file_path into the $PATH_TO_EXTERNAL_FILES directory "
     "(only mlir_file_name is looked up there)",
     {"fields": {"mlir_file_path": "{tmp}/outside/secret.txt"},
      "env": {"PATH_TO_EXTERNAL_FILES": "{tmp}/outside"}},
     f"refused: mlir_file_path: {OUTSIDE}"),
    ("env-external-weights", "real_weights_file_path into the $PATH_TO_EXTERNAL_FILES "
     "directory",
     {"fields": {"real_weights_file_path": "{tmp}/outside/w.irpa"},
      "env": {"PATH_TO_EXTERNAL_FILES": "{tmp}/outside"}},
     f"refused: real_weights_file_path: {OUTSIDE}"),
    ("env-artifacts-weights", "real_weights_file_path into the $IREE_TEST_FILES artifacts "
     "(only the artifact group lookups are made there)",
     {"fields": {"real_weights_file_path": "{tmp}/itf/artifacts/w.irpa"},
      "files": {"itf/artifacts/w.irpa": SECRET}, "suite": {"artifacts_dir": None},
      "env": {"IREE_TEST_FILES": "{tmp}/itf"}},
     f"refused: real_weights_file_path: {OUTSIDE}"),
    ("env-artifacts-root", "$IREE_TEST_FILES=/ does not make an @ input under /artifacts "
     "or anywhere else allowed",
     {"fields": {"inputs": ["@/etc/passwd"]}, "suite": {"artifacts_dir": None},
      "env": {"IREE_TEST_FILES": "/"}},
     f"refused: inputs[0]: {OUTSIDE}"),
    ("env-external-mlir-name", "mlir_file_name in the $PATH_TO_EXTERNAL_FILES directory, "
     "the lookup it names: runs",
     {"fields": {"mlir_file_path": None, "mlir_file_name": "model.mlir"},
      "files": {"ext/model.mlir": "// placeholder\n"},
      "env": {"PATH_TO_EXTERNAL_FILES": "{tmp}/ext"}},
     "case"),
    ("env-artifacts-group", "the weights in the $IREE_TEST_FILES artifact group, the "
     "lookup it names: runs",
     {"fields": {"real_weights_file_name": "w.irpa"},
      "files": {"itf/artifacts/m_x/w.irpa": "weights"}, "suite": {"artifacts_dir": None},
      "env": {"IREE_TEST_FILES": "{tmp}/itf"}},
     "case"),
    ("suite-external-input", "an @ input in the suite's own external_files_dir (a setting "
     "of the user's file, not the environment): runs",
     {"fields": {"inputs": ["4xf32=@{tmp}/ext/in.bin"]},
      "files": {"ext/in.bin": "0123456789abcdef"},
      "suite": {"external_files_dir": "{tmp}/ext"}},
     "case"),
    # --- what still runs or is skipped, as before -----------------------------------
    ("missing-mlir-inside", "an MLIR inside the tree that is absent: skipped, not refused",
     {"fields": {"mlir_file_path": "m/absent.mlir"}},
     "skipped: its MLIR is absent: expected"),
    ("missing-input-inside", "an @ input inside the tree that is absent: skipped",
     {"fields": {"inputs": ["4xf32=@absent.bin"]}},
     "skipped: its input inputs[0] is absent: expected"),
    ("missing-absolute-outside", "an absent absolute @ input (upstream's @/shark-dev/...): "
     "absent, skipped; nothing is read",
     {"fields": {"inputs": ["@/shark-dev/no/such/tokens.npy"]}},
     "skipped: its input inputs[0] is absent: expected /shark-dev/no/such/tokens.npy"),
    ("inside-everything", "MLIR, @ input, weights and flag files inside the tree: runs",
     {"fields": {"real_weights_file_path": "m/w.irpa", "compile_flags": [
         "--iree-opt-level=O2", "--iree-codegen-enable-default-tuning-specs=true"],
         "benchmark_flags": ["--parameters=other=bench/m/w.irpa",
                             "--input=4xf32=@bench/m/in.bin", "--benchmark_min_time=10x"]}},
     "case"),
    ("symlink-inside", "a symlink in the tree to a file in the tree: runs",
     {"fields": {"inputs": ["4xf32=@in_link.bin"]},
      "links": {"bench/m/in_link.bin": "bench/m/in.bin"}},
     "case"),
    ("artifacts-default", "the MLIR and weights where the quality tests put them, in "
     "<artifacts>/<group>/, outside the tree: runs",
     {"fields": {"mlir_file_path": None, "real_weights_file_name": "w.irpa"},
      "files": {"artifacts/m_x/model.mlir": "// placeholder\n",
                "artifacts/m_x/w.irpa": "weights"}},
     "case"),
    ("artifacts-dir-symlink", "the configured artifact directory is itself a symlink: its "
     "target counts",
     {"fields": {"mlir_file_path": None}, "files": {"real_art/m_x/model.mlir": "//\n"},
      "links": {"art_link": "real_art"}, "suite": {"artifacts_dir": "{tmp}/art_link"}},
     "case"),
    ("owned-statistics-flag", "upstream's --iree-scheduling-dump-statistics-file= in "
     "compile_flags: dropped (benchflow sets its own), not refused",
     {"fields": {"compile_flags": [
         "--iree-scheduling-dump-statistics-format=json",
         "--iree-scheduling-dump-statistics-file=compilation_info.json"]}},
     "case"),
]


def fill(value, tmp: Path):
    if isinstance(value, str):
        return value.replace("{tmp}", str(tmp))
    if isinstance(value, list):
        return [fill(v, tmp) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, tmp) for k, v in value.items()}
    return value


def make(tmp: Path, how: dict) -> dict:
    """Makes the tree of one row; returns the suite's benchmark_files settings."""
    for rel, text in {**BASE_FILES, **how.get("files", {})}.items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_text(text)
    for rel, target in how.get("links", {}).items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).symlink_to(tmp / target)
    data = {**BASE, **fill(how.get("fields", {}), tmp)}
    data = {k: v for k, v in data.items() if v is not None}
    (tmp / "bench" / "m" / "x_cpu.json").write_text(json.dumps(data))
    return {"dir": str(tmp / "bench"), "models": ["m"], "backends": [],
            "artifacts_dir": str(tmp / "artifacts"), **fill(how.get("suite", {}), tmp)}


def suite(spec: dict, sku: dict | None = None) -> dict:
    """`sku`: further keys of the SKU's `iree` section."""
    return validate_suite({"suite_name": "confinement",
                           "skus": {"cpu-host": {"iree": {"target_cpu": "host", **(sku or {})}}},
                           "benchmark_files": spec}, "s.yaml")


def env_of(how: dict, tmp: Path) -> dict:
    """The runner's environment variables of a row (unset unless it sets them)."""
    return {**NO_ENV, **fill(how.get("env", {}), tmp)}


def test_the_table_is_well_formed():
    ids = [row[0] for row in CASES]
    assert len(ids) == len(set(ids)) >= 12
    for _id, description, how, expected in CASES:
        assert description and set(how) <= {"fields", "files", "links", "suite", "sku", "env"}
        assert expected == "case" or expected.startswith(("refused: ", "skipped: "))


@pytest.mark.parametrize("case_id, description, how, expected", CASES,
                         ids=[row[0] for row in CASES])
def test_paths_a_benchmark_file_names(tmp_path, monkeypatch, case_id, description, how,
                                      expected):
    monkeypatch.chdir(tmp_path)
    spec, env = make(tmp_path, how), env_of(how, tmp_path)
    # A SKU's flags are the suite's problem (its file); the rest the benchmark file's.
    source = "s.yaml" if "sku" in how else str(tmp_path / "bench" / "m" / "x_cpu.json")
    if expected.startswith("refused: "):
        with pytest.raises(ConfigError) as err:
            select(suite(spec, how.get("sku")), "s.yaml", env=env)
        fragment = expected.removeprefix("refused: ")
        hits = [p for p in err.value.problems if fragment in p]
        assert hits, err.value.problems
        # Named by its file and key; the file's contents are never in the message.
        assert all(p.startswith(f"{source}: ") for p in hits)
        assert all(SECRET not in p for p in err.value.problems)
        return
    sel = select(suite(spec, how.get("sku")), "s.yaml", env=env)
    if expected == "case":
        assert [c.id for c in sel.cases] == ["cpu-host/iree/m.x_cpu/baseline"], sel.skipped
    else:
        assert sel.cases == [] and len(sel.skipped) == 1
        assert expected.removeprefix("skipped: ") in sel.skipped[0][2]


# One dispatch: LLVM's passes run on it, so --print-changed=diff has IR to diff.
ADD_MLIR = """\
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%x: f32, %z: f32):
    %s = arith.addf %x, %x : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


@pytest.mark.tool
def test_a_flag_that_runs_a_program_is_refused_before_anything_runs(tmp_path, monkeypatch,
                                                                    capsys):
    """The attack found on main: `--print-changed=diff --print-changed-diff-path=x.sh`
    in a file's compile_flags makes iree-compile run x.sh as its diff program. `benchflow
    validate`, `benchflow benchmarks` and `benchflow benchmarks --run` refuse the file
    (the run would start snakemake in this directory), and x.sh never runs; given to
    iree-compile as a compile stage would, it does (the test's premise)."""
    from workflow.backends.iree.tools import compile_flags as sku_flags
    from workflow.benchfile.flags import INPUT_TYPE
    from workflow.cli.main import main
    from workflow.jobs.iree import compile_module

    monkeypatch.chdir(tmp_path)
    marker, script = tmp_path / "marker", tmp_path / "bench" / "m" / "x.sh"
    attack = ["--print-changed=diff", f"--print-changed-diff-path={script}"]
    spec = make(tmp_path, {"fields": {"compile_flags": attack, "inputs": ["4xf32=1"]},
                           "files": {"bench/m/model.mlir": ADD_MLIR,
                                     "bench/m/x.sh": f"#!/bin/sh\ntouch {marker}\n"}})
    script.chmod(0o755)
    config = tmp_path / "s.yaml"
    config.write_text(json.dumps({"suite_name": "attack", "benchmark_files": spec,
                                  "skus": {"cpu-host": {"iree": {"target_cpu": "host"}}}}))
    path = tmp_path / "bench" / "m" / "x_cpu.json"
    refused = f"{path}: compile_flags[0]: --print-changed {NOT_PASSED}"
    for argv in (["validate", str(path)], ["benchmarks", "--configfile", str(config)],
                 ["benchmarks", "--configfile", str(config), "--run", "--cores", "1"]):
        assert main(argv) != 0, argv
        out = capsys.readouterr()
        assert refused in out.out + out.err, argv
        assert "compile_flags[1]: --print-changed-diff-path" in out.out + out.err
    assert not marker.exists() and not (tmp_path / "results").exists()

    pytest.importorskip("iree.compiler")
    # The compile stage, given the SKU's flags and the file's as they stand.
    sku = validate_suite(tiny_suite(), "s")["skus"]["host"]
    flags = [*sku_flags(sku, input_type=INPUT_TYPE), *attack]
    compile_module(mlir=str(tmp_path / "bench" / "m" / "model.mlir"), sku=sku, timeout=300,
                   vmfb=str(tmp_path / "x.vmfb"), meta=str(tmp_path / "compile.json"),
                   log=str(tmp_path / "compile.log"), flags=flags)
    assert marker.exists(), "premise: iree-compile runs the diff program a flag names"


def test_a_file_validated_on_its_own_is_confined_to_its_tree(tmp_path, capsys):
    """`benchflow validate FILE` (load_file with the defaults: the model directory's
    parent is the root, <root>/../artifacts the artifact directory)."""
    make(tmp_path, {"fields": {"mlir_file_path": "../outside/secret.txt"}})
    path = tmp_path / "bench" / "m" / "x_cpu.json"
    with pytest.raises(ConfigError) as err:
        load_file(path)
    assert err.value.problems == [
        f"{path}: mlir_file_path: {OUTSIDE}: '../outside/secret.txt' is "
        f"{(tmp_path / 'outside' / 'secret.txt').resolve()}; expected a path inside "
        f"{(tmp_path / 'bench').resolve()} or {(tmp_path / 'artifacts').resolve()}"]
    from workflow.cli.main import main

    assert main(["validate", str(path)]) != 0
    out = capsys.readouterr()
    assert f"mlir_file_path: {OUTSIDE}" in out.out + out.err


COMPILE, BENCH = "iree-compile", "iree-benchmark-module"


@pytest.mark.parametrize("flag, tool, paths", [
    ("--parameters=model=a.irpa", BENCH, ["a.irpa"]),
    ("--parameters=a.irpa", BENCH, ["a.irpa"]),
    ("--input=4xf32=@x.bin", BENCH, ["x.bin"]),
    ("--input=4xf32=1,2,3,4", BENCH, []),
    ("--module=m.vmfb", BENCH, ["m.vmfb"]),
    ("--device_allocator=caching", BENCH, []),
    ("--benchmark_min_time=10x", BENCH, []),
    ("--iree-codegen-enable-default-tuning-specs=true", COMPILE, []),
    ("--iree-hip-enable-tensor-ukernels", COMPILE, []),
    ("--iree-codegen-tuning-spec-path=s/t.mlir", COMPILE, ["s/t.mlir"]),
    ("--iree-opt-import-parameters=scope=a.irpa", COMPILE, ["a.irpa"]),
    # Listed flags other than READ_FLAGS read no file, whatever their value looks like.
    ("--iree-llvmcpu-target-triple=x86_64/linux", COMPILE, []),
])
def test_which_files_a_flag_reads(flag, tool, paths):
    assert flag_paths(flag, tool) == paths


@pytest.mark.parametrize("flag, tool, fragment", [
    ("--iree-something=a/b", COMPILE, "--iree-something is not a flag benchflow passes"),
    ("--parameters=a.irpa", COMPILE, "--parameters is not a flag"),  # the other tool's
    ("--iree-codegen-tuning-spec-path", COMPILE, "names a file: give it as "
                                                "--iree-codegen-tuning-spec-path=FILE"),
])
def test_which_flags_are_refused(flag, tool, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)):
        flag_paths(flag, tool)


# --- error text: the tool's diagnostics, not an input file's lines ---------------------

def test_quoted_source_lines_are_dropped_from_diagnostics():
    out = ("bad.mlir:1:1: error: custom op 'SECRET_TOKEN' is unknown\n"
           f"{SECRET}\n^\nbad.mlir:3:5: note: see here\n    x = y\n    ^~~~\nlast line\n")
    assert diagnostic_lines(out) == ("bad.mlir:1:1: error: custom op 'SECRET_TOKEN' is "
                                     "unknown\nbad.mlir:3:5: note: see here\nlast line")
    plain = "c/runtime/src/iree/tooling/numpy_io.c:134: INVALID_ARGUMENT; malformed header"
    assert diagnostic_lines(plain) == plain and first_lines(diagnostic_lines("")) == ""


@pytest.mark.tool
def test_a_malformed_mlir_in_the_tree_is_not_copied_into_the_record(tmp_path):
    """iree-compile quotes the offending line of its input under each error; the case
    record's error keeps the tool's diagnostic (`file:1:1: error: ...`), which may name a
    token of the file, and drops the quoted line (kept in the stage's log only)."""
    from workflow.benchfile.flags import compile_flags
    from workflow.jobs.iree import compile_module

    pytest.importorskip("iree.compiler")
    config = suite(make(tmp_path, {"files": {"bench/m/model.mlir": SECRET + "\n"}}))
    sel = select(config, "s.yaml", env=NO_ENV)
    f = sel.file("m.x_cpu")
    sku = validate_suite(tiny_suite(), "s")["skus"]["host"]
    log = tmp_path / "compile.log"
    result = compile_module(mlir=str(f.mlir), sku=sku, timeout=120, vmfb=str(tmp_path / "x.vmfb"),
                            meta=str(tmp_path / "compile.json"), log=str(log),
                            flags=compile_flags(f, sku))
    assert not result.ok and result.failed_stage == "compile"
    assert "model.mlir:1:1: error:" in result.error
    assert SECRET not in result.error
    assert SECRET not in json.loads((tmp_path / "compile.json").read_text())["error"]
    assert SECRET in log.read_text()  # the full output stays in the log


@pytest.mark.tool
def test_a_malformed_input_in_the_tree_is_not_copied_into_the_record(tmp_path):
    """iree-benchmark-module names the input it failed to parse and why; it does not print
    the file's contents, and nothing of them reaches the run stage's error."""
    import struct

    from workflow.benchfile.flags import compile_flags, run_spec
    from workflow.jobs.iree import compile_module
    from workflow.jobs.sharktank import run_benchmark_file

    pytest.importorskip("iree.runtime")
    tool_path("iree-benchmark-module")
    header = (SECRET + " " * 40 + "\n").encode()
    npy = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + b"\0" * 16
    how = {"fields": {"inputs": ["@bad.npy"]},
           "files": {"bench/m/model.mlir": "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> "
                                           "{\n  return %a : tensor<4xf32>\n}\n"}}
    config = suite(make(tmp_path, how))
    (tmp_path / "bench" / "m" / "bad.npy").write_bytes(npy)
    f = select(config, "s.yaml", env=NO_ENV).file("m.x_cpu")
    sku = validate_suite(tiny_suite(), "s")["skus"]["host"]
    vmfb, cmeta = str(tmp_path / "x.vmfb"), str(tmp_path / "compile.json")
    assert compile_module(mlir=str(f.mlir), sku=sku, timeout=120, vmfb=vmfb, meta=cmeta,
                          log=str(tmp_path / "c.log"), flags=compile_flags(f, sku)).ok
    result = run_benchmark_file(vmfb=vmfb, compile_meta=cmeta, spec=run_spec(f, sku), sku=sku,
                                timeout=120, timing=str(tmp_path / "run.json"),
                                log=str(tmp_path / "run.log"))
    assert not result.ok and result.failed_stage == "run"
    assert "iree-benchmark-module exited with" in result.error
    assert "bad.npy" in result.error and "SECRET" not in result.error
