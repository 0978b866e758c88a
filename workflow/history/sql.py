"""Every SQL statement benchflow sends to its history store, as text: the same text goes
to the embedded chdb session and to a ClickHouse server, so testing it on chdb tests it
for both. Nothing from a user reaches a statement except through `quote` (a ClickHouse
string literal) or `glob_regex` (an fnmatch pattern turned into an anchored RE2 regex,
then quoted).

The table is upstream's own DDL (workflow/schemas/oss_ci_benchmark_v3.sql, pytorch/
test-infra's clickhouse_db_schema, byte for byte) with two changes a local store needs:
`IF NOT EXISTS`, and the replicated engine's arguments (ZooKeeper paths a single server
has no use for) dropped, leaving a plain MergeTree. The columns stay v3, so that a row
read back is a row upstream's uploader would take."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from workflow.errors import ConfigError

DATABASE = "benchmark"
TABLE = f"{DATABASE}.oss_ci_benchmark_v3"
LATENCY = "latency median (ms)"

# Where benchflow keeps its own keys: the v3 table's benchmark.extra_info map.
CASE_ID = "benchmark.extra_info['case_id']"
RUN_ID = "benchmark.extra_info['run_id']"
SOURCE = "benchmark.extra_info['source']"
# One measurement (history/ingest.measurement_id): what makes ingesting idempotent.
MEASUREMENT_ID = "metric.extra_info['measurement_id']"
UNCLEAN = "benchmark.extra_info['disturbed'] = 'true'"
# The measurement configuration of the row's case (records/measurement_config.as_text:
# device, threads, invocation kind, measurement settings); a row without it (ingested
# before it was written, a torchao CSV, a foreign v3 file) reads as '' (a map's absent
# key): "configuration not recorded".
CONFIG = "benchmark.extra_info['measurement_config']"

_ENGINE = re.compile(r"ENGINE = MergeTree\('[^)]*'\)")
_CREATE = "CREATE TABLE benchmark.oss_ci_benchmark_v3 ("

# A ClickHouse string literal: backslash escapes; these characters must be escaped
# (quote and backslash) or are escaped so that the statement stays one printable line
# (a NUL would end the C string a client library hands on).
_ESCAPES = {"\\": "\\\\", "'": "\\'", "\0": "\\0", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_ESCAPE_RE = re.compile("[\\\\'\0\n\r\t]")


def quote(text: str) -> str:
    """`text` as a ClickHouse string literal."""
    return "'" + _ESCAPE_RE.sub(lambda m: _ESCAPES[m.group(0)], text) + "'"


@cache
def upstream_ddl() -> str:
    return resources.files("workflow.schemas").joinpath("oss_ci_benchmark_v3.sql") \
        .read_text()


def create_database() -> str:
    return f"CREATE DATABASE IF NOT EXISTS {DATABASE}"


def create_table() -> str:
    """Upstream's CREATE TABLE, made local (module docstring)."""
    ddl = upstream_ddl()
    # Each change must apply exactly once: an upstream DDL that changed shape fails
    # here rather than making some other table.
    if ddl.count(_CREATE) != 1 or len(_ENGINE.findall(ddl)) != 1:
        raise AssertionError("oss_ci_benchmark_v3.sql: the CREATE TABLE or ENGINE clause "
                             "is not the one upstream's DDL had")
    ddl = ddl.replace(_CREATE, "CREATE TABLE IF NOT EXISTS benchmark.oss_ci_benchmark_v3 (")
    return _ENGINE.sub("ENGINE = MergeTree", ddl)


def add_projections() -> list[str]:
    """Two projections; neither adds a column (the rows stay v3), and every query
    answers the same without them, only slower. The table's own order is by time, so
    every granule holds every case and a data-skipping index on the case id would skip
    nothing: `by_series` keeps the rows again ordered by series (case id, metric), so a
    series reads one granule a part; `by_run` keeps each run's aggregates for the list
    of runs. Measured (tests/perf/history_scale.py, a year of nightly runs of a
    1,000-case suite, 2.5 M rows, shared 2-core machine): a series 690 ms -> 45 ms, the
    list of runs 1.2 s -> 14 ms; the projections take 33 of the store's 76 MB."""
    return [f"ALTER TABLE {TABLE} ADD PROJECTION IF NOT EXISTS by_series "
            f"(SELECT * ORDER BY ({CASE_ID}, metric.name, timestamp))",
            f"ALTER TABLE {TABLE} ADD PROJECTION IF NOT EXISTS by_run "
            f"(SELECT {_RUN_COLUMNS} GROUP BY run_id)"]


def columns() -> str:
    """The table's columns and their types, as the server holds them (the structure of
    the grouped rows insert_rows reads is made of them, not restated here)."""
    return ("SELECT name, type FROM system.columns WHERE database = "
            f"{quote(DATABASE)} AND table = 'oss_ci_benchmark_v3' ORDER BY position "
            "FORMAT JSONEachRow")


def _structure(names: list[str], types: dict[str, str]) -> str:
    return ", ".join([f"{n} {types[n]}" for n in names] + [f"metrics Array({types['metric']})"])


def input_source(names: list[str], types: dict[str, str]) -> str:
    """The lines as the request's body (a server)."""
    return f"input({quote(_structure(names, types))})"


def file_source(path: str, names: list[str], types: dict[str, str]) -> str:
    """The lines from a file (the embedded store)."""
    return f"file({quote(path)}, 'JSONEachRow', {quote(_structure(names, types))})"


def insert_rows(names: list[str], types: dict[str, str], source: str) -> str:
    """Rows from grouped lines (store.grouped_lines): each line's columns `names` and
    its `metrics`, one table row per metric."""
    for name in names:
        if name not in types:
            raise AssertionError(f"{name}: not a column of {TABLE}")
    listed = ", ".join(names)
    return (f"INSERT INTO {TABLE} ({listed}, metric) SELECT {listed}, one_metric "
            f"FROM {source} ARRAY JOIN metrics AS one_metric")


def known_measurements(stamps) -> str:
    """The measurement ids the store holds at these measured times: a row's id hashes
    its timestamp, so only rows at one of them can be one of a new batch's; the table's
    primary key (timestamp first) skips every other granule."""
    listed = ", ".join(str(int(t)) for t in sorted(stamps))
    return (f"SELECT DISTINCT {MEASUREMENT_ID} AS measurement_id FROM {TABLE} "
            f"WHERE timestamp IN ({listed}) FORMAT JSONEachRow")


GLOB_CHARS = re.compile(r"[*?\[]")
# The longest text of a user's (a case id or glob, a metric's name, a run id) put into a
# statement. ClickHouse refuses a statement past its max_query_size (256 KiB) with "Max
# query size exceeded", and a glob's regex is up to four times its text once escaped and
# quoted: 4,096 characters keeps the longest statement far below it, and no case id,
# metric or run id benchflow or an importer makes comes near it.
MAX_TEXT = 4096


def check_text(text: str, what: str) -> str:
    """`text`, refused in one line naming `what` when it is longer than MAX_TEXT."""
    if len(text) > MAX_TEXT:
        raise ConfigError([f"{what}: {len(text)} characters; expected at most {MAX_TEXT} "
                           "(longer is no case id, metric or run id, and the store's query "
                           "would be past ClickHouse's max_query_size)"])
    return text


def glob_regex(pattern: str) -> str:
    """An fnmatch pattern as an anchored RE2 regex (the syntax ClickHouse's match()
    takes): `*` any run of characters, `?` one, `[seq]` / `[!seq]` a class, every other
    character literal. Python's fnmatch.translate is not used: its output has
    constructs RE2 lacks (\\Z, atomic groups)."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        ch = pattern[i]
        i += 1
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[":
            end = _class_end(pattern, i)
            if end < 0:
                out.append(re.escape(ch))
                continue
            body = pattern[i:end]
            i = end + 1
            negate = body.startswith("!")
            body = body[1:] if negate else body
            # Inside a class only backslash, `]` and `^` mean something to RE2; `-`
            # keeps its range meaning, as in fnmatch.
            body = body.replace("\\", "\\\\").replace("]", "\\]").replace("^", "\\^")
            out.append(("[^" if negate else "[") + body + "]")
        else:
            out.append(re.escape(ch))
    return "(?s)^" + "".join(out) + "$"


def _class_end(pattern: str, start: int) -> int:
    """The index of the `]` closing a class opened just before `start` (fnmatch: a `]`
    right after `[` or `[!` is a member), or -1 when it is never closed."""
    j = start
    if j < len(pattern) and pattern[j] == "!":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    return pattern.find("]", j)


def case_condition(pattern: str) -> str:
    """Rows of the cases `pattern` names: itself as an exact id (a case id may hold a
    `[`), and as a glob where it has glob characters."""
    exact = f"{CASE_ID} = {quote(pattern)}"
    if not GLOB_CHARS.search(pattern):
        return exact
    if pattern == "*":
        return f"{CASE_ID} != ''"
    glob = f"match({CASE_ID}, {quote(glob_regex(pattern))})"
    prefix = pattern[:GLOB_CHARS.search(pattern).start()]
    if prefix:
        # The literal head lets the by_series projection read only the ids it starts.
        glob = f"(startsWith({CASE_ID}, {quote(prefix)}) AND {glob})"
    return f"({exact} OR {glob})"


def series(pattern: str, metric: str | None) -> str:
    """Every series `pattern` and `metric` (None: every metric) name, one row each:
    a series is a case, a metric and a measurement configuration (CONFIG: unchanged code
    at 1 thread and at 2 differs by x1.7, so runs at two configurations are two series,
    never one with a step). Each row holds its unit and, aligned, its rows' run ids,
    timestamps and values (in no order). The
    run's commit, versions and host come from runs() (one row a run, not a copy per
    point: a year of a 1,000-case suite's latency series is 36 MB of JSON instead of
    173 MB, and `history detect` reads them all)."""
    where = case_condition(pattern)
    if metric is not None:
        where += f" AND metric.name = {quote(metric)}"
    return (
        f"SELECT {CASE_ID} AS case_id, metric.name AS metric, {CONFIG} AS config, "
        "any(metric.extra_info['unit']) AS unit, "
        f"groupArray({RUN_ID}) AS run_ids, groupArray(timestamp) AS timestamps, "
        "groupArray(metric.benchmark_values) AS values, "
        # Whether the measurement protocol found the run disturbed by outside load
        # (records' timing.disturbed, in the dashboard rows' extra_info): such a point is
        # judged with its wider spread, and no step may rest on two of them
        # (history/detect.py). A noisy one is used as any: small cases are noisy on
        # every run here, and the bootstrap weighs their spread.
        f"groupArray({UNCLEAN}) AS unclean "
        f"FROM {TABLE} WHERE {where} GROUP BY case_id, metric, config "
        f"ORDER BY case_id, metric, config SETTINGS {SERIES_SETTINGS} FORMAT JSONEachRow")


# Without these the by_series projection is never chosen (measured, chdb 4.4, 30 runs x
# 1,000 cases: 128 ms a series without, 16 ms with): reading in the table's order wins
# the plan as the ORDER BY starts with the fixed case id, and the case id rewritten to a
# map subcolumn no longer matches the projection's sort expression (runs() and by_run
# likewise).
SERIES_SETTINGS = "optimize_read_in_order = 0, optimize_functions_to_subcolumns = 0"


# A run's row in the list of runs; the by_run projection's SELECT is the same text,
# which is what lets ClickHouse answer runs() from it. Written with tupleElement: with
# `benchmark.extra_info[...]` chdb 4.4 fails every INSERT into the table once the
# projection exists ("Not found column benchmark.extra_info in block"). No count of a
# run's series: uniqExact's state kept each run's 7,000 (case, metric) hashes, 41 MB of
# the 117 MB a year of a 1,000-case suite takes; `rows` is that count for a benchflow
# report (one row per series).
_EXTRA = "tupleElement(benchmark, 'extra_info')"
_RUNNER = "tupleElement(runners[1], 'extra_info')['hostname']"
_RUN_COLUMNS = (
    f"{_EXTRA}['run_id'] AS run_id, min(timestamp) AS timestamp, any(head_sha) AS head_sha, "
    "any(head_branch) AS head_branch, any(repo) AS repo, any(name) AS name, "
    f"any({_EXTRA}['source']) AS source, count() AS rows, "
    f"any({_RUNNER}) AS hostname, any(tupleElement(runners[1], 'type')) AS runner_type, "
    "any(workflow_id) AS workflow_id, any(dependencies) AS dependencies")


def runs() -> str:
    """Every run the store holds, oldest first, with what `history show` lists and a
    series' points take: its commit, rows, first runner's hostname and type, and
    dependencies (of one of its rows: a run's are one report's)."""
    return (f"SELECT {_RUN_COLUMNS} FROM {TABLE} GROUP BY run_id ORDER BY timestamp, run_id "
            "SETTINGS optimize_functions_to_subcolumns = 0 FORMAT JSONEachRow")


def unusable_runs(latest: int) -> str:
    """Runs holding a row no series can use, from before these checks existed: a
    timestamp that is no time in seconds (a millisecond epoch; a negative time wrapped
    by the UInt64 column) or a value the Float32 column made infinite or NaN."""
    return (f"SELECT {RUN_ID} AS run_id, max(timestamp) AS latest, "
            "countIf(NOT arrayAll(v -> isFinite(v), metric.benchmark_values)) AS nonfinite "
            f"FROM {TABLE} GROUP BY run_id HAVING latest > {int(latest)} OR nonfinite > 0 "
            "ORDER BY run_id SETTINGS optimize_functions_to_subcolumns = 0 "
            "FORMAT JSONEachRow")


def run_rows(run_id: str) -> str:
    return (f"SELECT count() AS n FROM {TABLE} WHERE {RUN_ID} = {quote(run_id)} "
            "FORMAT JSONEachRow")


def delete_run(run_id: str) -> str:
    """A run's rows removed, the projections with them, done when the statement returns."""
    return (f"ALTER TABLE {TABLE} DELETE WHERE {RUN_ID} = {quote(run_id)} "
            "SETTINGS mutations_sync = 2")
