import math

import numpy as np
import pytest

from workflow.stats.accuracy import compare, pcc, sqnr_db

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
