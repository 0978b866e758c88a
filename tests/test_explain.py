"""Attribution in the verdicts (issue 25): `compare`, `check` and `ab` name the dispatches
behind a change and what differs between the two sides (regression/explain.py), from
records holding `kernels` (the case record's shape). The profiles are the real ones of
tests/data/iree_profile (ln_linear_gelu with and without aggressive fusion)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import DATA
from tests.test_goldens import BASE, make_case, make_report
from workflow.backends.iree.profile import dispatch_rows
from workflow.cli.main import main
from workflow.records.storage import write_json
from workflow.regression.compare import compare, to_json, to_markdown
from workflow.regression.explain import explain, interval_noise_ms
from workflow.render import ab as ab_render
from workflow.suite.load import load

CID = "host/iree/ln_linear_gelu-f32/baseline"
AGGRESSIVE = "--iree-dispatch-creation-enable-aggressive-fusion"


def kernels(variant: str, scale: float = 1.0, matmul_scale: float = 1.0) -> dict:
    """A case record's `kernels` from a real iree-profile output, its times scaled (the
    matmul's by `matmul_scale` more: a layer that grew)."""
    path = DATA / "iree_profile" / f"ln_linear_gelu.{variant}local-task.dispatch.jsonl"
    rows = []
    for r in dispatch_rows(path.read_text()):
        k = scale * (matmul_scale if "matmul" in r["name"] else 1.0)
        rows.append({"name": r["name"], "count": r["count"], "total_ms": r["total_ms"] * k,
                     "mean_ms": r["mean_ms"] * k, "share": r["share"], "workgroup": None})
    return {"source": "iree-profile", "mode": "host-execution", "calls": 5,
            "total_ms": sum(r["total_ms"] for r in rows), "seconds": 0.1, "rows": rows,
            "error": None}


def case(medians, kern, flags=()) -> dict:
    c = make_case(CID, medians, kernels=kern)
    c["compile"]["flags"] = ["--iree-input-type=torch", *flags]
    return c


def section_row(result: dict, section: str) -> dict:
    (row,) = to_json(result)["sections"][section]
    return row


def test_compare_names_the_matmul_that_grew_as_most_of_a_regression():
    base = make_report(case(BASE, kernels("")))
    new = make_report(case([2 * x for x in BASE], kernels("", matmul_scale=3.0)))
    result = compare(base, new)
    row = section_row(result, "Regressed")
    top = row["attribution"]["rows"][0]
    assert top["name"] == "main$async_dispatch_2_matmul_128x256x256_f32"
    assert top["explains"] > 0.9
    assert row["why"][0].startswith("+") and "matmul_128x256x256" in row["why"][0]
    assert "explains" in row["why"][0]
    assert row["changed"] == []
    md = to_markdown(result)
    # These records hold no model source digests: an empty diff does not claim them.
    assert "matmul_128x256x256_f32 explains" in md and \
        "what changed: same flags, tools and host (model sources not recorded)" in md
    with_sources = [case(BASE, kernels("")) for _ in range(2)]
    for c in with_sources:
        c["provenance"] = {"model_sources": {"layers.py": "ab12"}}
    assert explain(*with_sources, 1.0, 2.0, decided=True)["what_changed"] == \
        "what changed: same flags, tools, host and model source"


def test_a_fusion_change_within_noise_is_still_named_with_the_flag_that_made_it():
    base = make_report(case(BASE, kernels("")))
    new = make_report(case(BASE, kernels("aggressive-fusion."), [AGGRESSIVE]))
    row = section_row(compare(base, new), "Similar")
    assert "within noise" in row["why"][0]
    # Two dispatches left of three: the matmul and one reduction are matched across the
    # renumbering, the other reduction was fused away.
    assert row["why"][-1] == "removed: main$async_dispatch_1_reduction_128x256_f32"
    assert row["attribution"]["removed"] == ["main$async_dispatch_1_reduction_128x256_f32"]
    assert row["changed"] == [f"compile flags: + {AGGRESSIVE}"]
    # And back: from aggressive to default, the dispatch is added.
    back = section_row(compare(new, base), "Similar")
    assert back["why"][-1] == "added: main$async_dispatch_1_reduction_128x256_f32"
    assert back["changed"] == [f"compile flags: - {AGGRESSIVE}"]


@pytest.mark.parametrize("base_kernels,why", [
    (None, "no profile on the base side (base: not profiled)"),
    ({"source": "iree-profile", "mode": None, "calls": None, "total_ms": None, "seconds": None,
      "rows": [], "error": "profiling failed"},
     "no profile on the base side (base: profiling failed: profiling failed)"),
])
def test_a_side_without_profile_is_said_never_a_crash(base_kernels, why):
    base = make_report(case(BASE, base_kernels))
    new = make_report(case([2 * x for x in BASE], kernels("")))
    row = section_row(compare(base, new), "Regressed")
    assert row["why"] == [why]


def test_check_names_the_dispatch_against_a_golden_blessed_with_kernels(tmp_path, capsys):
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    write_json(base, make_report(case(BASE, kernels(""))))
    write_json(new, make_report(case([2 * x for x in BASE], kernels("", matmul_scale=3.0)),
                                sha="new222"))
    gdir = tmp_path / "goldens"
    assert main(["bless", "--report", str(base), "--goldens", str(gdir), "--yes"]) == 0
    golden = json.loads((gdir / "host.json").read_text())
    assert golden["schema_version"] == "1.3"
    assert golden["cases"][CID]["explain"]["kernels"]["rows"][0]["name"].endswith("matmul_"
                                                                                 "128x256x256_f32")
    capsys.readouterr()
    assert main(["check", "--report", str(new), "--goldens", str(gdir),
                 "--remeasure-budget", "0"]) == 1
    out = capsys.readouterr().out.splitlines()
    i = next(i for i, line in enumerate(out) if line.startswith(f"REGRESSED {CID}"))
    assert "main$async_dispatch_2_matmul_128x256x256_f32 explains" in out[i + 1]
    assert out[i + 1].startswith("    +")
    assert out[-2] == "    what changed: benchflow commit abc123 -> new222"


def test_check_against_an_old_golden_says_it_has_no_kernels(tmp_path, capsys):
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    write_json(base, make_report(case(BASE, kernels(""))))
    write_json(new, make_report(case([2 * x for x in BASE], kernels(""))))
    gdir = tmp_path / "goldens"
    assert main(["bless", "--report", str(base), "--goldens", str(gdir), "--yes"]) == 0
    path = gdir / "host.json"
    data = json.loads(path.read_text())
    del data["cases"][CID]["explain"]  # as blessed before goldens 1.1
    path.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["check", "--report", str(new), "--goldens", str(gdir),
                 "--remeasure-budget", "0"]) == 1
    out = capsys.readouterr().out
    assert "no profile on the base side (base: not profiled): golden blessed without " \
        "kernels" in out


def test_interval_noise_is_the_half_width_toward_no_change():
    assert interval_noise_ms(10.0, 1.5, [1.2, 1.9]) == pytest.approx(3.0)
    assert interval_noise_ms(10.0, 0.5, [0.3, 0.6]) == pytest.approx(1.0)
    assert interval_noise_ms(10.0, 1.5, None) == 0.0


def test_an_ab_row_says_the_dispatches_and_the_skus_flags(tmp_path):
    from workflow.comparisons.ab import row_attribution

    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "suite_name: t\nworkloads: [{model: ln_linear_gelu, shapes: [[128, 256, 256]]}]\n"
        "skus:\n  a: {iree: {target_cpu: generic, device: local-sync}}\n"
        f"  b: {{iree: {{target_cpu: generic, device: local-sync,\n"
        f"      compile_flags: [{AGGRESSIVE}]}}}}\n")
    skus = load([suite]).config["skus"]
    row = {"base": "a", "new": "b", "workload": "w", "verdict": "regression", "ratio": 1.5,
           "ci95": [1.3, 1.7], "base_ms": [1.0, 2.0, 3.0],
           "commands": {"a": ["iree-benchmark-module"], "b": ["iree-benchmark-module"]}}
    profiles = {"base": kernels(""), "new": kernels("aggressive-fusion.")}
    row["attribution"] = row_attribution(row, profiles, skus)
    assert row["attribution"]["attribution"]["delta_ms"] == pytest.approx(1.0)
    lines = ab_render.why_lines(row)
    assert lines[-1] == f"what changed: compile flags: + {AGGRESSIVE}; sku a -> b"
    assert "removed: main$async_dispatch_1_reduction_128x256_f32" in lines
    md = ab_render.markdown({"pairs": [{**row, "p_value": 0.01, "rounds": 9, "seconds": 1.0,
                                        "stop_reason": "decided", "mde": 1.1, "level": 0.95}]})
    assert "**a → b, w** (regression):" in md and "- what changed: compile flags: + " in md
    # A row without a decided verdict and with the same dispatches says nothing.
    same = explain({"kernels": kernels("")}, {"kernels": kernels("")}, 2.0, 2.0, decided=False)
    assert ab_render.why_lines({**row, "verdict": "no-difference", "attribution": same}) == []
