"""Change points of one series of runs (issue 26): pure, no I/O.

Two steps:
1. Where: Apache Otava's E-Divisive (split over sliding windows of `window` runs, then
   merge at `max_pvalue` and `min_change`; Fleming et al., ICPE 2023) on the per-run
   medians locates candidate steps.
2. Whether: each candidate is judged on the invocation-level values of the runs on
   either side (since the previous kept change point, until the next candidate) by a
   hierarchical bootstrap: resample the runs with replacement, then each resampled
   run's own values with replacement; the statistic is median(after) / median(before)
   of the pooled resampled values. Invocations within one run share that run's machine
   state (load, clocks, the build's layout), so they are not independent evidence:
   a test on pooled invocations would count one disturbed run's seven invocations as
   seven witnesses. Resampling the runs first keeps the run the unit of evidence, and
   the invocations add only what they know (the run's own spread).
   A candidate is kept when the share of bootstrap ratios on the step's side of 1 is at
   least `confidence` and |ratio - 1| >= `min_change`.

A run with a single value (a non-latency metric) makes the second resampling a no-op:
the bootstrap is then over runs only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Bootstrap resamples per candidate. The confidence is a share of them: at 0.99 its
# Monte-Carlo standard error is sqrt(0.99 * 0.01 / 2000) = 0.002.
RESAMPLES = 2000
# Resamples drawn at a time, so that a long segment (365 runs x 12 invocations) stays a
# few tens of MB.
CHUNK = 250
DIRECTIONS = ("lower", "higher")


@dataclass(frozen=True)
class Settings:
    """config/schema.yaml `history`. No defaults here: the schema holds them, and
    workflow.suite.defaults.history_settings fills what a suite leaves out."""

    window: int
    max_pvalue: float
    min_change: float
    confidence: float
    min_runs: int
    # Runs each side of a step needs: one run has no run-to-run spread for the bootstrap
    # to resample (it would judge a single disturbed run on its invocations alone, the
    # pooling the bootstrap exists to avoid), so a lone outlier run is never a step.
    min_side_runs: int
    seed: int


def detect(values_per_run: list[list[float]], *, direction: str,
           settings: Settings) -> list[dict]:
    """The change points of a series: values_per_run[i] is run i's values (latency:
    its invocation medians; other metrics: one value), runs in time order. direction:
    which way is better ("lower": a ratio above 1 is a regression)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction {direction!r}; expected one of {DIRECTIONS}")
    runs = [np.asarray(v, dtype=np.float64) for v in values_per_run]
    if any(r.size == 0 or not np.all(np.isfinite(r)) for r in runs):
        raise ValueError("every run needs at least one finite value")
    if len(runs) < max(settings.min_runs, 2 * settings.min_side_runs):
        return []
    candidates = _candidates(_medians(runs), settings)
    kept: list[dict] = []
    start = 0
    for k, (index, p_value) in enumerate(candidates):
        stop = candidates[k + 1][0] if k + 1 < len(candidates) else len(runs)
        cp = _judge(runs, start, index, stop, settings)
        if cp is None:
            continue
        cp["p_value"] = p_value
        cp["kind"] = _kind(cp["ratio"], direction)
        kept.append(cp)
        start = index
    return kept


def _medians(runs: list[np.ndarray]) -> list[float]:
    if len({r.size for r in runs}) == 1:  # the usual case, in one call (365 x 1000 series)
        return np.median(np.stack(runs), axis=1).tolist()
    return [float(np.median(r)) for r in runs]


def _candidates(medians: list[float], settings: Settings) -> list[tuple[int, float]]:
    """Otava's change points of the run medians: (index, t-test p), by index. The series
    goes in as a list: Otava's window slicing (ChangePointDetector) slices only lists."""
    # Imported here: otava imports scipy.stats (0.8 s), which the command-line options
    # that read Settings' defaults should not pay.
    from otava.analysis import compute_change_points

    cps, _weak = compute_change_points(
        medians, window_len=settings.window, max_pvalue=settings.max_pvalue,
        min_magnitude=settings.min_change)
    return [(int(c.index), float(c.stats.pvalue)) for c in cps]


def _judge(runs: list[np.ndarray], start: int, index: int, stop: int,
           settings: Settings) -> dict | None:
    """The step at `index` judged on runs[start:index] against runs[index:stop]; None
    when it is not kept."""
    before, after = runs[start:index], runs[index:stop]
    if min(len(before), len(after)) < settings.min_side_runs:
        return None
    m_before = float(np.median(np.concatenate(before)))
    m_after = float(np.median(np.concatenate(after)))
    if m_before <= 0:
        return None  # a ratio to zero (e.g. a count that was 0) is no relative step
    ratio = m_after / m_before
    if abs(ratio - 1) < settings.min_change:
        return None  # too small whatever the bootstrap says: spare its cost
    # One generator per (seed, step, segment): a step's verdict does not depend on
    # which other candidates were judged before it.
    rng = np.random.default_rng([settings.seed, start, index, stop])
    boot_before, boot_after = _bootstrap(before, rng), _bootstrap(after, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = boot_after / boot_before
    side = ratios > 1 if ratio > 1 else ratios < 1
    confidence = float(np.mean(side))
    if confidence < settings.confidence:
        return None
    lo, hi = np.quantile(ratios, [0.025, 0.975])
    return {"index": index, "before": m_before, "after": m_after, "ratio": ratio,
            "change_percent": 100 * (ratio - 1), "ci95": [float(lo), float(hi)],
            "confidence": confidence, "runs_before": len(before),
            "runs_after": len(after)}


def _bootstrap(segment: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """RESAMPLES medians of the segment's values pooled after resampling its runs, then
    each chosen run's values. Runs are padded to the most values of any run and each
    resampled run contributes that many draws from its own values, so each run weighs
    the same (with equal counts per run, the usual case, this is the plain scheme)."""
    width = max(r.size for r in segment)
    values = np.zeros((len(segment), width))
    sizes = np.array([r.size for r in segment])
    for i, r in enumerate(segment):
        values[i, :r.size] = r
    out = []
    for n in _chunks(RESAMPLES, CHUNK):
        chosen = rng.integers(0, len(segment), size=(n, len(segment)))
        picks = (rng.random((n, len(segment), width)) * sizes[chosen][..., None]).astype(int)
        pooled = values[chosen[..., None], picks].reshape(n, -1)
        out.append(np.median(pooled, axis=1))
    return np.concatenate(out)


def _chunks(total: int, size: int) -> list[int]:
    return [min(size, total - i) for i in range(0, total, size)]


def _kind(ratio: float, direction: str) -> str:
    worse = ratio > 1 if direction == "lower" else ratio < 1
    return "regression" if worse else "improvement"
