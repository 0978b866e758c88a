"""A rolling baseline (issue 43): a case judged against the last N stored runs of the same
case at the same measurement configuration, instead of against one blessing
(`benchflow check --against-history N`). Pure: the points come from
history/baseline.py, the verdict is stats/verdict.judge's and the gate's sorting
regression/gate.assess's.

One blessing carries one run's level, and reruns of unchanged code spread 5-6 % between
runs here; pooling the invocation medians of several runs puts that spread into the
sample the test compares against (as IREE's CI moved from one baseline commit to an
average of past runs, iree-org/iree#13377). The golden is a GoldenRef whose
invocation_medians_ms are the pooled invocation medians of the chosen runs and whose
median_ms is their median; its source says where it came from:
`history: last 5 runs at device=local-sync,threads=1,invocation_kind=process`.

Which runs: those of the case at exactly its measurement configuration (the same
records/measurement_config.as_text string: the history's series key), measured before
it, never a run that holds one of the report's own measurements (the report is usually
ingested already), never a bisection step (query.BISECT_RUN: a past revision measured
today). A run the protocol found disturbed by outside load is used, its wider spread in
the pool, as `history detect` uses it: on a machine other work shares every run is
disturbed, and leaving them out would judge nothing there. The newest N of them are
used; with fewer than MIN_RUNS (2) the case could not be judged (never counted as ok),
naming how many runs there are and at which other configurations the history holds runs
of it."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace

from workflow.records import measurement_config
from workflow.records.case import section
from workflow.regression import gate
from workflow.stats import verdict
from workflow.stats.enums import Status

# Fewer stored runs than this at the case's configuration: not judged. One run is one
# blessing again, the level of one run, which this mode is there to avoid.
MIN_RUNS = 2
# NotJudged.kind of a case with too few runs: could not judge, never counted as ok.
TOO_FEW = "too-few-runs"


def _parse(text: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in text.split(",") if "=" in part)


def compatible(case_config: str, stored: str, exact: bool) -> bool:
    """Whether a stored run's configuration is the case's: the same text; for a case that
    measured no time (`exact` False: a failed case, whose record says no invocation
    kind), every key its record holds has the stored value."""
    if exact:
        return stored == case_config
    have, other = _parse(case_config), _parse(stored)
    return bool(stored) and all(other.get(k) == v for k, v in have.items())


@dataclass
class Baseline:
    """The runs a case is judged against, and what was left out."""

    case_id: str
    config: str                       # the case's measurement configuration (as_text)
    asked: int                        # N of --against-history
    used: list[dict] = field(default_factory=list)     # history/baseline.points, oldest first
    others: dict[str, int] = field(default_factory=dict)  # {other config: usable runs}
    left_out: dict[str, int] = field(default_factory=dict)  # at its configuration, why

    @property
    def source(self) -> str:
        n = len(self.used)
        label = measurement_config.label(self.config)
        return f"history: last {n} run{'s' if n != 1 else ''} at {label}"

    @property
    def enough(self) -> bool:
        return len(self.used) >= MIN_RUNS

    @property
    def short(self) -> bool:
        """Judged, on fewer runs than asked for."""
        return self.enough and len(self.used) < self.asked

    def ref(self) -> verdict.GoldenRef | None:
        if not self.enough:
            return None
        pooled = tuple(v for p in self.used for v in p["values"])
        # Judged run against runs (stats/verdict.run_level_verdict): the stored runs'
        # spread is the noise between runs, which pooled invocations would hide.
        return verdict.GoldenRef(source=self.source, median_ms=statistics.median(pooled),
                                 invocation_medians_ms=pooled,
                                 run_medians_ms=tuple(statistics.median(p["values"])
                                                      for p in self.used))

    def too_few(self) -> str:
        """Why it could not be judged, naming the runs held at every configuration."""
        n = len(self.used)
        label = measurement_config.label(self.config)
        parts = [f"{n} stored run{'s' if n != 1 else ''} at {label}"]
        parts += [f"{count} at {measurement_config.label(c)}"
                  for c, count in sorted(self.others.items(), key=lambda kv: (-kv[1], kv[0]))]
        left = ", ".join(f"{count} {why}" for why, count in self.left_out.items() if count)
        return (f"history: {'; '.join(parts)}; at least {MIN_RUNS} runs at its own "
                f"measurement configuration are needed to judge it"
                + (f" (left out at its configuration: {left})" if left else ""))

    def line(self) -> str:
        """The baseline in one line, under a verdict: its runs' span and what it pooled."""
        pooled = [v for p in self.used for v in p["values"]]
        span = (self.used[0]["time"] if len(self.used) == 1
                else f"{self.used[0]['time']} to {self.used[-1]['time']}")
        fewer = (f" ({len(self.used)} of the {self.asked} asked for: no more stored)"
                 if self.short else "")
        disturbed = sum(not p["clean"] for p in self.used)
        noted = f" ({disturbed} disturbed by outside load)" if disturbed else ""
        return (f"against {self.source}{fewer}: median {statistics.median(pooled):.4g} ms of "
                f"{len(pooled)} invocation medians, runs from {span}{noted}")


# Why a stored run of the case at its configuration was left out, in the order checked.
OWN, NEWER, BISECT = ("holding this report's measurements", "newer than it",
                      "bisection steps")


def choose(case: dict, points: list[dict], asked: int, measured_at: int,
           own_runs: set[str]) -> Baseline:
    """The newest `asked` usable runs of the case at its configuration (module
    docstring); `points`: history/baseline.points of the case, oldest first;
    `measured_at`: when the report measured it (unix seconds); `own_runs`: the runs that
    hold any of the report's measurements."""
    config = measurement_config.as_text(measurement_config.of_case(case))
    exact = case.get("status") == Status.OK and bool(case.get("timing"))
    out = Baseline(case["id"], config, asked, left_out=dict.fromkeys((OWN, NEWER, BISECT), 0))
    usable = []
    for p in points:
        why = (OWN if p["run_id"] in own_runs else NEWER if p["timestamp"] > measured_at
               else BISECT if p["bisect"] else None)
        if compatible(config, p["config"], exact):
            if why:
                out.left_out[why] += 1
            else:
                usable.append(p)
        elif why is None:
            out.others[p["config"]] = out.others.get(p["config"], 0) + 1
    out.used = usable[-asked:]
    return out


def golden(case: dict, base: Baseline, settings: verdict.Settings) -> dict:
    """The case's `golden` section judged against its baseline (stats/verdict.judge).
    Too few runs: no golden, the reason saying why (settle() makes it could-not-judge).
    A compile-only case measured no time: the history holds times, so nothing to judge
    it on here (its dispatch count and size are judged against goldens)."""
    if case.get("status") in verdict.NOT_RUN:
        return section("golden", verdict.judge(case, None, settings))
    if case.get("status") == Status.COMPILE_ONLY:
        return section("golden", {**verdict.judge(case, None, settings),
                                  "reason": "compile-only: no time measured here, and the "
                                            "history baseline judges time only"})
    ref = base.ref()
    if ref is None:
        return section("golden", {**verdict.judge(case, None, settings),
                                  "reason": base.too_few()})
    return section("golden", verdict.judge(case, ref, settings))


def settle(a: gate.Assessment, report: dict, baselines: dict[str, Baseline]) -> gate.Assessment:
    """The assessment with every case that had too few runs could-not-judge, whatever
    --allow-inconclusive says: it is no verdict of noise but a baseline that is not
    there. A case that did not run (skipped) or measured no time stays as assess sorted
    it."""
    needs = {c["id"] for c in report["cases"]
             if c.get("status") not in (*verdict.NOT_RUN, Status.COMPILE_ONLY)
             and not baselines[c["id"]].enough}
    if not needs:
        return a
    found = {nj.case_id for nj in a.unjudged + a.not_judged if nj.case_id in needs}
    unjudged = [nj for nj in a.unjudged if nj.case_id not in needs and nj.case_id != "(report)"]
    not_judged = [nj for nj in a.not_judged if nj.case_id not in needs]
    unjudged += [gate.NotJudged(c["id"], TOO_FEW, baselines[c["id"]].too_few())
                 for c in report["cases"] if c["id"] in found]
    out = replace(a, unjudged=unjudged, not_judged=not_judged)
    if not out.unjudged and not out.judged and not out.regressed:
        out.unjudged.append(gate.NotJudged("(report)", gate.NO_GOLDEN, "no case to judge"))
    return out
