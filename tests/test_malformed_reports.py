"""Malformed inputs of the commands that read a report or goldens.

`benchflow compare BASE NEW`, `check --report R [--goldens D]`, `bless --report R` and
`coverage --report R` read every report through records.report.read_report, and the
goldens through regression.goldens.read: a file that is not what they expect is refused
with one line `FILE: problem` on stderr and exit status 1 (as every ConfigError of the
command line), never a traceback and never a silent verdict.

CASES is the table of malformed inputs (a docs generator reads it):
(id, what is wrong, how the input is made, a fragment of the expected message).
Ids starting `report-` are given as a report to each of the four commands; ids starting
`golden-` are a goldens file of SKU `host` (goldens/host.json) that `check --goldens`,
`validate`, goldens.read and the Snakefile's golden check (planning.plan.check_goldens)
refuse, naming the file and the case id.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.test_goldens import BASE, make_case, make_report
from workflow.cli.main import main
from workflow.errors import ConfigError
from workflow.records.report import ReportError, read_report
from workflow.records.results_file import forge_entry
from workflow.records.storage import write_json
from workflow.regression import goldens

REPO = Path(__file__).resolve().parent.parent
CID = "host/iree/a-f32/baseline"

CASES = [
    # Reports: every command that reads one refuses these.
    ("report-truncated", "a report cut short (a killed writer, a partial copy)",
     "a valid report's JSON text cut after half its characters",
     "not valid JSON (truncated?)"),
    ("report-empty", "an empty file", "a file of zero bytes", "empty file, not a report"),
    ("report-whitespace", "a file of blank lines", "a file holding only '\\n\\n'",
     "empty file, not a report"),
    ("report-trailing-garbage", "a report followed by other text",
     "a valid report's JSON followed by 'x'", "not valid JSON: Extra data"),
    ("report-json-list", "a JSON list instead of a report", "the text '[1, 2, 3]'",
     "a JSON list, not a report"),
    ("report-json-string", "a JSON string instead of a report", 'the text \'"report"\'',
     "a JSON str, not a report"),
    ("report-json-number", "a JSON number instead of a report", "the text '42'",
     "a JSON int, not a report"),
    ("report-goldens-file", "a goldens file given as a report",
     "goldens/host.json as `benchflow bless` writes it", "a goldens file"),
    ("report-other-kind", "a JSON object of another kind",
     '{"kind": "pytorch-dashboard", "cases": []}', "a file of kind 'pytorch-dashboard'"),
    ("report-directory", "a directory given as a report", "an existing directory",
     "is a directory, not a report file"),
    ("report-missing", "a path that does not exist", "a path nothing was written to",
     "file not found"),
    ("report-latin1", "a non-UTF-8 text file", "a report's text encoded as Latin-1 with a "
     "'\u00e9' in the suite name", "not UTF-8 text (byte 0xe9"),
    ("report-binary", "a binary file", "gzip magic bytes and zeros", "not UTF-8 text"),
    ("report-yaml", "a suite (YAML) given as a report", "the text 'skus:\\n  host: {}\\n'",
     "not valid JSON"),
    ("report-schema-2", "a report of an unknown major schema version",
     "a valid report with schema_version '2.0'", "schema_version 2.0: this benchflow reads "
     "reports of schema 1.x only"),
    ("report-schema-number", "a schema version that is not a string",
     "a valid report with schema_version 1.0 (a JSON number)",
     "schema_version 1.0: expected \"MAJOR.MINOR\""),
    ("report-no-schema", "an object without schema_version",
     "a valid report without its schema_version", "no schema_version: not a benchflow report"),
    ("report-no-cases", "a report without its cases", "a valid report without `cases`",
     "'cases' is a required property"),
    ("report-cases-object", "cases that are not a list",
     "a valid report whose `cases` is an object", "not of type 'array'"),
    ("report-case-not-object", "a case that is not an object",
     "a valid report whose cases are [1]", "cases[0]: 1 is not of type 'object'"),
    ("report-case-missing-field", "a case that lacks a required field",
     "a valid report whose case has no `model`",
     f"cases[0] (case {CID}): 'model' is a required property"),
    ("report-case-bad-status", "a case with an unknown status",
     "a valid report whose case has status 'great'", "cases[0].status (case"),
    ("report-case-timing-incomplete", "a case whose timing lacks fields",
     "a valid report whose case's timing has only median_ms", "cases[0].timing (case"),
    ("report-no-provenance", "a report without provenance",
     "a valid report without `provenance`", "'provenance' is a required property"),
    ("report-nan", "a NaN, which JSON has not (Python's json module reads it)",
     "a valid report with median_ms written as NaN", "NaN is not a JSON number"),
    ("report-infinity", "an Infinity, which JSON has not",
     "a valid report with median_ms written as Infinity", "Infinity is not a JSON number"),
    ("report-results-file", "a `benchflow run -o` results file given as a report "
     "(coverage reads those; compare, check and bless need a suite's report)",
     '{"schema_version": "1.0", "kind": "benchflow-results", "cases": [...]}',
     "a `benchflow run -o` results file, not a report"),
    # Goldens: refused at load, naming the file and the case id.
    ("golden-nan-median", "a NaN golden time (today the gate said pass)",
     "goldens/host.json with median_ms written as NaN",
     f"host.json: cases.{CID}.median_ms: expected a finite number, got nan"),
    ("golden-nan-invocation", "a NaN among the invocation medians",
     "goldens/host.json with invocation_medians_ms [1.0, NaN]",
     f"cases.{CID}.invocation_medians_ms[1]: expected a finite number, got nan"),
    ("golden-infinity", "an infinite golden time", "median_ms written as Infinity",
     f"cases.{CID}.median_ms: expected a finite number, got inf"),
    ("golden-minus-infinity", "a golden time of -Infinity", "median_ms written as -Infinity",
     f"cases.{CID}.median_ms"),
    ("golden-nan-cv", "a NaN coefficient of variation", "cv written as NaN",
     f"cases.{CID}.cv: expected a finite number, got nan"),
    ("golden-nan-tolerance", "a NaN tolerance", "tolerance written as NaN",
     f"cases.{CID}.tolerance: expected a finite number, got nan"),
    ("golden-negative-time", "a negative golden time", "median_ms -1.0",
     f"cases.{CID}.median_ms"),
    ("golden-zero-time", "a golden time of zero", "median_ms 0",
     f"cases.{CID}.median_ms"),
    ("golden-zero-invocation", "an invocation median of zero",
     "invocation_medians_ms [1.0, 0]", f"cases.{CID}.invocation_medians_ms"),
    ("golden-empty-invocations", "no invocation medians", "invocation_medians_ms []",
     f"cases.{CID}.invocation_medians_ms"),
    ("golden-duplicate-case", "a case's golden given twice, as a hand edit leaves it (a "
     "JSON reader keeps the second and drops the first without a word)",
     "goldens/host.json with the case's key twice in `cases`",
     f"host.json: cases.{CID}: given twice"),
]

REPORT_CASES = [c for c in CASES if c[0].startswith("report-")]
GOLDEN_CASES = [c for c in CASES if c[0].startswith("golden-")]
# Inputs a command accepts on purpose: coverage reads `benchflow run -o` results files.
ACCEPTED = {("report-results-file", "coverage")}


def valid_report() -> dict:
    return make_report(make_case(CID, BASE), make_case("host/iree/b-f32/baseline", BASE))


def _report_text(**changes) -> str:
    report = valid_report()
    report.update(changes)
    return json.dumps(report, indent=1)


def _case_changed(change) -> str:
    report = valid_report()
    change(report["cases"][0])
    return json.dumps(report, indent=1)


def _without(key):
    report = valid_report()
    del report[key]
    return json.dumps(report, indent=1)


def _golden_entry(**changes) -> dict:
    return {"median_ms": 1.0, "invocation_medians_ms": [1.0, 1.01], "cv": 0.01,
            "dispatch_count": 2, "binary_bytes": 10240, "taken_at": None, "git_sha": "abc",
            **changes}


def _goldens_text(**changes) -> str:
    data = goldens.empty("host")
    data["cases"][CID] = _golden_entry(**changes)
    return json.dumps(data)  # allow_nan: writes the NaN/Infinity literals


def _timing_only_median(case):
    case["timing"] = {"median_ms": 1.0}


# id -> what to write (str: text, bytes: raw) or None (the path is made otherwise).
MAKE = {
    "report-truncated": lambda: (t := _report_text())[: len(t) // 2],
    "report-empty": lambda: "",
    "report-whitespace": lambda: "\n\n",
    "report-trailing-garbage": lambda: _report_text() + "x",
    "report-json-list": lambda: "[1, 2, 3]",
    "report-json-string": lambda: '"report"',
    "report-json-number": lambda: "42",
    "report-goldens-file": lambda: _goldens_text(),
    "report-other-kind": lambda: '{"kind": "pytorch-dashboard", "cases": []}',
    "report-directory": None,
    "report-missing": None,
    "report-latin1": lambda: _report_text(provenance={
        **valid_report()["provenance"], "suite_name": "caf\u00e9"}).replace(
            "\\u00e9", "\u00e9").encode("latin-1"),
    "report-binary": lambda: b"\x1f\x8b\x08\x00" + bytes(64),
    "report-yaml": lambda: "skus:\n  host: {}\n",
    "report-schema-2": lambda: _report_text(schema_version="2.0"),
    "report-schema-number": lambda: _report_text().replace('"schema_version": "1.0"',
                                                            '"schema_version": 1.0'),
    "report-no-schema": lambda: _without("schema_version"),
    "report-no-cases": lambda: _without("cases"),
    "report-cases-object": lambda: _report_text(cases={}),
    "report-case-not-object": lambda: _report_text(cases=[1]),
    "report-case-missing-field": lambda: _case_changed(lambda c: c.pop("model")),
    "report-case-bad-status": lambda: _case_changed(lambda c: c.update(status="great")),
    "report-case-timing-incomplete": lambda: _case_changed(_timing_only_median),
    "report-no-provenance": lambda: _without("provenance"),
    "report-nan": lambda: _case_changed(lambda c: c["timing"].update(median_ms=float("nan"))),
    "report-infinity": lambda: _case_changed(
        lambda c: c["timing"].update(median_ms=float("inf"))),
    "report-results-file": lambda: json.dumps(
        {"schema_version": "1.0", "kind": "benchflow-results", "cases": valid_report()["cases"]}),
    "golden-nan-median": lambda: _goldens_text(median_ms=float("nan")),
    "golden-nan-invocation": lambda: _goldens_text(invocation_medians_ms=[1.0, float("nan")]),
    "golden-infinity": lambda: _goldens_text(median_ms=float("inf")),
    "golden-minus-infinity": lambda: _goldens_text(median_ms=float("-inf")),
    "golden-nan-cv": lambda: _goldens_text(cv=float("nan")),
    "golden-nan-tolerance": lambda: _goldens_text(tolerance=float("nan")),
    "golden-negative-time": lambda: _goldens_text(median_ms=-1.0),
    "golden-zero-time": lambda: _goldens_text(median_ms=0),
    "golden-zero-invocation": lambda: _goldens_text(invocation_medians_ms=[1.0, 0]),
    "golden-empty-invocations": lambda: _goldens_text(invocation_medians_ms=[]),
    "golden-duplicate-case": lambda: _goldens_text().replace(
        '"cases": {', f'"cases": {{"{CID}": {json.dumps(_golden_entry(median_ms=2.0))}, ', 1),
}


def make_input(case_id: str, where: Path) -> Path:
    """The malformed input of row `case_id`, under `where`."""
    where.mkdir(parents=True, exist_ok=True)
    if case_id.startswith("golden-"):
        path = where / "goldens" / "host.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(MAKE[case_id]())
        return path
    path = where / f"{case_id}.json"
    if case_id == "report-directory":
        path.mkdir()
    elif case_id != "report-missing":
        content = MAKE[case_id]()
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return path


def test_the_table_is_complete():
    assert len({c[0] for c in CASES}) == len(CASES) >= 20
    assert set(MAKE) == {c[0] for c in CASES}
    assert all(len(c) == 4 and all(isinstance(x, str) and x for x in c) for c in CASES)


def command_argv(command: str, bad: Path, tmp_path: Path) -> list[str]:
    good = tmp_path / "good.json"
    write_json(good, valid_report())
    return {
        "compare-new": ["compare", str(good), str(bad)],
        "compare-base": ["compare", str(bad), str(good)],
        "check": ["check", "--report", str(bad)],
        "check-goldens": ["check", "--report", str(bad), "--goldens", str(tmp_path / "g")],
        "bless": ["bless", "--report", str(bad), "--goldens", str(tmp_path / "g")],
        "bless-earlier": ["bless", "--report", str(bad), str(good),
                          "--goldens", str(tmp_path / "g")],
        "coverage": ["coverage", "--report", str(bad)],
    }[command]


COMMANDS = ["compare-new", "compare-base", "check", "check-goldens", "bless", "bless-earlier",
            "coverage"]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(("case_id", "description", "how", "expected"), REPORT_CASES,
                         ids=[c[0] for c in REPORT_CASES])
def test_a_malformed_report_is_refused_in_one_line(case_id, description, how, expected,
                                                   command, tmp_path, capsys):
    bad = make_input(case_id, tmp_path / "in")
    argv = command_argv(command, bad, tmp_path)
    if (case_id, command.split("-")[0]) in ACCEPTED:
        assert main(argv) == 0
        return
    # A gate's bad input exits 2: its 1 means a regression (README, "Exit codes").
    assert main(argv) == (2 if command.startswith("check") else 1)
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"{bad}: ") and expected in lines[0], lines[0]
    assert not (tmp_path / "g").exists()  # bless wrote nothing


@pytest.mark.parametrize(("case_id", "description", "how", "expected"), REPORT_CASES,
                         ids=[c[0] for c in REPORT_CASES])
def test_read_report_raises_report_error(case_id, description, how, expected, tmp_path):
    bad = make_input(case_id, tmp_path)
    with pytest.raises(ReportError) as exc:
        read_report(bad)
    assert exc.value.problems == [f"{bad}: {exc.value.problem}"]
    assert expected in exc.value.problem


def test_a_minor_schema_version_is_read_and_a_major_is_refused(tmp_path, capsys):
    path = tmp_path / "r.json"
    write_json(path, {**valid_report(), "schema_version": "1.9"})
    assert read_report(path)["schema_version"] == "1.9"
    # (No case has a golden: only with --allow-inconclusive is that a pass of the gate.)
    for argv in (["check", "--report", str(path), "--allow-inconclusive"],
                 ["compare", str(path), str(path)],
                 ["coverage", "--report", str(path)],
                 ["bless", "--report", str(path), "--goldens", str(tmp_path / "g")]):
        assert main(argv) == 0, argv
    write_json(path, {**valid_report(), "schema_version": "2.0"})
    capsys.readouterr()
    assert main(["check", "--report", str(path)]) == 2
    assert "schema_version 2.0" in capsys.readouterr().err


def test_coverage_still_reads_results_files_of_both_formats(tmp_path, capsys):
    cases = valid_report()["cases"]
    ours = tmp_path / "ours.json"
    write_json(ours, {"schema_version": "1.0", "kind": "benchflow-results", "cases": cases})
    forge = tmp_path / "forge.json"
    # As Forge writes it (NaN allowed), with one entry of Forge's own (no case record).
    entries = [forge_entry(c) for c in cases] + [
        {"total_time": float("nan"), "samples_per_sec": 0.0, "args": {"model": "x"}}]
    forge.write_text(json.dumps(entries))
    for path in (ours, forge):
        assert main(["coverage", "--report", str(path), "--json"]) == 0
        cov = json.loads(capsys.readouterr().out)
        assert cov["models"]["a"]["backends"]["iree"]["cases"] == 1
        assert cov["models"]["b"]["backends"]["iree"]["cases"] == 1
    # A results file whose records lack a field is refused like a report.
    entries[0]["benchflow"].pop("status")
    forge.write_text(json.dumps(entries))
    assert main(["coverage", "--report", str(forge)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{forge}: not a valid Forge results file: entries[0]") and \
        "'status' is a required property" in err
    # coverage also needs `workload` (every record has it; the schema leaves it optional).
    cases = valid_report()["cases"]
    cases[0].pop("workload")
    write_json(ours, {"schema_version": "1.0", "kind": "benchflow-results", "cases": cases})
    assert main(["coverage", "--report", str(ours)]) == 1
    assert "'workload' is a required property" in capsys.readouterr().err


@pytest.mark.tool
@pytest.mark.parametrize(("case_id", "args"), [
    ("report-truncated", ["compare", "{good}", "{bad}"]),
    ("report-latin1", ["check", "--report", "{bad}"]),
    ("report-goldens-file", ["bless", "--report", "{bad}", "--goldens", "{tmp}/g"]),
    ("report-directory", ["coverage", "--report", "{bad}"]),
    ("report-schema-2", ["compare", "{bad}", "{good}"]),
])
def test_the_console_script_prints_no_traceback(case_id, args, tmp_path):
    bad = make_input(case_id, tmp_path / "in")
    good = tmp_path / "good.json"
    write_json(good, valid_report())
    argv = [a.format(bad=bad, good=good, tmp=tmp_path) for a in args]
    script = Path(sys.executable).with_name("benchflow")
    proc = subprocess.run([str(script), *argv], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    # A gate's (check's) bad input exits 2, every other command's 1.
    assert proc.returncode == (2 if args[0] == "check" else 1), proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [proc.stderr.strip()] and \
        proc.stderr.startswith(f"{bad}: "), proc.stderr


# --- goldens -------------------------------------------------------------------------


@pytest.mark.parametrize(("case_id", "description", "how", "expected"), GOLDEN_CASES,
                         ids=[c[0] for c in GOLDEN_CASES])
def test_a_malformed_golden_is_refused_at_load(case_id, description, how, expected, tmp_path):
    path = make_input(case_id, tmp_path)
    with pytest.raises(ConfigError) as exc:
        goldens.read(path)
    assert any(p.startswith(f"{path}: cases.{CID}") and expected in f"{path}: {p}"
               for p in exc.value.problems), exc.value.problems
    assert goldens.check_dir(path.parent, ["host"]) == exc.value.problems


@pytest.mark.parametrize(("case_id", "description", "how", "expected"), GOLDEN_CASES,
                         ids=[c[0] for c in GOLDEN_CASES])
def test_check_against_malformed_goldens_fails(case_id, description, how, expected,
                                               tmp_path, capsys):
    """Today a NaN golden made `check --goldens` say pass: now it names file and case."""
    path = make_input(case_id, tmp_path)
    report = tmp_path / "r.json"
    write_json(report, valid_report())
    assert main(["check", "--report", str(report), "--goldens", str(path.parent)]) == 2
    captured = capsys.readouterr()
    assert "ok:" not in captured.out
    assert any(line.startswith(f"{path}: cases.{CID}") for line in captured.err.splitlines())
    assert expected in captured.err


def test_the_snakefile_refuses_a_nan_golden_before_any_job(tmp_path):
    from workflow.planning.plan import Refused, check_goldens

    path = make_input("golden-nan-median", tmp_path)
    suite = SimpleNamespace(config={"goldens": {"dir": str(path.parent)},
                                    "skus": {"host": {}, "other": {}}})
    with pytest.raises(Refused) as exc:
        check_goldens(suite)
    assert exc.value.problems == [
        f"{path}: cases.{CID}.median_ms: expected a finite number, got nan"]
    assert "invalid golden files" in str(exc.value)
    # A good golden file passes.
    path.write_text(_goldens_text())
    check_goldens(suite)


def test_validate_names_a_nan_golden(tmp_path, capsys):
    path = make_input("golden-nan-median", tmp_path)
    assert main(["validate", str(path)]) == 1
    assert f"cases.{CID}.median_ms: expected a finite number" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["check", "bless"])
def test_goldens_must_be_a_directory(command, tmp_path, capsys):
    report = tmp_path / "r.json"
    write_json(report, valid_report())
    assert main([command, "--report", str(report), "--goldens", str(report), "--yes"
                 ][: 5 if command == "check" else 6]) == (2 if command == "check" else 1)
    assert capsys.readouterr().err.startswith(f"{report}: not a directory")


def test_a_special_file_or_an_oversized_one_is_refused_without_reading_it(tmp_path,
                                                                         monkeypatch):
    """records/storage.read_json_file, every reader's: a FIFO would block a reader for
    ever, a huge file exhaust its memory; each is a one-line ConfigError instead."""
    import os

    from workflow.records import storage
    from workflow.records.storage import read_json_file

    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError) as err:
        read_json_file(fifo)
    assert err.value.problems == [
        f"{fifo}: is a FIFO (named pipe), not a regular file; expected a JSON file"]
    big = tmp_path / "big.json"
    big.write_text('{"cases": []}' + " " * 2048)
    monkeypatch.setattr(storage, "MAX_JSON_BYTES", 1024)
    with pytest.raises(ConfigError) as err:
        read_json_file(big)
    assert err.value.problems == [
        f"{big}: larger than 1,024 bytes; expected a JSON file below that"]


@pytest.mark.parametrize("text, truncated", [
    ('{"a": {"b": 1}', True),            # cut right after an inner object: ends with }
    ('{"a": [1, 2]', True),              # ... or an inner list
    ('{"a": 1,\n  ', True),
    ('{"a": tru', True),                 # inside a last literal
    ('{"a": "an unfinished str', True),  # inside a last string
    ('{"a": 1 "b": 2}', False),          # a missing comma mid-document
    ('{"a": 1} x', False),               # extra data after a whole document
    ('"a" x', False),                    # not an object or a list
])
def test_a_document_cut_short_is_called_truncated_wherever_it_was_cut(text, truncated,
                                                                     tmp_path):
    """The CI once cut a record half-way right after an inner `}`: "(truncated?)" is
    judged on where the parse stopped, not on the document's last character."""
    from workflow.records.storage import read_json_file

    path = tmp_path / "doc.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        read_json_file(path)
    assert ("(truncated?)" in err.value.problems[0]) is truncated, err.value.problems
