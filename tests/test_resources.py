"""workflow/planning/resources.py: parameter estimates, memory and wall-time requests, and the
rules' use of them (a dry run shows what each job would ask a scheduler for)."""

from __future__ import annotations

import os
import re
from types import SimpleNamespace

import pytest
import yaml

from tests.conftest import REPO, snakemake, tiny_suite, write_suite
from workflow.models.registry import get_model
from workflow.planning import placement
from workflow.planning import resources as r
from workflow.suite.load import Workload

MIB = 1 << 20


def torch_params(model: str, config: str, shape, layers=None) -> int:
    module = get_model(model).build(config, "f32", layers, shape).module
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("model,config,shape,layers", [
    ("linear", "default", (16, 32, 48), None),
    ("ln_linear_gelu", "default", (8, 24, 40), None),
    ("mlp", "default", (4, 16, 24), 3),
    ("mlp", "default", (4, 16, 24), None),
    ("transformer_block", "tiny", (1, 8), 2),
    # bert imports transformers (seconds): the slow tier (make test), not make check.
    pytest.param("bert", "tiny", (1, 16), 1, marks=pytest.mark.slow),
    # positions grow past 512 with the sequence
    pytest.param("bert", "tiny", (1, 600), 1, marks=pytest.mark.slow),
])
def test_param_estimate_matches_the_built_model(model, config, shape, layers):
    assert r.param_estimate(model, config, shape, layers) == torch_params(
        model, config, shape, layers)


def test_param_estimate_of_the_published_sizes():
    # bert-base-uncased: 109,482,240 parameters with the pooler; large: 335,141,888.
    assert r.param_estimate("bert", "base", (1, 128), None) == 109_482_240
    assert r.param_estimate("bert", "large", (1, 128), None) == 335_141_888
    assert r.fallback_params() == 335_141_888


def test_unknown_models_are_not_guessed_but_get_the_largest_request():
    assert r.param_estimate("my_model", "small", (8, 64), None) is None
    unknown = Workload("x", "my_model", "small", "f32", (8, 64), None)
    large = Workload("y", "bert", "large", "f32", (1, 128), None)
    assert r.export_mem_mb(unknown) == r.export_mem_mb(large)


# (stage, MiB of weights, measured peak MiB of the stage's tool): the calibration points
# of workflow/resources.py. A request must cover the tool plus the job's own snakemake.
MEASURED = [
    ("export", 0, 404), ("export", 17, 554), ("export", 144, 720), ("export", 256, 995),
    ("export", 512, 1571),
    ("compile", 0, 142), ("compile", 17, 202), ("compile", 144, 612), ("compile", 256, 656),
    ("compile", 512, 1166),
    ("run", 0, 30), ("run", 144, 297), ("run", 256, 519), ("run", 512, 1032),
    ("verify", 0, 35), ("verify", 144, 181), ("verify", 256, 291), ("verify", 512, 548),
]


@pytest.mark.parametrize("stage,weights_mib,peak_mib", MEASURED)
def test_memory_requests_cover_the_measured_peaks(stage, weights_mib, peak_mib):
    request = r.mem_request_mb(stage, weights_mib * MIB)
    assert request >= r.JOB_BASE_MB + peak_mib
    # ...without asking for several times what was used.
    assert request <= 2.5 * (r.JOB_BASE_MB + peak_mib) + r.MEM_GRANULE_MB


def test_memory_grows_with_weights_and_attempts():
    small = r.mem_request_mb("compile", 10 * MIB)
    big = r.mem_request_mb("compile", 4096 * MIB)
    assert big > 2 * 4096 * 1.5 > small  # 2 x the weights, with headroom
    assert r.mem_request_mb("compile", 10 * MIB, attempt=3) >= 3 * small - r.MEM_GRANULE_MB
    for value in (small, big):
        assert value % r.MEM_GRANULE_MB == 0


def test_export_memory_follows_the_model_size_in_fp32():
    tiny = Workload("a", "bert", "tiny", "f32", (1, 32), None)
    base = Workload("b", "bert", "base", "f32", (1, 32), None)
    base_f16 = Workload("c", "bert", "base", "f16", (1, 32), None)
    assert r.export_mem_mb(base) > r.export_mem_mb(tiny)
    # export builds the fp32 module whatever the dtype
    assert r.export_mem_mb(base_f16) == r.export_mem_mb(base)
    weights = 109_482_240 * 4 / MIB
    assert r.export_mem_mb(base) >= r.JOB_BASE_MB + 520 + 2.25 * weights


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError):
        r.mem_request_mb("link", 0)
    with pytest.raises(ValueError):
        r.mem_request_mb("run", -1)
    with pytest.raises(ValueError):
        r.mem_request_mb("run", 0, attempt=0)
    with pytest.raises(ValueError):
        r.runtime_min(-1)


def test_wall_time_covers_the_stage_timeouts():
    timeouts = {"export_s": 900, "compile_s": 120, "run_s": 600, "verify_s": 30}
    assert r.compile_runtime_min(timeouts) == 3       # (120 + 60) / 60
    # A retry's worst case: first call + 5 invocations + 5 more for a noisy case, 600 s
    # each, + overhead.
    assert r.run_runtime_min({"invocations": 5, "rerun_noisy": True}, timeouts, 2) == 111
    assert r.run_runtime_min({"invocations": 5, "rerun_noisy": False}, timeouts, 2) == 61
    # An IREE batch's retry: every stage of each case, ((900 + 120 + 30 + 6 x 600) x 2
    # + 60) / 60.
    two = [Workload("l", "linear", "default", "f32", (16, 32, 32), None)] * 2
    assert r.iree_batch_runtime_min(two, {"invocations": 5, "rerun_noisy": False},
                                    timeouts, attempt=2) == 156


DEFAULT_SUITE = REPO / "config" / "config.yaml"


def test_the_default_suites_batches_ask_for_minutes_and_little_memory():
    """The issue's figures: a 2-case IREE batch of the default suite asked for 341 min.
    Now its first try asks for what its cases are expected to take, in minutes."""
    from workflow.suite.load import load

    suite = load([DEFAULT_SUITE])
    timeouts = suite.config["timeouts"]
    for (sku, batch), cases in suite.iree_batches.items():
        workloads = [c.workload for c in cases]
        m = suite.sku(sku)["measurement"]
        first = r.iree_batch_runtime_min(workloads, m, timeouts)
        print(f"{sku}/{batch}: {len(cases)} cases, runtime {first} min "
              f"(retry {r.iree_batch_runtime_min(workloads, m, timeouts, 2)} min), "
              f"mem {r.iree_batch_mem_mb(workloads)} MiB")
        assert first <= 15 * len(cases), (sku, first)
        assert r.iree_batch_runtime_min(workloads, m, timeouts, 2) > 60 * len(cases)
        assert r.iree_batch_mem_mb(workloads) <= 1536  # tiny models: well under 5.4 GB
    two = suite.iree_batches[("cpu-generic-sync", "b0")]
    assert len(two) == 2
    assert r.iree_batch_runtime_min([c.workload for c in two],
                                    suite.sku("cpu-generic-sync")["measurement"],
                                    timeouts) <= 10


def test_case_estimates_follow_the_protocol_and_earlier_records():
    m = {"invocations": 6, "max_invocations": 12, "max_retakes": 6, "repetitions": 10,
         "min_warmup_time_s": 0.2, "min_time_s": 0.05, "budget_s": 60}
    timeouts = {"export_s": 900, "compile_s": 900, "run_s": 600, "verify_s": 600}
    # first call + 12 adaptive + 6 retakes, each 0.5 s start + 0.2 s + 10 x 0.05 s
    assert r.invocation_count(m) == 19
    assert r.invocation_seconds(m) == pytest.approx(1.2)
    w = Workload("l", "linear", "default", "f32", (128, 256, 256), None)
    fresh = r.iree_case_seconds(w, m, timeouts)
    # A slow earlier call (2 s each) and a long compile: each repetition takes the call.
    slow = {"compile": {"seconds": 100.0}, "timing": {"median_ms": 2000.0}}
    assert r.iree_case_seconds(w, m, timeouts, slow) > fresh + 3 * 100
    # Never more than every stage at its timeout.
    assert r.iree_case_seconds(w, m, {k: 1 for k in timeouts}, slow) == 1 + 1 + 1 + 19


def job_resources(text: str) -> list[tuple[str, dict]]:
    """(rule, resources) of each job in a dry run's output."""
    jobs = []
    for block in re.split(r"\n(?=\s*rule \w+:)", text):
        m = re.match(r"\s*rule (\w+):", block)
        res = re.search(r"resources: (.*)", block)
        threads = re.search(r"threads: (\d+)", block)
        if m and res:
            jobs.append((m.group(1), {**dict(kv.split("=", 1) for kv in res.group(1).split(", ")),
                                      "threads": threads and threads.group(1)}))
    return jobs


@pytest.mark.e2e
def test_rules_declare_resources_from_the_case(tmp_path):
    suite = tiny_suite(timeouts={"export_s": 300, "compile_s": 200, "run_s": 100,
                                 "verify_s": 50})
    suite["workloads"] = [{"model": "linear", "shapes": [[16, 32, 32]]},
                          {"model": "bert", "configs": ["tiny"], "shapes": [[1, 16]]}]
    write_suite(tmp_path / "suite.yaml", suite)
    proc = snakemake(tmp_path, "-n", "results/report.json", "--configfile",
                     str(tmp_path / "suite.yaml"))
    jobs = job_resources(proc.stdout)
    by_rule: dict[str, list[dict]] = {}
    for rule, res in jobs:
        by_rule.setdefault(rule, []).append(res)
    # One batch per SKU here; each asks for the largest stage of its largest model
    # (bert tiny's export) or, with a thread per export, its exports made at once, and
    # for every stage of every case at its timeout.
    bert = Workload("b", "bert", "tiny", "f32", (1, 16), None)
    linear = Workload("l", "linear", "default", "f32", (16, 32, 32), None)
    threads = [int(res["threads"]) for res in by_rule["iree_batch"]]
    assert [int(res["mem_mb"]) for res in by_rule["iree_batch"]] == \
        [r.iree_batch_mem_mb([linear, bert], threads=t) for t in threads]
    assert r.iree_batch_mem_mb([linear, bert], threads=1) == r.export_mem_mb(bert)
    # Each batch asks for its two cases' expected time (export, compile, verify and the
    # measuring of tiny_suite's protocol) with the margin, within their timeouts.
    from workflow.suite.load import load

    loaded = load([tmp_path / "suite.yaml"])
    expected = {str(r.iree_batch_runtime_min([linear, bert], loaded.sku(s)["measurement"],
                                             loaded.config["timeouts"]))
                for s in loaded.config["skus"]}
    assert {res["runtime"] for res in by_rule["iree_batch"]} == expected
    # Below the worst case (1 + 6 runs of up to 100 s per case, fixed 3 invocations with
    # noisy reruns, plus every retake), which only a retry asks for.
    assert all(int(res["runtime"]) < r.runtime_min(2 * (300 + 200 + 50 + 7 * 100))
               for res in by_rule["iree_batch"])
    assert all(res["bench_slot"] == "1" for res in by_rule["iree_batch"])


def profile_dry_run(tmp_path, profile: str, env: dict):
    write_suite(tmp_path / "suite.yaml", tiny_suite())
    return snakemake(tmp_path, "-n", "results/report.json", "--configfile",
                     str(tmp_path / "suite.yaml"), "--profile", str(REPO / "profiles" / profile),
                     env=env)


@pytest.mark.e2e
def test_local_profile_is_valid(tmp_path):
    proc = profile_dry_run(tmp_path, "local", dict(os.environ))
    assert "Using profile" in proc.stdout + proc.stderr
    for rule, res in job_resources(proc.stdout):
        assert ("bench_slot" in res) == (rule in ("iree_batch", "run_torch", "measure_peak")), \
            (rule, res)


@pytest.mark.e2e
def test_slurm_profile_sets_account_partition_and_exclusive_timing_nodes(tmp_path):
    env = {**os.environ, "BENCHFLOW_SLURM_ACCOUNT": "max", "BENCHFLOW_SLURM_PARTITION": "cpu"}
    proc = profile_dry_run(tmp_path, "slurm", env)
    jobs = job_resources(proc.stdout)
    assert {rule for rule, _ in jobs} >= {"iree_batch", "report"}
    for rule, res in jobs:
        # "max" stays a string: the profile quotes it so Python's max() cannot stand in.
        assert res["slurm_account"] == "max" and res["slurm_partition"] == "cpu", res
        assert (res.get("slurm_extra") == "--exclusive") == (rule == "iree_batch"), (rule, res)


@pytest.mark.e2e
def test_slurm_profile_names_an_unset_account_variable(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHFLOW_SLURM_")}
    proc = profile_dry_run(tmp_path, "slurm", env)
    accounts = {res["slurm_account"] for _, res in job_resources(proc.stdout)}
    assert accounts == {"$BENCHFLOW_SLURM_ACCOUNT"}


def test_torch_batches_ask_for_their_largest_model_and_every_case():
    small = Workload("s", "linear", "default", "f32", (16, 32, 32), None)
    big = Workload("b", "bert", "base", "f32", (1, 128), None)
    assert r.torch_batch_mem_mb([small, big]) == r.torch_batch_mem_mb([big]) \
        == r.export_mem_mb(big)
    train = Workload("t", "bert", "base", "f32", (1, 128), None, mode="training")
    assert r.torch_batch_mem_mb([train]) > r.torch_batch_mem_mb([big])

def test_torch_batches_ask_for_what_their_cases_take_and_a_retry_for_every_timeout():
    eager, compiled = SimpleNamespace(compile_mode=None), SimpleNamespace(compile_mode="default")
    m = {"invocations": 5, "rerun_noisy": True, "torch_warmup_s": 0.2,
         "torch_min_run_time_s": 0.2}
    # The worst case: 3 cases x (7 steps + the first call + 10 invocations) x 60 s + the
    # job's minute.
    assert r.invocation_count(m) == 11
    assert r.torch_batch_runtime_min([eager] * 3, m, {"run_s": 60}, attempt=2) == 55
    # Expected: one worker start + 3 x (build + 11 x (fork + warm-up + block)), x margin.
    per_case = r.TORCH_BUILD_S + 11 * (r.TORCH_INVOCATION_S + 0.4)
    assert r.torch_batch_runtime_min([eager] * 3, m, {"run_s": 60}) == \
        r.runtime_min(r.ESTIMATE_MARGIN * (r.TORCH_WORKER_START_S + 3 * per_case)) < 55
    # A compiled case without a record assumes a cold compile; its record says better.
    cold = r.torch_batch_runtime_min([compiled], m, {"run_s": 600})
    record = {"compile": {"seconds": 0.5}, "timing": {"first_run_ms": 300.0}}
    warm = r.torch_batch_runtime_min([compiled], m, {"run_s": 600}, earlier=[record])
    assert warm < cold < r.torch_batch_runtime_min([compiled], m, {"run_s": 600}, attempt=2)
    assert warm == r.runtime_min(r.ESTIMATE_MARGIN * (
        r.TORCH_WORKER_START_S + r.TORCH_BUILD_S + 0.5 + 0.3
        + 11 * (r.TORCH_INVOCATION_S + 0.4)))


def rule_blocks() -> dict[str, str]:
    """rule name -> its text, from rules/*.smk."""
    blocks = {}
    for smk in sorted((REPO / "rules").glob("*.smk")):
        for m in re.finditer(r"^rule (\w+):\n(.*?)(?=^\S|\Z)", smk.read_text(),
                             re.MULTILINE | re.DOTALL):
            blocks[m.group(1)] = m.group(2)
    return blocks


def test_every_rule_declares_threads_memory_and_wall_time():
    blocks = rule_blocks()
    assert {"iree_batch", "ab_pair", "run_torch"} <= set(blocks)
    missing = {name: [k for k in ("threads:", "mem_mb=", "runtime=") if k not in text]
               for name, text in blocks.items()}
    assert not {name: m for name, m in missing.items() if m}


SLOTTED = ("iree_batch", "run_torch")  # timing rules that claim a timing slot


def test_every_timing_rule_gets_an_exclusive_node_or_its_gpu_in_the_slurm_profile():
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.v8+.yaml").read_text())
    blocks = rule_blocks()
    whole = [name for name, text in blocks.items()
             if re.search(r"^\s+threads: BENCH_THREADS$", text, re.MULTILINE)]
    assert {"ab_pair", "run_bench_file", "measure_peak"} <= set(whole)
    for name in whole:
        assert profile["set-threads"].get(name) == 1, name
        assert profile["set-resources"].get(name, {}).get("slurm_extra") == "'--exclusive'", name
        assert re.search(r"^\s+bench_slot=BENCH_SLOTS,$", blocks[name], re.MULTILINE), name
    for name in SLOTTED:
        # The rule decides per SKU (placement.slurm_timing_extra); the profile must not
        # replace that with a node for every job.
        assert profile["set-threads"].get(name) == 1, name
        assert "slurm_extra" not in profile["set-resources"].get(name, {}), name
        assert "slurm_extra=lambda wc: slurm_timing_extra(" in blocks[name], name
        assert "cpus_per_gpu=lambda wc: slurm_cpus_per_gpu(" in blocks[name], name
        assert "bench_slot=lambda wc: min(BENCH_SLOTS, slots_needed(SUITE.config" in blocks[name]


def test_a_gpu_sku_shares_its_node_and_a_cpu_sku_holds_one():
    gpu = {"slurm": {"gres": "gpu:1", "cpus_per_gpu": 12}}
    assert placement.slurm_timing_extra(gpu) is None
    assert placement.slurm_cpus_per_gpu(gpu) == 12
    assert placement.slurm_timing_extra({"slurm": {}}) == "--exclusive"
    assert placement.slurm_cpus_per_gpu({"slurm": {}}) is None
    # The documented switch: exclusive nodes for a GPU SKU, shared ones for a CPU SKU.
    assert placement.slurm_timing_extra({"slurm": {**gpu["slurm"], "exclusive": True}}) \
        == "--exclusive"
    assert placement.slurm_cpus_per_gpu({"slurm": {**gpu["slurm"], "exclusive": True}}) is None
    assert placement.slurm_timing_extra({"slurm": {"exclusive": False}}) is None


GPU_SKU = {"iree": {"target_backend": "cuda", "target_chip": "sm_80", "device": "cuda"},
           "slurm": {"partition": "gpu-a100", "gres": "gpu:a100:1", "constraint": "a100|h100"}}


@pytest.mark.e2e
def test_slurm_profile_places_each_skus_jobs_in_its_partition_with_its_gpu(tmp_path):
    suite = tiny_suite()
    suite["skus"]["gpu"] = GPU_SKU
    # A CUDA SKU without a gres: warned about, placed like any other.
    suite["skus"]["bare-cuda"] = {"iree": GPU_SKU["iree"]}
    write_suite(tmp_path / "suite.yaml", suite)
    env = {**os.environ, "BENCHFLOW_SLURM_ACCOUNT": "acct", "BENCHFLOW_SLURM_PARTITION": "cpu"}
    proc = snakemake(tmp_path, "-n", "results/report.json", "--configfile",
                     str(tmp_path / "suite.yaml"), "--profile", str(REPO / "profiles" / "slurm"),
                     env=env)
    placed = {}
    for block in re.split(r"\n(?=\s*rule \w+:)", proc.stdout):
        sku = re.search(r"wildcards: .*?sku=([\w.-]+)", block)
        res = job_resources(block)
        if sku and res and res[0][0] == "iree_batch":
            placed[sku.group(1)] = res[0][1]
    assert set(placed) == {"host", "generic", "gpu", "bare-cuda"}, placed
    assert placed["gpu"]["slurm_partition"] == "gpu-a100"
    assert placed["gpu"]["gres"] == "gpu:a100:1" and placed["gpu"]["constraint"] == "a100|h100"
    # Its GPU and 8 CPUs on a shared node; the CPU SKUs' batches a node each.
    assert placed["gpu"]["cpus_per_gpu"] == "8" and "slurm_extra" not in placed["gpu"]
    assert placed["host"]["slurm_extra"] == "--exclusive", placed["host"]
    for sku in ("host", "generic", "bare-cuda"):
        assert placed[sku]["slurm_partition"] == "cpu", placed[sku]
        assert "gres" not in placed[sku] and "constraint" not in placed[sku], placed[sku]
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("benchflow: SLURM")]
    assert len(warnings) == 1 and "'bare-cuda' targets cuda" in warnings[0], proc.stderr


class Default:
    """A --default-resources entry as snakemake keeps it (its raw expression)."""

    def __init__(self, raw):
        self.raw = raw


def test_unset_account_and_partition_are_warned_about_once_each(monkeypatch):
    monkeypatch.delenv("BENCHFLOW_SLURM_ACCOUNT", raising=False)
    monkeypatch.setenv("BENCHFLOW_SLURM_PARTITION", "cpu")
    profile = {"slurm_account": Default("'$BENCHFLOW_SLURM_ACCOUNT'"),
               "slurm_partition": Default("'$BENCHFLOW_SLURM_PARTITION'")}
    assert placement.default_resource(profile, "slurm_partition") == "cpu"
    assert placement.default_resource(profile, "mem_mb") is None
    lines = placement.slurm_warnings({"host": {"iree": {"target_backend": "llvm-cpu"}}}, profile)
    assert lines == ["benchflow: SLURM: BENCHFLOW_SLURM_ACCOUNT is not set, so sbatch gets "
                     "$BENCHFLOW_SLURM_ACCOUNT; export BENCHFLOW_SLURM_ACCOUNT=<your account> "
                     '(docs/cluster.md)']
    # --executor slurm without the profile: neither is given.
    assert placement.slurm_in_use({}, ["snakemake", "--executor", "slurm"])
    assert placement.slurm_in_use({}, ["snakemake", "--executor=slurm"])
    assert not placement.slurm_in_use({}, ["snakemake", "--cores", "2"])
    assert not placement.slurm_in_use({}, ["snakemake", "--executor", "slurm-jobstep"])
    assert len(placement.slurm_warnings({}, {})) == 2
    # A GPU SKU with a gres, or a CPU SKU, is not warned about.
    skus = {"gpu": GPU_SKU, "rocm": {"iree": {"target_backend": "rocm"}}}
    assert [line.split("'")[1] for line in placement.slurm_warnings(skus, profile)[1:]] == ["rocm"]


def test_placement_is_no_part_of_a_cases_key():
    from workflow.planning.keys import sku_settings, without_placement

    sku = {"description": "d", **GPU_SKU}
    bare = {k: v for k, v in sku.items() if k != "slurm"}
    assert sku_settings(sku) == sku_settings(bare)
    assert without_placement(sku) == bare
    # The schema's defaults fill it in for every SKU; no key or job param sees them.
    from workflow.suite.load import load

    default = load([DEFAULT_SUITE]).sku("cpu-host")
    assert default["slurm"] == {"partition": None, "gres": None, "constraint": None,
                                "exclusive": None, "cpus_per_gpu": None}
    assert "slurm" not in sku_settings(default) and "slurm" not in without_placement(default)
    assert placement.slurm_partition(default, "cpu") == "cpu"
    assert placement.slurm_gres(default) is None and placement.slurm_constraint(default) is None
