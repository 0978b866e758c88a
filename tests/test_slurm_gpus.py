"""An 8-GPU node on a real SLURM: eight one-GPU timing jobs run on it at once, each
with its own GPU and its CPUs, asked for as profiles/slurm and rules/*.smk ask for a
GPU SKU's batch (--gres=<the SKU's slurm.gres> --cpus-per-gpu=<slurm.cpus_per_gpu>, no
--exclusive); a ninth waits for a free GPU, and a CPU SKU's job (--exclusive) waits
for the whole node.

tests/slurm/start_slurm.sh starts the cluster with 8 fake GPUs (gres.conf: 8
character devices of /dev/null's numbers; nothing runs on them, SLURM only hands them
out and says which in CUDA_VISIBLE_DEVICES). Run with `pytest -m slurm` as root, as
tests/test_slurm.py.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.test_slurm import SLURM_DIR, daemon_pids, start_cluster
from workflow.planning.placement import slurm_cpus_per_gpu, slurm_gres, slurm_timing_extra

pytestmark = pytest.mark.slurm

GPUS = 8
GPU_SKU = {"slurm": {"gres": "gpu:1", "cpus_per_gpu": 2}}
HOLD_S = 20  # long enough that the eight jobs' runs overlap however slowly they start


@pytest.fixture(scope="module")
def cluster8(request, tmp_path_factory):
    state = tmp_path_factory.mktemp("slurm-8gpu")
    values = start_cluster(request, state, {**os.environ, "BENCHFLOW_SLURM_GPUS": str(GPUS),
                                            "BENCHFLOW_SLURM_CPUS": str(GPUS * 2)})
    pids = daemon_pids(state)
    try:
        yield {**os.environ, "SLURM_CONF": values["SLURM_CONF"]}, \
            values["BENCHFLOW_SLURM_PARTITION"], state
    finally:
        subprocess.run([str(SLURM_DIR / "stop_slurm.sh"), str(state)], timeout=120)
    assert not [n for n, pid in pids.items() if Path(f"/proc/{pid}").exists()]


def sbatch(env: dict, partition: str, out: Path, *flags: str) -> str:
    script = (f'echo "start $(date +%s.%N) gpu=${{CUDA_VISIBLE_DEVICES:-none}}"; '
              f'sleep {HOLD_S}; echo "end $(date +%s.%N)"')
    proc = subprocess.run(["sbatch", "--parsable", "-p", partition, "-A", "benchflow-test",
                           "--mem=64", "-o", str(out), *flags, "--wrap", script],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_eight_gpu_jobs_run_at_once_on_one_node(cluster8, tmp_path):
    env, partition, _ = cluster8
    # What a GPU SKU's batch asks for (rules/*.smk via planning/placement.py).
    assert slurm_timing_extra(GPU_SKU) is None
    flags = (f"--gres={slurm_gres(GPU_SKU)}", f"--cpus-per-gpu={slurm_cpus_per_gpu(GPU_SKU)}")
    outs = [tmp_path / f"gpu{i}.out" for i in range(GPUS + 1)]
    ids = [sbatch(env, partition, out, *flags) for out in outs]
    # A CPU SKU's batch: the whole node, so it waits for every GPU job.
    cpu_out = tmp_path / "cpu.out"
    sbatch(env, partition, cpu_out, f"{slurm_timing_extra({'slurm': {}})}")
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and not (cpu_out.exists() and "end" in cpu_out.read_text()):
        time.sleep(2)
    runs = {}
    for out in [*outs, cpu_out]:
        words = out.read_text().split()  # start <s> gpu=<index> end <s>
        runs[out.stem] = (float(words[1]), words[2].removeprefix("gpu="), float(words[4]))
    first = [runs[f"gpu{i}"] for i in range(GPUS)]
    # The first eight overlap: each started before any of them ended.
    assert max(s for s, _, _ in first) < min(e for _, _, e in first), runs
    assert sorted(g for _, g, _ in first) == [str(i) for i in range(GPUS)], runs
    # The ninth waited for a GPU, the CPU job for the whole node.
    assert runs[f"gpu{GPUS}"][0] >= min(e for _, _, e in first) - 1, runs
    assert runs["cpu"][0] >= max(e for _, _, e in first) - 1, runs
    assert len(ids) == GPUS + 1
