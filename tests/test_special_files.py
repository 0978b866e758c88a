"""Files that are not regular files, where benchflow reads or writes one (workflow/files.py).

A FIFO would block a reader for ever, /dev/zero fill its memory, a symlink loop raise
RuntimeError from Path.resolve(), a socket fail to open with "No such device or
address": each is refused with one line naming the path and what it is, and no job
runs. Each row goes through the real entry point: `benchflow ...` in-process
(workflow.cli.main.main), or for the Snakefile's suite load planning.plan.load_suite, as
`snakemake --configfile` reaches it.

CASES is the table of these inputs (a docs generator reads it):
(id, what the input is, how it is made: "<target>:<kind>", a fragment of the message).
<kind> says what stands at the path: fifo (os.mkfifo), dev-zero (the path /dev/zero),
directory, socket (a bound AF_UNIX socket), loop (two links to each other), dangling (a
link to a path that does not exist), big (a regular file one KiB past the reader's cap,
the cap lowered to 1 KiB). <target> says which path it is and which command reads it.

A regression to blocking must fail, not hang CI: every row runs under an alarm.
"""

from __future__ import annotations

import json
import os
import signal
import socket
from pathlib import Path

import pytest

from tests.test_goldens import BASE, make_case, make_report
from workflow.cli.main import main
from workflow.errors import ConfigError
from workflow.records.storage import write_json

CID = "host/iree/a-f32/baseline"

# What each kind is called in the message.
SAYS = {
    "fifo": "is a FIFO (named pipe), not a regular file",
    "dev-zero": "is a character device, not a regular file",
    "directory": "is a directory, not a regular file",
    "socket": "is a socket, not a regular file",
    "loop": "is a symbolic link loop (ELOOP)",
    "dangling": "is a symbolic link to nowhere.json, which does not exist",
    "big": "larger than 1,024 bytes",
}
WORDS = {
    "fifo": "a FIFO (named pipe)", "dev-zero": "/dev/zero", "directory": "a directory",
    "socket": "a Unix socket", "loop": "a symbolic link loop", "dangling": "a dangling link",
    "big": "a file past the size cap",
}
# Where the input is given: (what it is, in words; the kinds refused there).
TARGETS = {
    "validate": ("the suite of `benchflow validate`", list(SAYS)),
    "configfile": ("the suite of `snakemake --configfile` (planning.plan.load_suite)",
                   list(SAYS)),
    "compare": ("the base report of `benchflow compare`", list(SAYS)),
    "check": ("the report of `benchflow check --report`", list(SAYS)),
    "bless": ("the report of `benchflow bless --report`", list(SAYS)),
    "run-o": ("the results file of `benchflow run -o` (read before any job runs)",
              list(SAYS)),
}
# A report named as a directory is refused by the report reader in its own words.
OWN_WORDS = {("compare", "directory"): "is a directory, not a report file",
             ("check", "directory"): "is a directory, not a report file",
             ("bless", "directory"): "is a directory, not a report file"}

CASES = [
    (f"{target}-{kind}", f"{WORDS[kind]} as {what}", f"{target}:{kind}",
     OWN_WORDS.get((target, kind), SAYS[kind]))
    for target, (what, kinds) in TARGETS.items() for kind in kinds
] + [
    ("torchao-yaml-fifo", "a FIFO as a torchao-format YAML suite (snakemake --configfile)",
     "torchao:fifo", SAYS["fifo"]),
    ("goldens-dir-is-a-file", "a regular file as `benchflow check --goldens DIR`",
     "goldens-dir:file", "not a directory: --goldens takes the goldens directory"),
    ("goldens-dir-is-a-fifo", "a FIFO as `benchflow bless --goldens DIR`",
     "bless-goldens-dir:fifo", "not a directory: --goldens takes the goldens directory"),
    ("golden-file-fifo", "a FIFO as goldens/host.json read by `benchflow check --goldens`",
     "golden-file:fifo", SAYS["fifo"]),
    ("benchmark-file-fifo", "a FIFO named like a benchmark file in the benchmarks tree",
     "benchfile:fifo", SAYS["fifo"]),
    ("benchmark-mlir-fifo", "the MLIR a benchmark file names is a FIFO: skipped, said so",
     "mlir:fifo", "bench/m/model.mlir is a FIFO (named pipe), not a regular file"),
    ("benchmark-mlir-directory", "the MLIR a benchmark file names is a directory: skipped",
     "mlir:directory", "bench/m/model.mlir is a directory, not a regular file"),
    ("benchmark-mlir-loop", "the MLIR a benchmark file names is a symbolic link loop",
     "mlir:loop", "mlir_file_path: 'm/model.mlir' is a symbolic link loop (ELOOP)"),
    ("benchmark-input-fifo", "an @ input of a benchmark file is a FIFO: skipped, said so",
     "input:fifo", "bench/m/in.bin is a FIFO (named pipe), not a regular file"),
    ("benchmarks-dir-fifo", "a FIFO as `benchflow benchmarks --dir`",
     "benchmarks-dir:fifo", "expected a directory of benchmark files, d is a FIFO (named "
     "pipe), not a directory"),
    ("run-workdir-file", "a regular file as `benchflow run --workdir`",
     "workdir:file", "is a regular file, not a directory; expected a work directory"),
    ("coverage-report-dev-zero", "/dev/zero as `benchflow coverage --report`",
     "coverage:dev-zero", SAYS["dev-zero"]),
    ("model-module-fifo", "a FIFO as a suite's model_modules file (importing it would block)",
     "model-module:fifo", "model_modules[0]: m.py is a FIFO (named pipe), not a regular file"),
    ("model-module-loop", "a symbolic link loop as a suite's model_modules file",
     "model-module:loop", "model_modules[0]: m.py is a symbolic link loop (ELOOP)"),
]

# Long enough for a cold import of the CLI; a read that blocks never returns at all.
ALARM_S = 60


@pytest.fixture(autouse=True)
def no_hang():
    def hung(signum, frame):
        raise TimeoutError(f"still blocked after {ALARM_S} s: a special file was read")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(ALARM_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def make(kind: str, path: Path, keep: list) -> str:
    """Puts `kind` at `path` (relative to the working directory); returns the path to
    give (for dev-zero, /dev/zero itself)."""
    if kind == "dev-zero":
        return "/dev/zero"
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))  # relative: a tmp_path may be past AF_UNIX's 108 bytes
        keep.append(sock)
    elif kind == "loop":
        path.symlink_to(path.name + ".other")
        path.with_name(path.name + ".other").symlink_to(path.name)
    elif kind == "dangling":
        path.symlink_to("nowhere.json")
    elif kind == "big":
        path.write_text("[" + " " * 2048 + "]" if path.suffix == ".json" else "#" * 2048)
    elif kind == "file":
        path.write_text("not a directory\n")
    else:
        raise AssertionError(f"no way to make {kind!r}")
    return str(path)


def lower_caps(monkeypatch):
    from workflow.records import results_file, storage
    from workflow.suite import schema

    for module, name in ((storage, "MAX_JSON_BYTES"), (results_file, "MAX_JSON_BYTES"),
                         (schema, "MAX_SUITE_BYTES")):
        monkeypatch.setattr(module, name, 1024)


def good_report(path: Path) -> str:
    write_json(path, make_report(make_case(CID, BASE)))
    return str(path)


def bench_tree(kind_at: dict) -> str:
    """A benchmarks tree bench/m/x_cpu.json with its MLIR and @ input, a suite selecting
    it (s.yaml); kind_at: {relative path: kind} put in place of a file."""
    base = {"inputs": ["4xf32=@in.bin"], "mlir_file_path": "m/model.mlir",
            "function_run": "f", "device": "local-task", "benchmark_repetitions": 1,
            "benchmark_min_warmup_time": 0}
    Path("bench/m").mkdir(parents=True)
    Path("artifacts").mkdir()
    for rel, text in {"bench/m/model.mlir": "// mlir\n", "bench/m/in.bin": "0123"}.items():
        if rel not in kind_at:
            Path(rel).write_text(text)
    for rel, kind in kind_at.items():
        make(kind, Path(rel), [])
    Path("bench/m/x_cpu.json").write_text(json.dumps(base))
    cwd = Path.cwd()
    Path("s.yaml").write_text(json.dumps({
        "suite_name": "special", "skus": {"cpu-host": {"iree": {"target_cpu": "host"}}},
        "benchmark_files": {"dir": str(cwd / "bench"), "models": ["m"], "backends": [],
                            "artifacts_dir": str(cwd / "artifacts")}}))
    return "s.yaml"


def argv_for(target: str, kind: str, keep: list) -> list[str] | None:
    """The command line of a row; None for the Snakefile's load (not a command)."""
    at = {"validate": "suite.yaml", "configfile": "suite.yaml", "torchao": "torchao.yaml",
          "compare": "base.json", "check": "report.json", "bless": "report.json",
          "run-o": "out.json", "coverage": "report.json"}
    if target in ("configfile", "torchao"):
        return None
    if target in at:
        p = make(kind, Path(at[target]), keep)
        return {"validate": ["validate", p], "compare": ["compare", p, p],
                "check": ["check", "--report", p], "bless": ["bless", "--report", p,
                                                             "--goldens", "g"],
                "run-o": ["run", "-m", "linear", "-o", p],
                "coverage": ["coverage", "--report", p]}[target]
    if target in ("goldens-dir", "bless-goldens-dir"):
        g = make(kind, Path("g"), keep)
        cmd = "check" if target == "goldens-dir" else "bless"
        return [cmd, "--report", good_report(Path("report.json")), "--goldens", g]
    if target == "golden-file":
        make(kind, Path("g/host.json"), keep)
        return ["check", "--report", good_report(Path("report.json")), "--goldens", "g"]
    if target == "benchfile":
        return ["benchmarks", "--configfile", bench_tree({"bench/m/y_cpu.json": kind})]
    if target == "mlir":
        return ["benchmarks", "--configfile", bench_tree({"bench/m/model.mlir": kind})]
    if target == "input":
        return ["benchmarks", "--configfile", bench_tree({"bench/m/in.bin": kind})]
    if target == "benchmarks-dir":
        suite = bench_tree({})
        return ["benchmarks", "--configfile", suite, "--dir", make(kind, Path("d"), keep)]
    if target == "model-module":
        make(kind, Path("m.py"), keep)
        Path("s.yaml").write_text(json.dumps(
            {"suite_name": "special", "model_modules": ["m.py"],
             "workloads": [{"model": "linear", "shapes": [[16, 32, 32]]}]}))
        return ["validate", "s.yaml"]
    if target == "workdir":
        return ["run", "-m", "linear", "--workdir", make(kind, Path("w"), keep)]
    raise AssertionError(f"no target {target!r}")


def test_the_table_is_well_formed():
    ids = [row[0] for row in CASES]
    assert len(ids) == len(set(ids)) >= 18
    for _id, description, how, expected in CASES:
        assert description and expected and how.count(":") == 1


@pytest.mark.parametrize("case_id, description, how, expected", CASES,
                         ids=[row[0] for row in CASES])
def test_a_special_file_is_refused_in_one_line_without_blocking(
        tmp_path, monkeypatch, capsys, case_id, description, how, expected):
    monkeypatch.chdir(tmp_path)
    target, kind = how.split(":")
    if kind == "big":
        lower_caps(monkeypatch)
    keep: list = []
    try:
        argv = argv_for(target, kind, keep)
        if argv is None:
            from workflow.planning.plan import Refused, load_suite

            path = make(kind, Path("torchao.yaml" if target == "torchao" else "suite.yaml"),
                        keep)
            with pytest.raises(Refused) as err:
                load_suite([path], {})
            lines = err.value.problems
        else:
            code = main(argv)
            out = capsys.readouterr()
            lines = (out.err + out.out).splitlines()
            skipped = target in ("mlir", "input") and kind != "loop"
            # `check` exits 2 for bad input (1 is its verdict "regressed").
            assert code == (0 if skipped else 2 if argv[0] == "check" else 1), lines
    finally:
        for sock in keep:
            sock.close()
    hits = [line for line in lines if expected in line]
    assert hits, lines
    assert all("Traceback" not in line for line in lines)


def test_o_onto_a_symlink_writes_through_and_keeps_the_link(tmp_path, monkeypatch):
    """`-o link.json` where link.json -> data/real.json: the target gets the record, the
    link stays a link (as cp and editors write through), the lock is the target's (and
    gone once released)."""
    from workflow.records import results_file
    from workflow.records.results_file import append_records

    locked = []
    real_lock = results_file.side_lock
    monkeypatch.setattr(results_file, "side_lock",
                        lambda path: locked.append(Path(path)) or real_lock(path))

    (tmp_path / "data").mkdir()
    real = tmp_path / "data" / "real.json"
    real.write_text("[]")  # a Forge results list, as tt-forge leaves it
    link = tmp_path / "link.json"
    link.symlink_to("data/real.json")
    record = make_case(CID, BASE)
    assert append_records(link, [record]) == 1
    assert link.is_symlink() and os.readlink(link) == "data/real.json"
    assert json.loads(real.read_text())[0]["benchflow"]["id"] == CID
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "link.json"]
    assert locked == [tmp_path / "data" / "real.json.lock"]
    assert [p.name for p in (tmp_path / "data").iterdir()] == ["real.json"]


def test_an_output_that_is_a_fifo_is_refused_before_anything_is_written(tmp_path):
    """The atomic writer would replace a FIFO (or a device node) with a regular file;
    it refuses instead, and leaves no temporary file behind."""
    from workflow.records.storage import write_text

    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError) as err:
        write_text(fifo, "{}")
    assert err.value.problems == [f"{fifo}: is a FIFO (named pipe), not a regular file; "
                                  "expected a regular file to write"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]
    assert fifo.is_fifo()
