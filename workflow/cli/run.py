"""`benchflow run`: one case from the command line, after Forge's benchmark.py.

    benchflow run -m bert -c tiny -df Fp16 --sku cpu-host -o perf.json

The case runs through the same Snakemake workflow as a suite, nothing re-implemented:
the options become a one-case suite (the SKU, accuracy and timeouts taken from the
default suite or --configfile), written into a work directory of its own, and
snakemake runs there as a subprocess with that suite's results/report.json as target
(that report holds the case whatever its backend: IREE cases, torch batches and cases
known unsupported are all collected there). A second identical run finds everything
up to date. The case record is printed as one line and appended to -o OUT.json (a
benchflow results file, or a Forge results list that gets a Forge-shaped entry).
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
import contextlib
import copy
import fcntl
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from workflow.errors import ConfigError

# Forge's -df names (and ours) -> benchflow dtypes. Forge's block-float formats are
# Tenstorrent hardware formats with no counterpart here.
DTYPE_NAMES = {"f32": "f32", "fp32": "f32", "float32": "f32",
               "f16": "f16", "fp16": "f16", "float16": "f16",
               "bf16": "bf16", "fp16_b": "bf16", "bfloat16": "bf16"}
FORGE_BLOCK_FORMATS = ("bfp8", "bfp8_b", "bfp4", "bfp4_b")
SOURCE = "benchflow run"
# How long a run waits for another run of the same case (or a snakemake) by default.
LOCK_WAIT_S = 3600.0
RUN_LOCK = ".benchflow-run.lock"
# What Snakemake prints when another snakemake holds the directory (LockException), and
# how long to retry then: no benchflow run holds it (they wait on RUN_LOCK), so it is a
# snakemake started by hand, or a stale lock of a killed one that only --unlock removes.
SNAKEMAKE_LOCKED = "Directory cannot be locked"
SNAKEMAKE_LOCK_WAIT_S = 120.0


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


def flat_id(case_id: str) -> str:
    """A case id as one path component; '+' never occurs in ids, so this is one-to-one."""
    return case_id.replace("/", "+")


@dataclass
class RunPlan:
    suite: dict       # the one-case suite, as written to suite.yaml
    case: object      # workflow.suite.Case
    workdir: Path


def _training_available() -> bool:
    from workflow.suite.schema import load_schema

    return "modes" in load_schema()["$defs"]["workload"]["properties"]


def plan_run(args: argparse.Namespace) -> RunPlan:
    """The one-case suite for the options; raises ConfigError naming every problem."""
    from workflow.models.registry import all_models
    from workflow.suite.load import expand, load, own_layers
    from workflow.suite.schema import validate_suite

    models = all_models()
    spec = models.get(args.model)
    if spec is None:
        raise ConfigError([f"{SOURCE}: -m {args.model}: unknown model; expected one of "
                           f"{sorted(models)} (`benchflow list` describes them)"])
    problems = []
    if args.config is not None and args.config not in spec.configs:
        problems.append(f"{SOURCE}: -c {args.config}: {spec.name} has configs "
                        f"{list(spec.configs)}")
    if args.layers is not None and not spec.supports_layers:
        problems.append(f"{SOURCE}: --layers: {spec.name} has no layer count to set")
    if args.training and not _training_available():
        problems.append(f"{SOURCE}: -t: training mode is not available yet in this version "
                        "of the suite schema (no workload `modes`)")
    base = load(args.configfile)
    skus = base.config["skus"]
    sku_name = args.sku or next(iter(skus))
    if sku_name not in skus:
        problems.append(f"{SOURCE}: --sku {sku_name}: not a SKU of {base.source}; expected "
                        f"one of {sorted(skus)}")
    backend = args.backend or ("torch-eager" if args.training else "iree")
    if args.loop_count and backend != "iree":
        problems.append(f"{SOURCE}: --loop_count: sets the repetitions of iree-benchmark-module; "
                        f"{backend} times adaptive blocks of calls (torch.utils.benchmark), so "
                        "it would change nothing measured: leave it out, or use -b iree")
    if problems:
        raise ConfigError(problems)

    sku = copy.deepcopy(skus[sku_name])
    if args.loop_count and args.loop_count != sku["measurement"]["repetitions"]:
        # Forge's --loop_count: how many times the model runs; here the repetitions of
        # each measured invocation. That is another measurement than the SKU's own, so it
        # is a SKU of its own (`host-loop3`): its case id, work directory and records
        # differ, and neither run overwrites or invalidates the other's results. A loop
        # count equal to the SKU's repetitions changes nothing and is the plain case.
        sku["measurement"]["repetitions"] = args.loop_count
        sku_name = f"{sku_name}-loop{args.loop_count}"
    workload: dict = {"model": spec.name, "dtypes": [args.dtype]}
    if args.config:
        workload["configs"] = [args.config]
    if args.shape:
        workload["shapes"] = [args.shape]
    if args.layers and own_layers(spec, args.config or spec.default_config, args.layers):
        # The config's own depth is the plain case: the same suite, so nothing reruns.
        workload["layers"] = args.layers
    if args.training:
        workload["modes"] = ["training"]
    # Every other suite-level setting (accuracy, timeouts, torch backends, ...) is the
    # base suite's; its workloads and torchao entries are replaced by this one case.
    suite = {k: v for k, v in copy.deepcopy(base.config).items() if k != "model_params"}
    suite.update(suite_name="benchflow-run", skus={sku_name: sku}, backends=[backend],
                 recipes=[args.recipe], workloads=[workload])
    expanded = expand(validate_suite(suite, SOURCE), SOURCE)
    if len(expanded.cases) != 1:
        raise ConfigError([f"{SOURCE}: the options give {len(expanded.cases)} cases, "
                           "expected exactly one"])
    case = expanded.cases[0]
    workdir = Path(args.workdir) if args.workdir else Path("results/cli") / flat_id(case.id)
    return RunPlan(suite=suite, case=case, workdir=workdir)


def snakemake_argv(plan: RunPlan, suite_file: Path, cores: int) -> list[str]:
    from workflow.paths import REPORT
    from workflow.suite.schema import REPO_ROOT

    return [sys.executable, "-m", "snakemake", "-s", str(REPO_ROOT / "Snakefile"),
            "--directory", str(plan.workdir), "--configfile", str(suite_file),
            "--cores", str(cores), "--rerun-incomplete", REPORT]


def forge_details(output: str) -> dict:
    """What Forge's benchmark.py adds to each result it appends: the code's short git hash
    (`-dirty` when the tree is) and its commit date (yy-mm-dd); None where git cannot tell."""
    from workflow.records.provenance import git_sha
    from workflow.suite.schema import REPO_ROOT

    sha = git_sha(REPO_ROOT)
    short = None if sha is None else sha[:7] + ("-dirty" if sha.endswith("-dirty") else "")
    try:
        proc = subprocess.run(["git", "-C", str(REPO_ROOT), "show", "-s", "--format=%cd",
                               "--date=format:%y-%m-%d", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        date = proc.stdout.strip() if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        date = None
    return {"output": output, "git_hash": short, "date": date or None}


def summary_line(rec: dict) -> str:
    """One line: status, id, then the figures a user looks at first."""
    head = f"{rec['status']} {rec['id']}"
    if rec["status"] != "ok":
        first = (rec.get("error") or "").strip().splitlines()
        where = f" at {rec['stage']}" if rec.get("stage") else ""
        return f"{head}{where}: {first[0] if first else 'no error recorded'}"
    parts = [head]
    t = rec.get("timing")
    if t:
        noisy = ", noisy" if t.get("noisy") else ""
        # IREE counts --benchmark_repetitions, torch its timed calls per invocation.
        each = (f"{t['repetitions']} repetitions" if t.get("repetitions") is not None
                else f"{t.get('calls_per_invocation')} calls")
        parts.append(f"median {t['median_ms']:.4g} ms (cv {100 * t['cv']:.1f}%, "
                     f"{t['invocations']} invocations x {each}{noisy})")
    thr = rec.get("throughput") or {}
    if thr.get("gflops"):
        parts.append(f"{thr['gflops']:.3g} GFLOP/s")
    acc = rec.get("accuracy")
    if acc and acc.get("pcc") is not None:
        verdict = "" if acc.get("accurate") in (None, True) else " INACCURATE"
        parts.append(f"pcc {acc['pcc']:.6f}{verdict}")
    golden = rec.get("golden") or {}
    if golden.get("verdict"):
        parts.append(f"golden {golden['verdict']}")
    return "  ".join(parts)


class _Backoff:
    """Sleeps growing from 0.1 s to 5 s between tries until `deadline` (time.monotonic)."""

    def __init__(self, deadline: float):
        self.deadline, self.delay = deadline, 0.1

    def wait(self) -> bool:
        """Sleeps before the next try; False when the deadline has passed."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(self.delay, left))
        self.delay = min(self.delay * 2, 5.0)
        return True


@contextlib.contextmanager
def workdir_lock(workdir: Path, wait_s: float, case_id: str):
    """Holds the work directory's run lock (flock on RUN_LOCK, released when the process
    ends however it ends), waiting up to `wait_s` for another run of the same case;
    raises TimeoutError naming the directory when it stays held."""
    backoff = _Backoff(time.monotonic() + wait_s)
    with open(workdir / RUN_LOCK, "a") as fh:
        told = False
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not told:
                    print(f"benchflow run: waiting for another run of {case_id} "
                          f"({workdir} is locked)", file=sys.stderr)
                    told = True
                if not backoff.wait():
                    raise TimeoutError(
                        f"{workdir}: another run of {case_id} still holds it after "
                        f"{wait_s:g} s (--lock-wait)") from None
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def run_snakemake(argv: list[str], log: Path, verbose: bool, wait_s: float) -> int:
    """Runs snakemake; while another snakemake (not a benchflow run: those wait on the run
    lock) holds the work directory, waits and retries with backoff up to `wait_s`."""
    backoff = _Backoff(time.monotonic() + wait_s)
    while True:
        with log.open("w") as fh:
            proc = subprocess.run(argv, stdout=None if verbose else fh,
                                  stderr=subprocess.STDOUT if not verbose else None)
        locked = (not verbose and proc.returncode != 0
                  and SNAKEMAKE_LOCKED in log.read_text(errors="replace"))
        if not locked:
            return proc.returncode
        if not backoff.wait():
            with log.open("a") as fh:
                fh.write(f"benchflow run: still locked by another snakemake after {wait_s:g} s;"
                         " if none runs there, remove a stale lock with: snakemake --unlock "
                         f"--directory {argv[argv.index('--directory') + 1]}\n")
            return proc.returncode


def run_locked(plan: RunPlan, args: argparse.Namespace) -> dict | None:
    """Writes the one-case suite, runs snakemake and returns the case's record (None after
    printing why there is none); the caller holds the work directory's lock."""
    from workflow.records.storage import write_text

    suite_file = plan.workdir / "suite.yaml"
    write_text(suite_file, yaml.safe_dump(plan.suite, sort_keys=False))
    log = plan.workdir / "snakemake.log"
    argv = snakemake_argv(plan, suite_file.resolve(), args.cores)
    code = run_snakemake(argv, log, args.verbose,
                         min(getattr(args, "lock_wait", LOCK_WAIT_S), SNAKEMAKE_LOCK_WAIT_S))
    if code != 0:
        tail = "" if args.verbose else "\n".join(log.read_text().splitlines()[-15:])
        print(f"benchflow run: snakemake exited with {code} ({log}):\n{tail}",
              file=sys.stderr)
        return None
    from workflow.paths import REPORT
    from workflow.records.storage import read_json

    report = read_json(plan.workdir / REPORT)
    records = [c for c in report["cases"] if c["id"] == plan.case.id]
    if len(records) != 1:
        print(f"benchflow run: {plan.workdir / REPORT} has {len(records)} records of "
              f"{plan.case.id}, expected one", file=sys.stderr)
        return None
    return records[0]


def run(args: argparse.Namespace) -> int:
    if args.list:
        from workflow.cli import list as list_cmd

        return list_cmd.run(argparse.Namespace(configfile=args.configfile, cases=False))
    if not args.model:
        raise ConfigError([f"{SOURCE}: -m MODEL is required (`benchflow list` prints them)"])
    from workflow.records.results_file import ResultsFileError, append_records, read_results

    if args.output:
        # Refuse an unusable OUT.json before minutes of benchmarking, not after.
        try:
            read_results(args.output)
        except ResultsFileError as exc:
            print(f"benchflow run: {exc}", file=sys.stderr)
            return 1
    plan = plan_run(args)
    plan.workdir.mkdir(parents=True, exist_ok=True)
    try:
        with workdir_lock(plan.workdir, getattr(args, "lock_wait", LOCK_WAIT_S), plan.case.id):
            rec = run_locked(plan, args)
    except TimeoutError as exc:
        print(f"benchflow run: {exc}", file=sys.stderr)
        return 1
    if rec is None:
        return 1
    print(summary_line(rec))
    if args.output:
        try:
            total = append_records(args.output, [rec], forge=forge_details(args.output))
        except ResultsFileError as exc:
            print(f"benchflow run: {exc}", file=sys.stderr)
            return 1
        print(f"appended to {args.output} ({total} records)")
    return 0 if rec["status"] == "ok" else 1


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
    p.add_argument("-l", "--list", action="store_true", help="list models, SKUs, backends, recipes")
    p.add_argument("-v", "--verbose", action="store_true", help="show snakemake's output")
    p.set_defaults(func=run)
