"""What the Snakefile and the rules need at load time: the validated suite (or a refusal
naming every problem), and the job lists and params planned from it."""

from __future__ import annotations

import json
import os
import re

from snakemake.exceptions import WorkflowError

from workflow.benchfile import plan as bench_plan
from workflow.benchfile.attach import attach
from workflow.errors import ConfigError
from workflow.paths import GATE as GATE_TARGET
from workflow.suite.load import Suite, load
from workflow.suite.overrides import yaml_scalars
from workflow.suite.schema import DEFAULT_CONFIG


class Refused(WorkflowError):
    """A suite, benchmark file or golden file that refuses the whole run before any job.

    Its message is what the user sees: one heading, then every problem on its own line.
    The Snakefile prints it and exits without a traceback; any other caller of the
    workflow gets it as Snakemake's own WorkflowError."""

    def __init__(self, what: str, problems: list[str]):
        self.what = what
        self.problems = list(problems)
        super().__init__("\n".join([f"benchflow: {what}, no job was run:",
                                    *(f"  {problem}" for problem in self.problems)]))


def load_suite(cli_configfiles, cli_overrides) -> Suite:
    """Loads the suite named by --configfile (default config/config.yaml) plus --config
    overrides; raises Refused listing every problem (file, key path, expectation), a
    problem the overrides brought naming the override, not the file."""
    paths = [str(p) for p in cli_configfiles] or [str(DEFAULT_CONFIG)]
    # Nested values as YAML reads them (Snakemake leaves them strings): shown so too.
    overrides = {k: yaml_scalars(v) for k, v in (cli_overrides or {}).items()}
    # The files are read here, not taken from Snakemake's merged `config`, so that
    # errors name the file they come from.
    try:
        return load(paths, overrides)
    except ConfigError as exc:
        problems = exc.problems
    if overrides:
        try:
            load(paths)
            own: list[str] = []
        except ConfigError as exc:
            own = exc.problems
        problems = blame_overrides(problems, own, ", ".join(paths), overrides)
    raise Refused("invalid suite", problems)


def command_suite(cli_configfiles, cli_overrides) -> Suite:
    """load_suite's suite for a command (`benchflow list`, `benchmarks`), which prints
    problems as every other command does: the same problems, as a ConfigError."""
    try:
        return load_suite([str(f) for f in cli_configfiles or []], cli_overrides)
    except Refused as refusal:
        raise ConfigError(refusal.problems) from None


def override_text(key: str, value) -> str:
    """An override as it can be written on the command line: Snakemake parses a --config
    value as YAML, and JSON is such YAML."""
    return f"--config {key}={json.dumps(value, default=str)}"


def blame_overrides(problems: list[str], own: list[str], source: str,
                    overrides: dict) -> list[str]:
    """`problems` of the suite merged with --config `overrides`, each one the files alone
    do not have (`own`) named by the override it comes from instead of the files
    (`--config skus=...: skus: expected object ...`): the override of the key path's top
    key, else all of them (a problem of the whole, such as an unknown key)."""
    out = []
    for problem in problems:
        rest = problem.removeprefix(f"{source}: ")
        if problem in own or rest == problem:
            out.append(problem)
            continue
        top = re.split(r"[.\[:]", rest, maxsplit=1)[0]
        keys = [top] if top in overrides else list(overrides)
        out.append(f"{' '.join(override_text(k, overrides[k]) for k in keys)}: {rest}")
    return out


def attach_benchmark_files(suite: Suite):
    """The suite's benchmark files (workflow.benchfile.select.Selection), also kept on it
    as suite.benchmark_files; a bad selection or benchmark file raises Refused."""
    try:
        return attach(suite)
    except ConfigError as exc:
        raise Refused("invalid benchmark files", exc.problems) from None


def check_goldens(suite: Suite) -> None:
    """A broken golden file refuses the run before any job, like a broken suite."""
    from workflow.regression.goldens import check_dir

    problems = check_dir(suite.config["goldens"]["dir"], suite.config["skus"])
    if problems:
        raise Refused("invalid golden files", problems)


# A run asking for the gate exits as the gates do for bad input (cli/options.EXIT_CODES:
# 2), not 1, which a gate's caller reads as a regression.
GATE_BAD_INPUT_EXIT = 2


def gate_in_targets(argv: list[str]) -> bool:
    """Whether a snakemake command line asks for the gate: `results/gate.json` (also as
    ./results/gate.json or an absolute path to this directory's) or the rule `gate` among
    its targets. Read with Snakemake's own parser, which knows which options take values
    (`--config a=1 x=2` is no target): Snakemake's settings, its targets among them, are
    not yet set while the Snakefile is read."""
    from snakemake.cli import get_argument_parser

    try:
        args, _ = get_argument_parser().parse_known_args(argv[1:])
    except SystemExit:  # Snakemake itself refuses such a command line, in its own words
        return False
    return any(t == "gate" or os.path.abspath(t) == os.path.abspath(GATE_TARGET)
               for t in getattr(args, "targets", None) or [])


def gate_goldens_problems(suite: Suite, bench) -> list[str]:
    """The suite's goldens.dir when it does not exist and the gate would need it: the
    cases that would be judged against it (every IREE and torch case of the suite, and
    each benchmark file's case whose file holds no goldens of its own), as the gate job
    counts them after measuring (regression.gate.goldens_dir_problems). [] when it exists
    or no case needs it. Relative to the working directory, as the gate reads it."""
    from pathlib import Path

    directory = suite.config["goldens"]["dir"]
    if os.path.lexists(directory):
        return []  # a file there is the suite's own problem (suite/goldens_dir.py)
    bare = [c.id for c in suite.iree_cases]
    bare += [c.id for key in sorted(suite.torch_batches) for c in suite.torch_batch(*key)]
    bare += bench_plan.cases_without_goldens(bench)
    if not bare:
        return []
    shown = directory if directory.isprintable() else repr(directory)
    where = "" if Path(directory).is_absolute() else f" (from {Path.cwd()})"
    return [f"{suite.source}: goldens.dir: {shown}: no such directory{where}; the gate "
            f"({GATE_TARGET}) would judge {len(bare)} case(s) against it, e.g. {bare[0]}, "
            "and fail after measuring them all; expected the directory of golden files "
            "(`benchflow bless --goldens DIR --yes` writes one), or leave the gate out of "
            "this run's targets"]


def bench_case_paths(bench) -> list[str]:
    """The case records of the suite's benchmark files (`bench`, from
    attach_benchmark_files), judged in their own cheap case step."""
    return bench_plan.case_paths(bench)


def case_golden_input(suite: Suite, sku: str) -> list[str]:
    """The SKU's golden file as an input of a step that judges its cases, when it exists
    (regression.gate.golden_input): blessing reruns those steps only."""
    from workflow.regression.gate import golden_input

    return golden_input(suite.config["goldens"]["dir"], sku)


def report_golden_inputs(suite: Suite) -> list[str]:
    """Golden files of the SKUs with IREE or torch cases: the report step judges those
    cases (cheap) instead of their measuring jobs, so blessing never re-measures."""
    skus = sorted({c.sku for c in suite.iree_cases} | {key[0] for key in suite.torch_batches})
    return [g for sku in skus for g in case_golden_input(suite, sku)]


def peak_input(suite: Suite) -> list[str]:
    """[results/peak.json] as an input of the renders when the suite times a case on this
    machine's CPU (an IREE case on a local device, a torch case on the CPU); else none,
    and measure_peak never runs: the peak is the 100% of percent-of-peak figures, which
    only such a case has, and it holds the bench slot and every core for seconds in a run
    whose cases are all unsupported, compile-only or on a GPU. (Benchmark files have no
    FLOP count, so no GFLOP/s to compare.)"""
    from workflow.backends.iree.tools import LOCAL_DEVICES
    from workflow.paths import PEAK

    iree = any(suite.sku(sku)["iree"]["device"] in LOCAL_DEVICES for sku, _ in suite.iree_batches)
    torch = any(c.workload.device == "cpu" for key in suite.torch_batches
                for c in suite.torch_batch(*key))
    return [PEAK] if iree or torch else []


def iree_builds() -> tuple[str, str]:
    """The builds of the IREE compiler and runtime packages (backends/builds.py): params
    of the benchmark-file and A/B rules, so that another build reruns what it made."""
    from workflow.backends.builds import package_build

    return package_build("iree-base-compiler"), package_build("iree-base-runtime")


def torch_batch_plan(suite: Suite, sku: str, batch: str) -> list:
    """What a run_torch job measures; also its params, so a changed case reruns its batch."""
    return [{"id": c.id, "identity": c.identity(), "workload": c.workload.spec(),
             "backend": c.backend, "recipe": c.recipe} for c in suite.torch_batch(sku, batch)]


def torch_batch_backends(suite: Suite, sku: str, batch: str) -> dict[str, dict]:
    """The torch backends a batch's cases use, by name (a param: an edited backend reruns
    the batches that use it)."""
    names = sorted({c.backend for c in suite.torch_batch(sku, batch)})
    return {name: suite.config["torch_backends"][name] for name in names}


def unsupported_plan(suite: Suite) -> list[dict]:
    """Cases known unsupported while planning, recorded by the report step."""
    return [{"identity": c.identity(), "reason": c.unsupported} for c in suite.unsupported_cases]


def bench_module_files(bench, sku: str, benchmark: str, pattern: str) -> list[str]:
    """The compiled modules (or their stage JSONs: `pattern` is BF_COMPILE_VMFB or
    BF_COMPILE_META) that a pipeline benchmark file loads before its own, on one SKU."""
    return bench_plan.module_files(bench, sku, benchmark, pattern)


def bench_identity(bench, sku: str, benchmark: str) -> dict:
    """The case identity of one benchmark file on one SKU."""
    return bench_plan.identity(bench_plan.case_of(bench, sku, benchmark))


def bench_provenance(bench, sku: str, benchmark: str) -> dict:
    """Where a benchmark file's case comes from: the file, its golden key, its device, the
    MLIR and weights it was found with."""
    return bench_plan.provenance(bench, sku, benchmark)


def bench_skipped_plan(bench) -> list[dict]:
    """The benchmark files' (file, SKU) pairs that cannot run here, with their reasons:
    recorded as skipped cases by the report step (never dropped, never a missing input)."""
    return bench_plan.skipped_plan(bench)


def iree_batch_plan(suite: Suite, sku: str, batch: str) -> list[dict]:
    """What an IREE batch job measures, also its params: a changed case reruns its batch
    (whose job then re-measures that case only)."""
    return [{"spec": c.workload.export_spec(), "identity": c.identity()}
            for c in suite.iree_batches[(sku, batch)]]


def sku_settings(suite: Suite, sku: str) -> dict:
    """The parts of a SKU that decide its results (its compile flags, device and
    measurement protocol): a rule param, so changing them reruns that SKU's jobs only.
    The description is left out: rewording it re-measures nothing (keys.sku_settings)."""
    from workflow.planning.keys import sku_settings as settings

    return settings(suite.sku(sku))


def ab_pair_plan(suite: Suite, base: str, new: str, workload: str) -> dict:
    """What an IREE A/B job makes its row from, beyond the SKUs' settings (its params: a
    change reruns the pair, and only the pairs it concerns): the workload's export spec,
    and per side the content its export and module are made from, as an IREE batch's
    (model sources, exporter, torch and tool builds: planning/keys.py), by content."""
    from workflow.planning.keys import iree_batch_content as content

    spec = suite.workloads[workload].export_spec()
    return {"spec": spec, "content": {role: content([spec], suite.sku(sku))
                                      for role, sku in (("base", base), ("new", new))}}


def speedup_ab_rows(suite: Suite) -> list[str]:
    """The torch A/B rows that measure a speedup the report shows (a report input): a
    pair of one SKU and workload whose base is the new side's baseline recipe on its
    backend, or its recipe on torch-eager (stats/speedup.base_key). The report takes
    such a speedup from the row, interleaved and with its interval, not from two batches
    measured minutes apart."""
    from workflow.paths import torch_ab_row_paths
    from workflow.stats.speedup import base_key

    def key(case) -> tuple[str, str, str, str]:
        return case.sku, case.backend, case.workload.id, case.recipe

    chosen = {}
    for k, pair in suite.torch_ab_pairs.items():
        new = dict(zip(("sku", "backend", "workload", "recipe"), key(pair.new.case),
                       strict=True))
        if key(pair.base.case) in (base_key(new, "vs_baseline"), base_key(new, "vs_eager")):
            chosen[k] = pair
    return torch_ab_row_paths(chosen)


def torch_ab_plan(suite: Suite, base: str, new: str, workload: str) -> dict:
    """What a torch A/B job measures (its params: a changed side reruns the pair): per
    side its label, case (as a torch batch plans it), torch backend and SKU settings, and
    the content its worker builds from (model sources, recipes' code, torch builds)."""
    from workflow.planning.keys import torch_batch_content as content

    pair = suite.torch_ab_pairs[(base, new, workload)]
    sides = {}
    for role, side in (("base", pair.base), ("new", pair.new)):
        c = side.case
        sides[role] = {"label": side.label, "side": side.to_dict(),
                       "case": {"id": c.id, "identity": c.identity(),
                                "workload": c.workload.spec(), "recipe": c.recipe},
                       "backend": suite.config["torch_backends"][c.backend],
                       "sku": sku_settings(suite, c.sku),
                       "content": content([c.workload.spec()], suite.sku(c.sku))}
    return {"workload": pair.workload, **sides}


def iree_batch_content(suite: Suite, sku: str, batch: str) -> dict:
    """The content an IREE batch is made from, beyond its plan (model sources, tool builds):
    a rule param, so an edited model file reruns the batches of its cases and
    `snakemake -n` says which file changed (planning/keys.py)."""
    from workflow.planning.keys import iree_batch_content as content

    return content([c.workload.export_spec() for c in suite.iree_batches[(sku, batch)]],
                   suite.sku(sku))


def iree_automatic(suite: Suite, sku: str) -> dict:
    """What the SKU's automatic IREE values are on this machine (planning/keys.py: the GPUs
    of a cuda device, `target_cpu: host`'s CPU model, local-task's CPUs): a param of the
    benchmark-file rules, as of the IREE batches' content, so that a results directory
    taken to another machine compiles and measures again there."""
    from workflow.planning.keys import iree_automatic as automatic

    return automatic(suite.sku(sku))


def torch_batch_content(suite: Suite, sku: str, batch: str) -> dict:
    """The content a torch batch is made from, beyond its plan: its models' sources, the
    recipes' code, the torch and torchao builds of its interpreter."""
    from workflow.planning.keys import torch_batch_content as content

    return content([c.workload.spec() for c in suite.torch_batch(sku, batch)],
                   suite.sku(sku))


def verify_batches(suite: Suite) -> list[str]:
    """Checks, at load, the files of every finished batch's cases (IREE: their records,
    MLIR, inputs, references, modules; torch: their records), by size and mtime, hashing
    only what changed, and returns one line per member that no longer verifies (deleted,
    cut short, edited, swapped). Such a batch gets a new repair note (planning/members.py),
    a param of its job (batch_repair), so Snakemake reruns it: an IREE batch measures
    exactly those members again and reuses the others, a torch batch measures its cases
    again."""
    from pathlib import Path

    from workflow.paths import iree_batch_path, torch_batch_dir
    from workflow.planning.members import damaged_members, mark_repair

    batches = [(iree_batch_path(k), cases) for k, cases in suite.iree_batches.items()]
    batches += [(torch_batch_dir(k), suite.torch_batch(*k)) for k in suite.torch_batches]
    lines = []
    for batch, cases in batches:
        if not Path(batch).exists():
            continue
        damaged = damaged_members(batch, [c.id for c in cases])
        if damaged:
            mark_repair(batch, damaged)
            lines += [f"benchflow: {case_id}: {why}; its batch {batch} measures it again"
                      for case_id, why in damaged]
    return lines


def batch_repair(batch: str) -> str | None:
    """The repair note of a batch (a param: a new note reruns the batch)."""
    from workflow.planning.members import repair_note

    return repair_note(batch)


def report_notes(suite: Suite) -> list[str]:
    """What the report's provenance.notes says the suite changed of its files' own
    settings: a torchao_device that moved entries off the device their file asked for."""
    from workflow.suite.torchao import override_note

    note = override_note(suite.config)
    return [note] if note else []


def report_records(suite: Suite, bench) -> list[dict]:
    """Every measured case the report step reads: its record's path, its identity,
    whether the report step judges it against the goldens (IREE and torch cases; a
    benchmark file's case was judged in its own case step), and the output that makes
    it again (its batch list or directory, or the benchmark file's case record)."""
    from workflow.paths import CASE, iree_batch_path, torch_batch_dir, torch_case_record

    out = []
    for key, cases in suite.iree_batches.items():
        for c in cases:
            ident = c.identity()
            out.append({"record": CASE.format(sku=ident["sku"], backend="iree",
                                              workload=ident["workload"],
                                              recipe=ident["recipe"]),
                        "identity": ident, "judge": True, "redo": iree_batch_path(key)})
    for key in suite.torch_batches:
        for c in suite.torch_batch(*key):
            ident = c.identity()
            out.append({"record": torch_case_record(torch_batch_dir(key), ident),
                        "identity": ident, "judge": True, "redo": torch_batch_dir(key)})
    return out + bench_plan.case_records(bench)

