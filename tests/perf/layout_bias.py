"""Benchmark (not a test): does memory layout bias an A/B of identical modules here?

Identical code at different memory layouts may run a percent or two apart for hours
(Mytkowicz et al., ASPLOS 2009; Curtsinger & Berger, STABILIZER, ASPLOS 2013), and an
interleaved A/B then calls a difference between two byte-identical files.
workflow/measure/layout.py randomizes the layout per invocation (a fresh copy of the
module file, an environment padding of random length); this script measures whether
that matters on this machine.

One GEMM (an input times a constant weight held in the module, f32) is compiled twice
with iree-compile into two byte-identical .vmfb files, A and B (the script stops if
they differ). Then --trials A/B trials per condition, the conditions alternating trial
by trial so that the machine's load falls on both alike; a trial is --rounds
interleaved rounds (one fresh single-threaded local-sync iree-benchmark-module
invocation of each side, in a seeded random order per round: workflow.measure.pairs
.interleave with one look at the end; a round that other processes disturbed, by the
protocol's probe and default threshold, is retaken, up to 12 per trial):

  fixed:       A and B always from their own file, the same environment;
  randomized:  every invocation a fresh copy of its file under a random name and an
               environment padding of random length (workflow.measure.layout).

Per condition: every trial's ratio B / A with its interval, the median and spread of
the ratios, and the fraction of trials whose interval excludes 1 (about 5 % expected
at a 95 % interval when nothing differs; a persistent layout bias shows as many
intervals on the same side of 1 in the fixed condition).

    python tests/perf/layout_bias.py [--trials 15] [--rounds 12] [--quick]

About 4 minutes with the defaults on 2 cores (an invocation of the iree-benchmark-module
program itself takes about 0.2 s; longer where outside load makes rounds retaken);
--quick (3 trials, 8 rounds) about a minute: a smoke run whose fractions mean nothing.
"""

from __future__ import annotations

import argparse
import filecmp
import math
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.perf.ab_evidence import native_benchmark_tool  # noqa: E402
from workflow.backends.iree import tools as iree  # noqa: E402
from workflow.backends.proc import run_tool, tool_path  # noqa: E402
from workflow.measure import layout  # noqa: E402
from workflow.measure.disturbance import Probe  # noqa: E402
from workflow.measure.pairs import interleave  # noqa: E402
from workflow.measure.protocol import Observation  # noqa: E402
from workflow.stats import sequential  # noqa: E402

TIMEOUT_S = 300
SKU = {"iree": {"target_backend": "llvm-cpu", "target_cpu": "host", "device": "local-sync",
                "compile_flags": []}}
CONDITIONS = ("fixed", "randomized")
# As the protocol does (measurement.disturbed_share, ab.max_retakes defaults): a round
# that other processes disturbed is retaken, so that the trials see the layout, not
# the load of a shared machine.
DISTURBED_SHARE = 0.25
MAX_RETAKES = 12


def gemm_mlir(n: int, seed: int = 0) -> str:
    """x (n x n, an input) times W (n x n, a constant in the module: its pages are the
    file's), f32."""
    w = np.random.default_rng(seed).standard_normal((n, n)).astype("<f4")
    t = f"tensor<{n}x{n}xf32>"
    return f"""\
func.func @main(%x: {t}) -> {t} {{
  %w = arith.constant dense<"0x{w.tobytes().hex().upper()}"> : {t}
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : {t}
  %f = linalg.fill ins(%zero : f32) outs(%e : {t}) -> {t}
  %r = linalg.matmul ins(%x, %w : {t}, {t}) outs(%f : {t}) -> {t}
  return %r : {t}
}}
"""


def build(tmp: Path, n: int, log: str) -> tuple[str, str]:
    """The same MLIR compiled twice: A.vmfb and B.vmfb, byte-identical."""
    mlir = tmp / "gemm.mlir"
    mlir.write_text(gemm_mlir(n))
    tool = tool_path("iree-compile")
    out = []
    for name in ("A", "B"):
        vmfb = tmp / f"{name}.vmfb"
        run_tool(iree.compile_argv(tool, str(mlir), str(vmfb), iree.compile_flags(SKU, "auto"),
                                   str(tmp / f"{name}.stats.json")),
                 stage="compile", timeout=TIMEOUT_S, log=log)
        out.append(str(vmfb))
    if not filecmp.cmp(*out, shallow=False):
        sys.exit(f"{out[0]} and {out[1]} differ: iree-compile is not deterministic here, "
                 "so this is no A/A of identical files")
    return out[0], out[1]


def side(vmfb: str, n: int, m: dict, *, randomized: bool, tmp: Path, rng: random.Random,
         log: str) -> Callable[[], Observation]:
    """One invocation of `vmfb` per call: from the file itself, or (randomized) from a
    fresh copy with an environment padding."""
    tool = native_benchmark_tool() or tool_path("iree-benchmark-module")

    def argv(path: str) -> list[str]:
        return iree.benchmark_argv(tool, path, "main", [f"{n}x{n}xf32=1"], SKU,
                                   repetitions=m["repetitions"], warmup_s=m["warmup_s"],
                                   min_time=f"{m['min_time_s']:g}s")

    def run(path: str, env: dict | None) -> Observation:
        with Probe(DISTURBED_SHARE) as probe:
            proc = run_tool(argv(path), stage="run", timeout=TIMEOUT_S, log=log, env=env)
        bench = iree.parse_benchmark_json(proc.stdout)
        return Observation(value_ms=bench.median_ms, data=bench, disturbance=probe.result())

    def call() -> Observation:
        if not randomized:
            return run(vmfb, None)
        with layout.randomized(vmfb, tmp, rng) as (path, env):
            return run(path, env)

    return call


def trial(a: Callable[[], Observation], b: Callable[[], Observation], rounds: int,
          seed: int) -> dict:
    """`rounds` interleaved rounds of A and B, judged once at the end (disturbed rounds
    retaken, MAX_RETAKES at most); an untimed call of each first (as an A/B does: the
    first invocation pays for cold caches)."""
    a()
    b()
    plan = sequential.Plan(min_rounds=rounds, max_rounds=rounds)
    return interleave(a, b, plan, budget_s=math.inf, seed=seed, max_retakes=MAX_RETAKES)


def summary(name: str, trials: list[dict]) -> list[str]:
    ratios = [t["ratio"] for t in trials]
    logs = [math.log(r) for r in ratios]
    excl = [t for t in trials if t["ci"][0] > 1 or t["ci"][1] < 1]
    above = sum(t["ci"][0] > 1 for t in excl)
    sd = statistics.stdev(logs) if len(logs) > 1 else float("nan")
    width = statistics.median(t["ci"][1] / t["ci"][0] - 1 for t in trials)
    return [f"{name}: {len(trials)} trials",
            f"  ratios B/A: median x{statistics.median(ratios):.4f}, range "
            f"x{min(ratios):.4f}..x{max(ratios):.4f}, sd of log ratios {sd:.4f}; median "
            f"interval width {width:.2%} at {trials[0]['level']:.1%}",
            f"  intervals excluding 1: {len(excl)}/{len(trials)} ({len(excl) / len(trials):.0%};"
            f" {above} above, {len(excl) - above} below); rounds retaken "
            f"{sum(len(t['retaken']) for t in trials)}"]


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=15, help="A/B trials per condition")
    ap.add_argument("--rounds", type=int, default=12, help="rounds per trial (>= 6)")
    ap.add_argument("--n", type=int, default=256, help="the GEMM's size (n x n x n)")
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.02, help="s per repetition")
    ap.add_argument("--warmup", type=float, default=0.05, help="s of warm-up per invocation")
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--quick", action="store_true", help="smoke run: --trials 3 --rounds 8")
    args = ap.parse_args()
    if args.quick:
        args.trials, args.rounds = 3, 8
    if args.trials < 1 or args.rounds < 6:
        ap.error("--trials must be at least 1 and --rounds at least 6 (an interval at 95 % "
                 "needs 6 rounds)")
    m = {"repetitions": args.repetitions, "min_time_s": args.min_time, "warmup_s": args.warmup}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="layout-bias-") as tmp:
        tmp = Path(tmp)
        log = str(tmp / "tools.log")
        a, b = build(tmp, args.n, log)
        rng = random.Random(args.seed)
        sides = {c: [side(v, args.n, m, randomized=c == "randomized", tmp=tmp, rng=rng,
                          log=log) for v in (a, b)] for c in CONDITIONS}
        print(f"GEMM {args.n}^3 f32 (constant weight in the module), {Path(a).stat().st_size}"
              f"-byte modules, byte-identical; local-sync, {m['repetitions']} repetitions x "
              f"{args.min_time:g} s after {args.warmup:g} s warm-up; {args.trials} trials x "
              f"{args.rounds} rounds per condition; load {open('/proc/loadavg').read().strip()}",
              flush=True)
        trials: dict[str, list[dict]] = {c: [] for c in CONDITIONS}
        for i in range(args.trials):
            for j, c in enumerate(CONDITIONS):
                r = trial(*sides[c], args.rounds, seed=args.seed * 1000 + 2 * i + j)
                trials[c].append(r)
                print(f"  trial {i + 1:>2} {c:<10} x{r['ratio']:.4f} [{r['ci'][0]:.4f}, "
                      f"{r['ci'][1]:.4f}]  A {statistics.median(r['base_ms']):.4f} ms  "
                      f"({r['seconds']:.0f} s, {len(r['retaken'])} rounds retaken, load "
                      f"{os.getloadavg()[0]:.2f})", flush=True)
    print()
    for c in CONDITIONS:
        print("\n".join(summary(c, trials[c])))
    print(f"wall time {time.monotonic() - t0:.0f} s; load at the end "
          f"{open('/proc/loadavg').read().strip()}")
    if args.quick:
        print("(--quick: too few trials for the fractions to mean anything)")


if __name__ == "__main__":
    main()
