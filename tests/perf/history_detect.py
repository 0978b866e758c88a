"""Change-point detection across runs (issue 26): not a test, a benchmark whose figures
go in the closing note. Run: `.venv/bin/python tests/perf/history_detect.py`.

The noise model is measured, not assumed: from real reports of the default suite
(--reports, default /tmp/*/results/report.json), for each case id present in at least 3
of them: the run-to-run spread of timing.median_ms (sd of its log over the quiet runs)
and the within-run spread of timing.invocation_medians_ms (sd of their log), the medians
of those over cases; runs more than max(5 robust sd, 10 %) off the case's median are
"disturbed" (a loaded machine): their share, how far off they were (log ratios,
resampled as they are: the heavy tail) and their own within-run spread. Printed first.

  (a) false change points on A/A series: --series x --runs nightly runs of flat series
      at that noise, judged with the schema's defaults; change points per 100
      series-years. Goal <= 1.
  (b) detection delay of a 5 % step (slower) after --before runs: runs after the step
      until detect, on the growing series, finds a regression within +-1 run of it;
      median and 90th percentile over --delay-series series (not found within
      --max-after runs counts as more than that).
  (c) seconds of history.detect.detect_series over all (a)'s series, in-process from
      series dicts (the lead times it through the store and the CLI). Goal <= 60 s.
Each for three noise models: "quiet" (no disturbed runs), "measured-marked" (the
disturbed runs at their measured share, of which the share the protocol itself marked
timing.disturbed is marked, and left out by detect as it leaves such runs out), and
"measured" (the same runs, none marked: the worst case).
"""

from __future__ import annotations

import argparse
import glob
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from workflow.history.detect import detect_series  # noqa: E402
from workflow.suite.defaults import history_settings  # noqa: E402

DAY = 86_400
START = 1_735_689_600  # 2025-01-01T00:00:00Z
MIN_REPORTS = 3
DISTURBED_SDS, DISTURBED_MIN = 5.0, np.log(1.10)
GOALS = {"false_per_100_series_years": 1.0, "detect_s": 60.0}


def _timings(paths: list[str]) -> dict[str, list[dict]]:
    by_case: dict[str, list[dict]] = {}
    for p in paths:
        for case in json.loads(Path(p).read_text())["cases"]:
            t = case.get("timing") or {}
            if t.get("median_ms") and len(t.get("invocation_medians_ms") or []) >= 2:
                by_case.setdefault(case["id"], []).append(t)
    return {k: v for k, v in by_case.items() if len(v) >= MIN_REPORTS}


def noise_model(paths: list[str]) -> dict:
    """The default suite's noise, from its reports (see the module's docstring)."""
    cases = _timings(paths)
    if not cases:
        raise SystemExit(f"no case in {MIN_REPORTS}+ of the reports {paths}")
    run_sd, within_sd, devs, within_disturbed, counts, flagged = [], [], [], [], [], []
    quiet = disturbed = 0
    for timings in cases.values():
        logs = np.log([t["median_ms"] for t in timings])
        dev = logs - np.median(logs)
        mad = 1.4826 * np.median(np.abs(dev))
        off = np.abs(dev) > max(DISTURBED_SDS * mad, DISTURBED_MIN)
        run_sd.append(float(np.std(logs[~off], ddof=1)))
        spreads = [float(np.std(np.log(t["invocation_medians_ms"]), ddof=1)) for t in timings]
        within_sd.append(statistics.median(s for s, o in zip(spreads, off, strict=True) if not o))
        within_disturbed += [s for s, o in zip(spreads, off, strict=True) if o]
        devs += [float(d) for d in dev[off]]
        flagged += [bool(t.get("disturbed")) for t, o in zip(timings, off, strict=True) if o]
        counts += [len(t["invocation_medians_ms"]) for t in timings]
        quiet, disturbed = quiet + int((~off).sum()), disturbed + int(off.sum())
    return {"cases": len(cases), "reports": len(paths),
            "run_sd": statistics.median(run_sd), "within_sd": statistics.median(within_sd),
            "invocations": int(statistics.median(counts)),
            "disturbed_fraction": disturbed / (quiet + disturbed),
            "disturbed_log_ratios": devs,
            "disturbed_within_sd": statistics.median(within_disturbed) if devs else 0.0,
            # Of those runs, the share the protocol itself marked timing.disturbed (its
            # check of outside CPU load during the kept invocations): history/detect
            # leaves those out. The rest are unmarked outliers (and real changes: a
            # case id whose suite changed between these reports looks the same here).
            "flagged_fraction": sum(flagged) / len(flagged) if flagged else 0.0}


def run_values(rng, model: dict, n_runs: int, step_at: int | None = None,
               factor: float = 1.0, marks: list | None = None) -> list[list[float]]:
    """One series' runs: each run's level (run-to-run noise, x factor from step_at on,
    x a resampled disturbance with the disturbed fraction), then its invocations."""
    k = model["invocations"]
    level = np.exp(model["run_sd"] * rng.standard_normal(n_runs))
    if step_at is not None:
        level[step_at:] *= factor
    within = np.full(n_runs, model["within_sd"])
    hit = rng.random(n_runs) < model["disturbed_fraction"]
    if hit.any():
        level[hit] *= np.exp(rng.choice(model["disturbed_log_ratios"], hit.sum()))
        within[hit] = model["disturbed_within_sd"]
    if marks is not None:  # which runs the protocol marked disturbed
        marks[:] = (hit & (rng.random(n_runs) < model.get("flagged_fraction", 0.0))).tolist()
    values = level[:, None] * np.exp(within[:, None] * rng.standard_normal((n_runs, k)))
    return values.tolist()


def as_series(i: int, values: list[list[float]], marks: list | None = None) -> dict:
    """history/query.py's shape, one run a night."""
    points = [{"run_id": f"{i:08x}{r:08x}", "timestamp": START + r * DAY,
               "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(START + r * DAY)),
               "head_sha": f"{r:040x}", "values": v, "value": float(np.median(v)),
               "clean": not (marks and marks[r])}
              for r, v in enumerate(values)]
    return {"id": f"synthetic/{i:05d} :: latency median (ms)",
            "case_id": f"synthetic/{i:05d}", "metric": "latency median (ms)",
            "unit": "ms", "direction": "lower", "points": points}


def false_change_points(model: dict, n_series: int, n_runs: int, settings,
                        seed: int) -> dict:
    """(a) and (c): detect_series over n_series flat series."""
    rng = np.random.default_rng(seed)
    series = []
    for i in range(n_series):
        marks: list = []
        series.append(as_series(i, run_values(rng, model, n_runs, marks=marks), marks))
    t = time.perf_counter()
    result = detect_series(series, settings)
    seconds = time.perf_counter() - t
    n = len(result["change_points"])
    return {"change_points": n, "per_100_series_years": 100 * n / (n_series * n_runs / 365),
            "series_flagged": sum(bool(s["change_points"]) for s in result["series"]),
            "detect_s": seconds}


def delay(model: dict, settings, *, n_series: int, before: int, max_after: int,
          step: float, seed: int) -> dict:
    """(b): runs after the step until it is found within +-1 run, per series."""
    rng = np.random.default_rng(seed)
    delays = []
    for _ in range(n_series):
        marks: list = []
        values = run_values(rng, model, before + max_after, before, step, marks=marks)
        found = None
        for m in range(1, max_after + 1):
            s = as_series(0, values[:before + m], marks)
            cps = detect_series([s], settings)["change_points"]
            if any(abs(c["index"] - before) <= 1 and c["kind"] == "regression" for c in cps):
                found = m
                break
        delays.append(found if found is not None else float("inf"))
    arr = np.array(delays)
    # inverted_cdf: an order statistic, not an interpolation (inf - inf is nan)
    return {"median": float(np.quantile(arr, 0.5, method="inverted_cdf")),
            "p90": float(np.quantile(arr, 0.9, method="inverted_cdf")),
            "not_found": int(np.isinf(arr).sum()), "series": n_series}


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    ap.add_argument("--reports", nargs="*", default=sorted(glob.glob(
        "/tmp/*/results/report.json")), help="reports of the default suite")
    ap.add_argument("--series", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=365)
    ap.add_argument("--delay-series", type=int, default=200)
    ap.add_argument("--before", type=int, default=100)
    ap.add_argument("--max-after", type=int, default=60)
    ap.add_argument("--step", type=float, default=1.05)
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                    help="history settings other than the schema's defaults")
    ap.add_argument("--models", nargs="*", default=["quiet", "measured-marked", "measured"])
    args = ap.parse_args()
    overrides = {k: type(getattr(history_settings(), k))(v)
                 for k, v in (s.split("=", 1) for s in args.set)}
    settings = replace(history_settings(), **overrides)
    measured = noise_model(args.reports)
    print("noise model:", json.dumps({k: (round(v, 4) if isinstance(v, float) else v)
                                      for k, v in measured.items()
                                      if k != "disturbed_log_ratios"}))
    ratios = np.exp(measured["disturbed_log_ratios"])
    if ratios.size:
        p10, p50, p90 = np.quantile(ratios, [0.1, 0.5, 0.9])
        print(f"  disturbed runs' ratio to the case median: p10 {p10:.2f}, "
              f"median {p50:.2f}, p90 {p90:.2f}")
    print("settings:", settings)
    models = {"quiet": {**measured, "disturbed_fraction": 0.0},
              "measured": {**measured, "flagged_fraction": 0.0},
              "measured-marked": measured}
    for name in args.models:
        model = models[name]
        a = false_change_points(model, args.series, args.runs, settings, args.seed)
        print(f"[{name}] (a) {a['change_points']} false change points in {args.series} "
              f"series x {args.runs} runs ({a['series_flagged']} series): "
              f"{a['per_100_series_years']:.2f} per 100 series-years "
              f"(goal <= {GOALS['false_per_100_series_years']})")
        print(f"[{name}] (c) detect_series over {args.series} series x {args.runs} runs: "
              f"{a['detect_s']:.1f} s (goal <= {GOALS['detect_s']:.0f} s)")
        b = delay(model, settings, n_series=args.delay_series, before=args.before,
                  max_after=args.max_after, step=args.step, seed=args.seed + 1)
        print(f"[{name}] (b) delay of a {100 * (args.step - 1):.0f} % step after "
              f"{args.before} runs: median {b['median']} runs, p90 {b['p90']} runs, "
              f"not found within {args.max_after}: {b['not_found']} of {b['series']}",
              flush=True)


if __name__ == "__main__":
    main()
