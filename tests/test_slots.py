"""Timing slots (workflow/slots, planning/slot_plan.py): one per GPU the machine lists,
each pinned to its GPU by UUID and to a disjoint, NUMA-near CPU set; claimed at run time
by a lock per slot that the kernel releases however the job ends. No GPU here: a fake
nvidia-smi on PATH answers as a real one would (its documented csv,noheader rows)."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from workflow.backends.proc import capture
from workflow.slots import claim, machine
from workflow.slots.machine import Gpu, Slot

UUIDS = [f"GPU-{i:08x}-1111-2222-3333-44444444444{i}" for i in range(8)]


def fake_smi(bin_dir: Path, gpus: int = 8, exit_code: int = 0) -> Path:
    """An nvidia-smi that answers NVIDIA_QUERY for `gpus` H100s on two NUMA nodes' buses."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    rows = "\n".join(f"{i}, {UUIDS[i]}, NVIDIA H100 80GB HBM3, 00000000:{0x18 + 0x10 * i:02X}:00.0"
                     for i in range(gpus))
    tool = bin_dir / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\n[ \"$1\" = \"{machine.NVIDIA_QUERY[0]}\" ] || exit 9\n"
                    f"cat <<'EOF'\n{rows}\nEOF\nexit {exit_code}\n")
    tool.chmod(0o755)
    return tool


def fake_sys(root: Path, gpus: int = 8) -> Path:
    """/sys of a 2-socket node: GPUs 0-3 on node 0 (CPUs 0-7), 4-7 on node 1 (8-15)."""
    for i in range(gpus):
        dev = root / "bus/pci/devices" / f"0000:{0x18 + 0x10 * i:02x}:00.0"
        dev.mkdir(parents=True)
        (dev / "numa_node").write_text(f"{i // 4}\n")
    for node, cpus in ((0, "0-7"), (1, "8-15")):
        d = root / f"devices/system/node/node{node}"
        d.mkdir(parents=True)
        (d / "cpulist").write_text(cpus + "\n")
    return root


def which_in(bin_dir: Path):
    return lambda name: str(bin_dir / name) if (bin_dir / name).exists() else None


@pytest.mark.tool  # starts the fake nvidia-smi
def test_eight_fake_gpus_give_eight_numa_near_disjoint_slots(tmp_path):
    bin_dir = tmp_path / "bin"
    fake_smi(bin_dir)
    found = machine.machine_slots(capture, 1, allowed=set(range(16)), which=which_in(bin_dir),
                                  sys_root=fake_sys(tmp_path / "sys"))
    assert [s.gpu.uuid for s in found.gpu_slots] == UUIDS
    cpus = [set(s.cpus) for s in found.gpu_slots]
    assert all(len(c) == 2 for c in cpus)
    assert len(set().union(*cpus)) == 16  # disjoint
    assert all(c <= set(range(8)) for c in cpus[:4])  # NUMA-near: GPUs 0-3 on node 0
    assert all(c <= set(range(8, 16)) for c in cpus[4:])
    assert [s.env() for s in found.gpu_slots] == [{"CUDA_VISIBLE_DEVICES": u} for u in UUIDS]


@pytest.mark.tool
def test_a_slurm_jobs_gpu_is_its_only_slot(tmp_path, monkeypatch):
    """SLURM's --gres sets CUDA_VISIBLE_DEVICES to the job's GPU (an index): the job's
    slots are that GPU's only, locked by UUID so that two jobs on a node never collide."""
    fake_smi(tmp_path / "bin")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    found = machine.machine_slots(capture, 1, allowed={0, 1}, which=which_in(tmp_path / "bin"))
    assert [s.gpu.uuid for s in found.gpu_slots] == [UUIDS[5]]
    assert claim.lock_name(found.gpu_slots[0]) == f"gpu-{UUIDS[5]}.lock"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{UUIDS[2]},{UUIDS[3]}")
    found = machine.machine_slots(capture, 1, allowed={0, 1}, which=which_in(tmp_path / "bin"))
    assert [s.gpu.index for s in found.gpu_slots] == [2, 3]


def test_without_numa_the_cpus_are_shared_evenly_and_the_rest_left_to_compiles(tmp_path):
    gpus = [Gpu("nvidia", i, UUIDS[i], "H100", None) for i in range(3)]
    assert machine.gpu_cpu_sets(gpus, set(range(8)), tmp_path) == [(0, 1), (2, 3), (4, 5)]


def test_cpu_slots_split_the_cores_and_are_capped_by_them(tmp_path):
    found = machine.machine_slots(capture, 2, allowed={0, 1}, which=lambda _: None)
    assert [s.cpus for s in found.cpu_slots] == [(0,), (1,)] and not found.gpu_slots
    assert found.no_gpu == "neither nvidia-smi nor rocm-smi is on PATH"
    capped = machine.machine_slots(capture, 3, allowed={0, 1}, which=lambda _: None)
    assert len(capped.cpu_slots) == 2 and "cpu_slots 3 but 2 CPUs" in capped.notes[0]


@pytest.mark.tool
def test_a_failing_or_lying_nvidia_smi_is_a_reason_not_a_crash(tmp_path):
    fake_smi(tmp_path / "bin", exit_code=9)
    gpus, reason = machine.list_gpus(capture, which=which_in(tmp_path / "bin"))
    assert gpus == [] and reason.startswith("nvidia-smi exited with 9")
    with pytest.raises(ValueError, match="not an 'index, uuid, name, pci.bus_id' line"):
        machine.parse_nvidia("NVIDIA H100, 9.0\n")


def test_rocm_smi_json_gives_uuids_rocr_takes():
    text = json.dumps({"card1": {"Unique ID": "0x4B2C1A9682B0E5C2", "PCI Bus": "0000:0C:00.0",
                                 "Card series": "AMD Instinct MI300X"},
                       "card0": {"Unique ID": "0x18f68e602b8a790f", "PCI Bus": "0000:05:00.0"},
                       "system": {"Driver version": "6.8"}})
    gpus = machine.parse_rocm(text)
    assert [(g.index, g.uuid) for g in gpus] == [(0, "GPU-18f68e602b8a790f"),
                                                 (1, "GPU-4b2c1a9682b0e5c2")]
    assert Slot(0, (0,), gpus[0]).env() == {"ROCR_VISIBLE_DEVICES": "GPU-18f68e602b8a790f"}


def _job(slots, root, out, barrier):
    """One timing job: claims a slot, pins to it (affinity recorded, not applied: this
    machine lacks the fake node's 16 CPUs), waits until all jobs hold theirs."""
    env: dict = {}
    applied = []
    with claim.claimed(slots, 1, root) as held:
        record = claim.pin(held, env, set_affinity=lambda pid, cpus: applied.append(cpus))
        barrier.wait(timeout=60)
        Path(out).write_text(json.dumps({
            "record": record, "cuda": env["CUDA_VISIBLE_DEVICES"], "affinity": applied[0],
            "device": claim.iree_device("cuda", env)}))


@pytest.mark.tool
def test_eight_jobs_at_once_each_hold_their_own_gpu_and_cpus(tmp_path):
    bin_dir = tmp_path / "bin"
    fake_smi(bin_dir)
    slots = machine.machine_slots(capture, 1, allowed=set(range(16)), which=which_in(bin_dir),
                                  sys_root=fake_sys(tmp_path / "sys")).gpu_slots
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(8)
    jobs = [ctx.Process(target=_job, args=(slots, tmp_path, tmp_path / f"job{i}.json", barrier))
            for i in range(8)]
    for job in jobs:
        job.start()
    for job in jobs:
        job.join(90)
    assert [j.exitcode for j in jobs] == [0] * 8
    got = [json.loads((tmp_path / f"job{i}.json").read_text()) for i in range(8)]
    assert sorted(g["cuda"] for g in got) == UUIDS  # every GPU, each once, all at once
    assert sorted(g["device"] for g in got) == [f"cuda://{u}" for u in UUIDS]
    cpu_sets = [set(g["affinity"]) for g in got]
    assert len(set().union(*cpu_sets)) == sum(map(len, cpu_sets)) == 16
    for g in got:
        assert g["record"]["gpu"]["uuid"] == g["cuda"] and g["record"]["cpus"] == g["affinity"]


def _hold(slots, root, ready):
    with claim.claimed(slots, 1, root):
        ready.set()
        time.sleep(300)


def test_a_killed_job_frees_its_slot(tmp_path):
    slots = (Slot(0, (0,)), Slot(1, (1,)))
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    holder = ctx.Process(target=_hold, args=(slots, tmp_path, ready))
    holder.start()
    assert ready.wait(60)
    with claim.claimed(slots, 1, tmp_path) as held:
        assert held[0].index == 1  # slot 0 is taken
    with pytest.raises(TimeoutError, match="no 2 free of 2 timing slots"):
        with claim.claimed(slots, 2, tmp_path, wait_s=0.3):
            pass
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(30)
    with claim.claimed(slots, 2, tmp_path, wait_s=10) as held:
        assert [s.index for s in held] == [0, 1]


def test_the_slot_reaches_the_device_flag_and_the_record_not_the_key(monkeypatch):
    from workflow.backends.iree.tools import device_flags
    from workflow.records.case import slot_provenance
    sku = {"iree": {"device": "cuda", "task_topology_max_group_count": None}}
    monkeypatch.delenv(claim.SLOT_ENV, raising=False)
    assert device_flags(sku) == ["--device=cuda"] and slot_provenance() == {}
    gpu = Gpu("nvidia", 3, UUIDS[3], "NVIDIA H100 80GB HBM3")
    env: dict = {}
    claim.pin((Slot(3, (), gpu),), env)  # no CPUs: affinity untouched
    assert env["CUDA_VISIBLE_DEVICES"] == UUIDS[3]
    monkeypatch.setenv(claim.SLOT_ENV, env[claim.SLOT_ENV])
    assert device_flags(sku) == [f"--device=cuda://{UUIDS[3]}"]
    assert device_flags({"iree": {"device": "cuda://0", "task_topology_max_group_count": None}}) \
        == ["--device=cuda://0"]
    assert slot_provenance() == {"slot": {"index": 3, "cpus": [], "gpu": {
        "vendor": "nvidia", "index": 3, "uuid": UUIDS[3], "name": "NVIDIA H100 80GB HBM3"}}}


H100_FILE = (Path(__file__).parent / "data" / "upstream" / "torchao" / "published"
             / "dbef6992fb6b.dashboard.microbenchmark_quantization_config.yml")


@pytest.mark.e2e
def test_torchaos_h100_file_plans_its_batches_onto_eight_gpu_slots(tmp_path):
    """The plan of torchao's H100 file on a node whose nvidia-smi lists 8 GPUs (16 CPUs),
    at the default torch_batch_size: 8 bench_slot units, its 240 cases spread over 8
    batches or more (the plan says how), each holding one slot and its 2 cores, so 8
    batches time at once; without a GPU the size rule's 4 batches hold the machine one
    after another."""
    from tests.conftest import snakemake

    fake_smi(tmp_path / "bin")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
           machine.FAKE_CPUS_ENV: "0-15"}
    args = ("-n", "results/report.json", "--configfile", str(H100_FILE))
    proc = snakemake(tmp_path, *args, "--cores", "16", env=env)
    slots = [line for line in proc.stderr.splitlines() if "GPU timing slots" in line]
    assert len(slots) == 1 and slots[0].startswith("benchflow: 8 GPU timing slots"), proc.stderr
    assert all(u in slots[0] for u in [f"GPU-{i:08x}" for i in range(8)])
    jobs = [b for b in proc.stdout.split("rule ")[1:] if b.startswith("run_torch:")]
    assert len(jobs) >= 8
    assert all("bench_slot=1," in j and "threads: 2\n" in j for j in jobs), jobs[0]
    assert f"benchflow: torch batches of SKU cuda: {len(jobs)} of " in proc.stderr
    # No GPU listed: every batch holds the machine's one slot and every core.
    env["PATH"] = os.environ["PATH"]
    cpu = snakemake(tmp_path, *args, "--cores", "16", env=env)
    jobs = [b for b in cpu.stdout.split("rule ")[1:] if b.startswith("run_torch:")]
    assert len(jobs) == 4
    assert all("bench_slot=1," in j and "threads: 16\n" in j for j in jobs)
    assert "GPU timing slots" not in cpu.stderr and "torch batches of SKU" not in cpu.stderr


def test_slots_are_no_part_of_a_cases_key(monkeypatch):
    """cpu_slots, slurm.exclusive / cpus_per_gpu and the claimed slot change no batch's
    content key nor SKU settings: two GPUs of one model, or one CPU slot against two,
    measure the same cases (a rerun re-measures nothing for them)."""
    from workflow.planning.keys import sku_settings
    from workflow.planning.plan import iree_batch_content, load_suite, torch_batch_content

    config = str(Path(__file__).resolve().parent.parent / "config" / "config.yaml")
    plain = load_suite([config], {})
    slotted = load_suite([config], {"cpu_slots": 2})
    monkeypatch.setenv(claim.SLOT_ENV, json.dumps({"index": 1, "gpu": None, "cpus": [1]}))
    for (sku, batch) in plain.iree_batches:
        assert iree_batch_content(plain, sku, batch) == iree_batch_content(slotted, sku, batch)
    for (sku, batch) in plain.torch_batches:
        assert torch_batch_content(plain, sku, batch) == torch_batch_content(slotted, sku, batch)
    sku = plain.sku(next(iter(plain.config["skus"])))
    assert sku_settings(sku) == sku_settings(
        {**sku, "slurm": {**sku["slurm"], "exclusive": True, "cpus_per_gpu": 3}})


def spread_on(monkeypatch, tmp_path, suite, gpus: int, slurm: bool = False) -> dict:
    """The suite's torch batches spread as the planning process spreads them on a
    16-CPU node whose nvidia-smi lists `gpus` GPUs (none: no nvidia-smi); the
    environment it leaves for the run's jobs."""
    from workflow.planning import slot_plan

    bin_dir = tmp_path / f"bin{gpus}"
    if gpus:
        fake_smi(bin_dir, gpus)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}" if gpus else "/usr/bin:/bin")
    monkeypatch.setenv(machine.FAKE_CPUS_ENV, "0-15")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    slot_plan.this_machine.cache_clear()
    env: dict = {}
    try:
        slot_plan.spread_over_slots(suite, main=True, slurm=slurm, environ=env)
    finally:
        slot_plan.this_machine.cache_clear()
    return env


def layout(suite) -> dict:
    return {key: [c.id for c in cases] for key, cases in suite.torch_batches.items()}


@pytest.mark.tool  # starts the fake nvidia-smi
def test_torchaos_h100_file_spreads_its_batches_over_eight_fake_gpus(tmp_path, monkeypatch):
    """240 GPU cases on 8 GPUs: at least 8 batches (the size rule alone cuts 4, which
    leaves 4 GPUs idle), each of at least the minimum, a workload's cases in one; the
    plan says so. One GPU, no GPU, or SLURM (whose concurrency is not known here): the
    size rule's batches, as before."""
    from workflow.planning.slot_plan import BATCH_SLOTS_ENV, batch_lines
    from workflow.suite.batches import MIN_TORCH_BATCH_CASES
    from workflow.suite.load import load

    before = layout(load([H100_FILE]))
    assert len(before) == 4
    suite = load([H100_FILE])
    env = spread_on(monkeypatch, tmp_path, suite, 8)
    assert json.loads(env[BATCH_SLOTS_ENV]) == {"gpu": 8, "cpu": 1}
    sizes = [len(cases) for cases in suite.torch_batches.values()]
    assert len(sizes) >= 8 and min(sizes) >= MIN_TORCH_BATCH_CASES, sizes
    assert sorted(c for ids in layout(suite).values() for c in ids) == \
        sorted(c for ids in before.values() for c in ids)
    batch_of = {}
    for key, cases in suite.torch_batches.items():
        for case in cases:
            assert batch_of.setdefault(case.workload.id, key) == key
    (line,) = batch_lines(suite)
    spread = f"{min(sizes)}" + ("" if min(sizes) == max(sizes) else f" to {max(sizes)}")
    assert line.startswith(f"benchflow: torch batches of SKU cuda: {len(sizes)} of {spread} "
                           "cases (240 cases; 8 timing slots"), line
    assert "torch_batch_size 64 alone would cut 4" in line
    for gpus, slurm in ((1, False), (0, False), (8, True)):
        suite = load([H100_FILE])
        spread_on(monkeypatch, tmp_path, suite, gpus, slurm)
        assert layout(suite) == before, (gpus, slurm)
        assert batch_lines(suite) == []


@pytest.mark.tool
def test_a_small_gpu_suite_on_eight_gpus_gets_the_batches_the_minimum_allows(
        tmp_path, monkeypatch):
    """A worker's start is paid once a batch: 5 cases stay one batch on 8 GPUs; 40
    cases make 2 (40 // 16), not 8 of 5."""
    from tests.conftest import FAST_MEASUREMENT, tiny_suite, write_suite
    from workflow.suite.batches import MIN_TORCH_BATCH_CASES
    from workflow.suite.load import load

    got = {}
    for count in (5, 40):
        cfg = tiny_suite(workloads=[{"model": "linear", "device": "cuda",
                                     "shapes": [[4, 8 + i, 8] for i in range(count)]}],
                         backends=["torch-eager"])
        cfg["skus"] = {"gpu": {"torch": {"threads": 1}, "measurement": dict(FAST_MEASUREMENT)}}
        suite = load([write_suite(tmp_path / f"s{count}.yaml", cfg)])
        spread_on(monkeypatch, tmp_path, suite, 8)
        got[count] = sorted(len(cases) for cases in suite.torch_batches.values())
    assert got[5] == [5]
    assert len(got[40]) == 40 // MIN_TORCH_BATCH_CASES and sum(got[40]) == 40
    assert min(got[40]) >= MIN_TORCH_BATCH_CASES, got


@pytest.mark.tool
def test_a_job_that_reads_the_snakefile_again_cuts_the_planners_batches(tmp_path,
                                                                       monkeypatch):
    """A SLURM job's snakemake reads the Snakefile again on its node, where it sees one
    GPU (or none): it takes the planning process's slots from the environment and cuts
    the same batches, so its batch exists; without them, the size rule's."""
    from workflow.planning.slot_plan import spread_over_slots
    from workflow.suite.load import load

    planned = load([H100_FILE])
    env = spread_on(monkeypatch, tmp_path, planned, 8)
    node = load([H100_FILE])
    spread_over_slots(node, main=False, slurm=False, environ=env)
    assert layout(node) == layout(planned) and len(layout(node)) >= 8
    alone = load([H100_FILE])
    spread_over_slots(alone, main=False, slurm=False, environ={})
    assert layout(alone) == layout(load([H100_FILE]))


def test_a_spread_counts_the_batches_cut_not_the_hash_buckets():
    """Three workloads of 20 cases that hash into one of the size rule's 4 buckets
    (torch_batch_size 16) make one batch, not 4: with 3 slots the spread still cuts 3."""
    from types import SimpleNamespace

    from workflow.suite.batches import _digest, by_workload_hash

    ids = [w for w in (f"w{i}" for i in range(1000)) if _digest(w) % 4 == 0][:3]
    cases = [SimpleNamespace(workload=SimpleNamespace(id=w), n=n) for w in ids
             for n in range(20)]
    assert len(by_workload_hash(cases, 16)) == 1
    got = by_workload_hash(cases, 16, slots=3)
    assert sorted(len(members) for _, members in got) == [20, 20, 20]
    assert all(len({c.workload.id for c in members}) == 1 for _, members in got)
