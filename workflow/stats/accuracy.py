"""Accuracy of a backend's outputs against the fp32 eager reference (pure numpy)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def _flat64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64).ravel()


def pcc(actual, expected) -> float:
    """Pearson correlation of the flattened tensors; 1.0 when both are the same constant."""
    a, e = _flat64(actual), _flat64(expected)
    if a.size == 0:
        return 1.0
    if not (np.isfinite(a).all() and np.isfinite(e).all()):
        return float("nan") if not np.array_equal(a, e, equal_nan=True) else 1.0
    da, de = a - a.mean(), e - e.mean()
    denom = math.sqrt(float(da @ da) * float(de @ de))
    if denom == 0.0:
        return 1.0 if np.allclose(a, e) else 0.0
    return float(np.clip((da @ de) / denom, -1.0, 1.0))


def sqnr_db(actual, expected) -> float:
    """Signal-to-quantization-noise ratio in dB (torchao's compute_error); inf when exact."""
    a, e = _flat64(actual), _flat64(expected)
    noise = float(np.sum((e - a) ** 2))
    signal = float(np.sum(e**2))
    if noise == 0.0:
        return math.inf
    return 10.0 * math.log10(signal / noise) if signal else -math.inf


def compare(
    actual: Sequence, expected: Sequence, *, rtol: float, atol: float, min_pcc: float
) -> dict:
    """Compares output lists pairwise; the figures are the worst over all outputs.

    max_rel_err is |a - e| / |e| elementwise, over the elements where |e| > atol:
    below that the absolute error is what matters, and dividing by ~0 would only
    report noise.
    """
    if len(actual) != len(expected):
        raise ValueError(f"{len(actual)} outputs, reference has {len(expected)}")
    worst_pcc, max_abs, max_rel, all_close, worst_sqnr = 1.0, 0.0, 0.0, True, math.inf
    for a, e in zip(actual, expected, strict=True):
        a64, e64 = np.asarray(a, dtype=np.float64), np.asarray(e, dtype=np.float64)
        if a64.shape != e64.shape:
            raise ValueError(f"output shape {a64.shape} differs from reference {e64.shape}")
        diff = np.abs(a64 - e64)
        p = pcc(a64, e64)
        worst_pcc = p if math.isnan(p) else min(worst_pcc, p)
        if diff.size:
            max_abs = max(max_abs, float(np.max(diff)))
            big = np.abs(e64) > atol
            if big.any():
                max_rel = max(max_rel, float(np.max(diff[big] / np.abs(e64[big]))))
        all_close &= bool(np.allclose(a64, e64, rtol=rtol, atol=atol))
        worst_sqnr = min(worst_sqnr, sqnr_db(a64, e64))
    finite_pcc = not math.isnan(worst_pcc)
    return {
        "pcc": worst_pcc if finite_pcc else None,
        "max_abs_err": max_abs,
        "max_rel_err": max_rel,
        "allclose": all_close,
        "sqnr_db": None if math.isinf(worst_sqnr) else worst_sqnr,
        "rtol": rtol,
        "atol": atol,
        "min_pcc": min_pcc,
        "metric": "pcc",
        "accurate": bool(finite_pcc and worst_pcc >= min_pcc),
    }


def worst_sqnr_db(actual: Sequence, expected: Sequence) -> float:
    """The lowest SQNR over the output pairs, unrounded: inf when exact, -inf or nan
    when the reference is zero or not finite."""
    return min(sqnr_db(a, e) for a, e in zip(actual, expected, strict=True))


def with_sqnr(acc: dict, sqnr: float, reference: str, min_sqnr_db: float | None) -> dict:
    """`acc` (compare's) with the SQNR against `reference` in place of its own, and, where
    `min_sqnr_db` is given, judged by it instead of by PCC: accurate when the SQNR reaches
    it (exact outputs do; a nan or -inf SQNR does not), which the record states as
    `metric: sqnr` with its threshold. JSON has no infinities: sqnr_db is then null."""
    out = {**acc, "sqnr_db": sqnr if math.isfinite(sqnr) else None, "sqnr_reference": reference}
    if min_sqnr_db is not None:
        out.update(metric="sqnr", min_sqnr_db=min_sqnr_db, accurate=bool(sqnr >= min_sqnr_db))
    return out
