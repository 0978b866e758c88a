"""User models that misbehave (issue 37, family 4): a forward that ends its process
(os._exit, sys.exit, with any status, OWN_BUG_EXIT included) or that returns no tensor
(None from a forgotten `return`, a string, a dict of numbers, a list holding a None).
Each is that case's recorded failure with the reason, the other cases of its batch are
measured, and a rerun reuses the failure instead of repeating it. And (issue 37, item
7) `--forcerun iree_batch` re-measures every case of a batch even when one of its
records was damaged, which alone re-measures that one.

CASES is the table of misbehaving models, one row each:
(id, what the model does, backend, expected stage, expected fragment of the error).
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import FAST_MEASUREMENT, snakemake, tiny_suite, write_suite
from workflow.records.storage import read_json

MODELS = textwrap.dedent('''
    """Models whose forward misbehaves in the ways a user's model can."""
    import os
    import sys

    from workflow.models.common import finish, seeded
    from workflow.models.registry import benchmark_model


    def _build(after, dtype, shape):
        import torch

        class Misbehaving(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(8, 8)

            def forward(self, x):
                return after(self.lin(x))

        gen = seeded()
        return finish(Misbehaving(), (torch.randn(*shape, generator=gen),), dtype)


    def _model(name, after):
        def build(config, dtype, layers, shape):
            return _build(after, dtype, shape)
        build.__name__ = name
        benchmark_model(default_shape=(4, 8), shape_doc="[batch, 8]")(build)


    def _os_exit(code):
        def after(y):
            os._exit(code)
        return after


    def _sys_exit(y):
        sys.exit(70)


    _WORKER = os.getpid()  # the process that imported this module: the torch worker


    def _os_exit_in_a_fork(y):
        if os.getpid() != _WORKER:  # a forked invocation, not the worker's own calls
            os._exit(70)
        return y


    _model("os_exit_70", _os_exit(70))
    _model("os_exit_0", _os_exit(0))
    _model("os_exit_3", _os_exit(3))
    _model("sys_exit_70", _sys_exit)
    _model("os_exit_70_in_a_fork", _os_exit_in_a_fork)
    _model("returns_none", lambda y: None)
    _model("returns_str", lambda y: "done")
    _model("returns_dict_of_ints", lambda y: {"a": 1})
    _model("returns_list_with_none", lambda y: [y, None])
''')

NOT_A_TENSOR = "; expected a tensor or a tuple of tensors"
CASES = [
    ("os-exit-70-iree", "forward calls os._exit(70), benchflow's own-bug status, in the "
     "export worker", "iree", "export", "exited with 70"),
    ("os-exit-0-iree", "forward calls os._exit(0) in the export worker", "iree", "export",
     "exited with 0 without writing its result"),
    ("os-exit-3-iree", "forward calls os._exit(3) in the export worker", "iree", "export",
     "exited with 3"),
    ("sys-exit-70-iree", "forward calls sys.exit(70) in the export worker", "iree", "export",
     "exited with 70"),
    ("none-iree", "forward returns None (a forgotten return)", "iree", "export",
     "forward returned NoneType" + NOT_A_TENSOR),
    ("str-iree", "forward returns a string", "iree", "export", "forward returned str"),
    ("dict-iree", "forward returns {'a': 1}", "iree", "export",
     "forward returned a dict holding int at ['a']"),
    ("list-none-iree", "forward returns [tensor, None]", "iree", "export",
     "forward returned a list holding NoneType at [1]"),
    ("os-exit-70-torch", "forward calls os._exit(70), benchflow's own-bug status, in the "
     "torch worker", "torch-eager", "run", "torch worker exited with 70 (batch)"),
    ("sys-exit-70-torch", "forward calls sys.exit(70) in the torch worker", "torch-eager",
     "run", "torch worker exited with 70 (batch)"),
    ("os-exit-0-torch", "forward calls os._exit(0) in the torch worker", "torch-eager",
     "run", "torch worker exited with 0"),
    ("os-exit-3-torch", "forward calls os._exit(3) in the torch worker", "torch-eager",
     "run", "torch worker exited with 3"),
    ("none-torch", "forward returns None (a forgotten return)", "torch-eager", "run",
     "TypeError: forward returned NoneType" + NOT_A_TENSOR),
    ("str-torch", "forward returns a string", "torch-eager", "run",
     "TypeError: forward returned str"),
    ("dict-torch", "forward returns {'a': 1}", "torch-eager", "run",
     "TypeError: forward returned a dict holding int at ['a']"),
    ("list-none-torch", "forward returns [tensor, None]", "torch-eager", "run",
     "TypeError: forward returned a list holding NoneType at [1]"),
]
MODEL_OF = {"os-exit-70": "os_exit_70", "os-exit-0": "os_exit_0", "os-exit-3": "os_exit_3",
            "sys-exit-70": "sys_exit_70", "none": "returns_none", "str": "returns_str",
            "dict": "returns_dict_of_ints", "list-none": "returns_list_with_none"}
HEALTHY = {"iree": "host/iree/linear-16x32x32-f32/baseline",
           "torch-eager": "host/torch-eager/linear-16x32x32-f32/baseline"}


def case_id(row: tuple) -> str:
    kind, backend = row[0].rsplit("-", 1)
    return f"host/{row[2]}/{MODEL_OF[kind]}-4x8-f32/baseline"


# --- the output check itself --------------------------------------------------------

def test_what_counts_as_a_models_output():
    import torch

    from workflow.errors import raised_in_own_code
    from workflow.models.outputs import checked_outputs, output_problem

    t = torch.zeros(2)
    for good in (t, (t,), [t, (t, t)], {"logits": t}, (t, {"h": [t]})):
        assert output_problem(good) is None
        assert checked_outputs(good) is good
    for bad, problem in ((None, "NoneType"), ("done", "str"), (3.0, "float"),
                         ({"a": 1}, "a dict holding int at ['a']"),
                         ([t, None], "a list holding NoneType at [1]"),
                         ((t, (t, "x")), "a tuple holding str at [1][1]"),
                         ((), "an empty tuple"), ({}, "an empty dict")):
        assert output_problem(bad) == problem
        with pytest.raises(TypeError) as exc:
            checked_outputs(bad)
        assert str(exc.value) == f"forward returned {problem}{NOT_A_TENSOR}"
        # The model's failure, not benchflow's bug: the case fails, the job goes on.
        assert not raised_in_own_code(exc.value)


def test_a_torch_case_never_compares_no_output_with_no_output():
    """Two forwards returning None once agreed perfectly (PCC 1.0, ok)."""
    from workflow.backends.torch.prepared import numpy_outputs

    for bad in (None, "done", [None]):
        with pytest.raises(TypeError, match="expected a tensor or a tuple of tensors"):
            numpy_outputs(bad)


def test_the_table_names_every_case_once():
    assert len({case_id(r) for r in CASES}) == len(CASES)


# --- the torch workers: a model's exit is its case's, benchflow's own bug the job's ----

def test_only_benchflows_own_exit_leaves_the_own_bug_marker(tmp_path):
    from workflow.backends.torch import worker
    from workflow.backends.worker_side import ended_by_own_bug, marking_own_bug, own_bug_marker

    plan = tmp_path / "plan.json"
    # A model's sys.exit(70) is raised in the model's frame (this test's): no marker.
    with pytest.raises(SystemExit), marking_own_bug(plan):
        sys.exit(70)
    assert not own_bug_marker(plan).exists() and not ended_by_own_bug(70, plan)
    # An exception raised in benchflow's own code: the worker's _failed exits 70, marked.
    with pytest.raises(SystemExit) as exc, marking_own_bug(plan):
        try:
            worker.groups([None], 0)
        except AttributeError as bug:
            worker._failed(bug)
    assert exc.value.code == 70 and ended_by_own_bug(70, plan)
    assert not ended_by_own_bug(1, plan)  # the status and the marker, never one alone


@pytest.fixture(scope="module")
def models_file(tmp_path_factory) -> Path:
    """MODELS as a file, one for the module: its names are registered once a process."""
    path = tmp_path_factory.mktemp("models") / "misbehaving_models.py"
    path.write_text(MODELS)
    return path


def torch_cases(tmp_path, models_file, workloads: list[dict]) -> tuple[list[dict], dict]:
    """The torch-eager cases of `workloads` (MODELS' models and the built-in ones), in
    that order, and a worker plan for them."""
    from tests.test_torch_bench import MEASURE, plan_of
    from workflow.suite.load import load

    cfg = tiny_suite(model_modules=[str(models_file)],
                     workloads=workloads, backends=["torch-eager"])
    cfg["skus"] = {"host": {"torch": {"threads": 1}, "measurement": dict(MEASURE)}}
    cases, plan = plan_of(load([write_suite(tmp_path / "s.yaml", cfg)]))
    order = [w["model"] for w in workloads]
    return sorted(cases, key=lambda c: order.index(c["workload"]["model"])), plan


@pytest.mark.tool
def test_a_models_exit_70_in_the_torch_worker_fails_its_case_and_the_batch_goes_on(
        tmp_path, models_file):
    """Exit 70 is what benchflow's workers use for their own bug; a model's is its case's
    failure, and a fresh worker measures the cases after it."""
    from workflow.jobs.torch import run_pass

    models = ["os_exit_70", "sys_exit_70", "os_exit_70_in_a_fork"]
    workloads = [*({"model": m, "shapes": [[4, 8]]} for m in models),
                 {"model": "linear", "shapes": [[4, 8, 8]]}]
    cases, plan = torch_cases(tmp_path, models_file, workloads)
    got = run_pass(plan, "batch", cases, timeout_per_case=60, log=str(tmp_path / "log"))
    by_model = {c["workload"]["model"]: got[c["id"]] for c in cases}
    for model in ("os_exit_70", "sys_exit_70"):
        assert by_model[model]["status"] == "failed", by_model[model]
        assert by_model[model]["error"].startswith("torch worker exited with 70 (batch):")
    # A forked invocation that the model ends: that invocation's failure, the case's.
    assert by_model["os_exit_70_in_a_fork"]["run_error"] == \
        "the invocation's process exited with 70"
    assert by_model["linear"]["status"] == "ok" and "run_error" not in by_model["linear"]
    assert by_model["linear"]["timing"]["invocations"] == 2


@pytest.mark.tool
def test_benchflows_own_bug_in_the_torch_worker_still_fails_the_job(tmp_path, models_file):
    from workflow.errors import OwnBug
    from workflow.jobs.torch import run_pass

    cases, plan = torch_cases(tmp_path, models_file,
                              [{"model": "linear", "shapes": [[4, 8, 8]]}])
    # Our bug, not the model's: a case whose backend the plan lacks (a KeyError raised in
    # the worker's own code, worker.measure_group).
    with pytest.raises(OwnBug, match="benchflow's own code failed in the torch worker"):
        run_pass({**plan, "backends": {}}, "batch", cases, timeout_per_case=60,
                 log=str(tmp_path / "log"))


@pytest.mark.tool
def test_a_torch_ab_side_whose_model_exits_70_is_that_sides_failure(tmp_path, models_file):
    from workflow.comparisons.ab_torch import _Worker
    from workflow.errors import OwnBug, StageError

    cases, plan = torch_cases(tmp_path, models_file,
                              [{"model": "os_exit_70", "shapes": [[4, 8]]}])
    serve = {"backend": plan["backend"], "threads": 1, "measurement": plan["measurement"],
             "block_s": 0.05, "cases": cases}
    log = str(tmp_path / "log")
    with pytest.raises(StageError) as exc:
        _Worker("side", serve, timeout=60, log=log)
    assert exc.value.stage == "prepare"
    assert exc.value.message.startswith("side: torch worker exited with 70 (prepare)")
    # Our bug in the same worker (a plan without its backend) still fails the job.
    del serve["backend"]
    with pytest.raises(OwnBug, match="own code failed in the torch A/B worker of side"):
        _Worker("side", serve, timeout=60, log=log)


# --- end to end: one suite, every misbehaving model in the same batches ---------------

@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, str, dict]:
    work = tmp_path_factory.mktemp("misbehaving")
    (work / "misbehaving_models.py").write_text(MODELS)
    torch_too = {"os_exit_70", "sys_exit_70", "os_exit_0", "os_exit_3", "returns_none",
                 "returns_str", "returns_dict_of_ints", "returns_list_with_none"}
    suite = {
        "suite_name": "misbehaving",
        "model_modules": ["misbehaving_models.py"],
        "skus": {"host": {"iree": {"target_cpu": "host"}, "torch": {"threads": 1},
                          "measurement": {**FAST_MEASUREMENT, "torch_warmup_calls": 2,
                                          "torch_warmup_s": 0.0,
                                          "torch_min_run_time_s": 0.02}}},
        "backends": ["iree", "torch-eager"],
        # One batch per backend (iree_batch_size), the healthy case in it too.
        "iree_batch_size": 64,
        "workloads": [*({"model": m, "shapes": [[4, 8]],
                         "backends": ["iree", "torch-eager"] if m in torch_too else ["iree"]}
                        for m in MODEL_OF.values()),
                      {"model": "linear", "shapes": [[16, 32, 32]],
                       "backends": ["iree", "torch-eager"]}],
        "timeouts": {"export_s": 120, "run_s": 120, "compile_s": 120, "verify_s": 120},
    }
    path = str(write_suite(work / "suite.yaml", suite))
    snakemake(work, "results/report.json", "--configfile", path)
    return work, path, {c["id"]: c for c in read_json(work / "results/report.json")["cases"]}


@pytest.mark.e2e
@pytest.mark.parametrize("row", CASES, ids=[r[0] for r in CASES])
def test_a_misbehaving_model_is_its_cases_failure(run, row):
    _, _, cases = run
    rec = cases[case_id(row)]
    assert rec["status"] == "failed", rec
    assert rec["stage"] == row[3]
    assert row[4] in rec["error"], rec["error"]
    assert "accuracy" not in rec or not rec["accuracy"] or rec["accuracy"].get("pcc") != 1.0


@pytest.mark.e2e
def test_the_batches_go_on_and_a_rerun_repeats_no_failure(run):
    work, path, cases = run
    for case in HEALTHY.values():
        assert cases[case]["status"] == "ok", cases[case].get("error")
    plan = snakemake(work, "results/report.json", "--configfile", path, "-n")
    assert "Nothing to be done" in plan.stdout + plan.stderr, plan.stdout


@pytest.mark.e2e
def test_forcerun_with_a_damaged_record_measures_every_case_again(run):
    """A damaged record alone reruns its batch for that case; with --forcerun iree_batch
    the batch measures every case again, as README and DESIGN promise."""
    work, path, _ = run
    batch_logs = list((work / "logs" / "iree" / "host").glob("*.log"))
    (batch_log,) = batch_logs
    record = work / "results/cases/host/iree/linear-16x32x32-f32/baseline.json"

    def damage():
        doc = json.loads(record.read_text())
        doc["hand_edited"] = True
        record.write_text(json.dumps(doc))

    def members() -> list[str]:  # the last run's lines (Snakemake starts the log anew)
        return [ln for ln in batch_log.read_text().splitlines() if ln.startswith("host/iree/")]

    # Damage alone: that case is measured again, the others reused.
    damage()
    snakemake(work, "results/report.json", "--configfile", path)
    again = [ln for ln in members() if "reused" not in ln]
    assert len(again) == 1 and again[0].startswith(HEALTHY["iree"]), members()
    damage()
    proc = snakemake(work, "results/report.json", "--configfile", path,
                     "--forcerun", "iree_batch")
    assert "its batch" in proc.stderr and "measures it again" in proc.stderr, proc.stderr
    forced = members()
    assert len(forced) == len(MODEL_OF) + 1, forced
    assert all("measuring again: the rerun was forced" in ln for ln in forced), forced
