"""`benchflow run`'s work: one case through the same Snakemake workflow as a suite
(cli/run.py parses the options, calls `run_one` and prints what it returns; its
docstring, the command's help, says what a user sees).

`plan_run` turns the options into a one-case suite (the SKU, accuracy and timeouts of
the default suite or --configfile) and its work directory, results/cli/<case id>;
`run_locked` writes the suite there and runs snakemake (through backends/proc.py) with
results/report.json as target, then reads the case's record back from that report,
which holds it whatever its backend. Runs of one case share their work directory, so
the second finds the first's results up to date: `workdir_lock` makes them wait for
each other, and `run_snakemake` waits the same way for a snakemake of someone else's
holding the directory; `is_cached` tells a record read back that way (an earlier run's,
appended marked cached) from one this run measured. `forge_details` is what a Forge
results list records beside each entry appended to -o.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from workflow.backends import proc
from workflow.errors import ConfigError
from workflow.files import directory_problem
from workflow.planning.other_run import OTHER_RUN
from workflow.planning.snakemake_command import snakemake_command

SOURCE = "benchflow run"
# The suite_name of every one-case suite: a work directory holds one case, told by the
# case ids of its report (check_workdir).
RUN_SUITE = "benchflow-run"
# How long a run waits for another run of the same case (or a snakemake) by default.
LOCK_WAIT_S = 3600.0
RUN_LOCK = ".benchflow-run.lock"
# What Snakemake prints when another snakemake holds the directory (LockException), or
# the Snakefile when it sees one running there (planning/other_run.py), and how long to
# retry then: no benchflow run holds it (they wait on RUN_LOCK), so it is a snakemake
# started by hand, or a stale lock of a killed one that only --unlock removes.
SNAKEMAKE_LOCKED = ("Directory cannot be locked", OTHER_RUN)
SNAKEMAKE_LOCK_WAIT_S = 120.0


class RunFailed(Exception):
    """Why a run gave no record (printed after `benchflow run: `)."""


def flat_id(case_id: str) -> str:
    """A case id as one path component; '+' never occurs in ids, so this is one-to-one.
    Past paths.MAX_ID (four names of up to 64 characters and a workload id may pass a
    component's 255 bytes) it keeps its start and a hash of the whole id."""
    import hashlib

    from workflow.paths import MAX_ID

    flat = case_id.replace("/", "+")
    if len(flat) <= MAX_ID:
        return flat
    return f"{flat[:MAX_ID - 17]}-{hashlib.sha256(flat.encode()).hexdigest()[:16]}"


@dataclass
class RunPlan:
    suite: dict       # the one-case suite, as written to suite.yaml
    case: object      # workflow.suite.Case
    workdir: Path


@dataclass
class RunOutcome:
    record: dict | None = None    # the case's record, once snakemake made it
    appended: int | None = None   # the records in -o OUT.json after appending it
    error: str | None = None      # why there is no record, or why it was not appended
    cached: bool = False          # the record is an earlier run's: this one measured nothing


def _training_available() -> bool:
    from workflow.suite.schema import load_schema

    return "modes" in load_schema()["$defs"]["workload"]["properties"]


def _model_spec(name: str, base, configfile: list[str] | None):
    """The ModelSpec -m names: a built-in model or one of the base suite's model_modules
    (loading the suite imported them into the registry), which the error lists too."""
    from workflow.models.registry import suite_models

    models = suite_models(base.config["model_modules"])
    spec = models.get(name)
    if spec is None:
        listing = " ".join(["benchflow list", *(["--configfile", *configfile]
                                                  if configfile else [])])
        raise ConfigError([f"{SOURCE}: -m {name}: unknown model; expected one of "
                           f"{sorted(models)}, built in or in the model_modules of "
                           f"{base.source} (`{listing}` describes them)"])
    return spec


def _option_problems(opts, spec, base, sku_name: str, backend: str) -> list[str]:
    """What is wrong with the options for this model and base suite, all of it."""
    problems = []
    if opts.config is not None and opts.config not in spec.configs:
        problems.append(f"{SOURCE}: -c {opts.config}: {spec.name} has configs "
                        f"{list(spec.configs)}")
    if opts.layers is not None and not spec.supports_layers:
        problems.append(f"{SOURCE}: --layers: {spec.name} has no layer count to set")
    if opts.training and not _training_available():
        problems.append(f"{SOURCE}: -t: training mode is not available yet in this version "
                        "of the suite schema (no workload `modes`)")
    skus = base.config["skus"]
    if sku_name not in skus:
        problems.append(f"{SOURCE}: --sku {sku_name}: not a SKU of {base.source}; expected "
                        f"one of {sorted(skus)}")
    if opts.loop_count and backend != "iree":
        problems.append(f"{SOURCE}: --loop_count: sets the repetitions of iree-benchmark-module; "
                        f"{backend} times adaptive blocks of calls (torch.utils.benchmark), so "
                        "it would change nothing measured: leave it out, or use -b iree")
    return problems


def _run_sku(sku: dict, sku_name: str, loop_count: int | None) -> tuple[str, dict]:
    """The SKU the case runs on, and its name: the suite's own, or with --loop_count a
    SKU of its own."""
    sku = copy.deepcopy(sku)
    if loop_count and loop_count != sku["measurement"]["repetitions"]:
        # Forge's --loop_count: how many times the model runs; here the repetitions of
        # each measured invocation. That is another measurement than the SKU's own, so it
        # is a SKU of its own (`host-loop3`): its case id, work directory and records
        # differ, and neither run overwrites or invalidates the other's results. A loop
        # count equal to the SKU's repetitions changes nothing and is the plain case.
        sku["measurement"]["repetitions"] = loop_count
        sku_name = f"{sku_name}-loop{loop_count}"
    return sku_name, sku


def _workload(opts, spec) -> dict:
    """The one workload entry of the options."""
    from workflow.suite.load import own_layers

    workload: dict = {"model": spec.name, "dtypes": [opts.dtype]}
    if opts.config:
        workload["configs"] = [opts.config]
    # The shape always, the model's default when --shape is not given: a suite that
    # lists its shapes (as the default suite does) names its cases with them, and a
    # case named without one would match none of their goldens or histories.
    workload["shapes"] = [opts.shape or list(spec.default_shape)]
    if opts.layers and own_layers(spec, opts.config or spec.default_config, opts.layers):
        # The config's own depth is the plain case: the same suite, so nothing reruns.
        workload["layers"] = opts.layers
    if opts.training:
        workload["modes"] = ["training"]
    return workload


def plan_run(opts) -> RunPlan:
    """The one-case suite for `opts` (the parsed `benchflow run` options); raises
    ConfigError naming every problem."""
    from workflow.suite.load import expand, load
    from workflow.suite.schema import validate_suite

    # The base suite first: loading it imports its model_modules, whose models -m may name.
    base = load(opts.configfile)
    spec = _model_spec(opts.model, base, opts.configfile)
    sku_name = opts.sku or next(iter(base.config["skus"]))
    backend = opts.backend or ("torch-eager" if opts.training else "iree")
    problems = _option_problems(opts, spec, base, sku_name, backend)
    if problems:
        raise ConfigError(problems)
    run_name, sku = _run_sku(base.config["skus"][sku_name], sku_name, opts.loop_count)
    other = base.config["skus"].get(run_name)
    if run_name != sku_name and other is not None and other != sku:
        # Its cases, work directory and results would be taken for that SKU's.
        raise ConfigError([f"{SOURCE}: --loop_count {opts.loop_count}: SKU {sku_name} with "
                           f"{opts.loop_count} repetitions is named {run_name}, which is also "
                           f"a SKU of {base.source} with other settings; expected a name of "
                           f"its own (rename that SKU, or run --sku {run_name})"])
    sku_name = run_name
    # Every other suite-level setting (accuracy, timeouts, torch backends, ...) is the
    # base suite's; its workloads and torchao entries are replaced by this one case.
    suite = {k: v for k, v in copy.deepcopy(base.config).items() if k != "model_params"}
    # A user's model comes with its own file only, by its absolute path (load resolved
    # it against the base suite's directory): suite.yaml is written to the work
    # directory, where a relative path would name nothing, and another model file of the
    # base suite has no part in this case.
    suite.update(suite_name=RUN_SUITE, skus={sku_name: sku}, backends=[backend],
                 recipes=[opts.recipe], workloads=[_workload(opts, spec)],
                 model_modules=[spec.source] if spec.source else [])
    expanded = expand(validate_suite(suite, SOURCE), SOURCE)
    if len(expanded.cases) != 1:
        raise ConfigError([f"{SOURCE}: the options give {len(expanded.cases)} cases, "
                           "expected exactly one"])
    case = expanded.cases[0]
    workdir = Path(opts.workdir) if opts.workdir else Path("results/cli") / flat_id(case.id)
    return RunPlan(suite=suite, case=case, workdir=workdir)


def check_workdir(plan: RunPlan, given: bool) -> None:
    """Raises ConfigError when the work directory holds results this run would replace:
    another suite's (its marker or report names it, planning/suite_dir.py), a suite file
    of someone else's where this run writes suite.yaml, or a report of another case (all
    one-case suites share RUN_SUITE, so the report's case ids tell them apart). Runs of
    the same case share a directory on purpose; the caller holds its lock."""
    from workflow.paths import REPORT
    from workflow.planning.suite_dir import SuiteIdentity, owner
    from workflow.records.report import read_report
    from workflow.suite.schema import read_yaml

    suite_file = plan.workdir / "suite.yaml"
    mine = SuiteIdentity(RUN_SUITE, (str(suite_file.resolve()),))
    found = owner(plan.workdir)
    held = None
    if found is not None and found != mine:
        held = f"the results of suite {found.describe()}" if isinstance(found, SuiteIdentity) \
            else f"results of a suite that cannot be told ({found})"
    elif suite_file.exists():
        try:
            name = (read_yaml(suite_file) or {}).get("suite_name")
        except (ConfigError, AttributeError):  # not YAML, not a mapping: not a run's
            name = None
        if name != RUN_SUITE:
            held = f"{suite_file}, a suite file of its own (suite_name {name!r})"
    if held is None and (plan.workdir / REPORT).is_file():
        try:
            ids = sorted({c["id"] for c in read_report(plan.workdir / REPORT)["cases"]})
        except ConfigError:  # a broken report of this suite: the run rebuilds it
            ids = [plan.case.id]
        if plan.case.id not in ids:
            held = f"the report of {', '.join(ids) or 'no case'} (another `benchflow run`)"
    if held is not None:
        where = f"--workdir {plan.workdir}" if given else str(plan.workdir)
        raise ConfigError([
            f"{SOURCE}: {where}: holds {held}, which this run of {plan.case.id} would "
            "replace; expected a directory of its own: pass --workdir an empty directory "
            "(or one of this case's runs), or leave --workdir out (results/cli/"
            f"{flat_id(plan.case.id)})"])


def snakemake_argv(plan: RunPlan, suite_file: Path, cores: int,
                   force: bool = False) -> list[str]:
    from workflow.paths import REPORT

    # --force: --forceall reruns every job the report needs, which in a one-case work
    # directory are the case's own jobs and the report step, nothing of another case.
    return snakemake_command("--directory", str(plan.workdir), "--configfile",
                             str(suite_file), "--cores", str(cores), "--rerun-incomplete",
                             *(["--forceall"] if force else []), REPORT)


def forge_details(output: str) -> dict:
    """What Forge's benchmark.py adds to each result it appends: the code's short git hash
    (`-dirty` when the tree is) and its commit date (yy-mm-dd); None where git cannot tell."""
    from workflow.backends.git import commit_date, git_sha
    from workflow.suite.schema import REPO_ROOT

    sha = git_sha(REPO_ROOT)
    short = None if sha is None else sha[:7] + ("-dirty" if sha.endswith("-dirty") else "")
    return {"output": output, "git_hash": short, "date": commit_date(REPO_ROOT)}


class _Backoff:
    """Sleeps growing from 0.1 s to `cap` between tries until `deadline`
    (time.monotonic): 1 s where a try is one flock call (a queued run then starts within
    a second of the lock's release; with 5 s, six queued runs each waited 2-6 s), 5 s
    where a try starts a whole snakemake."""

    def __init__(self, deadline: float, cap: float):
        self.deadline, self.delay, self.cap = deadline, 0.1, cap

    def wait(self) -> bool:
        """Sleeps before the next try; False when the deadline has passed."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(self.delay, left))
        self.delay = min(self.delay * 2, self.cap)
        return True


@contextlib.contextmanager
def workdir_lock(workdir: Path, wait_s: float, case_id: str):
    """Holds the work directory's run lock (flock on RUN_LOCK, released when the process
    ends however it ends), waiting up to `wait_s` for another run of the same case;
    raises TimeoutError naming the directory when it stays held."""
    backoff = _Backoff(time.monotonic() + wait_s, cap=1.0)
    with open(workdir / RUN_LOCK, "a") as fh:
        told = False
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not told:
                    # A progress note while it waits, not a result: stderr, at once.
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
    backoff = _Backoff(time.monotonic() + wait_s, cap=5.0)
    while True:
        with log.open("w") as fh:
            code = proc.run_attached(argv, out=None if verbose else fh)
        text = "" if verbose or code == 0 else log.read_text(errors="replace")
        locked = any(words in text for words in SNAKEMAKE_LOCKED)
        if not locked:
            return code
        if not backoff.wait():
            with log.open("a") as fh:
                fh.write(f"benchflow run: still locked by another snakemake after {wait_s:g} s;"
                         " if none runs there, remove a stale lock with: snakemake --unlock "
                         f"--directory {argv[argv.index('--directory') + 1]}\n")
            return code


def _earlier_record(plan: RunPlan) -> dict | None:
    """The case's record in the work directory's report before snakemake runs: None when
    there is none to read (no report yet, a damaged one: the run rebuilds it)."""
    from workflow.paths import REPORT
    from workflow.records.storage import read_json

    try:
        cases = read_json(plan.workdir / REPORT)["cases"]
    except (OSError, ValueError, ConfigError, KeyError, TypeError):
        return None
    found = [c for c in cases if isinstance(c, dict) and c.get("id") == plan.case.id]
    return found[0] if len(found) == 1 else None


def is_cached(earlier: dict | None, record: dict) -> bool:
    """Whether `record`, read back after snakemake, is an earlier run's rather than this
    one's measurement: the same record as before (no job ran), or, once the report was
    made again (a changed golden or report step), the same timing (the measuring job did
    not run: a measurement that ran has another measured_at and other medians). Told by
    content, not clocks: the measuring host (a SLURM node) may keep another time."""
    if earlier is None:
        return False
    return earlier == record or (record.get("timing") is not None
                                 and earlier.get("timing") == record["timing"])


def run_locked(plan: RunPlan, opts, wait_s: float) -> RunOutcome:
    """Writes the one-case suite, runs snakemake (`opts`: cores, verbose, force) and
    returns the case's record, cached or not; raises RunFailed saying why there is none.
    The caller holds the work directory's lock."""
    from workflow.paths import REPORT
    from workflow.records.storage import read_json, write_text

    suite_file = plan.workdir / "suite.yaml"
    write_text(suite_file, yaml.safe_dump(plan.suite, sort_keys=False))
    log = plan.workdir / "snakemake.log"
    earlier = _earlier_record(plan)
    argv = snakemake_argv(plan, suite_file.resolve(), opts.cores,
                          getattr(opts, "force", False))
    code = run_snakemake(argv, log, opts.verbose, min(wait_s, SNAKEMAKE_LOCK_WAIT_S))
    if code != 0:
        tail = "" if opts.verbose else "\n".join(
            log.read_text(errors="replace").splitlines()[-15:])
        raise RunFailed(f"snakemake exited with {code} ({log}):\n{tail}")
    report = read_json(plan.workdir / REPORT)
    records = [c for c in report["cases"] if c["id"] == plan.case.id]
    if len(records) != 1:
        raise RunFailed(f"{plan.workdir / REPORT} has {len(records)} records of "
                        f"{plan.case.id}, expected one")
    return RunOutcome(record=records[0], cached=is_cached(earlier, records[0]))


def run_one(opts) -> RunOutcome:
    """`benchflow run`'s whole job for `opts` (its parsed options): refuses an unusable
    -o file first, plans the case (ConfigError), runs it under the work directory's lock
    and appends its record to -o."""
    from workflow.records.results_file import (
        ResultsFileError,
        append_records,
        cached_record,
        read_results,
    )

    if opts.output:
        # Refuse an unusable OUT.json before minutes of benchmarking, not after.
        try:
            read_results(opts.output)
        except ResultsFileError as exc:
            return RunOutcome(error=str(exc))
    plan = plan_run(opts)
    problem = directory_problem(plan.workdir)  # a file, a FIFO, a link loop: named
    if problem:
        raise ConfigError([f"{plan.workdir}: {problem}; expected a work directory "
                           "(--workdir)"])
    given = bool(getattr(opts, "workdir", None))
    if plan.workdir.is_dir():  # refused before its lock file is left in another's directory
        check_workdir(plan, given)
    plan.workdir.mkdir(parents=True, exist_ok=True)
    wait_s = getattr(opts, "lock_wait", LOCK_WAIT_S)
    try:
        with workdir_lock(plan.workdir, wait_s, plan.case.id):
            # Under the lock: a run of another case into the same directory, started
            # beside this one, has written its report (or not yet begun) by now.
            check_workdir(plan, given)
            outcome = run_locked(plan, opts, wait_s)
    except (TimeoutError, RunFailed) as exc:
        return RunOutcome(error=str(exc))
    if opts.output:
        # A reused record says so in OUT.json too: two equal entries are one measurement.
        record = cached_record(outcome.record) if outcome.cached else outcome.record
        try:
            outcome.appended = append_records(opts.output, [record],
                                              forge=forge_details(opts.output))
        except ResultsFileError as exc:
            outcome.error = str(exc)
    return outcome
