"""`benchflow run`: one case from the command line, after Forge's benchmark.py.

    benchflow run -m bert -c tiny -df Fp16 --sku cpu-host -o perf.json

The case runs through the same Snakemake workflow as a suite, nothing re-implemented:
the options become a one-case suite (the SKU, accuracy and timeouts taken from the
default suite or --configfile), written into a work directory of its own, and
snakemake runs there as a subprocess with that suite's results/report.json as target
(that report holds the case whatever its backend: IREE cases, torch batches and cases
known unsupported are all collected there). A second identical run finds everything
up to date: it measures nothing, says `cached: <case id> measured at <when>`, and the
record it appends is marked cached (--force measures again). The case record is printed
as one line and appended to -o OUT.json (a benchflow results file, or a Forge results
list that gets a Forge-shaped entry). -m takes a built-in model or one of the
model_modules of the suite the settings come from (--configfile).
`--layers` equal to the config's own depth is the plain case; a `--loop_count` other
than the SKU's repetitions is a SKU of its own (`<sku>-loop<N>`), so runs with other
loop counts neither share nor invalidate each other's cached results.

Any number of runs may go at once. Runs of different cases have different work
directories. Runs of the same case share theirs, on purpose: they wait for each other
(a lock file in the work directory, polled with backoff up to --lock-wait seconds),
so the second finds the first's results up to date ("Nothing to be done") instead of
measuring the case again beside it; a work directory per run would lose that caching
and let two measurements of one case disturb each other. A snakemake of someone else's
holding the directory (Snakemake's own lock) is waited for the same way.
"""

from __future__ import annotations

import argparse
import os
import sys

from workflow.commands.single_run import LOCK_WAIT_S, SOURCE, run_one
from workflow.errors import REASON_CHARS, ConfigError, error_line
from workflow.stats.enums import Status

# Forge's -df names (and ours) -> benchflow dtypes. Forge's block-float formats are
# Tenstorrent hardware formats with no counterpart here.
DTYPE_NAMES = {"f32": "f32", "fp32": "f32", "float32": "f32",
               "f16": "f16", "fp16": "f16", "float16": "f16",
               "bf16": "bf16", "fp16_b": "bf16", "bfloat16": "bf16"}
FORGE_BLOCK_FORMATS = ("bfp8", "bfp8_b", "bfp4", "bfp4_b")


def parse_dtype(name: str) -> str:
    key = name.lower()
    if key in DTYPE_NAMES:
        return DTYPE_NAMES[key]
    if key in FORGE_BLOCK_FORMATS:
        raise argparse.ArgumentTypeError(
            f"{name} is a Tenstorrent block-float format with no CPU counterpart; "
            "use Fp32, Fp16, Fp16_b (or f32, f16, bf16)")
    raise argparse.ArgumentTypeError(
        f"unknown data format {name!r}; expected Fp32, Fp16, Fp16_b or f32, f16, bf16")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def parse_shape(text: str) -> list[int]:
    try:
        dims = [int(d) for d in text.replace("x", ",").split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a shape like 1,128 or 16x32x32, got {text!r}") from None
    if not dims or any(d < 1 for d in dims):
        raise argparse.ArgumentTypeError(f"expected positive dimensions, got {text!r}")
    return dims


def summary_line(rec: dict) -> str:
    """One line: status, id, then the figures a user looks at first."""
    head = f"{rec['status']} {rec['id']}"
    if rec["status"] != Status.OK:
        where = f" at {rec['stage']}" if rec.get("stage") else ""
        return f"{head}{where}: {error_line(rec.get('error'), REASON_CHARS) or 'no error recorded'}"
    parts = [head]
    t = rec.get("timing")
    if t:
        noisy = (", noisy" if t.get("noisy") else "") + (
            f", disturbed: {t['disturbance']['reason']}" if t.get("disturbed") else "")
        # IREE counts --benchmark_repetitions, torch its timed calls per invocation.
        each = (f"{t['repetitions']} repetitions" if t.get("repetitions") is not None
                else f"{t.get('calls_per_invocation')} calls")
        parts.append(f"median {t['median_ms']:.4g} ms (cv {100 * t['cv']:.1f}%, "
                     f"{t['invocations']} invocations x {each}{noisy})")
    thr = rec.get("throughput") or {}
    if thr.get("gflops"):
        parts.append(f"{thr['gflops']:.3g} GFLOP/s")
    acc = rec.get("accuracy")
    verdict = "" if not acc or acc.get("accurate") in (None, True) else " INACCURATE"
    if acc and acc.get("metric") == "sqnr":  # the figure that judged it (a quantized recipe)
        sqnr = (f"{acc['sqnr_db']:.1f} dB" if acc.get("sqnr_db") is not None
                else "exact" if acc.get("accurate") else "undefined")
        parts.append(f"sqnr {sqnr} (min {acc['min_sqnr_db']:g}){verdict}")
    elif acc and acc.get("pcc") is not None:
        parts.append(f"pcc {acc['pcc']:.6f}{verdict}")
    golden = rec.get("golden") or {}
    if golden.get("verdict"):
        parts.append(f"golden {golden['verdict']}")
    return "  ".join(parts)


def cached_line(rec: dict) -> str:
    """Said of a record this run did not measure: an earlier run's, its jobs up to date."""
    from workflow.stats.speedup import measured_at

    return (f"cached: {rec['id']} measured at {measured_at(rec) or 'an earlier run'} "
            "(no job of it ran; --force to measure again)")


def run(args: argparse.Namespace) -> int:
    if args.list:
        from workflow.cli import list as list_cmd

        return list_cmd.run(argparse.Namespace(configfile=args.configfile, cases=False,
                                                       config=[]))
    if not args.model:
        raise ConfigError([f"{SOURCE}: -m MODEL is required (`benchflow list` prints them)"])
    if args.output:
        from workflow.records.results_file import output_problem

        # Before minutes of measuring: a report, a broken file or a read-only folder at -o
        # would otherwise be found only when the record is appended.
        problem = output_problem(args.output)
        if problem:
            print(f"benchflow run: {problem}", file=sys.stderr)
            return 1
    outcome = run_one(args)
    if outcome.record is not None:
        print(summary_line(outcome.record))
    if outcome.cached:
        print(cached_line(outcome.record))
    if outcome.error is not None:
        print(f"benchflow run: {outcome.error}", file=sys.stderr)
        return 1
    if outcome.appended is not None:
        print(f"appended to {args.output} ({outcome.appended} records)")
    return 0 if outcome.record["status"] == Status.OK else 1


def add_parser(sub) -> None:
    p = sub.add_parser(
        "run", help="run one case through the workflow (Forge's benchmark.py); append to -o",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-m", "--model", help="model to benchmark (e.g. bert; `benchflow list`)")
    p.add_argument("-c", "--config", help="model configuration (e.g. tiny, base, large)")
    p.add_argument("--sku", help="SKU of the suite (default: its first)")
    p.add_argument("-b", "--backend",
                   help="iree or a torch backend of the suite (torch-eager, ...); default "
                        "iree, or torch-eager with -t (IREE runs inference only)")
    p.add_argument("-df", "--dataformat", "--dtype", dest="dtype", type=parse_dtype,
                   default="f32", help="f32, f16, bf16 or Forge's Fp32, Fp16, Fp16_b")
    p.add_argument("--recipe", default="baseline", help="quantization recipe (torch backends)")
    p.add_argument("-t", "--training", action="store_true",
                   help="benchmark training (forward, backward, optimizer step)")
    p.add_argument("--layers", type=positive_int,
                   help="number of layers, where the model has them (the config's own "
                        "depth is the plain case)")
    p.add_argument("--shape", type=parse_shape,
                   help="input shape, e.g. 1,128 (default: the model's)")
    p.add_argument("--loop-count", "--loop_count", dest="loop_count", type=positive_int,
                   help="repetitions of each measured invocation (IREE; the SKU's "
                        "`repetitions`); another count is a SKU of its own, <sku>-loop<N>")
    p.add_argument("-o", "--output",
                   help="JSON file to append the case record to (created if missing): a "
                        "benchflow results file, or a Forge benchmark.py list, kept as such")
    p.add_argument("--cores", type=positive_int, default=os.cpu_count() or 1,
                   help="cores snakemake may use (default: all)")
    p.add_argument("--configfile", nargs="+", default=None,
                   help="suite file(s) to take SKUs and settings from (default config/config.yaml)")
    p.add_argument("--workdir", help="snakemake work directory (default results/cli/<case id>)")
    p.add_argument("--lock-wait", type=float, default=LOCK_WAIT_S, metavar="S",
                   help="seconds to wait for another run of the same case (or a snakemake) "
                        f"holding the work directory (default {LOCK_WAIT_S:g})")
    p.add_argument("--force", action="store_true",
                   help="measure the case again even when its results are up to date "
                        "(snakemake --forceall in its work directory)")
    p.add_argument("-l", "--list", action="store_true", help="list models, SKUs, backends, recipes")
    p.add_argument("-v", "--verbose", action="store_true", help="show snakemake's output")
    p.set_defaults(func=run)
