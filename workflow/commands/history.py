"""The history's work (issue 26), for `benchflow history` and the `history` rule: which
store a command uses, ingesting files into it, a series, the change points and their
gate outcome, and results/history.html.

The store is the suite's `history` section (path: an embedded ClickHouse directory,
relative to the working directory; url: a shared ClickHouse server), which `--store` /
`--url` override; without a suite, the schema's defaults (`history/`)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from workflow.errors import ConfigError
from workflow.history import detect as detection
from workflow.history import ingest as ingesting
from workflow.history import query
from workflow.history.importers import read_runs
from workflow.history.runs import fill_meta
from workflow.history.store import NoStore, open_store, without_password
from workflow.records.storage import write_json, write_text
from workflow.regression.gate import UNJUDGED
from workflow.render import history as page
from workflow.suite.defaults import history_defaults, history_settings
from workflow.suite.schema import read_yaml, validate_suite

LATENCY = "latency median (ms)"


def history_config(configfile: Path | None) -> dict:
    """The `history` section of a suite (validated, defaults filled), or the defaults."""
    if configfile is None:
        return history_defaults()
    return validate_suite(read_yaml(configfile), str(configfile), configfile.parent)["history"]


def store_of(config: dict, *, store: Path | None = None, url: str | None = None,
             create: bool = False, write: bool = False):
    """The store a command reads (and, with `write`, changes): --url, else --store, else
    the suite's url, else its path. Only ingesting (`create`) makes an embedded store: a
    command that reads one that is not there says so (a typo'd --store is no empty
    history); an embedded store opened to read is read from a snapshot."""
    if url or (store is None and config.get("url")):
        return open_store(url=url or config["url"])
    path = Path(store if store is not None else config["path"])
    if not create and not path.is_dir():
        raise NoStore(path)
    return open_store(path=path, write=write or create, create=create)


def where(config: dict, *, store: Path | None = None, url: str | None = None) -> str:
    """The store's location as the page and the messages name it (a server without its
    password)."""
    if url or (store is None and config.get("url")):
        return without_password(url or config["url"])
    return str(store if store is not None else config["path"])


def read(paths: list[Path], *, overrides: dict | None = None, timestamp: int | None = None,
         suite_dir: Path | None = None) -> list:
    """Every run of every file, read and checked, their metadata filled: bad input
    refuses them all before any store is opened or anything written."""
    runs = []
    for path in paths:
        runs += read_runs(Path(path), timestamp=timestamp)
    for run in runs:
        fill_meta(run, env=os.environ, overrides=overrides or {},
                  suite_dir=suite_dir or Path(run.path).resolve().parent)
    return runs


def ingest(runs: list, st) -> dict:
    """The runs' measurements the store lacks (history/ingest.py)."""
    return ingesting.ingest(st, runs)


def detect(st, config: dict, *, pattern: str = "*", metric: str | None = LATENCY,
           since: str | None = None) -> tuple[dict, str, list[str]]:
    """(detection, gate outcome, lines): every series matching `pattern` judged."""
    series = query.series(st, pattern, metric)
    if not series:
        raise ConfigError([f"history: no series matches {pattern!r}"
                           + (f" for metric {metric!r}" if metric else "")
                           + "; expected a case id or glob of an ingested case "
                             "(`benchflow history show` lists the runs)"])
    result = detection.detect_series(series, history_settings(config))
    outcome, lines = detection.outcome(result, since=since)
    return result, outcome, lines


def write_page(out: Path, st, config: dict, *, location: str, pattern: str = "*",
               metric: str | None = LATENCY) -> dict:
    """results/history.html: every series matching `pattern`, change points marked."""
    series = query.series(st, pattern, metric)
    result = detection.detect_series(series, history_settings(config)) if series else None
    # The page shows the detection's own settings (result["settings"]); without a series
    # there is no detection, and nothing to show them for.
    meta = {"store": location, "generated_at": datetime.now(UTC).isoformat(timespec="seconds")}
    write_text(out, page.render(series, result, meta))
    return result or {}


def history_job(report: str, html: str, summary: str, settings: dict) -> None:
    """The `history` rule: the finished report into the suite's store, then the page and
    results/history.json. A change point found is printed to the log, never a failure
    (`benchflow history detect` is the gate)."""
    runs = read([Path(report)], suite_dir=Path.cwd())
    st = store_of(settings, create=True)
    try:
        done = ingest(runs, st)
        result = write_page(Path(html), st, settings, location=where(settings))
    finally:
        st.close()
    outcome, lines = detection.outcome(result) if result else (UNJUDGED, [])
    for line in lines:
        print(line)
    write_json(summary, {"ingested": done, "outcome": outcome, "detection": result})
