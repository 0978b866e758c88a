"""The regression gate: golden verdicts into case records, and the check of a report.

The case step calls `golden_section` (its verdict travels in the case record, so the
report shows it); `check` reads those verdicts back, or judges a report afresh against
another goldens directory. `results/report.json` never fails because of a regression:
only `benchflow check` and the `results/gate.json` target do.

A gate never passes without having judged (issue 20): `assess` sorts every case into
regressed, could not judge (inconclusive, failed with nothing judged, no golden when
goldens are required, or no golden anywhere in the report) and not judged but counted
as ok (no golden, skipped, inconclusive when allowed), and the outcome is the worst of
them: bad input, regressed, could not judge, passed (DESIGN.md, "Goldens and the gate").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from workflow.benchfile.plan import file_goldens_of
from workflow.errors import ConfigError
from workflow.records import measurement_config
from workflow.records.case import section
from workflow.records.storage import write_json
from workflow.regression import drift, goldens
from workflow.stats import verdict
from workflow.stats.drift import Drift
from workflow.stats.enums import Status, Verdict, status_at
from workflow.stats.ratio_text import ratio_text
from workflow.suite.defaults import gate_settings, goldens_default


def golden_section(case: dict, golden_file: str | Path | None, gate_config: dict | None,
                   file_goldens: dict | None = None, file_source: str | None = None,
                   drift: Drift | None = None) -> dict:
    """The `golden` section of a case record: every field the report schema gives it,
    those the verdict leaves open at their defaults, so that it is complete wherever it
    is used. drift: the case's run's common drift (regression/drift.py), taken out."""
    if isinstance(golden_file, list | tuple):  # a Snakemake input that may be empty
        golden_file = golden_file[0] if golden_file else None
    ref = goldens.lookup(case["id"], golden_file, file_goldens, file_source)
    judged = verdict.judge(case, ref, gate_settings(gate_config), drift)
    if case.get("status") == Status.COMPILE_ONLY and ref is not None:
        judged = _compile_only(case, ref, judged)
    accepted = (gate_config or {}).get("accept_config") or ()
    return section("golden", like_with_like(case, ref, judged, accepted))


def like_with_like(case: dict, ref: verdict.GoldenRef | None, judged: dict,
                   accepted=()) -> dict:
    """A time judged against a golden measured at another measurement configuration
    (threads, invocation kind, device, measurement settings: records/
    measurement_config.py) is not judged: inconclusive, with each key and both values in
    `config_differs` and the reason, and the gate's could-not-judge (assess). Rerunning
    unchanged code at 1 thread against a golden at 2 read as "x1.7 regressed". The
    dispatch count and size do not depend on it and stay judged. `accepted`: keys the
    user accepts as different (--accept-config, goldens.accept_config)."""
    timing = case.get("timing")
    if (ref is None or not ref.config or not ref.median_ms or not timing
            or case.get("status") != Status.OK):
        return judged
    diffs = measurement_config.differences(measurement_config.of_case(case), ref.config,
                                           accepted)
    if not diffs:
        return judged
    keys = ",".join(d["key"] for d in diffs)
    would = judged.get("verdict")
    ratio = judged.get("ratio")
    return {**judged, "verdict": Verdict.INCONCLUSIVE, "config_differs": diffs,
            "reason": f"measurement configuration differs: "
                      f"{measurement_config.describe_all(diffs)}; not judged (it would be "
                      f"{would}{f' at x{ratio_text(ratio)}' if ratio is not None else ''}"
                      "): rebless "
                      f"at this configuration, or accept it with --accept-config {keys}"}


def _compile_only(case: dict, ref: verdict.GoldenRef, judged: dict) -> dict:
    """A compile-only case (its device is absent here) is judged on what it measured, its
    dispatch count and binary size; a golden time is not a regression: the time was not
    measured here, and the reason says so."""
    why = " ".join((case.get("error") or "no device here").split())
    if ref.median_ms is not None:
        reason = (f"compile-only: time not measured here ({why}); the golden time "
                  f"{ref.median_ms:g} ms is not judged, dispatch count and size are")
    else:
        reason = (f"compile-only: time not measured here ({why}); dispatch count and size "
                  "judged")
    return {**judged, "verdict": Verdict.NO_GOLDEN, "ratio": None, "p_value": None,
            "test": None, "reason": reason}


def golden_input(directory: str, sku: str) -> list[str]:
    """The SKU's golden file as a rule input when it exists: blessing reruns the case
    steps (cheap) so that their verdicts follow the goldens."""
    path = goldens.golden_path(directory, sku)
    return [str(path)] if path.exists() else []


@dataclass(frozen=True)
class Finding:
    case_id: str
    aspects: list[str]   # time, dispatch, size
    detail: str

    def line(self) -> str:
        return f"{self.case_id}: {', '.join(self.aspects)} regressed ({self.detail})"


def _detail(g: dict) -> str:
    parts = []
    if g.get("verdict") == Verdict.REGRESSION:
        if g.get("basis") == "paired":  # baselines/pair.py: the pair decided
            parts.append(f"time {g.get('reason')}")
        elif g.get("ratio") is not None:
            level = (f" (of its run's level: the {g['drift']['group']} cases moved "
                     f"x{ratio_text(g['drift']['factor'])} together)" if g.get("drift") else "")
            parts.append(f"time x{ratio_text(g['ratio'])}{level} vs tolerance "
                         f"x{g.get('tolerance'):g}, p={g.get('p_value'):.4f}")
        else:
            parts.append(g.get("reason") or "time")
    if g.get("dispatch_verdict") == Verdict.REGRESSION:
        parts.append(f"dispatches x{ratio_text(g.get('dispatch_ratio') or 0)} of "
                     f"{g.get('dispatch_golden')}")
    if g.get("size_verdict") == Verdict.REGRESSION:
        parts.append(f"size x{ratio_text(g.get('size_ratio') or 0)} of "
                     f"{g.get('size_golden_bytes')} B (tolerance x{g.get('size_tolerance'):g})")
    return "; ".join(parts)


def judged_again(case: dict, golden_file: str | Path | None, gate_config: dict | None,
                 drift: Drift | None = None) -> dict:
    """The case's `golden` section judged afresh (its own benchmark file's goldens too)."""
    fg, source = file_goldens_of(case)
    return {**case.get("golden", {}),
            **golden_section(case, golden_file, gate_config, fg, source, drift)}


def judged_with_drift(cases: list[dict], golden_file: Callable[[dict], Path | None],
                      gate_config: dict | None) -> list[dict]:
    """`cases`, judged already, judged again with their run's common drift taken out
    where their group has one (regression/drift.py); golden_file(case): its golden
    file."""
    return drift.rejudged(cases, lambda c, d: judged_again(c, golden_file(c), gate_config, d))


def golden_ref(case: dict, golden_file: str | Path | None) -> verdict.GoldenRef | None:
    """The golden a case is judged against (golden_section's lookup)."""
    fg, source = file_goldens_of(case)
    return goldens.lookup(case["id"], golden_file, fg, source)


def golden_file_for(case: dict, goldens_dir: str | Path | None = None,
                    base: Path | None = None) -> Path | None:
    """The golden file a case is judged against: its SKU's in `goldens_dir`, else the
    golden file its verdict came from (None when that was its benchmark file), a relative
    one read from `base` (the run's directory, when it is not the working directory)."""
    if goldens_dir is not None:
        return goldens.golden_path(goldens_dir, case["sku"])
    source = (case.get("golden") or {}).get("source")
    if not source or source == (case.get("provenance") or {}).get("benchmark_file"):
        return None
    path = Path(source) if base is None or Path(source).is_absolute() else base / source
    return path if path.is_file() else None


def rejudge(report: dict, goldens_dir: str | Path, gate_config: dict | None) -> dict:
    """A copy of the report whose cases are judged against another goldens directory."""
    out = dict(report)
    cases = [{**case, "golden": judged_again(case, golden_file_for(case, goldens_dir),
                                             gate_config)}
             for case in report["cases"]]
    out["cases"] = judged_with_drift(cases, lambda c: golden_file_for(c, goldens_dir),
                                     gate_config)
    return out


def rejudge_config_differs(report: dict, gate_config: dict) -> dict:
    """A copy of the report whose cases measured at another configuration than their
    golden are judged again with gate_config's accept_config (check --accept-config)."""
    out = dict(report)
    again = {c["id"] for c in report["cases"] if (c.get("golden") or {}).get("config_differs")}
    lost = [f"{c['id']}: its golden file {c['golden']['source']} is not found from "
            f"{Path.cwd()}: run `check --accept-config` in the suite's directory, or name "
            "the goldens with --goldens DIR" for c in report["cases"]
            if c["id"] in again and golden_file_for(c) is None
            and c["golden"].get("source") != (c.get("provenance") or {}).get("benchmark_file")]
    if lost:  # judged against nothing, such a case would pass unjudged
        raise ConfigError(lost)
    cases = [{**case, "golden": judged_again(case, golden_file_for(case), gate_config)}
             if case["id"] in again else case for case in report["cases"]]
    # The accepted cases join their groups' levels: a case judged at another level than
    # its group's now is judged again where its golden file is found (a source relative
    # to the suite's directory may not be; then its section stays as the report had it).
    out["cases"] = drift.rejudged(cases, lambda c, d: judged_again(
        c, golden_file_for(c), gate_config, d) if c["id"] in again or (
            drift.of_section(c["golden"]) != d and golden_file_for(c) is not None)
        else c["golden"])
    return out


def goldens_dir_problems(report: dict, goldens_dir: str | Path, what: str,
                         strict: bool) -> list[str]:
    """Bad input: a goldens directory that is not one. `strict` (a directory the user
    named, `check --goldens`): it must exist. Otherwise (the suite's goldens.dir, which
    has a default) it must exist when some case that ran has no golden from elsewhere (a
    benchmark file's own goldens): a misspelt key must not make every case `no-golden`
    and the gate pass."""
    path = Path(goldens_dir)
    if path.is_dir():
        return []
    if path.exists():
        return [f"{goldens_dir}: not a directory: {what} takes the goldens directory "
                "(<dir>/<sku>.json inside)"]
    bare = [c["id"] for c in report["cases"] if c.get("status") not in verdict.NOT_RUN
            and not (c.get("golden") or {}).get("source")]
    if not strict and not bare:
        return []
    where = f" (from {Path.cwd()})" if not path.is_absolute() else ""
    if not strict:
        where += f"; {len(bare)} case(s) have no golden, e.g. {bare[0]}"
    return [f"{goldens_dir}: no such directory{where}: {what} takes the goldens directory "
            "(<dir>/<sku>.json, written by `benchflow bless --goldens DIR --yes`)"]


def findings(report: dict) -> list[Finding]:
    """Every case that regressed in time, dispatch count or size."""
    out = []
    for case in report["cases"]:
        g = case.get("golden") or {}
        aspects = verdict.regressed_aspects(g)
        if aspects:
            out.append(Finding(case["id"], aspects, _detail(g)))
    return out


# A gate's outcomes, the worst first (several apply: the first of them is the gate's):
# nothing could be judged for bad input; a regression is a finding even where other cases
# could not be judged. cli/options.py maps them to exit codes.
BAD_INPUT, REGRESSED, UNJUDGED, PASSED = "bad-input", "regressed", "could-not-judge", "passed"
OUTCOMES = (BAD_INPUT, REGRESSED, UNJUDGED, PASSED)

# Why a case was not judged (NotJudged.kind): its time verdict or its status.
NO_GOLDEN, INCONCLUSIVE = Verdict.NO_GOLDEN, Verdict.INCONCLUSIVE
FAILED, SKIPPED = Status.FAILED, Status.SKIPPED
# Measured at another measurement configuration than its golden (like_with_like): never
# counted as ok, --allow-inconclusive or not (that lets noise through, not a different
# measurement); --accept-config names the keys to accept.
CONFIG = "config-differs"
# Judged against its run's level, which moved past the tolerance (regression/drift.py):
# a machine and a change to every case look alike; never ok either (it is no noise).
LEVEL = "level-moved"


@dataclass(frozen=True)
class NotJudged:
    case_id: str
    kind: str    # no-golden | inconclusive | config-differs | level-moved | failed | skipped
    why: str

    def line(self) -> str:
        return f"{self.case_id}: {self.why}"


@dataclass
class Assessment:
    """Every case of a report, sorted by what the gate made of it."""

    regressed: list[Finding] = field(default_factory=list)
    unjudged: list[NotJudged] = field(default_factory=list)    # could not judge: fails
    not_judged: list[NotJudged] = field(default_factory=list)  # counted as ok
    judged: int = 0                                            # judged on some aspect
    problems: list[str] = field(default_factory=list)          # bad input

    @property
    def outcome(self) -> str:
        if self.problems:
            return BAD_INPUT
        return REGRESSED if self.regressed else UNJUDGED if self.unjudged else PASSED


def _not_judged(case: dict) -> NotJudged | None:
    """Why a case that did not regress was not judged; None when it was."""
    g = case.get("golden") or {}
    cid, status = case["id"], case.get("status")
    if status in verdict.NOT_RUN:
        return NotJudged(cid, SKIPPED, f"case {status}, not judged: {case.get('error')}")
    if g.get("config_differs"):
        return NotJudged(cid, CONFIG, g.get("reason") or "measurement configuration differs")
    if g.get("verdict") == Verdict.INCONCLUSIVE:
        kind = LEVEL if drift.level_moved(g) else INCONCLUSIVE
        return NotJudged(cid, kind, f"inconclusive: {g.get('reason')}")
    aspects = ("verdict", "dispatch_verdict", "size_verdict")
    if any(g.get(a) not in (None, Verdict.NO_GOLDEN) for a in aspects):
        return None
    if not g.get("source"):
        return NotJudged(cid, NO_GOLDEN, f"no golden ({g.get('reason') or 'none'})")
    if status == Status.FAILED:
        # It has a golden, but nothing the golden holds was measured: a failure the gate
        # cannot weigh, never an ok.
        return NotJudged(cid, FAILED, f"{status_at(case)}, nothing to judge "
                                      f"against its golden {g['source']}: {g.get('reason')}")
    return NotJudged(cid, NO_GOLDEN, f"no golden to compare with ({g.get('reason')})")


def assess(report: dict, *, require_goldens: bool = False, allow_inconclusive: bool = False,
           problems: list[str] = ()) -> Assessment:
    """The gate's view of a report's verdicts. Could not judge (the gate fails): an
    inconclusive case, a failed one with nothing judged, a case without a golden when
    goldens are required, and every case when none has a golden at all (a gate that
    judged nothing has not passed). `allow_inconclusive` counts inconclusive and
    no-golden cases as ok, as before issue 20 (require_goldens still fails a case
    without one); a failed case stays could-not-judge."""
    out = Assessment(problems=list(problems), regressed=findings(report))
    regressed = {f.case_id for f in out.regressed}
    for case in report["cases"]:
        if case["id"] in regressed:
            out.judged += 1
            continue
        nj = _not_judged(case)
        if nj is None:
            out.judged += 1
        elif (nj.kind in (FAILED, CONFIG, LEVEL) or (nj.kind == NO_GOLDEN and require_goldens)
              or (nj.kind == INCONCLUSIVE and not allow_inconclusive)):
            out.unjudged.append(nj)
        else:
            out.not_judged.append(nj)
    if not out.judged and not allow_inconclusive:
        # Nothing at all was judged: a missing or misspelt goldens directory, or goldens
        # of other SKUs. Every case not judged is then a case the gate could not judge.
        out.unjudged += [replace(nj, why=nj.why + "; no case of the report was judged")
                         for nj in out.not_judged if nj.kind != SKIPPED]
        out.not_judged = [nj for nj in out.not_judged if nj.kind == SKIPPED]
        if not out.unjudged:
            out.unjudged.append(NotJudged("(report)", NO_GOLDEN, "no case to judge"))
    return out


def summary(report: dict, a: Assessment, extra: dict | None = None) -> dict:
    """What results/gate.json (and the gate's log) records of an assessment."""
    counts: dict[str, int] = {}
    for case in report["cases"]:
        v = (case.get("golden") or {}).get("verdict", Verdict.NO_GOLDEN)
        counts[v] = counts.get(v, 0) + 1
    compile_only = sum(c.get("status") == Status.COMPILE_ONLY for c in report["cases"])
    return {"passed": a.outcome == PASSED, "outcome": a.outcome,
            "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "cases": len(report["cases"]), "judged": a.judged, "time_verdicts": counts,
            # Judged on dispatch count and binary size only (no device: no time).
            "compile_only": compile_only,
            "regressed": [{"id": f.case_id, "aspects": f.aspects, "detail": f.detail}
                          for f in a.regressed],
            "could_not_judge": [asdict(nj) for nj in a.unjudged],
            "not_judged": [asdict(nj) for nj in a.not_judged],
            "problems": a.problems, **(extra or {})}


class GateFailed(Exception):
    """Raised by the gate rule so that `snakemake results/gate.json` exits non-zero."""


def run_gate(report_path: str, out: str, log: str, settings: dict | None = None,
             remeasure: Callable[[dict], tuple[dict, list]] | None = None) -> dict:
    """The `gate` rule: judges the report with the suite's `goldens` settings (`settings`;
    None: the defaults, the goldens directory unchecked), re-measuring inconclusive cases
    first with `remeasure` (report -> (report, outcomes with .to_dict())). Writes the gate
    JSON only when the gate passed; otherwise fails naming every case that regressed or
    could not be judged, or the bad input (in the log and in the error)."""
    from workflow.records.report import read_report

    s = settings or {}
    try:
        report = read_report(report_path)
    except ConfigError as exc:
        raise GateFailed("bad input:\n" + "\n".join(f"  {p}" for p in exc.problems)) from None
    problems = (goldens_dir_problems(report, s["dir"], "goldens.dir", strict=False)
                if "dir" in s else [])
    remeasured = []
    if remeasure is not None and not problems:
        report, remeasured = remeasure(report)
    a = assess(report, require_goldens=s.get("require_goldens",
                                             goldens_default("require_goldens")),
               allow_inconclusive=s.get("allow_inconclusive",
                                        goldens_default("allow_inconclusive")),
               problems=problems)
    result = summary(report, a, {"remeasured": [r.to_dict() for r in remeasured]})
    with open(log, "w") as fh:
        fh.write(json.dumps(result, indent=1) + "\n")
    if a.outcome != PASSED:
        raise GateFailed("\n".join(failure_lines(a)))
    write_json(out, result)
    return result


def failure_lines(a: Assessment) -> list[str]:
    """Why a gate did not pass: a heading per kind, then one line per case."""
    lines = []
    if a.problems:
        lines += ["bad input:", *(f"  {p}" for p in a.problems)]
    if a.regressed:
        lines += ["regressions against the goldens:", *(f"  {f.line()}" for f in a.regressed)]
    if a.unjudged:
        lines += ["could not judge:", *(f"  {nj.line()}" for nj in a.unjudged)]
    return lines
