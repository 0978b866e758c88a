"""Benchmark (not a test): numbers that catch a 5 % regression on a noisy machine.

Evidence for the interleaved A/B comparison (workflow/stages/ab.py: rounds of one fresh
invocation of each module in a random order, stopped by the sequential plan of
workflow/stats/sequential.py with the suite's `ab` defaults), on a single-threaded
local-sync SKU with fast invocations (--repetitions x --min-time after --warmup):

  (a) A/A: --aa A/B runs of two identical modules (the same MLIR compiled twice).
      Prints the verdict counts, the false-regression rate (goal: at most 1 %) and the
      median rounds and machine seconds per verdict.
  (b) slowdowns of known size, each of --trials sequential A/B runs:
      - codegen: the same GEMM compiled for the host CPU and for `haswell` (AVX2); which
        one is slower here is measured, and the slower one is the "new" side (on an
        AVX-512 host, single-threaded, haswell is about x2: far beyond x1.2);
      - +5 % / +10 % / +20 %: the GEMM plus an independent small GEMM over the first R
        rows of the input (its own weight), R chosen so that it costs about 5 %, 10 %,
        20 % of the main one (--rows; a second dispatch has a fixed cost too).
      The true ratio of each is measured apart, before the trials, by --calib-rounds
      interleaved rounds (one look, no early stop), and printed. Per scenario: the
      detection rate (verdict == regression) and the median rounds and seconds per
      verdict. Goals: >= 95 % at a true ratio of about 1.2 (applied from x1.15 up),
      >= 80 % at about 1.05 (applied from x1.04 up).
  (c) the same trials judged by two other rules, side by side:
      - sharktank's runner: the new side's single-invocation mean <= golden x 1.1
        passes, a failure retried up to 2 times (the golden_time_ms: the trial's base
        median of invocation medians; the attempts: the new side's first invocations);
      - benchflow's golden gate (workflow.stats.verdict.time_verdict): the first 5
        invocation medians of each side, the base's as the golden (goldens measured
        moments earlier), tolerance 1.10, p 0.05.
      Per rule and scenario: the regression rate (a false alarm in A/A, a detection
      otherwise).

Trials of all scenarios alternate (A/A, codegen, +5 %, +10 %, A/A, ...) so the load of
the machine falls on all alike. At the end a summary table: each goal, the measured
figure, PASS or MISS.

    python tests/perf/ab_evidence.py [--aa 50] [--trials 20] [--quick] [--out FILE.json]

About 25 to 40 minutes with the defaults on 2 shared cores (26 minutes at load 1.1 to
2.5: an A/B verdict of a slowdown took 5 to 7 s, an A/A one 18 s, up to the 48 rounds of
the plan); --quick (2 A/A runs, 1 trial per
scenario, 8 calibration rounds, a 10 s budget per verdict) about 2 minutes: a smoke run
whose rates mean nothing. The figures depend on the load.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from workflow.backends.iree import tools as iree  # noqa: E402
from workflow.stages.ab import interleave, plan_of  # noqa: E402
from workflow.stages.iree import _benchmark, compile_module, export, sku_tool  # noqa: E402
from workflow.stages.plan import load_suite  # noqa: E402
from workflow.stats import sequential  # noqa: E402
from workflow.stats import summary as stats  # noqa: E402
from workflow.stats.enums import Verdict  # noqa: E402
from workflow.stats.verdict import GoldenRef, time_verdict  # noqa: E402

REGRESSION = Verdict.REGRESSION

TOLERANCE = 1.10      # sharktank's golden_time_tolerance_multiplier, the gate's default
P_VALUE = 0.05
RETRIES = 2           # sharktank: a failed check is run again, up to this many times
GATE_INVOCATIONS = 5  # invocations per side the golden gate judges
TIMEOUT_S = 600
MODEL = "ab_extra_gemm"

MODEL_FILE = '''\
"""A GEMM, plus (config extraR, R > 0) an independent GEMM of the first R rows of the
input with its own weight: a slowdown of a size set by R, for tests/perf/ab_evidence.py."""
from workflow.models.common import finish, seeded
from workflow.models.registry import benchmark_model


@benchmark_model(configs=CONFIGS, default_shape=(256, 256, 256), shape_doc="[M, K, N]")
def ab_extra_gemm(config, dtype, layers, shape):
    import torch

    m, k, n = shape
    r = int(config.removeprefix("extra"))
    gen = seeded()

    class ExtraGemm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.main = torch.nn.Linear(k, n, bias=False)
            self.extra = torch.nn.Linear(k, n, bias=False) if r else None

        def forward(self, x):
            y = self.main(x)
            if self.extra is None:
                return y
            return y, self.extra(x[:r])

    return finish(ExtraGemm(), (torch.randn(m, k, generator=gen),), dtype,
                  flops=2.0 * (m + r) * k * n)
'''


def suite_config(shape: list[int], rows: dict[str, int], m: dict) -> dict:
    def sku(cpu: str) -> dict:
        return {"iree": {"target_backend": "llvm-cpu", "target_cpu": cpu,
                         "device": "local-sync"},
                "measurement": dict(m)}

    return {"suite_name": "ab-evidence", "backends": ["iree"],
            "model_modules": ["ab_model.py"],
            "skus": {"sync": sku("host"), "sync-haswell": sku("haswell")},
            "workloads": [{"model": MODEL, "configs": configs_of(rows), "shapes": [shape]}]}


def configs_of(rows: dict[str, int]) -> list[str]:
    return [f"extra{r}" for r in sorted({0, *rows.values()})]


class Module:
    """One compiled module and the iree-benchmark-module command of one invocation."""

    def __init__(self, name: str, argv: list[str], compiled: dict):
        self.name, self.argv, self.compiled = name, argv, compiled


def build(workdir: Path, shape: list[int], rows: dict[str, int], m: dict, log: str
          ) -> tuple[dict[str, Module], dict]:
    """Exports the workloads and compiles the modules: base (host) twice, base for
    haswell, and base + R rows for each entry of `rows` (host)."""
    (workdir / "ab_model.py").write_text(MODEL_FILE.replace("CONFIGS", repr(configs_of(rows))))
    path = workdir / "suite.yaml"
    path.write_text(yaml.safe_dump(suite_config(shape, rows, m), sort_keys=False))
    suite = load_suite([path], {})
    by_rows = {int(w.config.removeprefix("extra")): w for w in suite.workloads.values()}
    wanted = {"base": (0, "sync"), "base-copy": (0, "sync"), "haswell": (0, "sync-haswell"),
              **{name: (r, "sync") for name, r in rows.items()}}
    exported: dict[int, tuple[Path, list[str]]] = {}
    modules = {}
    for name, (r, sku_name) in wanted.items():
        w, sku = by_rows[r], suite.sku(sku_name)
        d = workdir / w.id
        d.mkdir(exist_ok=True)
        if r not in exported:
            res = export(spec=w.export_spec(), timeout=TIMEOUT_S, mlir=str(d / "model.mlirbc"),
                         inputs=str(d / "inputs.npz"), reference=str(d / "reference.npz"),
                         meta=str(d / "export.json"), log=log)
            if not res.ok:
                sys.exit(f"export of {w.id} failed: {res.error}")
            dtypes = [i["dtype"] for i in res.data["inputs"]]
            inputs = iree.write_input_files(str(d / "inputs.npz"), dtypes, d)
            exported[r] = (d / "model.mlirbc", inputs)
        mlir, inputs = exported[r]
        vmfb = workdir / f"{name}.vmfb"
        res = compile_module(mlir=str(mlir), export_meta=str(d / "export.json"), sku=sku,
                             timeout=TIMEOUT_S, vmfb=str(vmfb),
                             meta=str(workdir / f"{name}.compile.json"), log=log)
        if not res.ok:
            sys.exit(f"compile of {name} failed: {res.error}")
        argv = iree.benchmark_argv(sku_tool(sku, "benchmark_tool"), str(vmfb), "main", inputs,
                                   sku, repetitions=m["repetitions"],
                                   warmup_s=m["min_warmup_time_s"],
                                   min_time=f"{m['min_time_s']:g}s")
        modules[name] = Module(name, argv, {
            "workload": w.id, "sku": sku_name, "target_cpu": sku["iree"]["target_cpu"],
            "dispatch_count": res.data["dispatch_count"],
            "binary_bytes": res.data["binary_bytes"], "flags": res.data["flags"]})
    return modules, {"ab": suite.config["ab"], "noisy_cv": suite.sku("sync")["measurement"][
        "noisy_cv"]}


def invocation_mean(run: iree.BenchmarkRun) -> float | None:
    """What sharktank's runner reads of one invocation (as stages/iree.measure records
    it): Google Benchmark's `mean` aggregate, the repetition itself when there is one."""
    return run.aggregates_ms.get("mean", run.repetition_ms[0] if len(run.repetition_ms) == 1
                                 else None)


def ab_run(base: Module, new: Module, plan: sequential.Plan, *, budget_s: float, seed: int,
           log: str) -> dict:
    """One sequential A/B as compare_pair runs it: an untimed call of each module, then
    workflow.stages.ab.interleave; every invocation's BenchmarkRun kept (for the means)."""
    runs: dict[str, list[iree.BenchmarkRun]] = {"base": [], "new": []}

    def side(which: str, mod: Module):
        def call() -> float:
            run = _benchmark(mod.argv, TIMEOUT_S, log)
            runs[which].append(run)
            return run.median_ms
        return call

    t0 = time.monotonic()
    for mod in (base, new):
        _benchmark(mod.argv, TIMEOUT_S, log)
    result = interleave(side("base", base), side("new", new), plan, budget_s=budget_s,
                        seed=seed)
    result["wall_seconds"] = time.monotonic() - t0
    result["base_means_ms"] = [invocation_mean(r) for r in runs["base"]]
    result["new_means_ms"] = [invocation_mean(r) for r in runs["new"]]
    return result


def sharktank_rule(trial: dict) -> dict:
    """sharktank's check on one trial: golden_time_ms = the base's median of invocation
    medians; attempt i passes when the new side's i-th invocation mean <= golden x 1.1;
    a failed attempt is retried up to RETRIES times; flagged when every attempt failed."""
    golden = statistics.median(trial["base_ms"])
    means = [x for x in trial["new_means_ms"] if x is not None][: 1 + RETRIES]
    fails = [x > golden * TOLERANCE for x in means]
    return {"golden_ms": golden, "attempt_means_ms": means, "first_fails": bool(fails[0]),
            "flagged": bool(fails) and all(fails)}


def gate_rule(trial: dict, noisy_cv: float) -> dict:
    """benchflow's golden gate on one trial: the new side's first GATE_INVOCATIONS
    invocation medians against the base side's first ones as the golden."""
    base = trial["base_ms"][:GATE_INVOCATIONS]
    new = trial["new_ms"][:GATE_INVOCATIONS]
    golden = GoldenRef(source="the A/B's base side", median_ms=statistics.median(base),
                       invocation_medians_ms=tuple(base))
    noisy = stats.summarize(new, noisy_cv)["noisy"]
    tv = time_verdict(new, noisy, golden, TOLERANCE, P_VALUE)
    return {"verdict": tv.verdict, "ratio": tv.ratio, "p_value": tv.p_value, "noisy": noisy,
            "flagged": tv.verdict == REGRESSION}


def calibrate(base: Module, new: Module, rounds: int, seed: int, log: str) -> dict:
    """The true ratio new / base: `rounds` interleaved rounds judged at one look only."""
    plan = sequential.Plan(min_rounds=rounds, max_rounds=rounds)
    return ab_run(base, new, plan, budget_s=math.inf, seed=seed, log=log)


def upper_bound(k: int, n: int, level: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound of a rate seen k times in n."""
    from scipy.stats import beta

    return 1.0 if k >= n else float(beta.ppf(level, k + 1, n - k))


def lower_bound(k: int, n: int, level: float = 0.95) -> float:
    """One-sided Clopper-Pearson lower bound of a rate seen k times in n."""
    from scipy.stats import beta

    return 0.0 if k <= 0 else float(beta.ppf(1 - level, k, n - k + 1))


def pct(k: int, n: int) -> str:
    return f"{k}/{n} ({k / n:.0%})" if n else "0/0"


def counts_of(verdicts: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in verdicts:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def fmt(row: list[str]) -> str:
        return "  ".join(f"{str(c):<{w}}" if i == 0 else f"{str(c):>{w}}"
                         for i, (c, w) in enumerate(zip(row, widths, strict=True)))

    return "\n".join([fmt(header), fmt(["-" * w for w in widths]), *map(fmt, rows)])


def target_for(ratio: float) -> tuple[str, float] | None:
    """The detection goal that applies to a true ratio: >= 95 % from about x1.2 (here
    x1.15), >= 80 % from about x1.05 (here x1.04); none below."""
    if ratio >= 1.15:
        return "detection >= 95 % at ~x1.2", 0.95
    if ratio >= 1.04:
        return "detection >= 80 % at ~x1.05", 0.80
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--aa", type=int, default=50, help="A/A runs (default 50)")
    ap.add_argument("--trials", type=int, default=20,
                    help="A/B runs per slowdown scenario (default 20)")
    ap.add_argument("--calib-rounds", type=int, default=100,
                    help="interleaved rounds measuring each true ratio (default 100)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: --aa 2 --trials 1 --calib-rounds 8 --budget-s 10")
    ap.add_argument("--shape", type=int, nargs=3, default=[256, 256, 256],
                    metavar=("M", "K", "N"), help="the main GEMM (default 256 256 256)")
    ap.add_argument("--rows", type=int, nargs=3, default=[10, 24, 48],
                    metavar=("R5", "R10", "R20"),
                    help="extra rows for the ~5 %%, ~10 %% and ~20 %% slowdowns (default "
                         "10 24 48: x1.06, x1.10 and x1.21 measured on a 2-core AMD EPYC "
                         "with AVX-512; 8 rows gave x1.04 there)")
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.02, help="s per repetition")
    ap.add_argument("--warmup", type=float, default=0.05, help="s of warm-up per invocation")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="seconds per A/B verdict (default: the suite's ab.budget_s)")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--out", type=Path, default=None, help="write every raw figure as JSON")
    args = ap.parse_args()
    if args.quick:
        args.aa, args.trials, args.calib_rounds = 2, 1, 8
        args.budget_s = 10 if args.budget_s is None else args.budget_s
    if args.aa < 1 or args.trials < 1:
        ap.error("--aa and --trials must be at least 1")
    if args.calib_rounds < 6:
        ap.error("--calib-rounds must be at least 6 (an interval at 95 % needs them)")
    t_start = time.monotonic()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ab-evidence-"))
    workdir.mkdir(parents=True, exist_ok=True)
    log = str(workdir / "tools.log")
    m = {"repetitions": args.repetitions, "min_time_s": args.min_time,
         "min_warmup_time_s": args.warmup}
    rows = {"+5%": args.rows[0], "+10%": args.rows[1], "+20%": args.rows[2]}

    def emit(*lines: str) -> None:
        print("\n".join(lines), flush=True)

    try:
        modules, settings = build(workdir, args.shape, rows, m, log)
        plan = plan_of(settings["ab"])
        budget = args.budget_s if args.budget_s is not None else settings["ab"]["budget_s"]
        load = os.getloadavg()[0]
        emit(f"GEMM {'x'.join(map(str, args.shape))} f32, local-sync (1 thread); invocation: "
             f"{m['repetitions']} repetitions x {m['min_time_s']:g} s after "
             f"{m['min_warmup_time_s']:g} s warm-up; plan looks {list(plan.looks)}, alpha "
             f"{plan.alpha:g}, margin {plan.margin:g}, target width {plan.target_rel_width:g},"
             f" budget {budget:g} s; load average {load:.2f}", "")

        # (b) the true ratios, measured apart before the trials.
        scenarios = {"codegen": ("base", "haswell"),
                     **{name: ("base", name) for name in rows}}
        calib = {}
        for i, (name, (b, n)) in enumerate(scenarios.items()):
            c = calibrate(modules[b], modules[n], args.calib_rounds, 1000 + i, log)
            if name == "codegen" and c["ratio"] < 1:
                # haswell is faster here: the host build is the slower ("new") side.
                scenarios[name] = (n, b)
                c = calibrate(modules[n], modules[b], args.calib_rounds, 1100 + i, log)
            calib[name] = c
        label = {"codegen": "{} vs {} codegen".format(
            modules[scenarios["codegen"][1]].compiled["target_cpu"],
            modules[scenarios["codegen"][0]].compiled["target_cpu"]),
            **{name: f"{name} (extra GEMM of {r} rows)" for name, r in rows.items()}}
        lines = [f"true ratios ({args.calib_rounds} interleaved rounds each, one look):"]
        for name, c in calib.items():
            b, n = scenarios[name]
            lines.append(
                f"  {label[name]:<32} x{c['ratio']:.4f}  interval [{c['ci'][0]:.4f}, "
                f"{c['ci'][1]:.4f}] at {c['level']:.1%}; base {statistics.median(c['base_ms']):.4f}"
                f" ms, new {statistics.median(c['new_ms']):.4f} ms; {c['seconds']:.0f} s; "
                f"dispatches {modules[b].compiled['dispatch_count']} -> "
                f"{modules[n].compiled['dispatch_count']}")
        emit(*lines, "")

        # (a) and (b): the trials, all scenarios alternating.
        pairs = {"A/A": ("base", "base-copy"), **scenarios}
        counts = {"A/A": args.aa, **{name: args.trials for name in scenarios}}
        trials: dict[str, list[dict]] = {name: [] for name in pairs}
        for i in range(max(counts.values())):
            for j, (name, (b, n)) in enumerate(pairs.items()):
                if i < counts[name]:
                    r = ab_run(modules[b], modules[n], plan, budget_s=budget,
                               seed=10_000 * (j + 1) + i, log=log)
                    r["sharktank"] = sharktank_rule(r)
                    r["gate"] = gate_rule(r, settings["noisy_cv"])
                    trials[name].append(r)
            done = sum(len(t) for t in trials.values())
            print(f"  ... {done} of {sum(counts.values())} A/B runs "
                  f"({time.monotonic() - t_start:.0f} s, load {os.getloadavg()[0]:.2f})",
                  file=sys.stderr, flush=True)

        def med(name, key):
            return statistics.median(t[key] for t in trials[name])

        def listed(counts: dict[str, int]) -> str:
            return ", ".join(f"{k} {v}" for k, v in counts.items()) or "-"

        aa = trials["A/A"]
        aa_counts = counts_of([t["verdict"] for t in aa])
        aa_false = aa_counts.get(REGRESSION, 0)
        aa_ratios = sorted(t["ratio"] for t in aa)
        emit(f"(a) A/A, {len(aa)} runs of identical modules:",
             f"    verdicts: {listed(aa_counts)}",
             f"    false regressions {pct(aa_false, len(aa))}, rate {aa_false / len(aa):.1%} "
             f"(95 % upper bound {upper_bound(aa_false, len(aa)):.1%})",
             f"    per verdict: median {med('A/A', 'rounds'):.0f} rounds, "
             f"{med('A/A', 'seconds'):.1f} s (max {max(t['seconds'] for t in aa):.1f} s; "
             f"{med('A/A', 'wall_seconds'):.1f} s with the 2 untimed warm-up calls); "
             f"stop reasons: {listed(counts_of([t['stop_reason'] for t in aa]))}",
             f"    ratios found: median x{statistics.median(aa_ratios):.4f}, range "
             f"x{aa_ratios[0]:.4f}..x{aa_ratios[-1]:.4f}", "")

        header = ["scenario", "true ratio", "A/B detected", "other verdicts", "rounds",
                  "s/verdict", "with warm-up", "ratio found"]
        body = []
        for name in scenarios:
            ts = trials[name]
            det = sum(t["verdict"] == REGRESSION for t in ts)
            other = counts_of([t["verdict"] for t in ts if t["verdict"] != REGRESSION])
            body.append([label[name], f"x{calib[name]['ratio']:.3f}", pct(det, len(ts)),
                         listed(other),
                         f"{med(name, 'rounds'):.0f}", f"{med(name, 'seconds'):.1f}",
                         f"{med(name, 'wall_seconds'):.1f}", f"x{med(name, 'ratio'):.3f}"])
        emit(f"(b) slowdowns, {args.trials} sequential A/B runs each (medians per verdict):",
             table(header, body), "")

        header = ["scenario", "true ratio", "A/B sequential", "sharktank (1 try)",
                  f"sharktank ({RETRIES} retries)", "golden gate"]
        body = []
        for name in pairs:
            ts = trials[name]
            n = len(ts)
            body.append([
                label.get(name, "A/A (false alarms)"),
                f"x{calib[name]['ratio']:.3f}" if name in calib else "x1",
                pct(sum(t["verdict"] == REGRESSION for t in ts), n),
                pct(sum(t["sharktank"]["first_fails"] for t in ts), n),
                pct(sum(t["sharktank"]["flagged"] for t in ts), n),
                pct(sum(t["gate"]["flagged"] for t in ts), n)])
        gate_other = counts_of([t["gate"]["verdict"] for ts in trials.values() for t in ts])
        emit("(c) regression rate per rule (A/A: false alarms; else detection):",
             table(header, body),
             f"    sharktank: mean <= golden x {TOLERANCE:g}, golden = the trial's base median;"
             f" gate: time_verdict, {GATE_INVOCATIONS} vs {GATE_INVOCATIONS} invocations, "
             f"tolerance {TOLERANCE:g}, p {P_VALUE:g} (all gate verdicts: "
             f"{listed(gate_other)})", "")

        # Summary: each goal, the sequential A/B's figure and verdict; the other rules'
        # figures on the same trials beside it, for comparison.
        rules = {"A/B": lambda t: t["verdict"] == REGRESSION,
                 "sharktank": lambda t: t["sharktank"]["flagged"],
                 "gate": lambda t: t["gate"]["flagged"]}

        def hits(name: str, rule: str) -> tuple[int, int]:
            return sum(map(rules[rule], trials[name])), len(trials[name])

        goals = []
        k, n = hits("A/A", "A/B")
        goals.append(["A/A false regressions <= 1 %", pct(k, n),
                      f"<= {upper_bound(k, n):.1%}", "PASS" if k / n <= 0.01 else "MISS",
                      pct(*hits("A/A", "sharktank")), pct(*hits("A/A", "gate"))])
        for name in scenarios:
            ratio = calib[name]["ratio"]
            k, n = hits(name, "A/B")
            goal = target_for(ratio)
            what = f"{label[name]}, x{ratio:.3f}"
            goals.append([f"{goal[0] if goal else 'no goal below x1.04'}: {what}", pct(k, n),
                          f">= {lower_bound(k, n):.1%}",
                          "-" if goal is None else "PASS" if k / n >= goal[1] else "MISS",
                          pct(*hits(name, "sharktank")), pct(*hits(name, "gate"))])
        wall = time.monotonic() - t_start
        emit("summary (95 % bound: Clopper-Pearson, one-sided; sharktank and gate: the same "
             "trials, for comparison):",
             table(["goal", "A/B measured", "95 % bound", "A/B", "sharktank",
                    "golden gate"], goals),
             f"wall time {wall:.0f} s; load average at the end {os.getloadavg()[0]:.2f}")
        if args.quick:
            emit("(--quick: too few runs for the rates to mean anything)")

        if args.out:
            doc = {"args": {k: (str(v) if isinstance(v, Path) else v)
                            for k, v in vars(args).items()},
                   "measurement": m, "plan": plan.to_dict(), "budget_s": budget,
                   "modules": {k: {"argv": v.argv, **v.compiled} for k, v in modules.items()},
                   "scenarios": {k: {"base": b, "new": n, "label": label.get(k, k)}
                                 for k, (b, n) in pairs.items()},
                   "calibration": calib, "trials": trials, "summary": goals,
                   "wall_seconds": wall}
            args.out.write_text(json.dumps(doc, indent=1, default=str))
            print(f"raw figures: {args.out}")
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"work directory: {workdir}")


if __name__ == "__main__":
    main()
