"""History at scale (issue 26): not a test, a benchmark whose figures go in the closing
note. Run: `.venv/bin/python tests/perf/history_scale.py [--cases 1000] [--runs 365]`.

- ingest: one 10,000-case benchflow report (real cases of tests/data/report_iree.json
  replicated under new ids), from the JSON file through read, rows and INSERT; goal 5 s.
- show: one series of a store holding a year of nightly runs of a 1,000-case suite
  (every case's latency with 7 invocation medians, within-run cv 0.4 %, run-to-run 1 %,
  plus the report's other metrics), median of 20 queries in-process; goal 100 ms. And
  the whole `benchflow history show CASE` process where the CLI exists.
- the store's size on disk.

The year is made with INSERT ... SELECT from one run's rows (each night: the template
with its time, run id and fresh seeded latency values): the same rows a nightly ingest
would write, without serialising 365 reports through JSON (hours on a small machine).
Figures only from functions; `main` prints them (helper H3 adds detect's part)."""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from workflow.history import ingest, query, sql  # noqa: E402
from workflow.history.store import open_store  # noqa: E402
from workflow.render import dashboard  # noqa: E402

SOURCE_REPORT = REPO / "tests" / "data" / "report_iree.json"
DAY = 86_400
START = 1_735_689_600  # 2025-01-01T00:00:00Z
INVOCATIONS = 7
WITHIN_CV, BETWEEN_CV = 0.004, 0.01
GOALS = {"ingest_s": 5.0, "show_ms": 100.0}


def measured_cases(report: dict) -> list[dict]:
    return [c for c in report["cases"] if c["status"] == "ok" and c.get("timing")]


def make_report(n_cases: int, seed: int = 0) -> dict:
    """A benchflow report of n_cases real cases (cycled) under new ids, each with its
    own latency level and seeded invocation medians."""
    base = json.loads(SOURCE_REPORT.read_text())
    real = measured_cases(base)
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(n_cases):
        case = copy.deepcopy(real[i % len(real)])
        case["id"] = f"synthetic/{i:05d}/{case['id']}"
        level = float(rng.lognormal(0.0, 1.0))
        case["timing"]["invocation_medians_ms"] = [
            float(v) for v in level * (1 + WITHIN_CV * rng.standard_normal(INVOCATIONS))]
        cases.append(case)
    base["cases"] = cases
    return base


def report_runs(path: Path) -> list:
    """The importer's runs of a report (history/importers.py where it exists; until
    then the same Run built from dashboard.records)."""
    try:
        from workflow.history.importers import read_runs
        return read_runs(path)
    except ImportError as exc:  # importers still being written (issue 26's helpers)
        print(f"(importers unavailable: {exc}; dashboard.records stands in)")
        return [_report_run(path)]


def _report_run(path: Path):
    from types import SimpleNamespace
    report = json.loads(path.read_text())
    rows = dashboard.records(report)
    for row in rows:
        row["benchmark"]["extra_info"]["source"] = "benchflow-report"
    started = report["provenance"]["started_at"]
    stamp = int(time.mktime(time.strptime(started[:19], "%Y-%m-%dT%H:%M:%S")))
    run_id = hashlib.sha256((json.dumps(rows, sort_keys=True) + str(stamp)).encode()) \
        .hexdigest()[:16]
    return SimpleNamespace(run_id=run_id, source="benchflow-report", path=str(path),
                           timestamp=stamp, meta={"head_sha": "0" * 40}, rows=rows)


def ingest_seconds(workdir: Path, n_cases: int = 10_000) -> dict:
    """One n_cases report: written to a file, then read, rows, INSERT (timed)."""
    path = workdir / "report_10k.json"
    path.write_text(json.dumps(make_report(n_cases, seed=1)))
    fresh = workdir / "ingest_store"
    shutil.rmtree(fresh, ignore_errors=True)  # a rerun must ingest, not find it held
    with open_store(fresh, write=True, create=True) as store:
        start = time.perf_counter()
        runs = report_runs(path)
        read_s = time.perf_counter() - start
        summary = ingest.ingest(store, runs, env={})
        total = time.perf_counter() - start
    return {"cases": n_cases, "rows": summary["rows"], "read_s": read_s,
            "ingest_s": total, "json_mb": path.stat().st_size / 1e6}


def template_rows(n_cases: int) -> list[dict]:
    run = _report_run_from(make_report(n_cases, seed=2))
    meta = {"repo": "example/suite", "head_branch": "refs/heads/main", "head_sha": "",
            "workflow_id": 0, "run_attempt": 1, "job_id": 0, "name": "benchflow"}
    return ingest.full_rows(run, meta)


def _report_run_from(report: dict):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.json"
        path.write_text(json.dumps(report))
        return _report_run(path)


def night_values(rng, levels: np.ndarray) -> list[list[float]]:
    run_level = levels * (1 + BETWEEN_CV * rng.standard_normal(len(levels)))
    noise = 1 + WITHIN_CV * rng.standard_normal((len(levels), INVOCATIONS))
    return (run_level[:, None] * noise).round(6).tolist()


def build_year(store, n_cases: int, n_runs: int, seed: int = 3) -> list[str]:
    """n_runs nightly runs of an n_cases suite; returns the case ids."""
    rows = template_rows(n_cases)
    store.execute(f"CREATE TABLE IF NOT EXISTS benchmark.perf_template AS {sql.TABLE} "
                  "ENGINE = Memory")
    store.execute("TRUNCATE TABLE benchmark.perf_template")
    store.execute("INSERT INTO benchmark.perf_template FORMAT JSONEachRow\n"
                + "\n".join(json.dumps(r) for r in rows))
    case_ids = sorted({r["benchmark"]["extra_info"]["case_id"] for r in rows})
    rng = np.random.default_rng(seed)
    levels = rng.lognormal(0.0, 1.0, len(case_ids))
    for night in range(n_runs):
        stamp, run_id = START + night * DAY, f"{night:016x}"
        values = night_values(rng, levels)
        data = "\n".join(json.dumps({"c": c, "v": v})
                         for c, v in zip(case_ids, values, strict=True))
        store.execute(_night_sql(stamp, run_id, data))
    store.execute("DROP TABLE benchmark.perf_template")
    settle(store)
    return case_ids


def settle(store, limit_s: float = 600) -> None:
    """Waits for the background merges of the year's 365 inserts: a store a year old
    has merged them long ago, and a merge running beside a query is measured with it."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and store.rows(
            "SELECT count() AS n FROM system.merges FORMAT JSONEachRow")[0]["n"]:
        time.sleep(1)


def _night_sql(stamp: int, run_id: str, data: str) -> str:
    bench = ("(benchmark.name, benchmark.mode, benchmark.dtype, "
             f"mapUpdate(benchmark.extra_info, map('run_id', '{run_id}')))")
    metric = (f"if(metric.name = '{sql.LATENCY}', (metric.name, v.v, metric.target_value, "
              "metric.extra_info), metric)")
    return (f"INSERT INTO {sql.TABLE} SELECT t.* REPLACE ({stamp} AS timestamp, "
            f"'{run_id:0>40}' AS head_sha, {bench} AS benchmark, {metric} AS metric) "
            "FROM benchmark.perf_template AS t LEFT JOIN format(JSONEachRow, "
            f"'c String, v Array(Float32)', $${data}$$) AS v "
            f"ON {sql.CASE_ID} = v.c")


def held_cases(store) -> list[str]:
    return [r["c"] for r in store.rows(f"SELECT DISTINCT {sql.CASE_ID} AS c FROM "
                                       f"{sql.TABLE} ORDER BY c FORMAT JSONEachRow")]


def show_ms(store, case_id: str, repeats: int = 20) -> dict:
    """Wall time, and CPU time of the process (all chdb threads): on a shared machine the
    CPU time is the steadier figure."""
    times, cpu, n = [], [], 0
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        got = query.series(store, case_id)
        times.append((time.perf_counter() - start) * 1e3)
        cpu.append((time.process_time() - start_cpu) * 1e3)
        n = len(got[0]["points"])
    return {"median_ms": statistics.median(times), "min_ms": min(times),
            "cpu_ms": statistics.median(cpu), "points": n}


def active_mb(store) -> dict:
    """The table's live parts and their projections (the directory also holds parts
    that merges replaced, until ClickHouse deletes them minutes later)."""
    out = {}
    for table in ("parts", "projection_parts"):
        (row,) = store.rows(f"SELECT sum(bytes_on_disk) AS b FROM system.{table} WHERE "
                            "active AND database = 'benchmark' FORMAT JSONEachRow")
        out[table] = int(row["b"] or 0) / 1e6
    return out


def size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def cli_show_s(path: Path, case_id: str) -> float | None:
    if not (REPO / "workflow" / "cli" / "history.py").exists():
        return None
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "workflow.cli.main", "history", "show",
                           "--store", str(path), case_id], capture_output=True, text=True)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        print(f"(benchflow history show failed, exit {proc.returncode}: {tail})")
        return None
    return took


def print_ingest(got: dict) -> None:
    print(f"ingest {got['cases']} cases ({got['rows']} rows, {got['json_mb']:.1f} MB "
          f"JSON): {got['ingest_s']:.2f} s (importer's read {got['read_s']:.2f} s, rows + "
          f"check + INSERT {got['ingest_s'] - got['read_s']:.2f} s); goal "
          f"{GOALS['ingest_s']} s, ratio {got['ingest_s'] / GOALS['ingest_s']:.2f}")


def year_store(work: Path, n_cases: int, n_runs: int) -> tuple[Path, list[str]]:
    """The year's store under `work`, built once per directory (the figures only read
    it); its case ids."""
    year = work / f"year_store_{n_cases}x{n_runs}"
    with open_store(year, write=True, create=True) as store:
        settle(store)
        case_ids = held_cases(store)
        if not case_ids:
            start = time.perf_counter()
            case_ids = build_year(store, n_cases, n_runs)
            print(f"built {n_runs} runs x {n_cases} cases in "
                  f"{time.perf_counter() - start:.1f} s")
    return year, case_ids


def show_figures(year: Path, case_ids: list[str]) -> dict:
    start = time.perf_counter()
    with open_store(year) as store:
        got = {"open_ms": (time.perf_counter() - start) * 1e3,
               "one": show_ms(store, case_ids[len(case_ids) // 2]),
               "glob": show_ms(store, case_ids[7][:-3] + "*", repeats=5)}
        listed = time.perf_counter()
        got["runs"] = len(query.runs(store))
        got["runs_ms"] = (time.perf_counter() - listed) * 1e3
        got["active_mb"] = active_mb(store)
    got["cli_s"] = cli_show_s(year, case_ids[0])
    got["size_mb"] = size_mb(year)
    return got


def print_show(got: dict, n_cases: int, n_runs: int) -> None:
    one = got["one"]
    print(f"open store: {got['open_ms']:.0f} ms")
    print(f"show one series ({one['points']} points): median {one['median_ms']:.1f} ms "
          f"(min {one['min_ms']:.1f}, CPU {one['cpu_ms']:.1f}); goal {GOALS['show_ms']} ms, ratio "
          f"{one['median_ms'] / GOALS['show_ms']:.2f}")
    print(f"show a glob (one case's id less its last 3 characters, then *): median "
          f"{got['glob']['median_ms']:.1f} ms")
    print(f"list of runs ({got['runs']}): {got['runs_ms']:.0f} ms")
    if got["cli_s"] is not None:
        print(f"benchflow history show process: {got['cli_s']:.2f} s")
    live = got["active_mb"]
    print(f"store size: {got['size_mb']:.1f} MB on disk; live parts {live['parts']:.1f} MB "
          f"of which projections {live['projection_parts']:.1f} MB ({n_runs} runs x "
          f"{n_cases} cases)")


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=365)
    parser.add_argument("--ingest-cases", type=int, default=10_000)
    parser.add_argument("--dir", type=Path, default=None,
                        help="keep the stores here (the year's is reused on a rerun)")
    parser.add_argument("--skip-ingest", action="store_true")
    args = parser.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="history_scale_"))
    work.mkdir(parents=True, exist_ok=True)
    if not args.skip_ingest:
        print_ingest(ingest_seconds(work, args.ingest_cases))
    year, case_ids = year_store(work, args.cases, args.runs)
    print_show(show_figures(year, case_ids), args.cases, args.runs)


if __name__ == "__main__":
    main()
