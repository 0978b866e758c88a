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

Runs disturbed by outside load (the measurement protocol's flag) are used, with their
own, wider spread of invocation values: on a machine other work shares every run is
disturbed, and leaving them out left nothing to judge. What they must not do is make a
step on their own, nor hide one:
- a disturbed run that is an outlier among its neighbours (disturbed_outliers: a Hampel
  filter over the runs' medians, LOCATION_WINDOW runs wide, its scale the wider of the
  neighbours' spread and the run's own) is left out of both steps. Kept in, one 1.4x
  disturbed run among ten drowns a 30 % step, in Otava's t-test and in the bootstrap
  alike. A run at a real step's edge is no outlier: it sits with the runs on its own
  side;
- one or two outliers the filter cannot tell (at the newest end of the series, or next
  to a step, where two of five runs around it are not a minority) still make no step:
  a side needs `min_side_runs` (3) runs, and the bootstrap resamples runs, so two
  outliers among three runs after a split carry about 0.74 of the resamples, below
  `confidence`.
Three or more disturbed runs in a row at a new level are a step, as three clean ones are.
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
# The runs a disturbed one is compared with to tell an outlier (disturbed_outliers):
# itself and two each side, so that two outliers in a row are a minority of it.
LOCATION_WINDOW = 5
# How far from its window's median, in scaled median absolute deviations (1.4826 MAD:
# a standard deviation for normal noise), a disturbed run is an outlier there.
HAMPEL_K = 3.0


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
           settings: Settings, disturbed: list[bool] | None = None) -> list[dict]:
    """The change points of a series: values_per_run[i] is run i's values (latency:
    its invocation medians; other metrics: one value), runs in time order. direction:
    which way is better ("lower": a ratio above 1 is a regression). disturbed[i]: run i
    was disturbed by outside load (module docstring; None: none was)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction {direction!r}; expected one of {DIRECTIONS}")
    runs = [np.asarray(v, dtype=np.float64) for v in values_per_run]
    if any(r.size == 0 or not np.all(np.isfinite(r)) for r in runs):
        raise ValueError("every run needs at least one finite value")
    flags = [bool(d) for d in disturbed] if disturbed is not None else [False] * len(runs)
    if len(flags) != len(runs):
        raise ValueError(f"{len(flags)} disturbed flags for {len(runs)} runs")
    if len(runs) < max(settings.min_runs, 2 * settings.min_side_runs):
        return []
    medians = _medians(runs)
    # The disturbed outliers out (module docstring); a change point's index is then
    # mapped back to the whole series'.
    out = set(_outliers(runs, medians, flags))
    used = [i for i in range(len(runs)) if i not in out]
    if len(used) < max(settings.min_runs, 2 * settings.min_side_runs):
        return []
    runs, flags = [runs[i] for i in used], [flags[i] for i in used]
    candidates = _candidates([medians[i] for i in used], settings)
    kept: list[dict] = []
    start = 0
    for k, (index, p_value) in enumerate(candidates):
        stop = candidates[k + 1][0] if k + 1 < len(candidates) else len(runs)
        cp = _judge(runs, start, index, stop, settings, flags)
        if cp is None:
            continue
        cp["p_value"] = p_value
        cp["kind"] = _kind(cp["ratio"], direction)
        kept.append(cp)
        start = index
    for cp in kept:
        cp["index"] = used[cp["index"]]
    return kept


def _medians(runs: list[np.ndarray]) -> list[float]:
    if len({r.size for r in runs}) == 1:  # the usual case, in one call (365 x 1000 series)
        return np.median(np.stack(runs), axis=1).tolist()
    return [float(np.median(r)) for r in runs]


def disturbed_outliers(values_per_run: list[list[float]], disturbed: list[bool]) -> list[int]:
    """The disturbed runs that are outliers among their neighbours, left out of both
    steps (module docstring): run i when disturbed[i] and its median lies more than
    HAMPEL_K scaled median absolute deviations (1.4826 MAD) from the median of the
    LOCATION_WINDOW runs around it (itself and two each side, fewer at the ends; a
    Hampel filter), the MAD the series' typical one over such windows or, where wider,
    that of the run's own median (from its invocations' spread). Left to right, an
    outlier already found counts in the windows after it as its window's median, so
    that two in a row are both found. A run at a real step's edge is no outlier: of the
    five runs around it, it sits with those on its own side, within their spread."""
    runs = [np.asarray(v, dtype=np.float64) for v in values_per_run]
    return _outliers(runs, _medians(runs), [bool(d) for d in disturbed])


def _outliers(runs: list[np.ndarray], medians: list[float],
              disturbed: list[bool]) -> list[int]:
    if not any(disturbed):
        return []
    half = LOCATION_WINDOW // 2

    def window(values: list[float], i: int) -> list[float]:
        return values[max(0, i - half):i + half + 1]

    # The run-to-run spread: the median over the series of each window's MAD (one
    # window's five medians can agree closely by chance; an outlier or a step widens
    # only the few windows holding it).
    spread = float(np.median([_mad(window(medians, i)) for i in range(len(medians))]))
    level = list(medians)  # the outliers found so far replaced by their windows' medians
    out = []
    for i, bad in enumerate(disturbed):
        if not bad:
            continue
        centre = float(np.median(window(level, i)))
        # Or, where wider, the spread of this run's own median (its invocations' MAD
        # over sqrt(n), times 1.2533: a median's standard error): a disturbed run's wide
        # spread is what it knows of its level.
        own = 1.2533 * float(np.median(np.abs(runs[i] - medians[i]))) / np.sqrt(runs[i].size)
        if abs(medians[i] - centre) > HAMPEL_K * 1.4826 * max(spread, own):
            out.append(i)
            level[i] = centre
    return out


def _mad(values: list[float]) -> float:
    centre = np.median(values)
    return float(np.median(np.abs(np.asarray(values) - centre)))


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
           settings: Settings, disturbed: list[bool]) -> dict | None:
    """The step at `index` judged on runs[start:index] against runs[index:stop]; None
    when it is not kept. A kept one says how many runs each side were disturbed."""
    before, after = list(range(start, index)), list(range(index, stop))
    cp = _judge_sides(runs, before, after, settings, [settings.seed, start, index, stop])
    if cp is not None:
        cp["disturbed_before"] = sum(disturbed[i] for i in before)
        cp["disturbed_after"] = sum(disturbed[i] for i in after)
    return cp


def _judge_sides(runs: list[np.ndarray], before_ix: list[int], after_ix: list[int],
                 settings: Settings, seed: list[int]) -> dict | None:
    """The step from the runs before_ix to the runs after_ix: the ratio of their pooled
    medians, its bootstrap interval and confidence; None when it is not kept."""
    before, after = [runs[i] for i in before_ix], [runs[i] for i in after_ix]
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
    rng = np.random.default_rng(seed)
    boot_before, boot_after = _bootstrap(before, rng), _bootstrap(after, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = boot_after / boot_before
    side = ratios > 1 if ratio > 1 else ratios < 1
    confidence = float(np.mean(side))
    if confidence < settings.confidence:
        return None
    lo, hi = np.quantile(ratios, [0.025, 0.975])
    return {"index": after_ix[0], "before": m_before, "after": m_after, "ratio": ratio,
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
