"""Malformed inputs of `benchflow history` (issue 26): each is refused with one line naming
the file or option and what was expected, with the command's exit code (ingest and show:
1; detect, a gate: 2), and nothing is added to the store.

CASES is the table of these inputs (tests/malformed_table.py renders it into
docs/malformed-inputs.md): (id, description, expected fragment); MAKE builds each one's
files and command line in a temporary directory."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

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
}


def test_every_case_has_its_maker():
    assert set(MAKE) == {c[0] for c in CASES}
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("case_id", "description", "expected"), CASES,
                         ids=[c[0] for c in CASES])
def test_refused_in_one_line(tmp_path, capsys, case_id, description, expected):
    code, argv = MAKE[case_id](tmp_path)
    capsys.readouterr()
    assert main(["history", *argv]) == code, description
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert expected in err and "secretpw" not in err, err
    if argv[0] == "ingest":  # every file is read before any store is made
        assert not (tmp_path / "store").exists()
