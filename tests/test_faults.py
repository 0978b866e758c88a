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

        return finish(_module(forward), (torch.randn(*shape, generator=seeded()),), dtype)


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
''')

# Small enough that the hanging cases cost seconds, large enough that a worker starts
# (python, torch, the FX importer) on a loaded 2-core machine before it runs out.
EXPORT_S, RUN_S = 45, 45

CASES = [
    ("segv-iree", "forward segfaults (SIGSEGV) in the export worker", "iree",
     "failed", "export", "exited with -11 (killed by SIGSEGV)"),
    ("hang-iree", "forward sleeps forever; export_s ends the export worker", "iree",
     "failed", "export", f"timeout after {EXPORT_S} s"),
    ("raise-iree", "forward raises RuntimeError in the export worker", "iree",
     "failed", "export", "RuntimeError: forward failed on purpose"),
    ("segv-torch", "forward segfaults (SIGSEGV) in the torch worker", "torch-eager",
     "failed", "run", "exited with -11 (killed by SIGSEGV)"),
    ("hang-torch", "forward sleeps forever; run_s ends the torch worker", "torch-eager",
     "failed", "run", f"timeout after {RUN_S} s (characterize)"),
    ("raise-torch", "forward raises RuntimeError in the torch worker", "torch-eager",
     "failed", "run", "RuntimeError: forward failed on purpose"),
    ("ok-torch", "a healthy case in the same torch batch, after the crash and the hang",
     "torch-eager", "ok", None, None),
]
MODEL_OF = {"segv": "segfaulting", "hang": "hanging", "raise": "raising", "ok": "linear"}


def case_id(row_id: str) -> str:
    kind, backend = row_id.split("-", 1)
    backend = "torch-eager" if backend == "torch" else "iree"
    shape = "16x32x32" if kind == "ok" else "4x8"
    return f"host/{backend}/{MODEL_OF[kind]}-{shape}-f32/baseline"


@pytest.fixture(scope="module")
def faulty_report(tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("faults")
    (work / "faulty_models.py").write_text(FAULTY_MODELS)
    faulty = [{"model": m, "shapes": [[4, 8]], "backends": ["iree", "torch-eager"]}
              for m in ("segfaulting", "hanging", "raising")]
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
                                "backends": ["torch-eager"]}],
        "timeouts": {"export_s": EXPORT_S, "run_s": RUN_S, "compile_s": 120, "verify_s": 120},
    }
    suite_file = write_suite(work / "suite.yaml", suite)
    snakemake(work, "results/report.json", "--configfile", str(suite_file))
    return {c["id"]: c for c in read_json(work / "results" / "report.json")["cases"]}


@pytest.mark.e2e
@pytest.mark.parametrize("row", CASES, ids=[r[0] for r in CASES])
def test_a_faulty_model_is_a_failed_case_and_the_suite_completes(faulty_report, row):
    row_id, _what, backend, status, stage, fragment = row
    rec = faulty_report[case_id(row_id)]
    assert rec["backend"] == backend
    assert rec["status"] == status, rec.get("error")
    assert rec["stage"] == stage
    if fragment:
        assert fragment in rec["error"], rec["error"]


def test_every_row_names_a_case_of_the_suite():
    assert len({case_id(r[0]) for r in CASES}) == len(CASES)


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
def small_fs(where: Path, kind: str, old: dict | None):
    """A 64 KiB tmpfs at `where` (made read-only after `old` was written, for `readonly`);
    unmounted whatever happens."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs the tests as root)")
    where.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)],
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

    from workflow.stages.single_run import RUN_LOCK, workdir_lock

    with open(tmp_path / RUN_LOCK, "a") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        with pytest.raises(TimeoutError, match=f"{tmp_path}: another run of c still holds"):
            with workdir_lock(tmp_path, 0.3, "c"):
                pass
    with workdir_lock(tmp_path, 0.3, "c"):  # free again: taken at once
        pass
