"""How long a suite's plan should take, said before it runs (`snakemake -n`, `benchflow
list`), and the question asked before a long one starts.

A case's time is the sum of what its stage does (planning/resources.py's calibrated
steps: a worker's start, build, compile, export, the invocations the protocol may take)
and of the calls it makes, each call as long as
- its earlier record's median call where this directory has one (the history), else
- its forward FLOPs at this machine's measured matmul peak (results/peak.json where a
  run measured it, else a quick numpy measurement now: backends/peak.quick), else
- nothing beyond the calibrated steps (a model whose FLOPs are not known here).
A case on a GPU is counted apart, not estimated: the peak measured is the CPU's, and
whether the GPU is here at all (else the case is compiled only) takes a probe of its
driver, which a listing should not start.
A torch case calls its model a few times before its invocations (the fp32 reference,
the first call, the accuracy check, the per-op profile: CHARACTERIZE_CALLS), and each
invocation at least once. A 16384x8192x8192 bf16 matmul is 2.2 TFLOP: minutes on a
CPU, which the calibrated steps alone would call a second. The estimate is a lower
bound where the machine is slower at the case's dtype than at f32 (bf16 without
hardware support), and it counts every case, measured already or not.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from workflow.errors import ConfigError
from workflow.files import file_problem
from workflow.paths import EXPORT_MLIR, HISTORY_HTML, PEAK, REPORT, REPORT_DERIVED
from workflow.planning import resources as r
from workflow.records.storage import read_json

# Calls of a torch case's model besides its invocations: the fp32 reference, the first
# call, the accuracy check, the per-op profile (its calls: measurement.profile_calls).
CHARACTERIZE_CALLS = 3
# Above this many seconds a run asks before it starts (BENCHFLOW_CONFIRM_ABOVE_S).
CONFIRM_ABOVE_S = 3600.0
# A plan this long also names its longest cases: what a subset would leave out first.
LONGEST_ABOVE_S = 600.0
CONFIRM_ENV, CONFIRMED_ENV = "BENCHFLOW_CONFIRM_ABOVE_S", "BENCHFLOW_CONFIRMED"


def forward_flops(workload) -> float | None:
    """A workload's FLOPs per forward call from its parameters (2 per multiply-add of
    each weight with each row of the input), for the models whose parameters are known
    here (resources.param_estimate); training: forward and backward, three times that.
    None for a model this module does not know."""
    shape = tuple(workload.shape)
    params = r.param_estimate(workload.model, workload.config, shape, workload.layers)
    if params is None or not shape:
        return None
    rows = shape[0] * (shape[1] if workload.model == "bert" and len(shape) > 1 else 1)
    flops = 2.0 * params * rows
    return 3 * flops if getattr(workload, "mode", "inference") == "training" else flops


def peak_gflops(root: Path | None = None) -> tuple[float | None, str]:
    """This machine's matmul peak and where it came from: results/peak.json of an
    earlier run here, else a quick measurement now; (None, why) when neither works."""
    path = (root or Path()) / PEAK
    if not file_problem(path):
        try:
            gflops = read_json(path).get("gflops")
            if isinstance(gflops, int | float) and gflops > 0:
                return float(gflops), f"{PEAK}"
        except (OSError, ValueError, AttributeError, ConfigError):
            pass  # not a peak: measured again below
    from workflow.backends.peak import quick

    try:
        return quick(), "measured now"
    except Exception as exc:  # no numpy BLAS here: the estimate goes without FLOPs
        return None, f"could not be measured ({type(exc).__name__})"


def on_cpu(suite, case) -> bool:
    """Whether the case runs on this machine's CPU, whose peak is the one measured."""
    if case.backend_kind == "iree":
        return str(suite.sku(case.sku)["iree"].get("device", "")).startswith("local")
    return getattr(case.workload, "device", "cpu") == "cpu"


def _call_s(suite, case, earlier: dict | None, peak: float | None) -> tuple[float, str]:
    median = ((earlier or {}).get("timing") or {}).get("median_ms")
    if median:
        return median / 1000, "history"
    flops = forward_flops(case.workload)
    if flops and peak:
        return flops / (peak * 1e9), "flops"
    return 0.0, "steps"


def _weight_bytes(workload) -> float:
    """A workload's fp32 weights as the stages' steps scale with them; a model of unknown
    size (a user's, not exported here yet) counts none. A resource request takes the
    largest built-in's there (planning/resources.py: under-asking kills the job); an
    estimate taking it would call a suite of tiny user models hours long."""
    w = workload
    if r.param_estimate(w.model, w.config, w.shape, w.layers) is None \
            and not os.path.exists(EXPORT_MLIR.format(workload=w.id)):
        return 0.0
    return r._fp32_weight_bytes(w)


def case_seconds(suite, case, peak: float | None, earlier: dict | None) -> tuple[float, str]:
    """(expected seconds, basis: history | flops | steps) of one case (module doc)."""
    m = suite.sku(case.sku)["measurement"]
    call_s, basis = _call_s(suite, case, earlier, peak)
    invocations = r.invocation_count(m)
    if case.backend_kind == "iree":
        weights = _weight_bytes(case.workload)
        compile_s = ((earlier or {}).get("compile") or {}).get("seconds") \
            or r._stage_seconds("compile", weights)
        seconds = (r._stage_seconds("export", weights) + compile_s
                   + r._stage_seconds("verify", weights) + call_s
                   + invocations * r.invocation_seconds(m, call_s))
    else:
        block_s = m.get("torch_min_run_time_s", 0.0)
        seconds = (r.torch_case_seconds(case, m, earlier)
                   + (CHARACTERIZE_CALLS + m.get("profile_calls", 0)
                      + m.get("torch_warmup_calls", 0)) * call_s
                   + invocations * max(0.0, call_s - block_s))
    return seconds, basis


def estimate(suite, root: Path | None = None, peak: tuple[float | None, str] | None = None
             ) -> dict:
    """The plan's expected seconds, one CPU case after another: {seconds, cases,
    gpu_cases (counted apart: module doc), basis:
    {history, flops, steps: case counts}, peak_gflops, peak_source, longest: [(case
    id, seconds)] (the three longest)}. Unsupported cases cost nothing."""
    runnable = [c for c in suite.cases if not c.unsupported and on_cpu(suite, c)]
    gpu = sum(1 for c in suite.cases if not c.unsupported and not on_cpu(suite, c))
    if peak is None:
        needs_peak = any(r.earlier_record(c) is None and forward_flops(c.workload)
                         for c in runnable)
        peak = peak_gflops(root) if needs_peak else (None, "not needed")
    by_case, basis = {}, {"history": 0, "flops": 0, "steps": 0}
    for case in runnable:
        seconds, how = case_seconds(suite, case, peak[0], r.earlier_record(case))
        by_case[case.id] = seconds
        basis[how] += 1
    # Each torch batch with a case counted here starts a worker once.
    batches = sum(1 for members in suite.torch_batches.values()
                  if any(c.id in by_case for c in members))
    total = sum(by_case.values()) + batches * r.TORCH_WORKER_START_S
    longest = sorted(by_case.items(), key=lambda kv: -kv[1])[:3]
    return {"seconds": total, "cases": len(runnable), "gpu_cases": gpu, "basis": basis,
            "peak_gflops": peak[0], "peak_source": peak[1], "longest": longest}


def duration(seconds: float) -> str:
    """'about 40 s', 'about 12 min', 'about 3.4 h'."""
    if seconds < 90:
        return f"about {seconds:.0f} s"
    if seconds < 5400:
        return f"about {seconds / 60:.0f} min"
    return f"about {seconds / 3600:.1f} h"


def plan_line(est: dict) -> str:
    """'plan: 240 case(s), about 3.4 h one after another (...)'."""
    parts = [f"{n} from {what}" for n, what in (
        (est["basis"]["history"], "earlier records here"),
        (est["basis"]["flops"], f"FLOPs at this machine's peak {est['peak_gflops']:.0f} "
                                f"GFLOP/s ({est['peak_source']})" if est["peak_gflops"]
                                else "FLOPs"),
        (est["basis"]["steps"], "the stages' calibrated steps only")) if n]
    text = (f"plan: {est['cases']} case(s), {duration(est['seconds'])} one after another "
            f"if every case is measured ({'; '.join(parts) or 'nothing to measure'})")
    if est["gpu_cases"]:
        text += f"; {est['gpu_cases']} case(s) on a GPU not estimated"
    if est["longest"] and est["seconds"] >= LONGEST_ABOVE_S:
        text += "; longest: " + ", ".join(f"{cid} {duration(s)}" for cid, s in est["longest"])
    return text


def confirm_above_s(env=os.environ) -> float | None:
    """The threshold above which a run asks first: BENCHFLOW_CONFIRM_ABOVE_S (seconds; 0
    never asks), default an hour. A value that is not a number is refused in one line."""
    raw = env.get(CONFIRM_ENV)
    if raw is None or raw == "":
        return CONFIRM_ABOVE_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise ConfigError([f"{CONFIRM_ENV}={raw!r}: expected a number of seconds (0: never "
                           "ask)"])
    return value or None


def confirmation(est: dict, *, env=os.environ, stdin=None, stderr=None) -> str | None:
    """None when the run may start: its estimate is below the threshold, it was
    confirmed (BENCHFLOW_CONFIRMED=1), or a terminal answered yes. Else the refusal's
    line: in a terminal the answer was no; elsewhere (CI, a pipe) nobody can answer, so
    the flag is asked for."""
    stdin, stderr = stdin or sys.stdin, stderr or sys.stderr
    threshold = confirm_above_s(env)
    if threshold is None or est["seconds"] <= threshold or env.get(CONFIRMED_ENV) == "1":
        return None
    long = (f"this plan should take {duration(est['seconds'])} ({est['cases']} case(s)), "
            f"more than {CONFIRM_ENV} ({threshold:g} s)")
    if stdin.isatty() and stderr.isatty():
        print(f"{long}. Start it? [y/N] ", end="", file=stderr, flush=True)
        answer = stdin.readline().strip().lower()
        if answer in ("y", "yes"):
            return None
        return (f"not started: {long}; run a subset of its cases (docs/suites.md, "
                "\"A subset of a suite\"), or answer y")
    return (f"not started: {long}, and no terminal to ask; set {CONFIRMED_ENV}=1 to run it, "
            f"or run a subset of its cases (docs/suites.md, \"A subset of a suite\")")


# Targets that measure every case of the suite: the default, and the report's files.
WHOLE_SUITE = {"all", "report", REPORT, *REPORT_DERIVED, HISTORY_HTML}


def whole_suite(targets) -> bool:
    """Whether a snakemake run's targets are the whole suite (none named, `all`, the
    report or a file made from it): only then is the estimate of every case the run's;
    a case's or a batch's file is a subset."""
    return not targets or {os.path.normpath(t) for t in targets} <= WHOLE_SUITE


def plan_check(suite, *, argv: list[str], env=os.environ, stdin=None,
               stderr=None) -> tuple[list[str], str | None]:
    """The Snakefile's: (lines to print, refusal or None), for the snakemake command
    line `argv`. The plan line for a run of the whole suite, dry or not; a real one
    above the threshold asks first (confirmation). A run of named targets (a subset),
    or a command line this cannot read, is neither estimated nor asked."""
    from workflow.planning.plan import Refused

    read = invocation(argv)
    if read is None or not whole_suite(read[0]):
        return [], None
    dry_run = read[1]
    try:
        confirm_above_s(env)
    except ConfigError as exc:
        raise Refused("the run's environment", exc.problems) from None
    est = estimate(suite)
    lines = [plan_line(est)]
    if dry_run:
        return lines, None
    for line in lines:  # said before the question, which refers to it
        print(line, file=stderr or sys.stderr, flush=True)
    return [], confirmation(est, env=env, stdin=stdin, stderr=stderr)


def invocation(argv: list[str]) -> tuple[list[str], bool] | None:
    """(targets, dry run) of the snakemake command line `argv`, read by snakemake's own
    parser (the Snakefile is read before snakemake's DAG settings exist); None when it
    cannot be read so (a plugin's option this parser lacks): then nothing is estimated."""
    import contextlib
    import io

    from snakemake.cli import get_argument_parser

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            args = get_argument_parser().parse_args(argv[1:])
    except (SystemExit, Exception):
        return None
    return list(args.targets or []), bool(args.dryrun)
