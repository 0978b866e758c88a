"""Malformed inputs of `benchflow history` (issue 26): each is refused with one line naming
the file or option and what was expected, with the command's exit code (ingest and show:
1; detect, a gate: 2), and nothing is added to the store.

CASES is the table of these inputs (tests/malformed_table.py renders it into
docs/malformed-inputs.md): (id, description, expected fragment); MAKE builds each one's
files and command line in a temporary directory."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest

from tests.test_outside_names import fill, mount_tmpfs, unmount
from workflow.cli.main import main

DATA = Path(__file__).resolve().parent / "data"
UP = DATA / "upstream" / "history"

CASES = [
    ("history-garbage", "bytes that are neither JSON nor CSV",
     "neither JSON, JSONEachRow nor a CSV with torchao's columns"),
    ("history-truncated-json", "a report cut off mid-object", "not valid JSON"),
    ("history-unknown-json", "a JSON object of no known kind",
     "JSON of no known kind (an object with keys ['hello'])"),
    ("history-empty", "an empty file", "empty file"),
    ("history-nan-report", "a benchflow report with NaN for a median",
     "not valid JSON: NaN is not a JSON number"),
    ("history-csv-no-latency", "a CSV with torchao's columns but no latency column",
     "header: no latency column"),
    ("history-csv-no-time", "torchao's own results.csv without --timestamp",
     "expected --timestamp (unix seconds or ISO-8601) for it"),
    ("history-no-store", "`history detect` with a --store that is not there",
     "no history store there; expected the directory"),
    ("history-bad-since", "`history detect --since yesterday`",
     "'yesterday' is no run id or commit in the history and no date; expected a run id"),
    ("history-no-series", "`history detect` with a glob that names no case",
     "no series matches 'nothing/*'"),
    ("history-bad-peak", "a report whose peak.json beside it holds no positive gflops",
     "peak.json: gflops: 0; expected the measured peak in GFLOP/s"),
    ("history-no-server", "`history show --url` naming a port where no server listens",
     "u:***@127.0.0.1:1/benchmark: history.url: cannot reach the ClickHouse server"),
    # Issue 37, family 1: the store itself. Each is refused and left as it was.
    ("history-not-a-store", "`history ingest --store` naming a directory of other files",
     "not a benchflow history store (it holds 'notes.txt', which a store does not)"),
    ("history-empty-dir", "`history show --store` naming an empty directory",
     "no history store there; expected the directory"),
    *((f"history-no-default-store-{verb[0]}", f"`history {' '.join(verb)}` where no "
       "history/ is (the default store)", "history: no history store there (from ")
      for verb in (["show"], ["detect"], ["html", "-o", "h.html"], ["remove", "r1"],
                   ["repair"])),
    ("history-no-table-sql", "a store whose table metadata file is missing",
     "damaged: the table's metadata file metadata/benchmark/oss_ci_benchmark_v3.sql is "
     "missing"),
    ("history-part-cut-short", "`history ingest` into a store whose data part was cut short",
     "damaged: a part is cut short or corrupt"),
    ("history-part-gone", "`history detect` on a store whose data part was deleted",
     "damaged: it holds 0 rows, 84 when benchflow last wrote it"),
    ("history-bad-marker", "a store whose benchflow-store.json is not JSON",
     "damaged: benchflow-store.json is unreadable"),
    ("history-remove-unknown", "`history remove` of a run id the store does not hold",
     "run 'nope': not in the history; expected a run id"),
    ("history-confirm-no-suite", "`history confirm` without --configfile",
     "history confirm: --configfile: missing; expected the suite file that measured the "
     "runs"),
    ("history-confirm-unknown-run", "`history confirm --run` of a run id the store does "
     "not hold", "--run 'nope': no such run in the history (the newest is "),
    ("history-confirm-run-and-since", "`history confirm` with both --run and --since",
     "--since and --run: given both; expected one"),
    # Issue 37, family 2: values the v3 table cannot hold, refused before any write.
    ("history-ms-timestamp", "`--timestamp 1764000000123` (milliseconds) for a torchao CSV",
     "--timestamp: 1764000000123 looks like milliseconds since 1970"),
    ("history-v3-ms-row", "a v3 row whose timestamp is in milliseconds",
     "records[0].timestamp: 1764000000123 looks like milliseconds since 1970"),
    ("history-v3-before-1970", "a v3 row dated 1969-07-20",
     "records[0].timestamp: -14182980 is before 1970"),
    ("history-v3-future", "a v3 row dated 2100-01-01", "4102444800 is in the future"),
    ("history-v3-inf-time", "a v3 row whose timestamp is 1e400 (infinite)",
     "records[0].timestamp: inf is not a finite number"),
    ("history-v3-wide-int", "a v3 runner whose cpu_count is 2**70",
     "runners[0].cpu_count: 1180591620717411303424 is outside the column's range"),
    ("history-v3-wide-workflow", "a v3 row whose workflow_id is 2**70",
     "workflow_id: 1180591620717411303424 is beyond its column"),
    ("history-v3-float32", "a v3 value of 1e308 (beyond Float32)",
     "benchmark_values[0]: 1e+308 is beyond the Float32 column"),
    ("history-v3-negative", "a v3 latency of -1 ms",
     "benchmark_values[0]: -1.0 is negative, which a quantity in ms cannot be"),
    ("history-csv-negative", "a torchao CSV line with a negative time",
     "line 2: model_inference_time_in_ms: '-2.0' is negative"),
    ("history-forge-future", "a Forge entry dated 2099-01-01",
     "entries[0].date: 4070908800 is in the future"),
    # Issue 47, family 1: the store on a full disk (a real tmpfs, filled), and a table
    # definition chdb cannot start on. Each is refused, the store left as it was.
    ("history-full-disk", "`history ingest` into a store whose file system is full (an "
     "8 MiB tmpfs, filled)", "history store: not enough space on its file system"),
    ("history-remove-full-disk", "`history remove` of a run from a store whose file system "
     "is full", "history store: not enough space on its file system"),
    ("history-repair-full-disk", "`history repair` of a damaged store whose file system is "
     "full", "history store: not enough space on its file system"),
    ("history-tiny-fs", "`history ingest` making a new store on a 512 KiB tmpfs (chdb: "
     "Cannot reserve 1.00 MiB); the directory is not left behind",
     "history store: not enough space on its file system ("),
    ("history-empty-table-sql", "a store whose table definition a full disk left at 0 "
     "bytes", "damaged: the table's metadata file metadata/benchmark/oss_ci_benchmark_v3.sql "
     "is empty"),
    ("history-foreign-table-sql", "a store whose table definition is other text",
     "oss_ci_benchmark_v3.sql is not the table's definition chdb writes"),
    ("history-unparsable-table-sql", "a store whose table definition chdb cannot parse",
     "damaged: chdb cannot open it (Cannot parse uuid x"),
    ("history-repair-nothing", "`history repair` of a store none of whose data parts "
     "survive", "nothing to rebuild it from: no data part survives"),
    # Issue 47, family 2: queries and imported values.
    ("history-long-glob", "`history show` with a 90 KB glob",
     "CASE|GLOB: 90000 characters; expected at most 4096"),
    ("history-long-run-id", "`history remove` of a 90 KB run id",
     "RUN_ID: 90000 characters; expected at most 4096"),
    ("history-v3-list-name", "a v3 model.name given as a list",
     'records[0].model.name: ["a", "b"] is a list; expected a string'),
    ("history-v3-origins-text", 'a v3 model.origins given as "notalist"',
     'records[0].model.origins: "notalist" is a string; expected a list'),
    ("history-v3-model-text", 'a v3 model given as "resnet"',
     'records[0].model: "resnet" is a string; expected an object'),
    ("history-v3-text-value", 'a v3 benchmark_values entry "fast"',
     'records[0].metric.benchmark_values[0]: "fast" is a string; expected a number'),
    ("history-forge-list-model", "a Forge entry whose args.model is a list",
     'entries[0].args.model: ["m"] is a list; expected a string'),
    ("history-html-full-disk", "`history html -o` onto a full 16 KiB tmpfs",
     "h.html: No space left on device; expected -o in a writable directory with room"),
    ("history-nothing-ingestible", "a report whose every case failed (exit 3, no store "
     "made)", "nothing ingestible: 2 case(s), none with a finite value"),
]


def _write(name: str, data: bytes):
    def make(tmp: Path) -> Path:
        path = tmp / name
        path.write_bytes(data)
        return path
    return make


def _bad_peak(tmp: Path) -> Path:
    (tmp / "peak.json").write_text(json.dumps({"gflops": 0, "dtype": "f32"}))
    path = tmp / "report.json"
    path.write_bytes((DATA / "report_iree.json").read_bytes())
    return path


def _nan_report(tmp: Path) -> Path:
    report = json.loads((DATA / "report_iree.json").read_text())
    ok = next(c for c in report["cases"] if c["status"] == "ok")
    ok["timing"]["median_ms"] = math.nan
    path = tmp / "report.json"
    path.write_text(json.dumps(report))  # json writes NaN, which JSON has not
    return path


def _store_with_one_run(tmp: Path) -> str:
    store = tmp / "store"
    assert main(["history", "ingest", str(DATA / "report_iree.json"), "--store",
                 str(store)]) == 0
    return str(store)


def _ingest(make):
    return lambda tmp: (1, ["ingest", str(make(tmp)), "--store", str(tmp / "store")])


def _copy_csv(tmp: Path) -> Path:
    return Path(shutil.copy(UP / "torchao" / "results.csv", tmp / "results.csv"))


def _v3(name: str, **changes):
    row = {"timestamp": 1_700_000_000, "benchmark": {"name": "b", "mode": "inference"},
           "model": {"name": "m"}, "runners": [{"name": "cpu", "cpu_count": 4}],
           "metric": {"name": "latency median (ms)", "benchmark_values": [1.0]}}
    for key, value in changes.items():
        where, _, leaf = key.rpartition("__")
        target = row
        for part in where.split("__") if where else []:
            target = target[part] if not part.isdigit() else target[int(part)]
        target[leaf] = value
    text = json.dumps([row]).replace('"__inf__"', "1e400")
    return _ingest(_write(name, text.encode()))


def _suite(tmp: Path) -> str:
    from tests.conftest import tiny_suite, write_suite

    write_suite(tmp / "suite.yaml", tiny_suite())
    return str(tmp / "suite.yaml")


def _store(tmp: Path, damage=None) -> Path:
    """A store holding one run (report_iree.json), `damage` done to it afterwards."""
    store = Path(_store_with_one_run(tmp))
    if damage is not None:
        damage(store)
    return store


def _part(store: Path) -> Path:
    (part,) = store.glob("store/*/*/all_*")
    return part


def _on_store(verb: str, damage=None, code: int = 1, *extra: str):
    return lambda tmp: (code, [verb, *extra, "--store", str(_store(tmp, damage))]
                        + ([str(DATA / "report_iree.json")] if verb == "ingest" else []))


def _other_files(tmp: Path) -> tuple[int, list[str]]:
    (tmp / "other").mkdir()
    (tmp / "other" / "notes.txt").write_text("mine\n")
    return 1, ["ingest", str(DATA / "report_iree.json"), "--store", str(tmp / "other")]


def _empty_dir(tmp: Path) -> tuple[int, list[str]]:
    (tmp / "empty").mkdir()
    return 2, ["show", "--store", str(tmp / "empty")]


def _default_store(verb: list[str]):
    """A verb run where no history/ is, as a user tries `history show` first: the
    directory it looked in named, whence, and the same code (2) as detect's."""
    def make(tmp: Path) -> tuple[int, list[str]]:
        return 2, verb  # run from tmp (test_refused_in_one_line), which has no history/
    return make


MAKE = {
    "history-garbage": _ingest(_write("bad.json", b"\x00\x01garbage")),
    "history-truncated-json": _ingest(_write("report.json", b'{"schema_version": "1.2",')),
    "history-unknown-json": _ingest(_write("other.json", b'{"hello": "world"}')),
    "history-empty": _ingest(_write("empty.json", b"")),
    "history-nan-report": _ingest(_nan_report),
    "history-bad-peak": _ingest(_bad_peak),
    "history-csv-no-latency": _ingest(_write(
        "bad.csv", b"name,quantization,m,k,n,device\nx,baseline,1,1,1,cpu\n")),
    "history-csv-no-time": _ingest(_copy_csv),
    "history-no-store": lambda tmp: (2, ["detect", "--store", str(tmp / "nowhere")]),
    "history-bad-since": lambda tmp: (2, ["detect", "--store", _store_with_one_run(tmp),
                                          "--since", "yesterday"]),
    "history-no-series": lambda tmp: (2, ["detect", "nothing/*", "--store",
                                          _store_with_one_run(tmp)]),
    # Port 1: nothing listens there; the password must not appear in the message.
    "history-no-server": lambda tmp: (1, ["show", "--url",
                                          "http://u:secretpw@127.0.0.1:1/benchmark"]),
    "history-not-a-store": _other_files,
    "history-empty-dir": _empty_dir,
    **{f"history-no-default-store-{verb[0]}": _default_store(verb)
       for verb in (["show"], ["detect"], ["html", "-o", "h.html"], ["remove", "r1"],
                    ["repair"])},
    "history-no-table-sql": _on_store("show", lambda s: next(
        s.glob("store/*/*/oss_ci_benchmark_v3.sql")).unlink()),
    "history-part-cut-short": _on_store("ingest", lambda s: os.truncate(
        _part(s) / "data.bin", 50)),
    "history-part-gone": _on_store("detect", lambda s: shutil.rmtree(_part(s)), 2),
    "history-bad-marker": _on_store("show", lambda s: (s / "benchflow-store.json")
                                    .write_text("{oops")),
    "history-remove-unknown": _on_store("remove", None, 1, "nope"),
    "history-confirm-no-suite": lambda tmp: (2, ["confirm", "--store",
                                                 _store_with_one_run(tmp)]),
    "history-confirm-unknown-run": lambda tmp: (2, ["confirm", "--store",
                                                    _store_with_one_run(tmp), "--run", "nope",
                                                    "--configfile", _suite(tmp)]),
    "history-confirm-run-and-since": lambda tmp: (2, [
        "confirm", "--store", _store_with_one_run(tmp), "--run", "newest", "--since",
        "2026-01-01", "--configfile", _suite(tmp)]),
    "history-ms-timestamp": lambda tmp: (1, ["ingest", str(_copy_csv(tmp)), "--timestamp",
                                             "1764000000123", "--store", str(tmp / "store")]),
    "history-v3-ms-row": _v3("v3.json", timestamp=1_764_000_000_123),
    "history-v3-before-1970": _v3("v3.json", timestamp="1969-07-20T20:17:00"),
    "history-v3-future": _v3("v3.json", timestamp="2100-01-01T00:00:00Z"),
    "history-v3-inf-time": _v3("v3.json", timestamp="__inf__"),
    "history-v3-wide-int": _v3("v3.json", runners__0__cpu_count=2**70),
    "history-v3-wide-workflow": _v3("v3.json", workflow_id=2**70),
    "history-v3-float32": _v3("v3.json", metric__benchmark_values=[1e308]),
    "history-v3-negative": _v3("v3.json", metric__benchmark_values=[-1.0]),
    "history-csv-negative": _ingest(_write("neg.csv", (
        b"name,quantization,m,k,n,device,model_inference_time_in_ms,timestamp\n"
        b"x,baseline,1,1,1,cpu,-2.0,2025-01-01T00:00:00\n"))),
    "history-forge-future": _ingest(_write("forge.json", json.dumps([{
        "total_time": 1.0, "total_samples": 8, "samples_per_sec": 8.0,
        "args": {"model": "m", "microbatch": 1}, "arch": "wormhole",
        "machine_name": "h", "hash": "a" * 40, "date": "2099-01-01"}]).encode())),
    "history-full-disk": lambda tmp: _on_tmpfs(tmp, "8m", full=True),
    "history-remove-full-disk": lambda tmp: _on_tmpfs(tmp, "8m", full=True,
                                                      verb=["remove", "e7608c6f76dba97b"]),
    "history-repair-full-disk": lambda tmp: _on_tmpfs(tmp, "8m", full=True,
                                                      verb=["repair"], damage=True),
    "history-tiny-fs": lambda tmp: _on_tmpfs(tmp, "512k", full=False),
    "history-empty-table-sql": _on_store("ingest", lambda s: _table_sql(s).write_text("")),
    "history-foreign-table-sql": _on_store("show", lambda s: _table_sql(s).write_text(
        "CREATE TABLE t (x UInt8) ENGINE = Memory\n")),
    "history-unparsable-table-sql": _on_store("detect", lambda s: _table_sql(s).write_text(
        "ATTACH TABLE _ UUID 'x'\n(\n    `x` UInt8\n)\nENGINE = MergeTree\n"), 2),
    "history-repair-nothing": _on_store("repair", lambda s: (
        _table_sql(s).write_text(""), shutil.rmtree(_part(s)))),
    "history-long-glob": _on_store("show", None, 1, "a*" * 45_000),
    "history-long-run-id": _on_store("remove", None, 1, "f" * 90_000),
    "history-v3-list-name": _v3("v3.json", model__name=["a", "b"]),
    "history-v3-origins-text": _v3("v3.json", model__origins="notalist"),
    "history-v3-model-text": _v3("v3.json", model="resnet"),
    "history-v3-text-value": _v3("v3.json", metric__benchmark_values=["fast"]),
    "history-forge-list-model": _ingest(_write("forge.json", json.dumps([{
        "total_time": 1.0, "total_samples": 8, "samples_per_sec": 8.0,
        "args": {"model": ["m"], "microbatch": 1}, "arch": "wormhole",
        "machine_name": "h", "hash": "a" * 40, "date": "2025-01-01"}]).encode())),
    "history-html-full-disk": lambda tmp: _html_on_tmpfs(tmp),
    "history-nothing-ingestible": lambda tmp: (3, ["ingest", str(_all_failed(tmp)),
                                                   "--store", str(tmp / "store")]),
}


def _table_sql(store: Path) -> Path:
    (sql,) = store.glob("store/*/*/oss_ci_benchmark_v3.sql")
    return sql


def _all_failed(tmp: Path) -> Path:
    report = json.loads((DATA / "report_iree.json").read_text())
    report["cases"] = [c for c in report["cases"] if c["status"] == "failed"]
    path = tmp / "failed.json"
    path.write_text(json.dumps(report))
    return path


# tmpfs mounted by a case's maker, unmounted after its test (_unmount_after).
MOUNTS: list[Path] = []


@pytest.fixture(autouse=True)
def _unmount_after():
    yield
    while MOUNTS:
        unmount(MOUNTS.pop())


def _on_tmpfs(tmp: Path, size: str, *, full: bool, verb: list[str] | None = None,
              damage: bool = False) -> tuple[int, list[str]]:
    """`history ingest` (or `verb`) with a store on a real tmpfs of `size` (the fault
    tests' own, tests/test_outside_names.mount_tmpfs; skipped where this process may not
    mount): with `full`, a store holding one run (its table's definition emptied, with
    `damage`) on a file system then filled to the last byte; else a new store."""
    where = mount_tmpfs(tmp / "mnt", size=size)
    MOUNTS.append(where)
    store = where / "store"
    if full:
        assert main(["history", "ingest", str(DATA / "report_iree.json"), "--store",
                     str(store)]) == 0
        if damage:
            _table_sql(store).write_text("")
        fill(where)
    if verb:
        return 1, [*verb, "--store", str(store)]
    return 1, ["ingest", str(DATA / "report_torch.json"), "--store", str(store)]


def _html_on_tmpfs(tmp: Path) -> tuple[int, list[str]]:
    store = _store(tmp)
    where = mount_tmpfs(tmp / "mnt", size="16k")
    MOUNTS.append(where)
    return 1, ["html", "-o", str(where / "h.html"), "--store", str(store)]


def _tree(tmp: Path) -> dict[str, int]:
    """Every file under tmp and its size, the lock's left out (a reader takes it)."""
    return {str(p.relative_to(tmp)): p.stat().st_size for p in tmp.rglob("*")
            if p.is_file() and p.name != "benchflow.lock"}


def test_every_case_has_its_maker():
    assert set(MAKE) == {c[0] for c in CASES}
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("case_id", "description", "expected"), CASES,
                         ids=[c[0] for c in CASES])
@pytest.mark.slow
def test_refused_in_one_line(tmp_path, capsys, monkeypatch, case_id, description, expected):
    monkeypatch.chdir(tmp_path)
    code, argv = MAKE[case_id](tmp_path)
    before, existed = _tree(tmp_path), (tmp_path / "store").exists()
    capsys.readouterr()
    assert main(["history", *argv]) == code, description
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert expected in err and "secretpw" not in err, err
    assert _tree(tmp_path) == before  # nothing the user had changed, a store included
    if argv[0] == "ingest" and not existed:  # every file is read before a store is made
        assert not (tmp_path / "store").exists()
