"""A bisection's measurements into the history store (issue 38: "the steps' measurements
land in the history store, each under its revision"): each side of each measured step
is a run of its own, under its revision's commit (a release's version in the run's
versions), so that `benchflow history show CASE` lists the steps' times beside the
nightly runs.

A side becomes a minimal benchflow report (one case, its timing summarized from the
side's per-round times) written beside the bisection's cache and read back by the
importers that `benchflow history ingest` uses: the report schema checks it there, and
the rows are what an ingested report's would be. Only the times of the rounds are
taken: each is one invocation of that side, as a case's invocation medians are.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from workflow.bisect.search import Step
from workflow.errors import ConfigError
from workflow.history.query import BISECT_RUN
from workflow.records.case import case_record, section
from workflow.records.report import build_report
from workflow.records.schemas import schema_problems
from workflow.records.storage import write_json
from workflow.stats.enums import Status
from workflow.stats.summary import summarize
from workflow.suite.defaults import history_defaults
from workflow.suite.schema import load_schema, read_yaml

SOURCE = BISECT_RUN


def now() -> str:
    """When a step began (UTC, ISO 8601): its sides' runs are measured then."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def side_case(prepared: dict, times_ms: list[float], row: dict, role: str) -> dict:
    """The case record of one side of a step: the case's identity at its revision, the
    side's rounds as invocation medians, what it was paired with in its provenance."""
    m = prepared["sku"]["measurement"]
    timing = {**summarize(times_ms, m["noisy_cv"]), "first_run_ms": None,
              "repetitions": row["invocation"][role]["repetitions"],
              "measured_at": row["measured_at"]}
    other = "new" if role == "base" else "base"
    prov = {"started_at": row["measured_at"], "iree_device": prepared["sku"]["iree"]["device"],
            "bisect": {"revision": row[role], "paired_with": row[other], "role": role,
                       "ratio": row.get("ratio"), "verdict": row.get("verdict")}}
    return case_record(prepared["identity"], status=Status.OK, stage=None, error=None,
                       timing=section("timing", timing), provenance=prov)


def side_reports(step: Step, built: dict, kind: str, package: str | None,
                 run_name: str = SOURCE) -> list[tuple]:
    """[(revision, report)] for both sides of a measured step (none for a failed one):
    a commit's report names it as its git_sha; a release's sets the package's version
    in the report's versions."""
    row = step.row
    if not row.get("base_ms"):
        return []
    out = []
    for role, times in (("base", row["base_ms"]), ("new", row["new_ms"])):
        name, prepared = row[role], built[row[role]]
        report = build_report([side_case(prepared, times, row, role)],
                              suite_name=run_name, config_hash=prepared["key"][:16],
                              config_source=f"{run_name} {name}",
                              git_sha=name if kind == "commit" else None)
        if kind == "release":
            report["provenance"]["versions"][package] = name
        out.append((name, report))
    return out


# store_settings' key for whether the suite's own file names its store (path or url).
NAMED = "named"


def store_settings(configfile: Path) -> dict:
    """The suite's `history` section, checked by the suite schema's rules for it and its
    defaults filled, without loading the suite: that would import its model modules into
    this process, which bisect/prepare.py keeps to a process per revision. NAMED says
    whether the suite names its store itself (absent, own_store)."""
    raw = read_yaml(configfile)
    section = raw.get("history", {}) if isinstance(raw, dict) else {}
    schema = {"type": "object", "properties": {"history": load_schema()["properties"]["history"]}}
    problems = schema_problems({"history": section}, schema, str(configfile))
    if problems:
        raise ConfigError(problems[:1])
    named = "path" in section or bool(section.get("url"))
    return {**history_defaults(), **section, NAMED: named}


def own_store(config: dict, suite_dir: Path | None) -> bool:
    """Whether the suite's history path is this suite's store: the suite names it, or
    the working directory is where the suite's own runs put their default store (its
    directory, or the top of the repository holding it). A default `history/` anywhere
    else is whatever suite's was run there."""
    if config.get(NAMED):
        return True
    if suite_dir is None:
        return False
    cwd, suite_dir = Path.cwd().resolve(), suite_dir.resolve()
    return cwd == suite_dir or (cwd in suite_dir.parents and (cwd / ".git").exists())


def absent(config: dict, store: Path | None, suite_dir: Path | None = None) -> str | None:
    """Why the sides are not kept, or None: `--store` is made when absent (as ingest
    makes one), the suite's configured path only used where it already is and is the
    suite's own (a bisection makes no history in a place nobody named, nor adds to
    another suite's)."""
    from workflow.commands import history

    if store is not None or config.get("url"):
        return None
    if not Path(config["path"]).is_dir():
        return (f"history: no store at {history.where(config)}: the steps' measurements "
                "were not kept (--store DIR keeps them there)")
    if not own_store(config, suite_dir):
        return (f"history: {history.where(config)} in {Path.cwd()} is not this suite's "
                "store (the suite names no history path, and this is neither its "
                "directory nor its repository's): the steps' measurements were not kept "
                "(--store DIR keeps them there)")
    return None


def check_store(config: dict, store: Path | None, suite_dir: Path | None) -> None:
    """Before anything is measured: the store the steps would go to must be a history
    store, or nothing yet (ingest makes it), or the steps would be lost after the
    measuring. ConfigError otherwise (history/layout.py's words)."""
    from workflow.history import layout

    if store is not None:
        layout.state(store)
    elif absent(config, None, suite_dir) is None and not config.get("url"):
        layout.state(Path(config["path"]))


def keep(steps: list[Step], built: dict, source, store_config: dict, store: Path | None,
         out_dir: Path, run_name: str = SOURCE) -> dict:
    """Every measured side into the store: {"store", "ingested": run ids, "already",
    "runs"} or {"store", "skipped": why}. A report or store that is refused is one
    line (ConfigError: bisect/run.py records it beside the bisection's answer).
    `run_name`: the runs' name (query.PAIRED_RUNS), a whole-suite A/B's its own."""
    from workflow.commands import history

    where = history.where(store_config, store=store)
    why = absent(store_config, store, source.suite_dir)
    if why:
        return {"store": where, "skipped": why}
    paths, shas = [], []
    for i, step in enumerate(steps):
        for role, (name, report) in zip(("base", "new"), side_reports(
                step, built, source.kind, source.where, run_name), strict=False):
            path = out_dir / f"step{i:02d}-{role}.json"
            write_json(path, report)
            paths.append(path)
            shas.append(name if source.kind == "commit" else None)
    if not paths:
        return {"store": where, "skipped": "history: no step was measured, nothing kept"}
    runs = []
    for path, sha in zip(paths, shas, strict=True):
        # The revision's commit, not the checkout's; the name tells a step's side from a
        # nightly run in `history show` (the series holds both).
        overrides = {"name": run_name, **({"head_sha": sha} if sha else {})}
        runs += history.read([path], overrides=overrides, suite_dir=source.suite_dir)
    st = history.store_of(store_config, store=store, create=True)
    try:
        done = history.ingest(runs, st)
    finally:
        st.close()
    return {"store": where, **done, "runs": len(runs)}


def history_line(kept: dict) -> str:
    """The text output's line about the store."""
    if kept.get("skipped"):
        return kept["skipped"]
    return (f"history: {len(kept['ingested'])} run(s) of the steps' sides kept in "
            f"{kept['store']} ({len(kept['already'])} already there)")
