"""A tiny suite on a real single-node SLURM, through profiles/slurm and the executor plugin.

tests/slurm/start_slurm.sh starts munged, slurmctld and slurmd of Debian's packages
(installing them when missing); the suite runs with `--profile profiles/slurm`, only the
site's settings overridden (account, partition, squeue as status command because the
test cluster has no slurmdbd, short status intervals); one timing job is cancelled with
scancel while it measures, and the suite must still complete with nothing lost. A CUDA
SKU (compile-only here) names its own partition and a GPU gres (skus.gpu.slurm): its job
must be placed there with the GPU (the test cluster's node has one, a count in gres.conf).
slurmctld's job completion log and scontrol are the scheduler's records checked here.

Run with `pytest -m slurm` as root; elsewhere it is skipped with the reason, unless
BENCHFLOW_REQUIRE_SLURM is set (CI), where a missing cluster is a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, write_suite
from workflow.planning.placement import slurm_gres
from workflow.planning.resources import iree_batch_mem_mb, iree_batch_runtime_min
from workflow.suite.load import load

pytestmark = pytest.mark.slurm

SLURM_DIR = REPO / "tests" / "slurm"
ACCOUNT = "benchflow-test"
# Long enough per invocation that a timing job is still measuring when it is cancelled.
MEASUREMENT = {"invocations": 3, "max_invocations": 3, "repetitions": 5,
               "min_warmup_time_s": 0.2, "min_time_s": 0.05, "rerun_noisy": False}
WORKLOADS = ["linear-16x32x32-f32", "linear-32x64x64-f32"]
GPU_PARTITION = "benchflow-gpu"  # tests/slurm/start_slurm.sh's second partition
RUN_TIMEOUT_S = 900


def suite() -> dict:
    return {
        "suite_name": "slurm",
        "skus": {"host": {"iree": {"target_cpu": "host"}, "measurement": dict(MEASUREMENT)},
                 # Compiled here, not timed (no CUDA device): one short job that goes to
                 # its own partition and asks for its GPU.
                 "gpu": {"iree": {"target_backend": "cuda", "target_chip": "sm_80",
                                  "device": "cuda"},
                         # Its GPU and 2 CPUs on a shared node, not the node.
                         "slurm": {"partition": GPU_PARTITION, "gres": "gpu:1",
                                   "cpus_per_gpu": 2}}},
        "workloads": [{"model": "linear", "shapes": [[16, 32, 32], [32, 64, 64]],
                       "skus": ["host"]},
                      {"model": "linear", "shapes": [[16, 32, 32]], "skus": ["gpu"]}],
        # One case per IREE job: two timing jobs on host, one of them cancelled and
        # retried, and the GPU SKU's.
        "iree_batch_size": 1,
    }


def unavailable(reason: str):
    """Skips, or fails where the cluster is required (CI)."""
    if os.environ.get("BENCHFLOW_REQUIRE_SLURM"):
        pytest.fail(f"SLURM test required but: {reason}")
    pytest.skip(reason)


@dataclass
class Cluster:
    state: Path
    env: dict
    cpus: int
    jobcomp: Path

    def run(self, *argv: str, check: bool = True) -> str:
        proc = subprocess.run(list(argv), capture_output=True, text=True, env=self.env,
                              timeout=60)
        if check and proc.returncode != 0:
            raise AssertionError(f"{argv}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc.stdout

    def records(self) -> dict[str, dict]:
        """slurmctld's job completion log: job id -> its fields."""
        out = {}
        text = self.jobcomp.read_text() if self.jobcomp.exists() else ""
        for line in text.splitlines():
            fields = dict(re.findall(r"(\w+)=(\S*)", line))
            out[fields["JobId"]] = fields
        return out


def daemon_pids(state: Path) -> dict[str, int]:
    return {p.name.split(".")[0]: int(p.read_text()) for p in state.glob("*.daemon.pid")}


def start_cluster(request, state: Path, env: dict | None = None) -> dict[str, str]:
    """tests/slurm/start_slurm.sh's cluster in `state` (env: its settings, e.g. fake GPUs)
    and the values it wrote; the test skipped unless `-m slurm` names it, unavailable
    (a skip, or a failure under BENCHFLOW_REQUIRE_SLURM) where it cannot run here."""
    # addopts deselect these tests, but any other -m (say "not e2e") replaces that: they
    # start daemons and take minutes, so only a marker expression naming them runs them.
    markexpr = request.config.getoption("markexpr") or ""
    if "slurm" not in markexpr or "not slurm" in markexpr:
        pytest.skip("starts a SLURM cluster: selected only with -m slurm")
    if os.geteuid() != 0:
        unavailable("needs root: slurmd runs jobs as their user and the packages come from apt")
    if not shutil.which("apt-get") and not all(
            shutil.which(t) for t in ("slurmctld", "slurmd", "munged", "sbatch")):
        unavailable("SLURM is not installed and there is no apt-get to install it")
    start = subprocess.run([str(SLURM_DIR / "start_slurm.sh"), str(state)], env=env,
                           capture_output=True, text=True, timeout=900)
    if start.returncode != 0:
        stop = subprocess.run([str(SLURM_DIR / "stop_slurm.sh"), str(state)],
                              capture_output=True, text=True, timeout=120)
        reason = f"start_slurm.sh exited {start.returncode}: {start.stderr.strip()[-2000:]}"
        if start.returncode == 3:  # the script's "cannot run here" (no root, foreign config)
            unavailable(reason)
        pytest.fail(reason + stop.stderr)
    return dict(line.split("=", 1) for line in (state / "env").read_text().split())


@pytest.fixture(scope="module")
def cluster(request, tmp_path_factory):
    state = tmp_path_factory.mktemp("slurm-cluster")
    values = start_cluster(request, state)
    env = {**os.environ, "SLURM_CONF": values["SLURM_CONF"],
           "BENCHFLOW_SLURM_ACCOUNT": ACCOUNT,
           "BENCHFLOW_SLURM_PARTITION": values["BENCHFLOW_SLURM_PARTITION"]}
    pids = daemon_pids(state)
    try:
        yield Cluster(state, env, int(values["BENCHFLOW_SLURM_CPUS"]),
                      Path(values["BENCHFLOW_SLURM_JOBCOMP"]))
    finally:
        subprocess.run([str(SLURM_DIR / "stop_slurm.sh"), str(state)], timeout=120)
    alive = [name for name, pid in pids.items() if Path(f"/proc/{pid}").exists()]
    assert not alive, f"daemons still running after stop_slurm.sh: {alive}"


def snakemake_cmd(workdir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
            "--directory", str(workdir), "--configfile", str(workdir / "suite.yaml"),
            "--profile", str(REPO / "profiles" / "slurm"),
            # The site's settings: no slurmdbd here, so squeue (MinJobAge 300 s >= 3 x 2 s);
            # short intervals because the jobs take seconds.
            "--slurm-status-command", "squeue",
            "--slurm-init-seconds-before-status-checks", "2",
            "--seconds-between-status-checks", "2",
            "--latency-wait", "5",
            "--slurm-keep-successful-logs",
            *extra, "results/report.json"]


def submissions(log: str) -> dict[str, str]:
    """SLURM job id -> what snakemake submitted in it: rule_<name>, or group."""
    return {m.group(1): "group" if m.group(2).startswith("group_") else m.group(2)
            for m in re.finditer(
                r"submitted with SLURM jobid (\d+) \(log: \S*/slurm_logs/((?:rule|group)_\w+)/",
                log)}


def wildcards_of(workdir: Path, jobs) -> dict[str, str]:
    """SLURM job id -> its wildcards: each job's SLURM log (kept by
    --slurm-keep-successful-logs) is slurm_logs/<rule_name>/<wildcards>/<job id>.log."""
    logs = workdir / ".snakemake" / "slurm_logs"
    return {job: next(p.parent.name for p in logs.rglob(f"{job}.log")) for job in jobs}


def mem_of(record: dict) -> int:
    return int(re.search(r"mem=(\d+)M", record["Tres"]).group(1))


def cancel_a_measuring_timing_job(cluster: Cluster, proc: subprocess.Popen) -> str:
    """Waits for an iree_batch job whose nested snakemake has started the rule, then
    scancels it; returns its SLURM job id."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        out = cluster.run("squeue", "-h", "-t", "RUNNING", "-o", "%i|%k", check=False)
        for line in out.splitlines():
            job, comment = line.split("|", 1)
            if not comment.startswith("rule_iree_batch_") or "host" not in comment:
                continue
            info = cluster.run("scontrol", "show", "job", "-o", job, check=False)
            m = re.search(r"StdOut=(\S+)", info)
            log = Path(m.group(1)) if m else None
            if log and log.exists() and "rule iree_batch:" in log.read_text(errors="replace"):
                cluster.run("scancel", job)
                return job
        time.sleep(0.2)
    raise AssertionError("no iree_batch job was caught measuring (the suite ended or hung "
                         "first)")


@pytest.fixture(scope="module")
def finished(cluster, tmp_path_factory):
    """The suite, run once through SLURM with one timing job cancelled mid-run."""
    workdir = tmp_path_factory.mktemp("slurm-suite")
    write_suite(workdir / "suite.yaml", suite())
    log_path = workdir / "snakemake.out"
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(snakemake_cmd(workdir), stdout=log, stderr=subprocess.STDOUT,
                                env=cluster.env, cwd=workdir)
        try:
            cancelled = cancel_a_measuring_timing_job(cluster, proc)
            rc = proc.wait(timeout=RUN_TIMEOUT_S)
        finally:
            if proc.poll() is None:  # our own snakemake, stuck: stop it by its PID
                proc.kill()
                proc.wait()
    seconds = time.monotonic() - t0
    out = log_path.read_text()
    assert rc == 0, f"snakemake exited {rc} after {seconds:.0f} s:\n{out[-6000:]}"
    print(f"slurm suite: {seconds:.0f} s")
    return workdir, out, cancelled


def test_every_job_ran_through_slurm_with_the_profiles_resources(cluster, finished):
    workdir, out, cancelled = finished
    submitted = submissions(out)
    records = cluster.records()
    # Three IREE batch jobs (one case each: export, compile, run, verify, record) plus
    # the retry of the cancelled one.
    kinds = sorted(submitted.values())
    assert kinds == ["rule_iree_batch"] * 4, kinds
    assert set(submitted) <= set(records), "the scheduler has no record of some jobs"
    the_suite = load([workdir / "suite.yaml"])
    timeouts = the_suite.config["timeouts"]
    names = {records[j]["Name"] for j in submitted}
    assert len(names) == 1, f"one snakemake run, one SLURM job name: {names}"
    wildcards = wildcards_of(workdir, submitted)
    # The job that ran again after the cancelled one, for the same batch: its attempt 2.
    retried = {j for j in submitted if j != cancelled and wildcards[j] == wildcards[cancelled]}
    for job in submitted:
        rec = records[job]
        sku, batch = wildcards[job].split("_", 1)
        cases = the_suite.iree_batches[(sku, batch)]
        partition = GPU_PARTITION if sku == "gpu" else "benchflow"
        assert rec["Account"] == ACCOUNT and rec["Partition"] == partition, rec
        assert rec["JobState"] == ("CANCELLED" if job == cancelled else "COMPLETED"), rec
        # Wall time: what the cases are expected to take on the first attempt (no earlier
        # records here), every stage at its timeout on the retry; memory from the largest
        # model's estimated weights, twice as much on the second attempt.
        attempt = 2 if job in retried else 1
        workloads = [c.workload for c in cases]
        measurement = the_suite.sku(sku)["measurement"]
        assert int(rec["TimeLimit"]) == iree_batch_runtime_min(workloads, measurement,
                                                               timeouts, attempt), rec
        tries = [iree_batch_mem_mb(workloads, attempt) for attempt in (1, 2)]
        assert mem_of(rec) == tries[job in retried], rec
        if sku == "gpu":  # its GPU and cpus_per_gpu on a shared node (test below)
            assert int(rec["ProcCnt"]) == 2 < cluster.cpus, rec
            continue
        # One CPU asked for (set-threads), the whole node granted (--exclusive).
        assert "cpu=1," in rec["Tres"] and int(rec["ProcCnt"]) == cluster.cpus, rec


def test_a_gpu_skus_job_went_to_its_partition_with_its_gres(cluster, finished):
    """The SKU's `slurm` settings reach sbatch: its partition, and its gres on the job
    that uses its device; the host SKU's jobs ask for no GPU."""
    workdir, out, _ = finished
    submitted = submissions(out)
    wildcards = wildcards_of(workdir, submitted)
    records = cluster.records()
    the_suite = load([workdir / "suite.yaml"])
    gpu_jobs = [j for j in submitted if wildcards[j].startswith("gpu_")]
    assert len(gpu_jobs) == 1, wildcards
    for job in submitted:
        # MinJobAge keeps finished jobs in slurmctld for minutes: scontrol still has them.
        info = cluster.run("scontrol", "show", "job", "-o", job)
        sku = wildcards[job].split("_", 1)[0]
        gres = slurm_gres(the_suite.sku(sku))
        if job in gpu_jobs:
            assert gres == "gpu:1" and records[job]["Partition"] == GPU_PARTITION
            assert re.search(r"TresPerNode=(gres:)?gpu:1\b", info), info
            assert records[job]["JobState"] == "COMPLETED", records[job]
            # --cpus-per-gpu=2 and no --exclusive: two CPUs of the node, not all of them.
            assert int(records[job]["ProcCnt"]) == 2 < cluster.cpus, records[job]
        else:
            assert gres is None and "TresPerNode" not in info, info
    # Compiled on the GPU partition, compile-only there (no CUDA device on the node).
    report = json.loads((workdir / "results" / "report.json").read_text())
    gpu_cases = [c for c in report["cases"] if c["sku"] == "gpu"]
    assert len(gpu_cases) == 1 and gpu_cases[0]["compile"]["binary_bytes"] > 0, gpu_cases


def test_timing_jobs_never_shared_the_node(cluster, finished):
    _, out, cancelled = finished
    records = cluster.records()
    submitted = submissions(out)

    def span(job):
        r = records[job]
        return r["StartTime"], r["EndTime"]

    timing = [j for j, k in submitted.items() if k == "rule_iree_batch" and j != cancelled]
    for t in timing:
        t_start, t_end = span(t)
        for other in submitted:
            if other == t:
                continue
            o_start, o_end = span(other)
            # ISO timestamps compare as strings; a shared second is not an overlap.
            assert o_end <= t_start or o_start >= t_end, (
                f"job {other} ({submitted[other]}) ran beside timing job {t}")


def test_a_cancelled_job_is_retried_and_nothing_is_lost(cluster, finished):
    workdir, out, cancelled = finished
    submitted = submissions(out)
    records = cluster.records()
    assert submitted[cancelled] == "rule_iree_batch"
    assert re.search(rf"SLURM-job '{cancelled}' failed, SLURM status is: 'CANCELLED'", out)
    wildcards = wildcards_of(workdir, submitted)
    retries = [j for j in submitted if j != cancelled and wildcards[j] == wildcards[cancelled]]
    assert len(retries) == 1 and int(retries[0]) > int(cancelled), retries
    retry = records[retries[0]]
    assert retry["JobState"] == "COMPLETED"
    # Attempt 2 asks for twice the memory (workflow/planning/resources.py).
    assert mem_of(retry) > mem_of(records[cancelled])

    report = json.loads((workdir / "results" / "report.json").read_text())
    cases = {c["workload"]: c for c in report["cases"] if c["sku"] == "host"}
    assert sorted(cases) == sorted(WORKLOADS)
    the_suite = load([workdir / "suite.yaml"])
    batch_of = {c.workload.id: f"{sku}_{batch}"
                for (sku, batch), cases in the_suite.iree_batches.items() for c in cases
                if sku == "host"}
    run_jobs = {wildcards[j]: j for j in submitted if records[j]["JobState"] == "COMPLETED"}
    for wid, case in cases.items():
        assert case["status"] == "ok", case
        assert case["timing"]["invocations"] == MEASUREMENT["invocations"]
        assert len(case["timing"]["invocation_medians_ms"]) == MEASUREMENT["invocations"]
        assert case["accuracy"]["allclose"]
        # The case names the SLURM job that measured it.
        assert case["provenance"].get("slurm_job_id") == run_jobs[batch_of[wid]], (
            case["provenance"], run_jobs)

    # Nothing left to redo: the suite is complete as it stands.
    again = subprocess.run(snakemake_cmd(workdir, "--dry-run"), capture_output=True,
                           text=True, env=cluster.env, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "Nothing to be done" in again.stdout + again.stderr


def test_the_live_case_lines_and_the_summary_come_through_slurm(finished):
    """benchflow's logger under the SLURM executor, with no flag (the workflow profile,
    profiles/default/, applies under --profile profiles/slurm too): a line per case as
    its job ends (read from the shared file system), ETA lines, and the summary naming
    the retried job; Snakemake's own lines (the submissions the tests above read) still there."""
    _, out, _ = finished
    assert "\x1b[" not in out and "Logging error" not in out
    live, summary = out.split("── benchflow summary")
    for workload in WORKLOADS:
        case = re.escape(f"host/iree/{workload}/baseline")
        assert re.search(rf"^ok +{case}  [0-9.e-]+( \[[0-9.e-]+, [0-9.e-]+\])? ms", live,
                         re.M), live[-4000:]
    assert re.search(r"^compile-only +gpu/iree/linear-16x32x32-f32/baseline  ", live, re.M)
    assert re.search(r"^ETA .*\(\d+ of \d+ jobs done", live, re.M)
    assert "finished: 3 cases: 2 ok, 1 compile-only" in summary, summary
    assert re.search(r"^retried: iree_batch \(jobid \d+\) failed once, then finished",
                     summary, re.M), summary
    assert "reports: results/report.json" in summary
