"""Issue 34, the cost per case: a torch case measured whole in one worker (invocations
forked from it, or in-process blocks where forking is unsafe), its cost per phase, a
target width that follows the question asked, threads decided once per run, torchao
files on one thread."""

from __future__ import annotations

import json
import os

import pytest
import torch

from tests.conftest import tiny_suite, write_suite
from tests.test_torch_bench import plan_of, suite_for
from workflow.backends.torch.worker import measure_case
from workflow.jobs import torch as torch_stage
from workflow.planning.targets import GOLDEN_SOURCE, time_targets, with_target
from workflow.suite.load import load

LINEAR = [{"model": "linear", "shapes": [[16, 64, 64]]}]


def _measured(tmp_path, threads: int, **m):
    suite = suite_for(tmp_path, LINEAR)
    (case,), plan = plan_of(suite)
    plan["threads"] = threads
    plan["measurement"] = {**plan["measurement"], **m}
    return measure_case(case, plan["backend"], plan)


@pytest.mark.slow
def test_one_thread_on_the_cpu_forks_each_invocation_from_the_warm_worker(tmp_path):
    got = _measured(tmp_path, 1)
    timing = got["timing"]
    assert got["status"] == "ok" and timing["invocation_kind"] == "fork"
    assert len(timing["invocation_medians_ms"]) == timing["invocations"] == 2
    # The characterization came from the same process: no second build, no second compile.
    assert got["accuracy"]["pcc"] > 0.9999 and got["graph"]["aten_ops"] >= 1
    cost = got["cost"]
    for phase in ("build_s", "first_call_s", "accuracy_s", "profile_s", "warmup_s",
                  "timed_s", "invocations_s", "graph_s", "total_s"):
        assert cost[phase] >= 0, phase
    # Every phase is inside the case's total; the invocations hold the warm-up and timing.
    assert cost["total_s"] >= cost["invocations_s"] + cost["build_s"] + cost["graph_s"]
    assert cost["invocations_s"] >= cost["warmup_s"] + cost["timed_s"]


@pytest.mark.slow
def test_more_than_one_thread_times_in_process_blocks(tmp_path):
    """GNU OpenMP leaves a child forked after a parallel region hung: two threads are
    measured in the worker itself, and the record says so."""
    got = _measured(tmp_path, 2)
    assert got["status"] == "ok" and got["timing"]["invocation_kind"] == "block"
    assert len(got["timing"]["invocation_medians_ms"]) == 2


@pytest.mark.slow
def test_a_fork_that_gives_nothing_is_measured_again_as_a_block(tmp_path, monkeypatch):
    from workflow.backends.torch import invocations

    monkeypatch.setattr(invocations, "_forked", lambda *a: None)
    got = _measured(tmp_path, 1)
    assert got["status"] == "ok" and got["timing"]["invocation_kind"] == "block"
    assert got["timing"]["invocations"] == 2


def test_a_forked_invocation_that_dies_fails_the_case_with_the_reason(tmp_path, monkeypatch):
    import os

    from workflow.backends.torch import invocations

    def dies(prepared, plan):
        if os.getpid() != parent:
            os.kill(os.getpid(), 9)
        return real(prepared, plan)

    parent, real = os.getpid(), invocations._one_invocation
    monkeypatch.setattr(invocations, "_one_invocation", dies)
    got = _measured(tmp_path, 1)
    assert got["run_error"] == "the invocation's process exited with -9 (killed by SIGKILL)"
    assert got["accuracy"]["pcc"] > 0.9999  # the characterization stands


def test_a_case_judged_by_a_golden_measures_towards_half_its_tolerance(tmp_path):
    golden_dir = tmp_path / "goldens"
    golden_dir.mkdir()
    entry = {"median_ms": 1.0, "invocation_medians_ms": [1.0] * 6, "dispatch_count": 1,
             "binary_bytes": 1024, "cv": 0.01, "taken_at": "2026-11-27T00:00:00+00:00",
             "git_sha": "0" * 40}
    (golden_dir / "host.json").write_text(json.dumps({
        "kind": "benchflow-goldens", "schema_version": "1.0", "sku": "host",
        "cases": {"host/iree/a-f32/baseline": entry,
                  "host/iree/b-f32/baseline": {**entry, "tolerance": 1.3}}}))
    gate = {"dir": str(golden_dir), "tolerance": 1.10}
    ids = [f"host/iree/{w}-f32/baseline" for w in "abc"]
    got = time_targets(ids, "host", {"target_rel_width": 0.02}, gate)
    assert got == {ids[0]: {"rel_width": pytest.approx(0.05), "source": GOLDEN_SOURCE},
                   ids[1]: {"rel_width": pytest.approx(0.15), "source": GOLDEN_SOURCE}}
    # A SKU that already asks for more than the golden's question keeps its own target.
    assert time_targets(ids, "host", {"target_rel_width": 0.1}, gate) == \
        {ids[1]: {"rel_width": pytest.approx(0.15), "source": GOLDEN_SOURCE}}
    assert time_targets(ids, "nogoldens", {"target_rel_width": 0.02}, gate) == {}
    sku = {"measurement": {"target_rel_width": 0.02, "invocations": 6}}
    assert with_target(sku, got[ids[0]])["measurement"] == {
        "target_rel_width": pytest.approx(0.05), "target_source": GOLDEN_SOURCE,
        "invocations": 6}
    assert with_target(sku, None) is sku


def test_threads_zero_is_decided_once_per_run(tmp_path, monkeypatch):
    """Issue 34: two batches of one run got 2 and 1 threads. The run's first batch
    decides; every later batch of the run reads its decision, whatever it would decide
    then (another node may grant other CPUs)."""
    monkeypatch.setenv(torch_stage.RUN_ID_ENV, "run-a")
    monkeypatch.setattr(torch_stage, "THREADS_DIR", tmp_path)
    monkeypatch.setattr(torch_stage, "outside_share", lambda: 0.5)
    monkeypatch.setattr(torch_stage, "granted_cpus", lambda: 1)
    first = torch_stage.run_threads()
    monkeypatch.setattr(torch_stage, "granted_cpus", lambda: 2)
    assert torch_stage.run_threads() == first
    assert first[0] == 1 and "run's first torch batch" in first[1] and "50%" in first[1]
    sku = {"torch": {"threads": 0}}
    assert torch_stage.with_threads(sku, None)["torch"]["threads"] == 1
    # Another run decides anew.
    monkeypatch.setenv(torch_stage.RUN_ID_ENV, "run-b")
    assert torch_stage.run_threads()[0] == 2
    # A SKU's own count is used as it is, and said to be the SKU's.
    assert torch_stage.with_threads({"torch": {"threads": 3}}, None)["torch"] == {
        "threads": 3, "threads_decided": "the SKU's torch.threads"}


GRANTED = ("import sys, os; os.sched_setaffinity(0, {0}); sys.path.insert(0, sys.argv[1]); "
           "from workflow.measure.disturbance import granted_cpus; print(granted_cpus())")


@pytest.mark.tool
def test_threads_zero_follows_the_cpus_the_process_is_granted(tmp_path):
    """`threads: 0` is the process's grant: a process started on one CPU gets 1, whatever
    the machine has."""
    import subprocess
    import sys

    from tests.conftest import REPO

    got = subprocess.run([sys.executable, "-c", GRANTED, str(REPO)], capture_output=True,
                         text=True, check=True).stdout.strip()
    assert got == "1"


@pytest.mark.tool
@pytest.mark.quiet
def test_threads_zero_on_a_loaded_machine_chooses_what_an_idle_one_chooses(tmp_path,
                                                                             monkeypatch):
    """Issue 43: a run that started beside a process holding a core took 1 thread, a
    rerun on an idle machine 2, and unchanged code came out x1.7 slower. The count is
    now the grant; the load is recorded with it as a disturbance."""
    from tests.perf.hog import cpu_hog, hogged_share

    monkeypatch.setattr(torch_stage, "THREADS_DIR", tmp_path)
    monkeypatch.setenv(torch_stage.RUN_ID_ENV, "idle")
    idle, idle_how = torch_stage.run_threads()
    with cpu_hog(1) as pids:
        monkeypatch.setenv(torch_stage.RUN_ID_ENV, "loaded")
        loaded, loaded_how = torch_stage.run_threads()
        assert hogged_share(pids) > 0.5, "the hog did not load the machine"
    assert loaded == idle == len(os.sched_getaffinity(0))
    share = float(loaded_how.split("used ")[1].split("%")[0])
    assert share >= 25, loaded_how  # the load was seen, and only recorded


def test_a_torchao_file_without_skus_measures_on_one_thread(tmp_path):
    torchao = {"benchmark_mode": "inference", "quantization_config_recipe_names": ["baseline"],
               "output_dir": "out",
               "model_params": [{"matrix_shapes": [{"name": "custom", "shapes": [[8, 16, 16]]}],
                                 "high_precision_dtype": "torch.float32", "device": "cpu"}]}
    suite = load([write_suite(tmp_path / "t.yml", torchao)])
    assert suite.config["skus"]["cpu-host"]["torch"]["threads"] == 1
    # A suite that names its SKUs keeps them.
    own = load([write_suite(tmp_path / "s.yml", {**tiny_suite(), **torchao})])
    assert set(own.config["skus"]) == {"host", "generic"}
    assert own.config["skus"]["host"]["torch"]["threads"] == 0


def test_each_invocation_reads_its_inputs_and_plain_weights_at_new_addresses(tmp_path):
    from workflow.backends.torch.prepared import Prepared, fresh_buffers, probe_device

    suite = suite_for(tmp_path, LINEAR, recipes=["baseline", "int8wo"])
    for recipe in ("baseline", "int8wo"):
        (case,), plan = plan_of(suite, recipe=recipe)
        prepared = Prepared(case, plan["backend"], probe_device("cpu", recipe)[0])
        before_out = prepared.forward()
        weights = [p.data_ptr() for p in prepared.module.parameters()]
        inputs = [x.data_ptr() for x in prepared.inputs]
        fresh_buffers(prepared)
        assert all(x.data_ptr() not in inputs for x in prepared.inputs)
        moved = [p.data_ptr() not in weights for p in prepared.module.parameters()]
        # Plain weights move; a quantized weight (a tensor subclass) stays.
        plain = [type(p.data) is torch.Tensor for p in prepared.module.parameters()]
        assert moved == plain and plain[0] == (recipe == "baseline"), recipe
        assert (prepared.forward() == before_out).all()


@pytest.mark.tool
def test_a_line_read_with_the_one_before_it_is_not_left_waiting():
    """Two lines in one write, then silence: the second is seen at once, not after the
    next line (a buffered readline kept it while select() waited on an empty pipe, and a
    worker's hang was blamed on the case before the one that hung)."""
    import time

    from workflow.backends.proc import Streaming

    with Streaming(["sh", "-c", 'printf "a\\nb\\nc"; sleep 30']) as proc:
        t0 = time.monotonic()
        assert proc.readline(10) == "a\n" and proc.readline(10) == "b\n"
        assert proc.readline(0.2) is None  # "c" has no newline yet: not a line
        assert time.monotonic() - t0 < 5
        proc.kill()
        assert proc.readline(1) == "c" and proc.readline(1) == ""


@pytest.mark.slow
def test_a_batch_compiles_every_case_of_one_model_class():
    """Dynamo compiles one forward at most recompile_limit (8) times per process: a
    batch's ninth compiled case of one model class would fail (fullgraph=True, as
    torchao's cases) or run eager under a compiled name. allow_compiles lifts it."""
    import torch

    from workflow.backends.torch.prepared import allow_compiles

    class Linear(torch.nn.Module):  # a class of its own: its forward's cache is empty
        def __init__(self, n):
            super().__init__()
            self.lin = torch.nn.Linear(n, n)

        def forward(self, x):
            return self.lin(x)

    def compile_cases(count):
        for n in range(1, count + 1):
            torch.compile(Linear(n), backend="eager", fullgraph=True)(torch.randn(2, n))

    with torch._dynamo.config.patch(recompile_limit=8, accumulated_recompile_limit=256):
        with pytest.raises(torch._dynamo.exc.FailOnRecompileLimitHit):
            compile_cases(10)  # the limit as torch sets it: the ninth case fails
        torch._dynamo.reset()
        allow_compiles(12)
        compile_cases(12)
    torch._dynamo.reset()
