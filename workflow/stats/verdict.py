"""Verdicts against a golden (DESIGN.md): pure functions, no I/O.

Time: `regression` only when ratio = median / golden median exceeds the tolerance AND
an exact one-sided test on invocation medians (the invocation is the unit: one fresh
process each) gives p below the threshold; `improvement` symmetrically (ratio below
1 / tolerance). What noise can explain is `inconclusive`, never a pass and never a
regression:
- a ratio beyond the tolerance that the test does not find significant (the samples'
  spread explains it; calling it a pass would hide a change as large as the ratio);
- sample sizes that cannot reach the threshold at all (3 against 3 invocations: the
  smallest exact p is 1/20);
- a noisy case (CV above the SKU's noisy_cv: the run stage has already measured it again
  with twice the invocations) whose shift is significant but not significantly beyond
  the tolerance. With noise the median ratio is a loose estimate: a small change plus
  noise can put it past the tolerance. So a noisy case regresses only when the same
  exact test, applied to the new medians divided by the tolerance (multiplied, for an
  improvement), is significant too: the shift itself exceeds the tolerance at the
  observed noise. (It replaces the earlier rule "every new invocation slower than
  tolerance x the slowest golden one", which is this test's complete separation, and
  missed 1.5x slowdowns with one overlapping invocation: tests/test_verdict_simulation.py.)

The test: Mann-Whitney (new medians against the golden's stored medians); against a
golden that is a single number (a sharktank benchmark file's golden_time_ms), the
exact Wilcoxon signed-rank test of the new medians against that number.

Dispatch count: any increase regresses, a decrease improves. Binary size: above
golden x size_tolerance regresses; below the measured (unrounded) golden size /
size_tolerance improves.

Whose rule: a golden from a sharktank benchmark file's golden_* fields is judged with
that format's own size rule, `binary size <= golden_size` (its runner's check), and its
own dispatch rule, `dispatch count <= golden_dispatch` (the same as benchflow's); its
time stays benchflow's statistical test (the runner's is one invocation's mean <=
golden_time_ms x tolerance, retried on failure), and each verdict names its rule.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from workflow.stats import drift as common
from workflow.stats.enums import Status, Verdict, status_at
from workflow.stats.ratio_text import ratio_text

MANN_WHITNEY = "mann-whitney-exact"
RUN_LEVEL = "run-level-prediction-t"
WILCOXON = "wilcoxon-signed-rank-exact"


@dataclass(frozen=True)
class Settings:
    """The suite's `goldens` thresholds. No defaults here: config/schema.yaml holds them,
    and workflow.suite.defaults.gate_settings fills what a suite leaves out."""

    tolerance: float
    size_tolerance: float
    p_value: float


@dataclass(frozen=True)
class GoldenRef:
    """A golden of one case, from a golden file or a benchmark file."""

    source: str
    median_ms: float | None = None
    invocation_medians_ms: tuple[float, ...] | None = None  # None: a single number only
    tolerance: float | None = None
    dispatch_count: int | None = None
    binary_bytes: int | None = None
    binary_bytes_measured: int | None = None  # before rounding up, where known
    # The golden's own size tolerance (a sharktank file's golden_size: 1.0, `<=`); None:
    # the suite's goldens.size_tolerance.
    size_tolerance: float | None = None
    # Whose rules judge it: "benchflow" (a golden file) or "sharktank" (a benchmark file).
    origin: str = "benchflow"
    # The median of each run it pools (a golden blessed from several reports, a rolling
    # baseline of stored runs): with two or more, the time is judged run against runs
    # (run_level_verdict), their spread the noise between runs; None: one run.
    run_medians_ms: tuple[float, ...] | None = None
    # The measurement configuration it was measured at ({key: value}, records/
    # measurement_config.py); None: unknown (a benchmark file's number). Compared by
    # the regression layer, not here.
    config: dict | None = None


@dataclass(frozen=True)
class TimeVerdict:
    verdict: str
    ratio: float | None
    p_value: float | None
    test: str | None
    reason: str


def min_p(n_new: int, n_golden: int | None) -> float:
    """The smallest one-sided exact p the test can give for these sample sizes."""
    if n_golden is None:
        return 0.5 ** n_new                      # signed-rank: all signs the same way
    return 1.0 / math.comb(n_new + n_golden, n_new)  # Mann-Whitney: complete separation


def one_sided_p(new: Sequence[float], golden: Sequence[float] | float, alternative: str
                ) -> tuple[float, str]:
    """p of `new` being greater (or less) than the golden; alternative: greater | less."""
    from scipy import stats

    if isinstance(golden, int | float):
        diffs = [x - golden for x in new if x != golden]
        if not diffs:
            return 1.0, WILCOXON
        res = stats.wilcoxon(diffs, alternative=alternative, method="exact")
        return float(res.pvalue), WILCOXON
    res = stats.mannwhitneyu(list(new), list(golden), alternative=alternative, method="exact")
    return float(res.pvalue), MANN_WHITNEY


def _side(ratio: float, tolerance: float) -> tuple[str, bool, str]:
    """(the one-sided test's direction, whether the ratio is past the tolerance that way,
    the verdict it would then be)."""
    slower = ratio >= 1
    beyond = ratio > tolerance if slower else ratio < 1 / tolerance
    return ("greater" if slower else "less", beyond,
            Verdict.REGRESSION if slower else Verdict.IMPROVEMENT)


def several_runs(golden: GoldenRef) -> bool:
    """Whether a golden pools two runs or more (judged run against runs)."""
    return bool(golden.run_medians_ms) and len(golden.run_medians_ms) >= 2


def run_level_verdict(new_medians: Sequence[float], golden: GoldenRef, tolerance: float,
                      p_threshold: float) -> TimeVerdict:
    """The time judged run against runs: this run's median against the medians of the
    golden's runs (two or more), on the log scale, by the one-sided t test of a new
    observation against a sample (its prediction interval: mean +- t(n-1) x sd x
    sqrt(1 + 1/n)). The invocations of one run share its machine state, so pooled into
    one sample they overstate the evidence between runs: identical code rerun minutes
    apart moved 5 to 20 % as a whole on the 2-core machine while each run's interval was
    a few percent wide, and the invocation-level test called that a regression. Here the
    runs' own spread is the noise; the ratio is still the median's against the golden
    median and must pass the tolerance too."""
    from scipy import stats

    runs = [math.log(m) for m in golden.run_medians_ms]
    n = len(runs)
    centre, spread = statistics.fmean(runs), statistics.stdev(runs)
    median = statistics.median(new_medians)
    ratio = median / golden.median_ms
    # A floor far below any machine's noise: identical run medians would divide by zero.
    score = (math.log(median) - centre) / (max(spread, 1e-9) * math.sqrt(1 + 1 / n))
    direction, beyond, would = _side(ratio, tolerance)
    p = float(stats.t.sf(score, n - 1) if direction == "greater" else stats.t.cdf(score, n - 1))
    where = (f"ratio {ratio_text(ratio)} vs tolerance x{tolerance:g}, p={p:.4f} ({RUN_LEVEL}: "
             f"this run's median against {n} runs' medians, which spread x"
             f"{math.exp(spread):.3f})")
    if not beyond:
        return TimeVerdict(Verdict.PASS, ratio, p, RUN_LEVEL, f"within tolerance: {where}")
    if p >= p_threshold:
        return TimeVerdict(Verdict.INCONCLUSIVE, ratio, p, RUN_LEVEL,
                           f"would be {would} but not significant (p >= {p_threshold:g}): "
                           f"the golden's runs spread as much from one run to the next: "
                           f"{where}")
    return TimeVerdict(would, ratio, p, RUN_LEVEL, where)


def time_verdict(new_medians: Sequence[float], noisy: bool, golden: GoldenRef,
                 tolerance: float, p_threshold: float,
                 drift: common.Drift | None = None) -> TimeVerdict:
    """drift: the common drift of the case's run (stats/drift.py), taken out of its
    medians before they are judged against a golden of one run; None: judged as
    measured. A golden of several runs is judged run against runs, as measured: their
    spread holds how far runs move as a whole, so a level past it is judged too."""
    if not golden.median_ms:
        return TimeVerdict(Verdict.NO_GOLDEN, None, None, None, "no golden time")
    if several_runs(golden):
        return run_level_verdict(new_medians, golden, tolerance, p_threshold)
    if drift is not None:
        level = [m / drift.factor for m in new_medians]
        return _drifted(time_verdict(level, noisy, golden, tolerance, p_threshold),
                        drift, tolerance)
    median = statistics.median(new_medians)
    ratio = median / golden.median_ms
    sample = (golden.invocation_medians_ms if golden.invocation_medians_ms
              and len(golden.invocation_medians_ms) > 1 else golden.median_ms)
    n_golden = None if isinstance(sample, float | int) else len(sample)
    direction, beyond, would = _side(ratio, tolerance)
    p, test = one_sided_p(new_medians, sample, direction)
    where = f"ratio {ratio_text(ratio)} vs tolerance x{tolerance:g}, p={p:.4f} ({test})"
    if not beyond:
        return TimeVerdict(Verdict.PASS, ratio, p, test, f"within tolerance: {where}")
    if p >= p_threshold:
        if min_p(len(new_medians), n_golden) >= p_threshold:
            return TimeVerdict(Verdict.INCONCLUSIVE, ratio, p, test,
                               f"would be {would} but {len(new_medians)} invocations vs "
                               f"{n_golden or 'a single golden number'} cannot reach "
                               f"p < {p_threshold:g}: {where}")
        return TimeVerdict(Verdict.INCONCLUSIVE, ratio, p, test,
                           f"would be {would} but not significant (p >= {p_threshold:g}): "
                           f"noise can explain the ratio: {where}")
    if noisy:
        # The shift beyond the tolerance, tested: new / tolerance against the golden.
        shift = tolerance if direction == "greater" else 1 / tolerance
        p_beyond, _ = one_sided_p([x / shift for x in new_medians], sample, direction)
        beyond_where = (f"{where}; noisy, the shift beyond x{tolerance:g} has "
                        f"p={p_beyond:.4f}")
        if p_beyond >= p_threshold:
            return TimeVerdict(Verdict.INCONCLUSIVE, ratio, p, test,
                               f"would be {would} but the case is still noisy after its "
                               f"rerun and the shift is not significantly beyond the "
                               f"tolerance: {beyond_where}")
        return TimeVerdict(would, ratio, p, test, beyond_where)
    return TimeVerdict(would, ratio, p, test, where)


def _drifted(tv: TimeVerdict, drift: common.Drift, tolerance: float) -> TimeVerdict:
    """A verdict on a case's ratio to its run's level (tv), completed: a change must
    also stand out from the other cases' ratios, since the invocations of one run do not
    see what moves a case between runs; and a level that moved past the tolerance is no
    pass: one run cannot tell a slower machine from a change that slowed every case."""
    said = drift.describe()
    if tv.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT) and not common.stands_out(
            tv.ratio, drift):
        return replace(tv, verdict=Verdict.INCONCLUSIVE,
                       reason=f"would be {tv.verdict} against its run's level, but x"
                              f"{ratio_text(tv.ratio)} does not stand out from the other cases' "
                              f"ratios (within {common.OUTLIER_Z:g} of their spreads); "
                              f"{said}: {tv.reason}")
    if tv.verdict == Verdict.PASS and common.beyond(drift.factor, tolerance):
        return replace(tv, verdict=Verdict.INCONCLUSIVE,
                       reason=f"{said}, past the tolerance x{tolerance:g}: from one run a "
                              f"slower or faster machine and a change to every case look "
                              f"alike; judge against several runs (bless from several "
                              f"reports, or check --against-history); against that level "
                              f"this case is {tv.reason}")
    return replace(tv, reason=f"{tv.reason}; against its run's level: {said}")


def count_verdict(new: int | None, golden: int | None) -> tuple[str, float | None]:
    """Dispatch count: any increase regresses."""
    if golden is None or new is None:
        return Verdict.NO_GOLDEN, None
    ratio = new / golden if golden else None
    if new > golden:
        return Verdict.REGRESSION, ratio
    return (Verdict.IMPROVEMENT if new < golden else Verdict.PASS), ratio


def size_verdict(new: int | None, golden: int | None, size_tolerance: float,
                 measured: int | None = None) -> tuple[str, float | None]:
    """`golden` is a ceiling (blessed sizes are rounded up, sharktank's are round
    numbers); an improvement is judged against the size measured before rounding, so
    it is only known for goldens that keep it."""
    if golden is None or new is None:
        return Verdict.NO_GOLDEN, None
    ratio = new / golden if golden else None
    if new > golden * size_tolerance:
        return Verdict.REGRESSION, ratio
    if measured is not None and new * size_tolerance < measured:
        return Verdict.IMPROVEMENT, ratio
    return Verdict.PASS, ratio


def rules(golden: GoldenRef, tolerance: float, size_tolerance: float,
          p_threshold: float) -> dict:
    """Which rule judges each aspect against this golden, named with its owner."""
    if several_runs(golden):
        test = (f"one-sided t test of this run's median against the {len(golden.run_medians_ms)}"
                " golden runs' medians (log scale, their prediction interval)")
    elif golden.invocation_medians_ms and len(golden.invocation_medians_ms) > 1:
        test = "exact one-sided Mann-Whitney test of the invocation medians"
    else:
        test = "exact Wilcoxon signed-rank test of the invocation medians against it"
    time = (f"benchflow: regression when median / golden > x{tolerance:g} and the {test} "
            f"gives p < {p_threshold:g}")
    if golden.origin == "sharktank":
        return {"time_rule": time + " (sharktank's own: one invocation's mean <= "
                                    f"golden_time_ms x {tolerance:g}, retried)",
                "dispatch_rule": "sharktank: dispatch count <= golden_dispatch",
                "size_rule": ("sharktank: binary size <= golden_size" if size_tolerance == 1
                              else f"sharktank: binary size <= golden_size x "
                                   f"{size_tolerance:g}")}
    return {"time_rule": time, "dispatch_rule": "benchflow: dispatch count <= golden",
            "size_rule": f"benchflow: binary size <= golden x {size_tolerance:g}"}


# A skipped case (a benchmark file this machine lacks the device, chip or files for) did
# not run by design: nothing to judge, nothing regressed. (An unsupported case that has a
# golden time once ran, so it stays judged as a failure.)
NOT_RUN = (Status.SKIPPED,)
_UNJUDGED = {"verdict": Verdict.NO_GOLDEN, "dispatch_verdict": Verdict.NO_GOLDEN,
             "size_verdict": Verdict.NO_GOLDEN}


def judge(case: dict, golden: GoldenRef | None, settings: Settings,
          drift: common.Drift | None = None) -> dict:
    """The `golden` section of a case record (the schema's golden properties) for a case
    dict; records.case.section("golden", ...) completes it. drift: the common drift of
    the case's run, taken out of its time (time_verdict)."""
    if golden is None:
        return {**_UNJUDGED, "reason": "no golden for this case"}
    if case.get("status") in NOT_RUN:
        return {**_UNJUDGED, "source": golden.source,
                "reason": f"case {case['status']}: not judged ({case.get('error')})"}
    tolerance = golden.tolerance or settings.tolerance
    size_tolerance = (golden.size_tolerance if golden.size_tolerance is not None
                      else settings.size_tolerance)
    out: dict = {"source": golden.source, "tolerance": tolerance,
                 "value_ms": golden.median_ms, "dispatch_golden": golden.dispatch_count,
                 "size_golden_bytes": golden.binary_bytes,
                 "size_tolerance": size_tolerance,
                 **rules(golden, tolerance, size_tolerance, settings.p_value)}
    comp = case.get("compile") or {}
    out["dispatch_verdict"], out["dispatch_ratio"] = count_verdict(
        comp.get("dispatch_count"), golden.dispatch_count)
    out["size_verdict"], out["size_ratio"] = size_verdict(
        comp.get("binary_bytes"), golden.binary_bytes, size_tolerance,
        golden.binary_bytes_measured)
    timing = case.get("timing")
    if case.get("status") != Status.OK or not timing:
        # A case that ran before (it has a golden) and now fails is the worst regression;
        # a gate that passed it would hide a crash behind a missing number.
        has = golden.median_ms is not None
        out.update(verdict=Verdict.REGRESSION if has else Verdict.NO_GOLDEN, ratio=None,
                   p_value=None,
                   reason=f"case {status_at(case)}: "
                          f"{'the golden has a time' if has else 'no golden time'}")
        return out
    tv = time_verdict(timing["invocation_medians_ms"], bool(timing.get("noisy")), golden,
                      tolerance, settings.p_value, drift)
    if drift is not None and not several_runs(golden):
        out["drift"] = drift.to_dict()
    # Against a benchmark file's threshold (another machine's number, sharktank's
    # rule) a disturbed improvement stands: load did not make the code slower than it.
    if timing.get("disturbed") and (tv.verdict == Verdict.REGRESSION or (
            tv.verdict == Verdict.IMPROVEMENT and golden.origin != "sharktank")):
        tv = _disturbed(tv, timing, golden, tolerance, settings.p_value, drift)
    out.update(verdict=tv.verdict, ratio=tv.ratio, p_value=tv.p_value, test=tv.test,
               reason=tv.reason)
    return out


def load_reach(timing: dict, drift: common.Drift | None, levelled: bool
               ) -> tuple[float | None, list[str]]:
    """How far outside load can move a disturbed case, as a factor >= 1 (a ratio within
    [1/reach, reach] of what the code would give is the load's to explain), from what
    this run measured, and the figures it came from; None when the run measured
    neither:
    - the case's own: the median of its disturbed invocations (kept, and retaken) over
      the median of its clean kept ones (outside share at most the threshold). That is
      what the load did to this very case in this run;
    - the run's: its group's common level against the goldens (stats/drift.py) and
      `OUTLIER_Z` of the cases' spread around it: how far the load moved the other
      cases measured beside it. Where the case's ratio is already taken to that level
      (`levelled`), only the spread is left to the load.
    The larger of the two. A ratio past reach x tolerance that the case's test still
    finds significant once its medians are divided by reach is more than this run's
    load did anywhere: the code's (a x5 slowdown with the run's cases at their level)."""
    found, said = [], []
    d = timing.get("disturbance") or {}
    values, shares = timing.get("invocation_medians_ms") or [], d.get("outside_share") or []
    threshold = d.get("threshold")
    if threshold is not None and len(shares) == len(values):
        bad = [v for v, s in zip(values, shares, strict=True) if s is not None and s > threshold]
        clean = [v for v, s in zip(values, shares, strict=True)
                 if s is not None and s <= threshold]
        bad += [v for v in d.get("retaken_ms") or [] if v and v > 0]
        if bad and clean and statistics.median(clean) > 0 and statistics.median(bad) > 0:
            own = statistics.median(bad) / statistics.median(clean)
            found.append(max(own, 1 / own))
            said.append(f"its {len(bad)} disturbed invocation(s) x{own:.3f} of its "
                        f"{len(clean)} clean one(s)")
    if drift is not None:
        moved = 0.0 if levelled else abs(math.log(drift.factor))
        run = math.exp(moved + common.OUTLIER_Z * drift.spread)
        found.append(run)
        said.append(f"the run's {drift.cases} {drift.group} cases within x{run:.3f}"
                    + ("" if levelled else f" (level x{drift.factor:.3f})"))
    return (max(found) if found else None), said


def _disturbed(tv: TimeVerdict, timing: dict, golden: GoldenRef, tolerance: float,
               p_threshold: float, drift: common.Drift | None) -> TimeVerdict:
    """A change measured while outside load kept disturbing the case's invocations (the
    protocol retook them and they stayed disturbed: timing.disturbed) is the load's as
    much as the code's, as far as the load reaches (load_reach): within that,
    inconclusive, never a regression nor an improvement. Under a CPU hog for the first
    minute of a rerun, unchanged cases came out x1.2 to x1.5 "slower", and torch's 1024
    cases x0.78 "faster" (their worker settled at its other allocator level: DESIGN
    "Process variance"); `check` measures an inconclusive IREE case again within its
    budget. Beyond it (the medians divided by the reach still judged the same way), the
    verdict stands: no slowdown, however large, would fail a gate on a machine where
    every run is disturbed otherwise."""
    why = " ".join(str((timing.get("disturbance") or {}).get("reason")
                       or "outside load").split())
    levelled = drift is not None and not several_runs(golden)
    reach, said = load_reach(timing, drift, levelled)
    if reach is not None:
        shift = reach if tv.verdict == Verdict.REGRESSION else 1 / reach
        scale = shift * (drift.factor if levelled else 1.0)
        beyond = time_verdict([m / scale for m in timing["invocation_medians_ms"]],
                              bool(timing.get("noisy")), golden, tolerance, p_threshold)
        measured = f"the load this run measured reaches x{reach:.3f} ({'; '.join(said)})"
        if beyond.verdict == tv.verdict:
            return replace(tv, reason=f"{tv.reason}; measured under outside load ({why}), "
                                      f"and beyond what it can explain: {measured}, and "
                                      f"divided by that the case is still {beyond.reason}")
        return TimeVerdict(Verdict.INCONCLUSIVE, tv.ratio, tv.p_value, tv.test,
                           f"would be {tv.verdict} but measured under outside load ({why}) "
                           f"and within its reach: {measured}; measure again on a quiet "
                           f"machine: {tv.reason}")
    return TimeVerdict(Verdict.INCONCLUSIVE, tv.ratio, tv.p_value, tv.test,
                       f"would be {tv.verdict} but measured under outside load ({why}), "
                       f"and this run measured nothing that bounds how far the load "
                       f"reaches (no clean invocation to set its disturbed ones against, "
                       f"too few cases for the run's level): measure again on a quiet "
                       f"machine: {tv.reason}")


def regressed_aspects(golden: dict) -> list[str]:
    """Which of time, dispatch and size regressed in a case's `golden` section."""
    names = (("verdict", "time"), ("dispatch_verdict", "dispatch"), ("size_verdict", "size"))
    return [label for key, label in names if golden.get(key) == Verdict.REGRESSION]
