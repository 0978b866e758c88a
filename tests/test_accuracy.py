import math

import numpy as np
import pytest

from workflow.backends.torch.recipes import min_sqnr_db, parse
from workflow.errors import ConfigError
from workflow.records.case import section
from workflow.render.common import degraded_reasons, status
from workflow.stats.accuracy import compare, pcc, sqnr_db, with_sqnr, worst_sqnr_db
from workflow.suite.schema import validate_suite

TOL = {"rtol": 1e-3, "atol": 1e-4, "min_pcc": 0.999}


def test_identical_outputs_are_exact():
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    r = compare([x], [x], **TOL)
    assert r["pcc"] == pytest.approx(1.0)
    assert r["max_abs_err"] == 0.0 and r["max_rel_err"] == 0.0
    assert r["allclose"] and r["accurate"]
    assert r["sqnr_db"] is None  # infinite: no noise


def test_errors_and_sqnr_are_computed_from_the_difference():
    ref = np.array([1.0, -2.0, 4.0, 0.0])
    got = ref + np.array([0.1, 0.0, -0.2, 0.0])
    r = compare([got], [ref], **TOL)
    assert r["max_abs_err"] == pytest.approx(0.2)
    assert r["max_rel_err"] == pytest.approx(0.1)  # 0.1 / 1.0; the zero is excluded
    assert not r["allclose"]
    assert r["sqnr_db"] == pytest.approx(10 * math.log10(21.0 / 0.05))


def test_pcc_detects_uncorrelated_outputs():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(1000), rng.standard_normal(1000)
    assert abs(pcc(a, b)) < 0.1
    assert pcc(a, -a) == pytest.approx(-1.0)
    r = compare([a], [b], **TOL)
    assert not r["accurate"]


def test_worst_output_decides():
    a = np.ones(10)
    r = compare([a, a * 2], [a, a * 2 + 1], **TOL)
    assert r["max_abs_err"] == 1.0 and not r["allclose"]


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="shape"):
        compare([np.ones(3)], [np.ones(4)], **TOL)


def test_sqnr_of_a_known_noise():
    ref = np.ones(100)
    assert sqnr_db(ref * 1.1, ref) == pytest.approx(20.0)


# --- the rule per recipe: PCC for baseline, SQNR for quantizing recipes (as torchao) ---

W = [{"model": "linear", "backends": ["torch-eager"]}]


def accuracy_config(**accuracy) -> dict:
    """A validated suite's `accuracy`, defaults filled as the worker receives it."""
    raw = {"backends": ["torch-eager"], "workloads": W}
    if accuracy:
        raw["accuracy"] = accuracy
    return validate_suite(raw, "s.yaml")["accuracy"]


def quantized_outputs(noise_var: float):
    """A reference, its unquantized-module outputs (here the same) and outputs with white
    noise of `noise_var` on a unit-variance signal: SQNR 10*log10(1/noise_var) dB, PCC
    1/sqrt(1 + noise_var)."""
    rng = np.random.default_rng(7)
    ref = rng.standard_normal(20_000)
    return ref, ref + rng.standard_normal(ref.size) * math.sqrt(noise_var)


def judged(recipe: str, noise_var: float, accuracy: dict) -> dict:
    """A torch case's accuracy section as the worker builds it (worker.characterize)."""
    ref, got = quantized_outputs(noise_var)
    acc = {**compare([got], [ref], **TOL), "reference": "torch-eager-fp32"}
    return with_sqnr(acc, worst_sqnr_db([got], [ref]), "baseline recipe",
                     min_sqnr_db(parse(recipe), accuracy))


def case_with(acc: dict) -> dict:
    return {"id": "c", "status": "ok", "accuracy": section("accuracy", acc)}


def test_int4_at_pcc_0998_is_accurate_by_its_sqnr_threshold():
    acc = judged("int4wo-128", 0.004, accuracy_config())  # pcc ~0.998, SQNR ~24 dB
    assert 0.997 < acc["pcc"] < TOL["min_pcc"]  # the PCC rule would call it degraded
    assert acc["sqnr_db"] == pytest.approx(24.0, abs=0.3)
    assert acc["metric"] == "sqnr" and acc["min_sqnr_db"] == 20 and acc["accurate"] is True
    rec = case_with(acc)
    assert rec["accuracy"]["metric"] == "sqnr" and rec["accuracy"]["min_sqnr_db"] == 20
    assert rec["accuracy"]["sqnr_reference"] == "baseline recipe"
    assert status(rec) == "ok" and degraded_reasons(rec) == []


def test_int4_below_its_sqnr_threshold_is_degraded_and_says_so():
    acc = judged("int4wo-128", 0.02, accuracy_config())  # SQNR ~17 dB
    assert acc["metric"] == "sqnr" and acc["min_sqnr_db"] == 20 and acc["accurate"] is False
    rec = case_with(acc)
    assert status(rec) == "degraded"
    assert degraded_reasons(rec) == [f"accuracy: sqnr {acc['sqnr_db']:.1f} dB < 20 dB"]
    assert acc["sqnr_db"] == pytest.approx(17.0, abs=0.3)


def test_exact_quantized_outputs_are_accurate_and_nan_ones_are_not():
    x = np.ones(8)
    acc = {**compare([x], [x], **TOL), "reference": "torch-eager-fp32"}
    exact = with_sqnr(acc, worst_sqnr_db([x], [x]), "baseline recipe", 20)
    assert exact["sqnr_db"] is None and exact["accurate"] is True
    nan = with_sqnr(acc, float("nan"), "baseline recipe", 20)
    assert nan["sqnr_db"] is None and nan["accurate"] is False
    assert degraded_reasons(case_with(nan)) == ["accuracy: sqnr undefined, needs >= 20 dB"]


def test_baseline_keeps_the_dtypes_pcc_rule():
    config = accuracy_config()
    assert min_sqnr_db(parse("baseline"), config) is None
    # Sparsity is judged by PCC unless the suite names it (torchao has no threshold for it).
    assert min_sqnr_db(parse("baseline.sparsity-block"), config) is None
    ref, got = quantized_outputs(0.004)
    acc = {**compare([got], [ref], **TOL), "reference": "torch-eager-fp32"}
    assert acc["metric"] == "pcc" and acc["accurate"] is False  # pcc 0.998 < 0.999
    assert degraded_reasons(case_with(acc)) == [f"accuracy: pcc {acc['pcc']:.6f} < 0.999"]
    assert case_with(acc)["accuracy"]["min_sqnr_db"] is None


def test_every_quantizing_family_defaults_to_torchaos_20_db():
    config = accuracy_config()
    for recipe in ("int8wo", "int8dq", "int8dq_prefill_wo_decode", "int4wo-32",
                   "int4wo-64-hqq", "8da4w-128", "int8_dynamic_activation_intx_weight-4-32-asym",
                   "float8wo", "float8dq-row"):
        assert min_sqnr_db(parse(recipe), config) == 20, recipe


def test_a_suite_sets_the_threshold_by_recipe_family_and_default():
    config = accuracy_config(min_sqnr_db=18, recipes={
        "int4wo": {"min_sqnr_db": 15}, "int4wo-128": {"min_sqnr_db": 12},
        "float8dq": {"min_sqnr_db": 25}, "baseline.sparsity-block": {"min_sqnr_db": 3}})
    assert min_sqnr_db(parse("int4wo-128"), config) == 12  # its name wins over its family
    assert min_sqnr_db(parse("int4wo-32"), config) == 15
    assert min_sqnr_db(parse("int4wo-32-hqq"), config) == 18  # another family
    assert min_sqnr_db(parse("float8dq-row"), config) == 25
    assert min_sqnr_db(parse("int8wo"), config) == 18
    assert min_sqnr_db(parse("baseline.sparsity-block"), config) == 3
    assert min_sqnr_db(parse("baseline"), config) is None
    acc = judged("int4wo-128", 0.02, config)  # ~17 dB: below the default, above its own 12
    assert acc["accurate"] is True and acc["min_sqnr_db"] == 12


@pytest.mark.parametrize(("accuracy", "expected"), [
    ({"recipes": {"baseline": {"min_sqnr_db": 10}}},
     "s.yaml: accuracy.recipes: expected a quantizing recipe's name"),
    ({"recipes": {"int4w": {"min_sqnr_db": 10}}}, "not baseline (the PCC rule judges it), "
                                                  "got 'int4w'"),
    ({"recipes": {"int4wo": {"min_sqnr": 10, "min_sqnr_db": 10}}},
     "s.yaml: accuracy.recipes.int4wo: unknown key(s) ['min_sqnr']"),
    ({"min_sqnr_db": "high"}, "s.yaml: accuracy.min_sqnr_db: expected number, got str 'high'"),
])
def test_a_bad_threshold_is_refused_naming_its_key(accuracy, expected):
    with pytest.raises(ConfigError) as err:
        accuracy_config(**accuracy)
    assert len(err.value.problems) == 1 and expected in err.value.problems[0], err.value.problems


def test_benchflow_runs_line_shows_the_figure_that_judged_the_case():
    from workflow.cli.run import summary_line

    low = {"id": "h/torch-eager/m-f32/int4wo-128", "status": "ok",
           "accuracy": judged("int4wo-128", 0.02, accuracy_config())}
    assert f"sqnr {low['accuracy']['sqnr_db']:.1f} dB (min 20) INACCURATE" in summary_line(low)
    ok = {**low, "accuracy": judged("int4wo-128", 0.004, accuracy_config())}
    assert summary_line(ok).endswith(f"sqnr {ok['accuracy']['sqnr_db']:.1f} dB (min 20)")
    assert "pcc" not in summary_line(ok)  # its PCC below min_pcc does not judge it


def test_an_sqnr_threshold_is_no_part_of_an_iree_cases_key():
    from workflow.planning.keys import dtype_tolerances

    plain, lowered = accuracy_config(), accuracy_config(min_sqnr_db=10)
    assert dtype_tolerances(plain) == dtype_tolerances(lowered) != {}
    assert set(dtype_tolerances(plain)) == {"f32", "f16", "bf16"}
