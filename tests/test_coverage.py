"""workflow.render.coverage: per-model ops and per-backend status from a report's cases."""

from __future__ import annotations

from workflow.render.coverage import format_coverage, model_coverage


def case(model, backend, status="ok", *, sku="h", workload=None, stage=None, error=None,
         accurate=True, hist=None, timing=True):
    workload = workload or f"{model}-f32"
    return {
        "id": f"{sku}/{backend}/{workload}/baseline", "model": model, "workload": workload,
        "backend": backend, "status": status, "stage": stage, "error": error,
        "timing": {"median_ms": 1.0} if timing and status == "ok" else None,
        "accuracy": {"accurate": accurate} if status == "ok" else None,
        "graph": None if hist is None else {"aten_ops": sum(hist.values()),
                                            "aten_ops_unique": len(hist), "op_histogram": hist},
    }


def report():
    bert_ops = {"aten.linear.default": 12, "aten.softmax.int": 2}
    return {"cases": [
        # bert: passes IREE on two SKUs (ops counted once), fails torch-inductor at run.
        case("bert", "iree", hist=bert_ops),
        case("bert", "iree", sku="g", hist=bert_ops),
        case("bert", "iree", workload="bert-1x64-f32", hist={"aten.linear.default": 12,
                                                             "aten.gelu.default": 2}),
        case("bert", "torch-inductor", "failed", stage="run",
             error="InductorError: boom\nmore", hist=bert_ops),
        # resnet: fails to compile on IREE (never compiled, never ran).
        case("resnet", "iree", "failed", stage="compile", error="iree-compile exited with 1"),
        case("resnet", "torch-inductor", hist={"aten.conv2d.default": 20}),
        # gpt: runs on IREE but inaccurately; training is unsupported there.
        case("gpt", "iree", accurate=False),
        case("gpt", "iree", "unsupported", workload="gpt-f32-train",
             error="the IREE backend benchmarks inference only"),
        # mnist: only unsupported cases on torch-inductor.
        case("mnist", "torch-inductor", "unsupported", error="no"),
    ]}


def test_statuses_counts_and_first_problem():
    cov = model_coverage(report())
    assert cov["backends"] == ["iree", "torch-inductor"]
    bert = cov["models"]["bert"]
    assert bert["backends"]["iree"]["status"] == "pass"
    assert bert["backends"]["iree"]["cases"] == 3 and bert["backends"]["iree"]["ran"] == 3
    ind = bert["backends"]["torch-inductor"]
    assert (ind["status"], ind["compiled"], ind["ran"]) == ("failed", 1, 0)
    assert ind["failed_stages"] == {"run": 1}
    assert ind["first_problem"]["error"] == "InductorError: boom"
    resnet = cov["models"]["resnet"]["backends"]["iree"]
    assert (resnet["status"], resnet["compiled"], resnet["ran"]) == ("failed", 0, 0)
    gpt = cov["models"]["gpt"]["backends"]["iree"]
    assert (gpt["status"], gpt["inaccurate"], gpt["unsupported"]) == ("inaccurate", 1, 1)
    assert cov["models"]["mnist"]["backends"] == {"torch-inductor": {
        **cov["models"]["mnist"]["backends"]["torch-inductor"], "status": "unsupported"}}
    assert "iree" not in cov["models"]["mnist"]["backends"]


def test_ops_are_the_union_over_workloads_counted_once_per_workload():
    bert = model_coverage(report())["models"]["bert"]
    # linear: 12 in each workload (not 36 for three cases), gelu from the second workload.
    assert bert["ops"] == {"aten.linear.default": 12, "aten.gelu.default": 2,
                           "aten.softmax.int": 2}
    assert bert["aten_ops"] == 14 and bert["aten_ops_unique"] == 3
    assert bert["workloads"] == ["bert-1x64-f32", "bert-f32"]
    gpt = model_coverage(report())["models"]["gpt"]
    assert gpt["ops"] == {} and gpt["aten_ops"] is None


def test_pass_counts_per_backend_ignore_unsupported_only_models():
    cov = model_coverage(report())
    assert cov["passing"] == {"iree": {"models": 3, "passing": 1},
                              "torch-inductor": {"models": 2, "passing": 1}}


def test_text_table():
    text = format_coverage(model_coverage(report()))
    lines = text.splitlines()
    assert lines[0].split() == ["model", "aten", "ops", "unique", "iree", "torch-inductor"]
    bert = next(ln for ln in lines if ln.startswith("bert"))
    assert "pass 3/3" in bert and "failed 0/1 (run)" in bert
    assert "iree: 1/3 models pass" in lines and "torch-inductor: 1/2 models pass" in lines
