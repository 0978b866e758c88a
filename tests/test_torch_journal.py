"""A stopped torch batch keeps what it measured (jobs/torch_journal.py): the cases
finished before SIGTERM (a SLURM time limit), SIGKILL (what SLURM sends after it) or
Ctrl-C are kept where Snakemake does not delete them, the case that was running says
what it was doing, and the rerun measures only what is missing; a compile budget fails
its case alone."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_torch_bench import suite_for
from workflow.backends.groups import descendants
from workflow.jobs.torch_journal import Journal, journal_dir
from workflow.paths import torch_case_record
from workflow.planning.plan import torch_batch_content, torch_batch_plan

# The job, as scripts/run_torch.py runs it: Ctrl-C and SIGTERM end it as jobs/job.py
# says; each case a group of its own, so that each is kept as it ends.
JOB = """
import json, sys
from workflow.jobs import torch
from workflow.jobs.job import end_quietly_on_ctrl_c
end_quietly_on_ctrl_c()
torch.GROUP_WEIGHT_BYTES = 0
args = json.load(open(sys.argv[1]))
torch.run_torch_batch(**args)
"""

WORKLOADS = [{"model": "linear", "shapes": [[4, 8, 8], [8, 8, 8]]},
             {"model": "sleepy_model", "shapes": [[4, 8]]}]


def batch_args(tmp_path, suite, timeout: float) -> dict:
    # The sleepy case last: the two linear ones finish before it hangs.
    cases = sorted(torch_batch_plan(suite, "host", "b0"),
                   key=lambda c: c["workload"]["model"] == "sleepy_model")
    return {"cases": cases, "backends": suite.config["torch_backends"],
            "sku": suite.sku("host"), "tolerances": suite.config["accuracy"],
            "timeout_per_case": timeout, "out_dir": str(tmp_path / "results" / "b0"),
            "log": str(tmp_path / "batch.log"),
            "content": torch_batch_content(suite, "host", "b0")}


def start_job(tmp_path, args: dict) -> subprocess.Popen:
    (tmp_path / "args.json").write_text(json.dumps(args))
    (tmp_path / "job.py").write_text(JOB)
    return subprocess.Popen([sys.executable, str(tmp_path / "job.py"),
                             str(tmp_path / "args.json")], cwd=tmp_path,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def kept(args: dict) -> list[str]:
    journal = Journal(args["out_dir"])
    return [c["id"] for c in args["cases"] if journal.path(c["identity"]).exists()
            and "record" in json.loads(journal.path(c["identity"]).read_text())]


def wait_for(cond, job: subprocess.Popen, seconds: float = 240) -> None:
    deadline = time.monotonic() + seconds
    while not cond():
        assert job.poll() is None, job.stderr.read() if job.stderr else job.returncode
        assert time.monotonic() < deadline
        time.sleep(0.2)


@pytest.mark.tool
@pytest.mark.parametrize("how", ["sigterm", "sigint", "sigkill"])
def test_a_stopped_batch_keeps_its_finished_cases_and_the_rerun_measures_the_rest(
        tmp_path, how):
    """SIGTERM (a time limit), Ctrl-C, or SIGKILL of the job and its worker (SLURM's
    kill after its grace) while the third case hangs: the two measured cases are kept
    outside the batch's output (which Snakemake deletes), the hung case says what it
    was doing (not after SIGKILL: nothing runs then), and the rerun reuses the two,
    record for record, and measures the third alone (here: its per-step timeout)."""
    suite = suite_for(tmp_path, WORKLOADS)
    args = batch_args(tmp_path, suite, timeout=120)
    ids = [c["id"] for c in args["cases"]]
    job = start_job(tmp_path, args)
    try:
        wait_for(lambda: kept(args) == ids[:2], job)
        time.sleep(2)  # the sleepy case is in its first call
        if how == "sigkill":
            for pid in [job.pid, *descendants(job.pid)]:
                os.kill(pid, signal.SIGKILL)
        else:
            job.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGINT)
        code = job.wait(timeout=60)
        err = job.stderr.read()
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    assert code == {"sigterm": 143, "sigint": 130, "sigkill": -9}[how], err
    first = {cid: json.loads(Journal(args["out_dir"]).path(c["identity"]).read_text())
             for cid, c in zip(ids, args["cases"], strict=True)
             if Journal(args["out_dir"]).path(c["identity"]).exists()}
    assert [cid for cid in ids if "record" in first.get(cid, {})] == ids[:2]
    if how != "sigkill":
        by = "SIGTERM (a time limit reached, or the job cancelled)" if how == "sigterm" \
            else "Ctrl-C (SIGINT)"
        stopped = first[ids[2]]["stopped"]
        assert stopped.startswith(f"stopped by {by} after ") and \
            stopped.endswith(" s while checking accuracy"), stopped  # its fp32 reference
        assert f"torch batch stopped: 2 of 3 cases kept in {journal_dir(args['out_dir'])}; " \
            f"{ids[2]} was {stopped}; the rerun measures the other 1" in err, err
    # The rerun (Snakemake deleted the batch's output): the two reused as they were.
    rerun = {**args, "timeout_per_case": 5}
    job = start_job(tmp_path, rerun)
    assert job.wait(timeout=300) == 0, job.stderr.read()
    batch = json.loads((Path(args["out_dir"]) / "batch.json").read_text())
    assert batch["reused"] == ids[:2]
    for cid, case in zip(ids, args["cases"], strict=True):
        record = json.loads(Path(torch_case_record(args["out_dir"], case["identity"]))
                            .read_text())
        if cid in ids[:2]:
            assert record == first[cid]["record"]
        else:
            assert record["status"] == "failed" and "timeout after 5 s" in record["error"]
    log = (tmp_path / "batch.log").read_text()
    assert f"{ids[0]}: reused: measured by the last run, which was stopped" in log
    if how != "sigkill":
        assert f"{ids[2]}: measuring again: the last run was stopped by " in log
    # One worker in the rerun, for the third case alone.
    assert log.count("sleepy_model") and not journal_dir(args["out_dir"]).exists()


@pytest.mark.tool
def test_a_kept_record_is_reused_only_when_its_key_and_case_are_the_cases_own(tmp_path):
    """Read back by content: a kept record whose key is not the case's key now (its
    batch's content changed), or that holds another case's record (copied into its
    place), is measured again; one that verifies is reused."""
    suite = suite_for(tmp_path, [{"model": "linear", "shapes": [[4, 8, 8], [8, 8, 8]]}])
    cases = torch_batch_plan(suite, "host", "b0")
    journal = Journal(tmp_path / "b0")
    a, b = (c["identity"] for c in cases)
    journal.keep(a, "k1", {"id": a["id"], "status": "ok"}, {})
    assert journal.reusable(a, "k1", {})[0] == {"id": a["id"], "status": "ok"}
    assert journal.reusable(a, "k2", {}) == (
        None, "its inputs changed since the last run measured it")
    journal.keep(b, "k1", {"id": a["id"], "status": "ok"}, {})  # a's record in b's place
    assert journal.reusable(b, "k1", {}) == (
        None, f"{journal.path(b)}: not the record of {b['id']}")
    journal.keep(a, "k1", {"id": a["id"], "status": "failed"}, {"run_s": 5})
    assert journal.reusable(a, "k1", {"run_s": 10}) == (
        None, "it failed, and the timeouts changed since")


@pytest.mark.tool
def test_a_compile_budget_hit_fails_its_case_and_the_batch_goes_on(tmp_path):
    """torch.compile past timeouts.torch_compile_s (a model that sleeps 60 s in its
    compiled first call): that case fails at stage compile with the budget named, the
    step's timeout far off; the cases after it are measured."""
    from workflow.jobs.torch import run_torch_batch

    suite = suite_for(tmp_path, [WORKLOADS[0], {"model": "slow_to_compile_model"}],
                      backends=["torch-inductor"])
    args = batch_args(tmp_path, suite, timeout=120)
    args["cases"].sort(key=lambda c: c["workload"]["model"] == "linear")  # it first
    # Without the budget the sleep (60 s) would end within the step's 120 s: ok.
    sleepy, first, second = run_torch_batch(**{**args, "compile_budget_s": 3})
    assert (sleepy["status"], sleepy["stage"]) == ("failed", "compile"), sleepy
    assert sleepy["error"].startswith("compile budget of 3 s hit (timeouts.torch_compile_s) "
                                      "while compiling with torch.compile"), sleepy["error"]
    assert first["status"] == second["status"] == "ok"


@pytest.mark.e2e
def test_ctrl_c_then_the_same_command_measures_only_the_missing_cases(tmp_path):
    """What a user does: `snakemake ... results/report.json`, Ctrl-C while the batch's
    third case hangs (Snakemake deletes the batch's output), the same command again: the
    two measured cases are reused, record for record, the third is measured (its
    timeout here), and the report holds all three."""
    import copy

    from tests.conftest import DATA, FAST_MEASUREMENT, write_suite
    from tests.test_progress_truth import plain_snakemake
    from workflow.planning import plan as plans
    from workflow.suite.load import load

    suite = write_suite(tmp_path / "suite.yaml", {
        "suite_name": "stopped", "model_modules": [str(DATA / "extra_models.py")],
        "skus": {"host": {"iree": {"target_cpu": "host"}, "torch": {"threads": 1},
                          "measurement": copy.deepcopy(FAST_MEASUREMENT)}},
        "timeouts": {"run_s": 20},
        "workloads": [{**w, "backends": ["torch-eager"]} for w in WORKLOADS]})
    work = tmp_path / "work"
    cmd = plain_snakemake("--directory", str(work), "--configfile", str(suite), "--",
                          "results/report.json")
    (key,) = load([str(suite)]).torch_batches
    cases = plans.torch_batch_plan(load([str(suite)]), *key)
    out_dir = str(work / "results" / "torch" / key[0] / key[1])
    linear = [c["id"] for c in cases if c["workload"]["model"] == "linear"]
    first = tmp_path / "first.txt"
    with open(first, "w") as sink:
        job = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT,
                               start_new_session=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        wait_for(lambda: sorted(kept({"out_dir": out_dir, "cases": cases})) == sorted(linear),
                 job, 300)
        time.sleep(2)
        os.killpg(job.pid, signal.SIGINT)  # the terminal's Ctrl-C reaches the group
        assert job.wait(timeout=60) == 130, first.read_text()
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    # No batch directory: Snakemake would keep it marked incomplete, and the same command
    # would refuse to go on without --rerun-incomplete.
    assert not Path(out_dir).exists()
    journal = Journal(out_dir)
    kept_records = {c["id"]: json.loads(journal.path(c["identity"]).read_text())["record"]
                    for c in cases if c["id"] in linear}
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert sorted(json.loads((Path(out_dir) / "batch.json").read_text())["reused"]) \
        == sorted(linear)
    report = json.loads((work / "results" / "report.json").read_text())
    by_id = {c["id"]: c for c in report["cases"]}
    for cid in linear:
        assert by_id[cid]["status"] == "ok"
        assert by_id[cid]["timing"] == kept_records[cid]["timing"]
    (sleepy,) = [by_id[c["id"]] for c in cases if c["id"] not in linear]
    assert sleepy["status"] == "failed" and "timeout after 20 s" in sleepy["error"]


@pytest.mark.tool
def test_a_worker_signalled_with_its_job_stops_the_batch_not_fails_its_case(tmp_path):
    """SLURM's time limit signals every process of the job, the worker too (its own
    session does not shield it): a worker ended by SIGTERM is the batch stopped (exit
    143, as the job's own SIGTERM), not a failure of the case it was measuring, which
    would be kept and reused."""
    import threading

    from tests.test_torch_bench import plan_of
    from workflow.jobs.torch import run_pass

    suite = suite_for(tmp_path, [{"model": "sleepy_model"}])
    cases, plan = plan_of(suite)

    def stop_the_worker() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for pid in descendants(os.getpid()):
                try:
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if b"workflow.backends.torch.worker" in cmdline:
                    time.sleep(5)  # into its case (the sleepy model's reference call)
                    os.kill(pid, signal.SIGTERM)
                    return
            time.sleep(0.2)

    threading.Thread(target=stop_the_worker, daemon=True).start()
    heard = []
    with pytest.raises(SystemExit) as stopped:
        run_pass(plan, "batch", cases, timeout_per_case=120, log=str(tmp_path / "log"),
                 finished=lambda cid, result: heard.append((cid, result)))
    assert stopped.value.code == 143 and heard == []


@pytest.mark.tool
def test_cases_in_batches_cut_again_are_reused_not_measured_again(tmp_path):
    """The batches cut again (another count of timing slots, another torch_batch_size, a
    workload added): a case a finished batch measured, now in another batch beside
    other models, is reused there record for record, and only the new case is measured.
    Snakemake has deleted the old batch's output by then; the SKU's store kept them."""
    from tests.conftest import DATA, tiny_suite, write_suite
    from tests.test_torch_bench import MEASURE
    from workflow.jobs.torch import run_torch_batch
    from workflow.suite.load import load

    def suite_of(shapes, size):
        cfg = tiny_suite(model_modules=[str(DATA / "extra_models.py")],
                         workloads=[{"model": "linear", "shapes": shapes},
                                    {"model": "conv_model"}],
                         backends=["torch-eager"], torch_batch_size=size)
        cfg["skus"] = {"host": {"torch": {"threads": 1}, "measurement": dict(MEASURE)}}
        return load([write_suite(tmp_path / f"s{size}-{len(shapes)}.yaml", cfg)])

    def run(suite, batch):
        out = tmp_path / "results" / "torch" / "host" / batch
        shutil.rmtree(out, ignore_errors=True)  # as Snakemake does before a job
        cases = torch_batch_plan(suite, "host", batch)
        records = run_torch_batch(cases=cases, backends=suite.config["torch_backends"],
                                  sku=suite.sku("host"), tolerances=suite.config["accuracy"],
                                  timeout_per_case=120, out_dir=str(out),
                                  log=str(tmp_path / f"{batch}.log"),
                                  content=torch_batch_content(suite, "host", batch))
        return {r["id"]: r for r in records}, json.loads((out / "batch.json").read_text())

    first = suite_of([[4, 8, 8], [8, 8, 8]], 64)
    (batch,) = [b for _, b in first.torch_batches]
    measured, info = run(first, batch)
    assert len(measured) == 3 and info["reused"] == []
    # One workload a batch now, a linear shape added: four batches of one workload.
    again = suite_of([[4, 8, 8], [8, 8, 8], [2, 8, 8]], 1)
    assert len(again.torch_batches) == 4
    for _, name in again.torch_batches:
        shutil.rmtree(tmp_path / "results" / "torch" / "host" / batch, ignore_errors=True)
        got, info = run(again, name)
        for cid, record in got.items():
            if cid in measured:
                assert cid in info["reused"] and record == measured[cid]
            else:
                assert info["reused"] == [] and record["status"] == "ok"
