"""The work of the two gates, `benchflow check` and `benchflow ab`: cli/check.py and
cli/ab.py parse the options, call `check_report` or `ab_gate` and print the lines they
return (their docstrings, the commands' help, say what a user sees and how each exits).

`check_report` judges a report (again, against --goldens, when given), measures its
inconclusive IREE cases again (gating/remeasure.py) and assesses it
(regression/gate.py). `ab_gate` refuses a suite without ab_pairs, builds results/ab.json
with snakemake in the suite's working directory (planning/suite_dir.py) and assesses its
rows. Both give one of regression/gate.py's outcomes; bad input is a ConfigError, which
the commands exit 2 on (cli/options.gate_command).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workflow.backends.proc import run_attached
from workflow.errors import ConfigError
from workflow.paths import AB
from workflow.records.report import read_report
from workflow.regression import explain, gate
from workflow.regression.gate import PASSED, REGRESSED, UNJUDGED
from workflow.stats.enums import ABVerdict, Status, Verdict

# The first word of a gate's last line, per outcome.
HEADS = {PASSED: "ok", REGRESSED: "FAIL", UNJUDGED: "COULD NOT JUDGE"}

# Why a case not judged counted as ok, by its kind (regression.gate.NotJudged.kind).
HINTS = {Verdict.NO_GOLDEN: "--require-goldens fails it",
         Verdict.INCONCLUSIVE: "--allow-inconclusive",
         Status.SKIPPED: "it did not run here by design"}


@dataclass
class GateResult:
    outcome: str                                     # regression/gate.py's PASSED, ...
    lines: list[str]                                 # what the command prints, in order
    rows: list[dict] = field(default_factory=list)   # `ab`: the rows of ab.json


def check_report(report_path: Path, *, goldens: Path | None, require_goldens: bool,
                 allow_inconclusive: bool, remeasure_budget_s: float,
                 settings, accept_config: tuple[str, ...] = (), unpaired: bool = False,
                 gate_on_machine: bool = False, goldens_from: str = "--goldens") -> GateResult:
    """`benchflow check`'s judgement of a report; settings: stats.verdict.Settings;
    accept_config: measurement configuration keys a case may differ from its golden in
    (records/measurement_config.KEYS); goldens_from: what named `goldens`, for its
    problems (--goldens, or a suite's goldens.dir). Each case is first decided by what
    changed since its golden (baselines/pair.py: unchanged, paired within
    remeasure_budget_s, or unpaired), unless `unpaired` (every case judged from the
    numbers, as before); `gate_on_machine`: an unchanged case's drift is judged as
    measured."""
    from workflow.baselines import pair
    from workflow.gating.remeasure import remeasure_inconclusive

    report = read_report(report_path)
    gate_config = {**asdict(settings), "accept_config": list(accept_config)}
    if goldens:
        problems = gate.goldens_dir_problems(report, goldens, goldens_from, strict=True)
        if problems:
            raise ConfigError(problems)
        report = gate.rejudge(report, goldens, gate_config)
    elif accept_config:
        report = gate.rejudge_config_differs(report, gate_config)
    decided = []
    if not unpaired:
        start = time.monotonic()
        report, decided = pair.decide(report, report_path, goldens_dir=goldens,
                                      budget_s=remeasure_budget_s,
                                      gate_on_machine=gate_on_machine)
        remeasure_budget_s = max(0.0, remeasure_budget_s - (time.monotonic() - start))
    base = run_directory(report_path)
    report, remeasured = remeasure_inconclusive(
        report, budget_s=remeasure_budget_s, gate_config=gate_config,
        goldens_dir=goldens, base=base)
    a = gate.assess(report, require_goldens=require_goldens,
                    allow_inconclusive=allow_inconclusive)
    lines = [d.line for d in decided if d.line] + [r.line() for r in remeasured]
    why = explain.finding_lines(report, a.regressed, goldens, base)
    why.update(pair.finding_lines(report, a.regressed))
    unchanged = sum(d.basis == pair.UNCHANGED for d in decided)
    tail = (f"; {unchanged} unchanged since blessed, "
            f"{sum(d.basis == pair.PAIRED for d in decided)} paired with their baseline, "
            f"{sum(d.basis == pair.UNPAIRED for d in decided)} unpaired") if decided else ""
    lines += gate_lines(report, a, why, summary_tail=tail)
    return GateResult(a.outcome, lines)


def run_directory(report_path: Path) -> Path | None:
    """The directory a report's paths (results/run/..., results/compile/...) are relative
    to, when it is not this one: the run's, above the report's results/ (`check --report
    n3/results/report.json` typed outside n3). None: this directory (a report elsewhere,
    results/report.json here)."""
    from workflow.paths import RESULTS

    where = Path(report_path).absolute().parent
    if where.name != RESULTS or where.parent.resolve() == Path.cwd().resolve():
        return None
    return where.parent.resolve()


def gate_lines(report: dict, a: gate.Assessment, why: dict[str, list[str]],
               notes: list[str] = (), summary_tail: str = "") -> list[str]:
    """The lines `check` prints of an assessment: REGRESSED (each with its explanation,
    `why`), COULD NOT JUDGE, NOT JUDGED lines, `notes`, then the summary line (its
    first word the outcome's: ok, FAIL, COULD NOT JUDGE), `summary_tail` at its end."""
    lines = []
    for f in a.regressed:
        lines += [f"REGRESSED {f.line()}", *why.get(f.case_id, [])]
    lines += [f"COULD NOT JUDGE {nj.line()}" for nj in a.unjudged]
    lines += [f"NOT JUDGED {nj.line()} (counted as ok: {HINTS.get(nj.kind, nj.kind)})"
              for nj in a.not_judged]
    lines += list(notes)
    result = gate.summary(report, a)
    n = len(report["cases"])
    compile_only = (f"; {result['compile_only']} compile-only case(s) judged on dispatch "
                    "count and size only (no device: no time)" if result["compile_only"]
                    else "")
    unjudged = f", {len(a.unjudged)} could not be judged" if a.unjudged else ""
    verdicts = ", ".join(f"{count} {getattr(v, 'value', v)}"
                         for v, count in result["time_verdicts"].items())
    lines.append(f"{HEADS[a.outcome]}: {len(a.regressed)} of {n} case(s) regressed{unjudged}, "
                 f"{a.judged} judged; time verdicts: {verdicts or 'none'}{compile_only}"
                 f"{summary_tail}")
    return lines


def check_against_history(report_path: Path, store, runs: int, *, where: str,
                          require_goldens: bool, allow_inconclusive: bool,
                          settings) -> GateResult:
    """`benchflow check --against-history N`: each case of the report judged against
    the last `runs` stored runs of the same case at the same measurement configuration
    in `store` (opened to read; `where` names it), by the same verdict rules and gate as
    against goldens (regression/rolling.py chooses the runs; history/baseline.py reads
    them). Runs holding any of the report's own measurements, runs newer than it and
    bisection steps are left out (disturbed runs are used); a case with fewer than 2 runs left
    could not be judged. Nothing is measured again: the baseline is no golden file to
    judge new invocations against."""
    from workflow.history import baseline
    from workflow.regression import rolling

    report = read_report(report_path)
    stamps, measurements, run_time = baseline.report_measurements(report_path)
    own = baseline.runs_holding(store, measurements)
    points = baseline.points(store, [c["id"] for c in report["cases"]])
    bases = {c["id"]: rolling.choose(c, points.get(c["id"], []), runs,
                                     stamps.get(c["id"], run_time), own)
             for c in report["cases"]}
    # Judged run against runs as measured (no run's level taken out: stats/verdict
    # .time_verdict): the baseline's spread holds how far runs move as a whole.
    report = {**report, "cases": [{**c, "golden": rolling.golden(c, bases[c["id"]], settings)}
                                  for c in report["cases"]]}
    a = rolling.settle(gate.assess(report, require_goldens=require_goldens,
                                   allow_inconclusive=allow_inconclusive),
                       report, bases)
    why = {f.case_id: [f"    {bases[f.case_id].line()}"] for f in a.regressed
           if bases[f.case_id].enough}
    regressed = {f.case_id for f in a.regressed}
    # A case judged on fewer runs than asked for says so (a regressed one under its line).
    notes = [f"FEWER RUNS {c['id']}: time {c['golden'].get('verdict')} "
             f"{bases[c['id']].line()}" for c in report["cases"]
             if bases[c["id"]].short and c["id"] not in regressed]
    tail = (f"; against the last {runs} stored run(s) of each case at its measurement "
            f"configuration in {where}")
    return GateResult(a.outcome, gate_lines(report, a, why, notes, tail))


def outcome(rows: list[dict], allow_inconclusive: bool) -> tuple[str, list[str]]:
    """The gate's outcome of A/B rows (workflow/regression/gate.py's names) and its
    lines: one per row not judged, naming the pair and why, then the summary."""
    def pair(r: dict) -> str:
        return f"{r['base']} -> {r['new']} {r['workload']}"

    regressed = [r for r in rows if r["verdict"] == ABVerdict.REGRESSION]
    failed = [r for r in rows if r["verdict"] == ABVerdict.FAILED]
    inconclusive = [r for r in rows if r["verdict"] == ABVerdict.INCONCLUSIVE]
    unjudged = failed + ([] if allow_inconclusive else inconclusive)
    result = REGRESSED if regressed else UNJUDGED if unjudged else PASSED
    lines = [f"COULD NOT JUDGE {pair(r)}: failed at {r.get('failed_stage')}, no rounds "
             f"measured: {r.get('error')}" for r in failed]
    lines += [f"{'NOT JUDGED' if allow_inconclusive else 'COULD NOT JUDGE'} {pair(r)}: "
              f"inconclusive, its interval spans the margin after {r['rounds']} rounds "
              f"({r['stop_reason']})"
              + (" (counted as ok: --allow-inconclusive)" if allow_inconclusive else "")
              for r in inconclusive]
    lines.append(f"{HEADS[result]}: {len(regressed)} of {len(rows)} A/B row(s) regressed, "
                 f"{len(unjudged)} could not be judged")
    return result, lines


def read_rows(path: Path, row_paths: list[str] | None = None) -> list[dict]:
    """The rows of an ab.json, checked (records/ab.read_ab) and, given the suite's pair
    records (row_paths, relative to the file's directory's parent), checked against them
    too: bad input (ConfigError, one line) when it cannot be read or no longer holds
    them, never a hand edit taken for a measurement."""
    from workflow.comparisons.ab import ab_damage
    from workflow.records.ab import read_ab
    from workflow.render.text import printable

    try:
        rows = read_ab(path, rows_only=True)["pairs"]
        problem = (ab_damage(path, [str(path.parent.parent / p) for p in row_paths])
                   if row_paths is not None else None)
    except ConfigError as exc:
        raise ConfigError([printable(p) for p in exc.problems]) from None
    if problem:
        raise ConfigError([printable(problem) + "; run `benchflow ab` again to build it "
                           "from the records"])
    if not rows:
        raise ConfigError([f"{path}: pairs: empty; expected a row per pair and workload"])
    return rows


def declares_pairs(configfile: Path):
    """The suite; bad input before any job: a suite that is not one, or declares no
    ab_pairs."""
    from workflow.suite.load import load

    if not configfile.is_file():
        raise ConfigError([f"{configfile}: no such suite file"])
    suite = load([str(configfile)], {})
    if not suite.has_ab:
        raise ConfigError([f"{configfile}: ab_pairs: none declared; expected at least one "
                           "{base, new} pair of SKUs or torch sides (docs/ab.md, \"A/B "
                           "comparisons\")"])
    return suite


def ab_directory(suite, configfile: Path, directory: Path | None) -> tuple[Path, list[str]]:
    """Where the suite's results/ are, and the snakemake options that say so: --directory
    when given, else where snakemake started here puts them (planning/suite_dir.py)."""
    from workflow.planning.plan import Refused
    from workflow.planning.suite_dir import suite_dir

    if directory is not None:
        return directory, ["--directory", str(directory)]
    try:
        return suite_dir(suite, [configfile], directory_given=False).path, []
    except Refused as exc:
        raise ConfigError(exc.problems) from None


def ab_gate(configfile: Path, *, cores: str, directory: Path | None, extra: list[str],
            allow_inconclusive: bool) -> GateResult:
    """`benchflow ab`'s whole job: the suite's A/B rows built by snakemake (its output
    attached to ours) and assessed; extra: more snakemake options."""
    from workflow.planning.snakemake_command import snakemake_command

    suite = declares_pairs(configfile)
    where, directory_options = ab_directory(suite, configfile, directory)
    # The target before --configfile, which takes every word after it.
    code = run_attached(snakemake_command(
        *directory_options, "--cores", str(cores), AB, *[a for a in extra if a != "--"],
        "--configfile", str(configfile.resolve())))
    if code != 0:
        return GateResult(UNJUDGED, [f"COULD NOT JUDGE: snakemake exited {code} before {AB} "
                                     "was complete (its output above names the failed job)"])
    from workflow.paths import ab_row_paths, torch_ab_row_paths

    rows = read_rows(where / AB, ab_row_paths(suite.ab_pairs)
                     + torch_ab_row_paths(suite.torch_ab_pairs))
    result, lines = outcome(rows, allow_inconclusive)
    return GateResult(result, lines, rows)
