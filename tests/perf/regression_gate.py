"""Benchmark (not a test): how often the regression gate is wrong on this machine.

Runs a suite of 25 small linear / ln_linear_gelu shapes on 2 SKUs (50 cases) three
times with the same code (fresh processes each time), then once with slower code:

  (a) false regressions: run 2 judged against goldens blessed from run 1 (the
      protocol as stated; plus runs 3 vs 1 and 3 vs 2 judged the same way offline, 150
      comparisons), and run 3 against goldens pooled from runs 1 and 2 (`bless
      --report R1 R2`), which also hold the drift between runs. Goal: at most 1 %.
  (b) detection: the same models compiled for a lesser ISA than the host's, AVX2
      (`haswell` instead of AVX-512: a moderate slowdown) on the local-task SKU and
      `generic` x86-64 (a large one) on the local-sync SKU, judged against the pooled
      goldens (as CI would) and against run 3 (measured just before: the method's
      power without the machine's drift).
  (c) the same data judged by sharktank's rule, one run's mean <= golden x 1.1 (the
      golden itself one run's mean), for comparison.

    python tests/perf/regression_gate.py [--workdir DIR] [--keep]

About 15 minutes on 2 idle cores, more on a loaded machine. The figures depend on
the load: they are what this machine measured, printed at the end.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from workflow.records.storage import read_json  # noqa: E402
from workflow.regression import goldens  # noqa: E402
from workflow.stats.verdict import GoldenRef, judge  # noqa: E402
from workflow.suite.defaults import gate_settings  # noqa: E402

TOLERANCE = 1.10
MEASUREMENT = {"invocations": 5, "repetitions": 5, "min_warmup_time_s": 0.1,
               "min_time_s": 0.02}
LINEAR = [[m, k, n] for m, k, n in [
    (16, 64, 64), (16, 128, 128), (32, 64, 128), (32, 128, 64), (32, 256, 256),
    (64, 64, 64), (64, 128, 128), (64, 256, 128), (64, 256, 256), (96, 128, 128),
    (128, 64, 64), (128, 128, 256), (128, 256, 256)]]
LN_LINEAR = [[m, k, n] for m, k, n in [
    (16, 64, 64), (16, 128, 256), (32, 64, 64), (32, 128, 128), (32, 256, 128),
    (64, 64, 128), (64, 128, 64), (64, 128, 256), (96, 64, 64), (128, 64, 128),
    (128, 128, 128), (128, 256, 64)]]


def suite(task2_cpu: str = "host", sync_cpu: str = "host") -> dict:
    def sku(device, cpu):
        return {"iree": {"target_cpu": cpu, "device": device,
                         "task_topology_max_group_count": 2},
                "measurement": dict(MEASUREMENT)}

    return {"suite_name": "regression-gate", "backends": ["iree"],
            "skus": {"task2": sku("local-task", task2_cpu), "sync": sku("local-sync", sync_cpu)},
            "workloads": [{"model": "linear", "shapes": LINEAR},
                          {"model": "ln_linear_gelu", "shapes": LN_LINEAR}]}


def snakemake(workdir: Path, config: dict, *args: str) -> float:
    path = workdir / "suite.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory",
           str(workdir), "--cores", "2", "results/report.json", "--configfile", str(path),
           *args, "--quiet", "all"]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"snakemake failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return time.monotonic() - t0


def timings(workdir: Path) -> dict[str, dict]:
    """Each case's run-stage timing (it has every invocation's mean, which the case
    record does not keep): case id -> timing."""
    out = {}
    for path in (workdir / "results" / "run").glob("*/iree/*/baseline/timing.json"):
        data = read_json(path)
        if data["status"] == "ok":
            sku, _, workload = path.parts[-5:-2]
            out[f"{sku}/iree/{workload}/baseline"] = data["timing"]
    return out


def gate_counts(report: dict) -> dict[str, int]:
    """The time verdicts the pipeline's case steps gave (against the blessed goldens)."""
    counts: dict[str, int] = {}
    for case in report["cases"]:
        v = case["golden"]["verdict"]
        counts[v] = counts.get(v, 0) + 1
    return counts


def medians_of(*reports: dict) -> dict[str, list[float]]:
    """Case id -> invocation medians pooled over reports (what a golden holds)."""
    out: dict[str, list[float]] = {}
    for report in reports:
        for c in report["cases"]:
            if c["timing"]:
                out.setdefault(c["id"], []).extend(c["timing"]["invocation_medians_ms"])
    return out


def judged(report: dict, golden: dict[str, list[float]], ids) -> dict[str, int]:
    """Time verdicts of a report's cases against golden medians (the same pure functions
    as the case step)."""
    counts: dict[str, int] = {}
    for case in report["cases"]:
        if case["id"] in ids:
            g = GoldenRef(source="offline", median_ms=statistics.median(golden[case["id"]]),
                          invocation_medians_ms=tuple(golden[case["id"]]))
            v = judge(case, g, gate_settings({"tolerance": TOLERANCE}))["verdict"]
            counts[v] = counts.get(v, 0) + 1
    return counts


def add(total: dict[str, int], counts: dict[str, int]) -> dict[str, int]:
    return {k: total.get(k, 0) + counts.get(k, 0) for k in {*total, *counts}}


def verdict_line(counts: dict[str, int], n: int, hit: str) -> str:
    return (f"{hit} {pct(counts.get('regression', 0), n)}, inconclusive "
            f"{counts.get('inconclusive', 0)}, pass {counts.get('pass', 0)}, improvement "
            f"{counts.get('improvement', 0)}")


def single_run(golden: dict[str, dict], new: dict[str, dict], ids) -> dict:
    """sharktank's check, new mean <= golden mean x 1.1, on single runs: the first
    invocation of each (one CI run), over every pair of invocations (the rate of one
    run against one golden), and flagged only when all 5 new runs exceed (retries)."""
    first = pairs = pair_hits = all_hits = 0
    for cid in ids:
        # An invocation without a mean aggregate has null (never its median): left out.
        g = [x for x in golden[cid]["invocation_means_ms"] if x is not None]
        n = [x for x in new[cid]["invocation_means_ms"] if x is not None]
        if not g or not n:
            continue
        first += n[0] > g[0] * TOLERANCE
        pairs += len(g) * len(n)
        pair_hits += sum(x > y * TOLERANCE for x in n for y in g)
        all_hits += all(x > g[0] * TOLERANCE for x in n)
    return {"first": first, "pair_rate": pair_hits / pairs, "all_retries": all_hits}


def ratios(golden: dict[str, list[float]], new: dict[str, list[float]], ids) -> list[float]:
    return sorted(statistics.median(new[c]) / statistics.median(golden[c]) for c in ids)


def pct(k: int, n: int) -> str:
    return f"{k}/{n} ({k / n:.1%})"


def spread(r: list[float]) -> str:
    return f"x{statistics.median(r):.2f} ({r[0]:.2f}..{r[-1]:.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="regression-gate-"))
    workdir.mkdir(parents=True, exist_ok=True)
    gdir = workdir / "goldens"

    def emit(*lines: str) -> None:
        print("\n".join(lines), flush=True)

    try:
        # Run 1; its figures become the goldens of run 2.
        t1 = snakemake(workdir, suite())
        r1, m1 = read_json(workdir / "results/report.json"), timings(workdir)
        ids = sorted(c["id"] for c in r1["cases"] if c["status"] == "ok")
        n = len(ids)
        goldens.write_plan(goldens.plan_bless(r1, "run-1", gdir))
        t2 = snakemake(workdir, suite(), "--forcerun", "iree_batch")
        r2, m2 = read_json(workdir / "results/report.json"), timings(workdir)
        # Run 3 against goldens pooled from runs 1 and 2.
        goldens.write_plan(goldens.plan_bless(r2, "run-2", gdir, earlier=[r1]))
        t3 = snakemake(workdir, suite(), "--forcerun", "iree_batch")
        r3, m3 = read_json(workdir / "results/report.json"), timings(workdir)
        noisy = [sum(c["timing"]["noisy"] for c in r["cases"] if c["timing"])
                 for r in (r1, r2, r3)]
        emit(f"suite: {n} cases ok of {len(r1['cases'])} (25 shapes x 2 SKUs), "
             f"{MEASUREMENT['invocations']} invocations x {MEASUREMENT['repetitions']} "
             f"repetitions, min_time {MEASUREMENT['min_time_s']} s; runs 1-3 took "
             f"{t1:.0f}, {t2:.0f}, {t3:.0f} s; noisy cases per run {noisy}", "")

        pipeline_2 = gate_counts(r2)
        single = add(add(pipeline_2, judged(r3, medians_of(r1), ids)),
                     judged(r3, medians_of(r2), ids))
        pooled = gate_counts(r3)
        aspects = sum(c["golden"]["dispatch_verdict"] == "regression"
                      or c["golden"]["size_verdict"] == "regression"
                      for c in r2["cases"] + r3["cases"])
        pairs = [(m1, m2), (m1, m3), (m2, m3)]
        sr = [single_run(g, x, ids) for g, x in pairs]
        emit(
            "(a) same code; medians of run 2 / run 1 "
            + spread(ratios(medians_of(r1), medians_of(r2), ids))
            + ", run 3 / run 2 " + spread(ratios(medians_of(r2), medians_of(r3), ids)),
            "    gate, run 2 vs goldens of run 1 (the pipeline): false regressions "
            f"{pct(pipeline_2.get('regression', 0), n)}; inconclusive "
            f"{pipeline_2.get('inconclusive', 0)}, false improvements "
            f"{pipeline_2.get('improvement', 0)}",
            "    gate, single-run goldens (2 vs 1, 3 vs 1, 3 vs 2): false regressions "
            f"{pct(single.get('regression', 0), 3 * n)}; inconclusive "
            f"{single.get('inconclusive', 0)}, false improvements {single.get('improvement', 0)}",
            "    gate, run 3 vs goldens pooled from runs 1+2 (the pipeline): false regressions "
            f"{pct(pooled.get('regression', 0), n)}; inconclusive {pooled.get('inconclusive', 0)}"
            f", false improvements {pooled.get('improvement', 0)}; dispatch/size regressions "
            f"{aspects}",
            "(c) single-run rule, same pairs: false regressions "
            f"{pct(sum(x['first'] for x in sr), 3 * n)} (first invocations), per run pair "
            f"{statistics.fmean(x['pair_rate'] for x in sr):.1%}, still flagged after 4 retries "
            f"{pct(sum(x['all_retries'] for x in sr), 3 * n)}", "")

        # (b) Slower code: the same models compiled for lesser ISAs.
        t4 = snakemake(workdir, suite(task2_cpu="haswell", sync_cpu="generic"))
        r4, m4 = read_json(workdir / "results/report.json"), timings(workdir)
        pooled_12 = medians_of(r1, r2)
        lines = [f"(b) slower code ({t4:.0f} s):"]
        for sku, what in (("task2", "haswell (AVX2) instead of host (AVX-512)"),
                          ("sync", "generic x86-64 instead of host")):
            sub = [c for c in ids if c.startswith(sku + "/")]
            r = ratios(medians_of(r3), medians_of(r4), sub)
            vs_pool = judged(r4, pooled_12, sub)
            vs_r3 = judged(r4, medians_of(r3), sub)
            sr_g, sr_3 = single_run(m1, m4, sub), single_run(m3, m4, sub)
            lines += [
                f"  {sku}: {what}: measured slowdown vs run 3 {spread(r)}, "
                f"{sum(x > TOLERANCE for x in r)} of {len(sub)} beyond x{TOLERANCE}",
                "    gate vs pooled goldens (the pipeline): "
                + verdict_line(vs_pool, len(sub), "detected"),
                "    gate vs run 3 (just before):          "
                + verdict_line(vs_r3, len(sub), "detected"),
                f"(c) single-run rule: detected {pct(sr_g['first'], len(sub))} vs run 1, "
                f"{pct(sr_3['first'], len(sub))} vs run 3",
            ]
        pipeline_4 = gate_counts(r4)
        # The offline judgement is the case step's: both must agree.
        assert pipeline_4 == judged(r4, pooled_12, ids), (pipeline_4, judged(r4, pooled_12, ids))
        emit(*lines)
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"work directory: {workdir}")


if __name__ == "__main__":
    main()
