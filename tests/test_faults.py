"""Faults: models that crash, hang or raise (a failed case with its stage and error, the
suite completes), and results/ on a full or read-only file system (a named error, no
half-written file).

CASES is the table of faults tried, one row each:
(id, what goes wrong, backend, expected status, stage, fragment of the error).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.conftest import FAST_MEASUREMENT, snakemake, write_suite
from workflow.records.storage import WriteError, read_json, write_json, write_text

# --- models that fail, registered through a suite's model_modules --------------------

FAULTY_MODELS = textwrap.dedent('''
    """Models whose forward fails in the ways a real model can."""
    import os
    import signal
    import time

    from workflow.models.common import finish, seeded
    from workflow.models.registry import benchmark_model


    def _module(forward):
        import torch

        class Faulty(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(8, 8)

            def forward(self, x):
                forward()
                return self.lin(x)

        return Faulty()


    def _build(forward, dtype, shape):
        import torch

        gen = seeded()  # before the module: its weights are the same in every build
        return finish(_module(forward), (torch.randn(*shape, generator=gen),), dtype)


    def _segfault():
        os.kill(os.getpid(), signal.SIGSEGV)


    def _hang():
        while True:
            time.sleep(3600)


    def _raise():
        raise RuntimeError("forward failed on purpose")


    @benchmark_model(default_shape=(4, 8), shape_doc="[batch, 8]")
    def segfaulting(config, dtype, layers, shape):
        return _build(_segfault, dtype, shape)


    @benchmark_model(default_shape=(4, 8), shape_doc="[batch, 8]")
    def hanging(config, dtype, layers, shape):
        return _build(_hang, dtype, shape)


    @benchmark_model(default_shape=(4, 8), shape_doc="[batch, 8]")
    def raising(config, dtype, layers, shape):
        return _build(_raise, dtype, shape)


    # Healthy models that write what is not UTF-8 (a Latin-1 locale message, a lone
    # surrogate, a line that looks like the torch worker's protocol) to stdout and
    # stderr: at the Python level, and to fds 1 and 2 as a C extension does.
    def _python_noise():
        import json
        import sys

        sys.stdout.buffer.write(b"model stdout caf\\xe9 \\xff\\n")
        sys.stdout.flush()
        print("model print caf\\udce9")
        print(json.dumps({"event": "result", "case": "not-a-case", "result": {}}))
        sys.stderr.buffer.write(b"model stderr: Fehler beim \\xd6ffnen\\n")
        sys.stderr.flush()
        print("model stderr caf\\udce9", file=sys.stderr)


    def _fd_noise():
        os.write(1, b"fd 1 caf\\xe9 \\xff\\n{\\"event\\": \\"start\\", \\"case\\": \\"x\\"}\\n")
        os.write(2, b"fd 2 \\xe9\\xff\\xfe\\n")


    def _quiet():
        pass


    @benchmark_model(default_shape=(4, 8), shape_doc="[batch, 8]")
    def latin1_at_build(config, dtype, layers, shape):
        _python_noise()
        return _build(_quiet, dtype, shape)


    @benchmark_model(default_shape=(4, 8), shape_doc="[batch, 8]")
    def latin1_in_forward(config, dtype, layers, shape):
        return _build(_python_noise, dtype, shape)


    @benchmark_model(default_shape=(4, 8), shape_doc="[batch, 8]")
    def bytes_on_fds(config, dtype, layers, shape):
        _fd_noise()
        return _build(_fd_noise, dtype, shape)
''')

# Small enough that the hanging cases cost seconds (both hangs are on the fixture's
# critical path: the torch batch and the IREE batch run one after the other), large
# enough that a healthy step finishes first on a loaded 2-core machine: an export
# worker's whole run (python, torch, the FX importer: about 4 s idle, about 10 s
# loaded) within export_s; a torch worker's start (about 2 s idle) or one of its
# phases within run_s, which each step restarts.
EXPORT_S, RUN_S = 20, 15

MODEL_CASES = [
    ("segv-iree", "forward segfaults (SIGSEGV) in the export worker", "iree",
     "failed", "export", "exited with -11 (killed by SIGSEGV)"),
    ("hang-iree", "forward sleeps forever; export_s ends the export worker", "iree",
     "failed", "export", f"timeout after {EXPORT_S} s"),
    ("raise-iree", "forward raises RuntimeError in the export worker", "iree",
     "failed", "export", "RuntimeError: forward failed on purpose"),
    ("segv-torch", "forward segfaults (SIGSEGV) in the torch worker", "torch-eager",
     "failed", "run", "exited with -11 (killed by SIGSEGV)"),
    ("hang-torch", "forward sleeps forever; run_s ends the torch worker", "torch-eager",
     "failed", "run", f"timeout after {RUN_S} s (batch)"),
    ("raise-torch", "forward raises RuntimeError in the torch worker", "torch-eager",
     "failed", "run", "RuntimeError: forward failed on purpose"),
    ("ok-torch", "a healthy case in the same torch batch, after the crash and the hang",
     "torch-eager", "ok", None, None),
    ("ok-iree", "a healthy case in the same IREE batch as the faulty and the noisy ones",
     "iree", "ok", None, None),
    ("latin1build-iree", "build writes Latin-1 bytes and a lone surrogate to stdout and "
     "stderr (python level) in the export worker", "iree", "ok", None, None),
    ("latin1build-torch", "build writes Latin-1 bytes and a lone surrogate to stdout and "
     "stderr (python level) in the torch worker", "torch-eager", "ok", None, None),
    ("latin1forward-iree", "forward writes Latin-1 bytes, a lone surrogate and a line "
     "like the torch protocol's to stdout and stderr in the export worker", "iree", "ok",
     None, None),
    ("latin1forward-torch", "forward writes Latin-1 bytes, a lone surrogate and a line "
     "like the torch protocol's to stdout and stderr in the torch worker (timed calls too)",
     "torch-eager", "ok", None, None),
    ("fdwrite-iree", "build and forward os.write() non-UTF-8 bytes to fds 1 and 2 (as a "
     "C extension does) in the export worker", "iree", "ok", None, None),
    ("fdwrite-torch", "build and forward os.write() non-UTF-8 bytes and a protocol-like "
     "line to fds 1 and 2 in the torch worker, whose protocol is on stdout",
     "torch-eager", "ok", None, None),
]
MODEL_OF = {"segv": "segfaulting", "hang": "hanging", "raise": "raising", "ok": "linear",
            "latin1build": "latin1_at_build", "latin1forward": "latin1_in_forward",
            "fdwrite": "bytes_on_fds"}
NOISY = ("latin1_at_build", "latin1_in_forward", "bytes_on_fds")


def case_id(row_id: str) -> str:
    kind, backend = row_id.split("-", 1)
    backend = "torch-eager" if backend == "torch" else "iree"
    shape = "16x32x32" if kind == "ok" else "4x8"
    return f"host/{backend}/{MODEL_OF[kind]}-{shape}-f32/baseline"


@pytest.fixture(scope="module")
def faulty_run(tmp_path_factory) -> tuple[Path, dict]:
    """The faults suite run once: its work directory and its report's cases by id."""
    work = tmp_path_factory.mktemp("faults")
    (work / "faulty_models.py").write_text(FAULTY_MODELS)
    faulty = [{"model": m, "shapes": [[4, 8]], "backends": ["iree", "torch-eager"]}
              for m in ("segfaulting", "hanging", "raising", *NOISY)]
    suite = {
        "suite_name": "faults",
        "model_modules": ["faulty_models.py"],
        "skus": {"host": {"iree": {"target_cpu": "host"}, "torch": {"threads": 1},
                          "measurement": {**FAST_MEASUREMENT, "torch_warmup_calls": 2,
                                          "torch_warmup_s": 0.0,
                                          "torch_min_run_time_s": 0.02}}},
        "backends": ["iree", "torch-eager"],
        # The healthy case last, so it runs after the crash and the hang in its batch.
        "workloads": [*faulty, {"model": "linear", "shapes": [[16, 32, 32]],
                                "backends": ["torch-eager", "iree"]}],
        "timeouts": {"export_s": EXPORT_S, "run_s": RUN_S, "compile_s": 120, "verify_s": 120},
    }
    suite_file = write_suite(work / "suite.yaml", suite)
    snakemake(work, "results/report.json", "--configfile", str(suite_file))
    return work, {c["id"]: c for c in read_json(work / "results" / "report.json")["cases"]}


@pytest.fixture(scope="module")
def faulty_report(faulty_run) -> dict:
    return faulty_run[1]


@pytest.mark.e2e
@pytest.mark.parametrize("row", MODEL_CASES, ids=[r[0] for r in MODEL_CASES])
def test_a_faulty_model_is_a_failed_case_and_the_suite_completes(faulty_report, row):
    row_id, _what, backend, status, stage, fragment = row
    rec = faulty_report[case_id(row_id)]
    assert rec["backend"] == backend
    assert rec["status"] == status, rec.get("error")
    assert rec["stage"] == stage
    if fragment:
        assert fragment in rec["error"], rec["error"]
    if status == "ok":  # measured right, too: the outputs are the reference's
        assert rec["accuracy"]["allclose"], rec["accuracy"]


@pytest.mark.e2e
def test_what_a_noisy_model_writes_goes_to_the_logs(faulty_run):
    """The noisy cases passed because their output was kept apart, not lost: the torch
    worker's fd 1 and sys.stdout went to its log (its protocol has a channel of its
    own), as the bytes written, a lone surrogate escaped; the export worker's output is
    in the case's log, decoded with replacement."""
    work, _ = faulty_run
    torch_logs = b"".join(p.read_bytes() for p in (work / "logs" / "torch").rglob("*.log"))
    for written in (b"fd 1 caf\xe9 \xff\n{\"event\": \"start\"", b"fd 2 \xe9\xff\xfe",
                    b"model stdout caf\xe9", b"model print caf\\udce9",
                    b"model stderr: Fehler beim \xd6ffnen"):
        assert written in torch_logs
    iree_log = (work / "logs" / "iree" / "host" / "cases" / "bytes_on_fds-4x8-f32.log")
    assert "fd 1 caf\ufffd \ufffd" in iree_log.read_text(encoding="utf-8")


def test_every_row_names_a_case_of_the_suite():
    assert len({case_id(r[0]) for r in MODEL_CASES}) == len(MODEL_CASES)


# --- results/ on a full or read-only file system ----------------------------------------

STORAGE_CASES = [
    ("full-new", "a new record into a full tmpfs", "full", False,
     "No space left on device"),
    ("full-replace", "a record replacing an older one on a full tmpfs", "full", True,
     "No space left on device"),
    ("readonly-new", "a new record onto a read-only file system", "readonly", False,
     "Read-only file system"),
    ("readonly-replace", "a record replacing one on a read-only file system", "readonly",
     True, "Read-only file system"),
]
# A record larger than the 64 KiB file system (the JSON is ~3x the floats' count in bytes).
BIG_RECORD = {"id": "host/iree/big-f32/baseline", "status": "ok",
              "timing": {"invocation_medians_ms": [1.0 + i / 7 for i in range(20000)]}}
OLD_RECORD = {"id": "host/iree/big-f32/baseline", "status": "ok", "old": True}


@contextlib.contextmanager
def small_fs(where: Path, kind: str, old: dict | None, size: str = "64k"):
    """A tmpfs of `size` at `where` (made read-only after `old` was written, for
    `readonly`); unmounted whatever happens."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs the tests as root)")
    where.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        (where / "results").mkdir()
        if old is not None:
            write_json(where / "results" / "case.json", old)
        if kind == "readonly":
            subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)
        yield where / "results"
    finally:
        subprocess.run(["umount", str(where)], check=True)


@pytest.mark.tool
@pytest.mark.parametrize("row", STORAGE_CASES, ids=[r[0] for r in STORAGE_CASES])
def test_a_write_to_a_full_or_read_only_results_dir_names_the_file(tmp_path, row):
    _id, _what, kind, replace, reason = row
    old = OLD_RECORD if replace else None
    with small_fs(tmp_path / "mnt", kind, old) as results:
        target = results / "case.json"
        with pytest.raises(WriteError) as err:
            write_json(target, BIG_RECORD)
        message = str(err.value)
        assert message == f"could not write {target}: {reason}"
        assert err.value.errno in (errno.ENOSPC, errno.EROFS)
        assert isinstance(err.value, OSError) and err.value.filename == str(target)
        # No half-written record, no temporary file left; the old record whole.
        assert sorted(p.name for p in results.iterdir()) == (["case.json"] if replace else [])
        if replace:
            assert json.loads(target.read_text()) == OLD_RECORD
        # A record that fits still goes in on the full file system.
        if kind == "full":
            write_json(target, {"small": True})
            assert read_json(target) == {"small": True}


def test_a_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    """Without root: the same clean-up when the replace itself fails."""
    target = tmp_path / "r" / "case.json"
    write_text(target, "old\n")

    def refuse(src, dst):
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(WriteError, match=f"could not write {target}: "):
        write_text(target, "new\n")
    assert [p.name for p in target.parent.iterdir()] == ["case.json"]
    assert target.read_text() == "old\n"


# --- a worker's outputs on a full or read-only file system -------------------------------
# Real ENOSPC and EROFS where a tmpfs can be mounted (root, as in CI); EFBIG through
# RLIMIT_FSIZE in the worker's own process, and ENOSPC from a file whose write fails,
# without root. The worker writes through records/storage.atomic_writer: no partial file,
# no temporary file, and its one line `could not write PATH: REASON` is the case's error.

WRITE_CASES = [
    ("enospc-export", "the export worker writes its MLIR module onto a full file system "
     "(a 4 KiB tmpfs)", "iree", "failed", "export", "No space left on device"),
    ("erofs-export", "the export worker's outputs on a read-only file system: the worker "
     "fails, then so does the empty artifact the failed stage leaves (the job fails)",
     "iree", "job fails", "export", "Read-only file system"),
    ("efbig-export", "the export worker's MLIR module past RLIMIT_FSIZE (EFBIG)", "iree",
     "failed", "export", "File too large"),
    ("enospc-trace", "the torch worker writes a case's profiler trace onto a full file "
     "system (a 4 KiB tmpfs)", "torch-eager", "failed", "run", "No space left on device"),
    ("enospc-npz", "an .npz a worker writes (export inputs, verify outputs) whose file "
     "write fails with ENOSPC half-way", "iree", "failed", "verify",
     "No space left on device"),
]
CASES = [*MODEL_CASES, *WRITE_CASES]
# linear [4, 256, 256]: a 256 KiB weight, so that its module overflows the 4 KiB tmpfs
# and RLIMIT_FSIZE alike.
BIG_LINEAR = {"model": "linear", "shapes": [[4, 256, 256]]}
FSIZE_LIMIT = 16384


def _linear_suite(tmp_path, **workload):
    from workflow.suite.load import load

    cfg = {"suite_name": "writes", "backends": ["iree", "torch-eager"],
           "skus": {"host": {"iree": {"target_cpu": "host"}, "torch": {"threads": 1},
                             "measurement": dict(FAST_MEASUREMENT)}},
           "workloads": [{**BIG_LINEAR, **workload}]}
    return load([write_suite(tmp_path / "suite.yaml", cfg)])


def _export_paths(out: Path) -> dict:
    return {"mlir": str(out / "module.mlirbc"), "inputs": str(out / "inputs.npz"),
            "reference": str(out / "reference.npz")}


def _export_into(tmp_path: Path, out: Path):
    """The export stage of linear [4, 256, 256], its files in `out`, its meta and log in
    tmp_path; returns the stage result and the files' paths."""
    from workflow.jobs.iree import export

    suite = _linear_suite(tmp_path)
    (case,) = [c for cases in suite.iree_batches.values() for c in cases]
    paths = _export_paths(out)
    result = export(spec=case.workload.export_spec(), timeout=240,
                    meta=str(tmp_path / "export.json"), log=str(tmp_path / "export.log"),
                    **paths)
    return result, paths


def _enospc_export(tmp_path, monkeypatch):
    with small_fs(tmp_path / "mnt", "full", None, size="4k") as out:
        result, paths = _export_into(tmp_path, out)
        assert (result.status, result.failed_stage) == ("failed", "export"), result.error
        assert f"could not write {paths['mlir']}: No space left on device" in result.error
        # The failed stage's empty artifacts, and nothing else: no partial module, no
        # temporary file.
        assert sorted(p.name for p in out.iterdir()) == sorted(Path(p).name
                                                                for p in paths.values())
        assert all(Path(p).stat().st_size == 0 for p in paths.values())
    # The worker's failure is its one line in the stage's log: no traceback (chained or
    # not), as the disk, not the code, is at fault.
    log = (tmp_path / "export.log").read_text()
    assert f"WriteError: could not write {paths['mlir']}: No space left on device\n" in log
    assert "Traceback" not in log and "During handling" not in log, log


def _erofs_export(tmp_path, monkeypatch):
    with small_fs(tmp_path / "mnt", "readonly", None, size="4k") as out:
        mlir = _export_paths(out)["mlir"]
        with pytest.raises(WriteError) as err:
            _export_into(tmp_path, out)
        assert str(err.value) == f"could not write {mlir}: Read-only file system"
        assert list(out.iterdir()) == []
    # The worker's own failure, first, in the stage's log.
    log = (tmp_path / "export.log").read_text()
    assert f"WriteError: could not write {mlir}: Read-only file system" in log
    assert "Traceback" not in log, log


def _efbig_export(tmp_path, monkeypatch):
    """The export worker itself, started as run_python starts it but under RLIMIT_FSIZE
    (Python ignores SIGXFSZ, so the write fails with EFBIG)."""
    import sys

    from workflow.backends.proc import run_tool
    from workflow.errors import StageError

    suite = _linear_suite(tmp_path)
    (case,) = [c for cases in suite.iree_batches.values() for c in cases]
    out = tmp_path / "out"
    paths = _export_paths(out)
    limited = ("import resource, runpy, sys; "
               f"resource.setrlimit(resource.RLIMIT_FSIZE, ({FSIZE_LIMIT}, {FSIZE_LIMIT})); "
               "runpy.run_module('workflow.backends.iree.export', run_name='__main__')")
    with pytest.raises(StageError) as err:
        run_tool([sys.executable, "-c", limited, json.dumps(case.workload.export_spec()),
                  paths["mlir"], paths["inputs"], paths["reference"], str(tmp_path / "m.json")],
                 stage="export", timeout=240, own_bug_exit=True)
    assert f"could not write {paths['mlir']}: File too large" in err.value.message
    assert list(out.iterdir()) == []


def _enospc_trace(tmp_path, monkeypatch):
    from workflow.jobs.torch import run_pass
    from workflow.planning.plan import torch_batch_plan

    suite = _linear_suite(tmp_path, profiler=True, backends=["torch-eager"])
    cases = torch_batch_plan(suite, "host", next(iter(suite.torch_batches))[-1])
    with small_fs(tmp_path / "mnt", "full", None, size="4k") as out:
        plan = {"backends": {"torch-eager": suite.config["torch_backends"]["torch-eager"]},
                "threads": 1,
                "measurement": suite.config["skus"]["host"]["measurement"],
                "tolerances": suite.config["accuracy"], "artifacts_dir": str(out)}
        (got,) = run_pass(plan, "batch", cases, timeout_per_case=240,
                          log=str(tmp_path / "torch.log")).values()
        trace = out / f"{cases[0]['workload']['id']}.torch-eager.baseline.trace.json"
        assert got == {"status": "failed",
                       "error": f"WriteError: could not write {trace}: No space left on device"}
        assert list(out.iterdir()) == []


class _FillingFile:
    """A file on a disk that fills up after `room` bytes: its write raises ENOSPC."""

    def __init__(self, fh, room: int):
        self._fh, self._room = fh, room

    def write(self, data) -> int:
        if len(data) > self._room:
            self._fh.write(bytes(data[:self._room]))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._room -= len(data)
        return self._fh.write(data)

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()


def _enospc_npz(tmp_path, monkeypatch):
    import builtins

    import numpy as np

    from workflow.backends.iree.export import save_arrays
    from workflow.records import storage

    out = tmp_path / "verify" / "outputs.npz"
    save_arrays(str(out), "out", [np.zeros(4)])  # an older file, kept whole
    before = out.read_bytes()
    monkeypatch.setattr(storage, "open", lambda *a, **k: _FillingFile(builtins.open(*a, **k),
                                                                      1000), raising=False)
    with pytest.raises(WriteError) as err:
        save_arrays(str(out), "out", [np.arange(4096.0)], first_call_ms=np.float64(1.0))
    assert str(err.value) == f"could not write {out}: No space left on device"
    assert [p.name for p in out.parent.iterdir()] == ["outputs.npz"]
    assert out.read_bytes() == before


WRITE_CHECKS = {"enospc-export": (_enospc_export, "tool"), "erofs-export": (_erofs_export, "tool"),
                "efbig-export": (_efbig_export, "tool"), "enospc-trace": (_enospc_trace, "tool"),
                "enospc-npz": (_enospc_npz, None)}


@pytest.mark.parametrize("row", [
    pytest.param(r, marks=[getattr(pytest.mark, WRITE_CHECKS[r[0]][1])]
                 if WRITE_CHECKS[r[0]][1] else [], id=r[0]) for r in WRITE_CASES])
def test_a_worker_that_cannot_write_names_the_file_and_leaves_no_partial_one(
        tmp_path, monkeypatch, row):
    WRITE_CHECKS[row[0]][0](tmp_path, monkeypatch)


def test_every_write_row_has_its_check():
    assert set(WRITE_CHECKS) == {r[0] for r in WRITE_CASES}


# --- concurrent `benchflow run -o OUT.json` ------------------------------------------------

CONCURRENT = [("host", 6), ("generic", 2)]  # SKU, runs: the same case and different ones


@pytest.mark.e2e
def test_concurrent_runs_keep_every_record_and_share_the_cache(tmp_path):
    """8 `benchflow run` at once, 6 of one case and 2 of another, appending to one file:
    every run succeeds (same-case runs wait for each other instead of dying on
    Snakemake's lock), every record is kept, and each case is measured once."""
    import sys

    from tests.conftest import tiny_suite

    suite_file = write_suite(tmp_path / "suite.yaml", tiny_suite())
    out = tmp_path / "perf.json"
    argv = [sys.executable, "-m", "workflow.cli.main", "run", "-m", "linear",
            "--shape", "16,32,32", "-b", "iree", "--configfile", str(suite_file),
            "-o", str(out), "--cores", "1", "--lock-wait", "500"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    procs = [subprocess.Popen([*argv, "--sku", sku], cwd=tmp_path, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for sku, n in CONCURRENT for _ in range(n)]
    try:
        outputs = [p.communicate(timeout=560) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    done = [(p.returncode, o, e) for p, (o, e) in zip(procs, outputs, strict=True)]
    for code, stdout, stderr in done:
        assert code == 0, stdout + stderr
    assert any("waiting for another run of" in e for _, _, e in done)
    cases = json.loads(out.read_text())["cases"]
    assert len(cases) == 8
    for sku, n in CONCURRENT:
        cid = f"{sku}/iree/linear-16x32x32-f32/baseline"
        mine = [c for c in cases if c["id"] == cid]
        assert len(mine) == n and all(c["status"] == "ok" for c in mine)
        # Measured once: every run recorded the same measurement ...
        assert len({json.dumps(c["timing"], sort_keys=True) for c in mine}) == 1
        # ... and the last run to go found it up to date.
        log = tmp_path / "results" / "cli" / cid.replace("/", "+") / "snakemake.log"
        assert "Nothing to be done" in log.read_text()


def test_a_run_lock_held_too_long_is_a_named_timeout(tmp_path):
    import fcntl

    from workflow.commands.single_run import RUN_LOCK, workdir_lock

    with open(tmp_path / RUN_LOCK, "a") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        with pytest.raises(TimeoutError, match=f"{tmp_path}: another run of c still holds"):
            with workdir_lock(tmp_path, 0.3, "c"):
                pass
    with workdir_lock(tmp_path, 0.3, "c"):  # free again: taken at once
        pass
