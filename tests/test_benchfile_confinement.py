"""A benchmark file reads nothing outside the benchmarks tree and the artifact / external
files directories (workflow.benchfile.resolve: Locations.roots, confinement_problems), and
a tool's recorded error is its own diagnostic, not a line of an input file
(workflow.backends.proc.diagnostic_lines).

CASES is a table a docs generator can read: (id, description, how the file is made,
expected). `how` is declarative: `fields` override the base benchmark file
`bench/m/x_cpu.json` (BASE), `files` and `links` are made under the test's directory
(`links`: symlink -> target), `suite` adds `benchmark_files` settings; `{tmp}` stands
for the test's directory, which is also the working directory (relative flag paths are
relative to it). `expected`: `refused: <fragment of the ConfigError>`, `skipped:
<fragment of the skip reason>` or `case` (it runs).
"""

from __future__ import annotations

import json
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
WRITES = "writes files or runs a program"

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
    ("flag-flagfile", "--flagfile= reads flags from a file outside",
     {"fields": {"benchmark_flags": ["--flagfile={tmp}/outside/secret.txt"]}},
     f"refused: benchmark_flags[0]: {OUTSIDE}"),
    ("flag-tuning-spec", "an iree-compile flag that reads a file (tuning spec) outside",
     {"fields": {"compile_flags": ["--iree-codegen-tuning-spec-path=outside/secret.txt"]}},
     f"refused: compile_flags[0]: {OUTSIDE}"),
    ("flag-unknown-file", "an unknown flag whose value is a path out of the tree",
     {"fields": {"compile_flags": ["--iree-some-future-file=../outside/secret.txt"]}},
     f"refused: compile_flags[0]: {OUTSIDE}"),
    ("flag-without-value", "a flag that reads a file given without =FILE (its value would "
     "be the next argument)",
     {"fields": {"compile_flags": ["--iree-codegen-transform-dialect-library"]}},
     "refused: compile_flags[0]: --iree-codegen-transform-dialect-library names a file"),
    ("flag-unknown-without-value", "an unknown flag named like a file flag, without =FILE",
     {"fields": {"compile_flags": ["--iree-some-future-path", "--iree-opt-level=O2"]}},
     "refused: compile_flags[0]: --iree-some-future-path may name a file"),
    # --- flags that write files or run programs -------------------------------------
    ("flag-output", "--output= writes a file",
     {"fields": {"benchmark_flags": ["--output=@bench/m/out.npy"]}},
     f"refused: benchmark_flags[0]: --output {WRITES}"),
    ("flag-linker", "iree-compile runs the linker a flag names",
     {"fields": {"compile_flags": ["--iree-llvmcpu-system-linker-path=/bin/sh"]}},
     f"refused: compile_flags[0]: --iree-llvmcpu-system-linker-path {WRITES}"),
    ("flag-dump", "iree-compile dumps executables where a flag says",
     {"fields": {"compile_flags": ["--iree-hal-dump-executable-files-to=bench/m"]}},
     f"refused: compile_flags[0]: --iree-hal-dump-executable-files-to {WRITES}"),
    ("flag-plugin", "iree-benchmark-module loads a plugin library",
     {"fields": {"benchmark_flags": ["--executable_plugin=bench/m/w.irpa"]}},
     f"refused: benchmark_flags[0]: --executable_plugin {WRITES}"),
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


def suite(spec: dict) -> dict:
    return validate_suite({"suite_name": "confinement",
                           "skus": {"cpu-host": {"iree": {"target_cpu": "host"}}},
                           "benchmark_files": spec}, "s.yaml")


def test_the_table_is_well_formed():
    ids = [row[0] for row in CASES]
    assert len(ids) == len(set(ids)) >= 12
    for _id, description, how, expected in CASES:
        assert description and set(how) <= {"fields", "files", "links", "suite"}
        assert expected == "case" or expected.startswith(("refused: ", "skipped: "))


@pytest.mark.parametrize("case_id, description, how, expected", CASES,
                         ids=[row[0] for row in CASES])
def test_paths_a_benchmark_file_names(tmp_path, monkeypatch, case_id, description, how,
                                      expected):
    monkeypatch.chdir(tmp_path)
    config = suite(make(tmp_path, how))
    source = str(tmp_path / "bench" / "m" / "x_cpu.json")
    if expected.startswith("refused: "):
        with pytest.raises(ConfigError) as err:
            select(config, "s.yaml", env=NO_ENV)
        fragment = expected.removeprefix("refused: ")
        hits = [p for p in err.value.problems if fragment in p]
        assert hits, err.value.problems
        # Named by its file and key; the file's contents are never in the message.
        assert all(p.startswith(f"{source}: ") for p in hits)
        assert all(SECRET not in p for p in err.value.problems)
        return
    sel = select(config, "s.yaml", env=NO_ENV)
    if expected == "case":
        assert [c.id for c in sel.cases] == ["cpu-host/iree/m.x_cpu/baseline"], sel.skipped
    else:
        assert sel.cases == [] and len(sel.skipped) == 1
        assert expected.removeprefix("skipped: ") in sel.skipped[0][2]


def test_a_file_validated_on_its_own_is_confined_to_its_tree(tmp_path, capsys):
    """`benchflow validate FILE` (load_file with the defaults: the model directory's
    parent is the root, <root>/../artifacts the artifact directory)."""
    make(tmp_path, {"fields": {"mlir_file_path": "../outside/secret.txt"}})
    path = tmp_path / "bench" / "m" / "x_cpu.json"
    with pytest.raises(ConfigError) as err:
        load_file(path)
    assert err.value.problems == [
        f"{path}: mlir_file_path: {OUTSIDE}: '../outside/secret.txt' is "
        f"{(tmp_path / 'outside' / 'secret.txt').resolve()}"]
    from workflow.cli.main import main

    assert main(["validate", str(path)]) != 0
    out = capsys.readouterr()
    assert f"mlir_file_path: {OUTSIDE}" in out.out + out.err


@pytest.mark.parametrize("flag, paths", [
    ("--parameters=model=a.irpa", ["a.irpa"]),
    ("--parameters=a.irpa", ["a.irpa"]),
    ("--input=4xf32=@x.bin", ["x.bin"]),
    ("--input=4xf32=1,2,3,4", []),
    ("--module=m.vmfb", ["m.vmfb"]),
    ("--device_allocator=caching", []),
    ("--benchmark_min_time=10x", []),
    ("--iree-codegen-enable-default-tuning-specs=true", []),
    ("--iree-hip-enable-tensor-ukernels", []),
    ("--iree-something=a/b", ["a/b"]),
    ("--iree-something=@a", ["a"]),
])
def test_which_files_a_flag_reads(flag, paths):
    assert flag_paths(flag) == paths


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
    from workflow.stages.iree import compile_module

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
    from workflow.stages.iree import compile_module
    from workflow.stages.sharktank import run_benchmark_file

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
