"""Edges of the command line (issue 23): a reader that closes the pipe, `--config`
overrides, `benchflow run --workdir` onto another suite's or case's results, `-o` results
files whose cases are not objects, reports holding a case twice, `benchflow validate` of
reports and of suites whose benchmark files a run refuses, and failure text carrying
HTML into report.md.

CASES is a table a docs generator reads: (id, what the input is, how it is made: a key
of MAKE, a fragment of the message). Each MAKE entry makes the input under the test's
directory, runs the command in-process (workflow.cli.main.main, or the one function the
command or the Snakefile calls) and returns its exit status (None where the function
returns no status) and what it printed; EXIT says which status each kind of row gives.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import tiny_suite
from tests.test_goldens import BASE, make_case, make_report
from workflow.benchfile.resolve import OUTSIDE
from workflow.cli.main import PIPE_CLOSED, main
from workflow.paths import SUITE_MARKER
from workflow.planning.plan import Refused, load_suite
from workflow.records.storage import write_json
from workflow.regression import compare
from workflow.render import ab as ab_render
from workflow.render import markdown

REPO = Path(__file__).resolve().parent.parent
CID = "host/iree/a-f32/baseline"
SCRIPT = "<script>alert(1)</script>"
IMG = '<img src=x onerror="alert(1)">'

CASES = [
    # --- a reader that stops reading: quiet, exit 141 (cli/main.py's PIPE_CLOSED) ------
    ("pipe-list", "`benchflow list | head -1`: stdout closed by the reader", "pipe-list",
     "(nothing: no traceback)"),
    ("pipe-compare", "`benchflow compare A B | head -1`: stdout closed by the reader",
     "pipe-compare", "(nothing: no traceback)"),
    ("pipe-validate", "`benchflow validate FILE | head -1`: stdout closed by the reader",
     "pipe-validate", "(nothing: no traceback)"),
    # --- --config overrides: validated as the suite file is, named as their source -----
    ("config-unknown-key", "`--config bogus=1`: a key the suite schema lacks",
     "config-unknown-key", "--config bogus=1: <top>: unknown key(s) ['bogus']"),
    ("config-wrong-type", "`--config skus=x`: a string where a mapping belongs",
     "config-wrong-type", '--config skus="x": skus: expected object, got str'),
    ("config-bad-enum", "`--config benchmark_mode=nope`: not one of the allowed values",
     "config-bad-enum", "--config benchmark_mode=\"nope\": benchmark_mode: expected one of "
     "['inference', 'training']"),
    ("config-unknown-sku", "`--config workloads=[{model: linear, skus: [nope]}]`: a SKU "
     "the suite lacks", "config-unknown-sku", "workloads[0].skus: unknown SKU 'nope'"),
    ("config-nested", "`--config goldens={tolerance: x}`: a nested key of the wrong type "
     "(the rest of goldens from the file)", "config-nested",
     '--config goldens={"tolerance": "x"}: goldens.tolerance: expected number'),
    ("config-file-own-problem", "a suite file with its own problem, run with a valid "
     "override: the file stays named", "config-file-own-problem",
     "s.yaml: max_cases: expected integer"),
    # --- benchflow run --workdir: never over another suite's or case's results ---------
    ("workdir-other-suite", "`benchflow run --workdir DIR`, DIR holding another suite's "
     "results (its results/.suite.json)", "workdir-other-suite",
     "holds the results of suite other"),
    ("workdir-other-case", "`benchflow run --workdir DIR`, DIR holding the report of a "
     "`benchflow run` of another case", "workdir-other-case",
     "holds the report of host/iree/mlp-f32/baseline (another `benchflow run`)"),
    ("workdir-suite-file", "`benchflow run --workdir DIR`, DIR holding a suite.yaml of "
     "the user's (this run would write its own there)", "workdir-suite-file",
     "a suite file of its own (suite_name 'mine')"),
    # --- -o OUT.json: each record of `cases` an object --------------------------------
    ("results-case-str", "`-o OUT.json` whose cases hold a string", "results-case-str",
     "cases[1]: expected an object (a case record), got str"),
    ("results-case-list", "`-o OUT.json` whose cases hold a list", "results-case-list",
     "cases[1]: expected an object (a case record), got list"),
    ("results-case-null", "`-o OUT.json` whose cases hold null", "results-case-null",
     "cases[1]: expected an object (a case record), got null"),
    ("results-case-number", "`-o OUT.json` whose cases hold a number",
     "results-case-number", "cases[1]: expected an object (a case record), got int"),
    # --- one case id twice in a report: refused by every reader ------------------------
    ("dup-compare-base", "`benchflow compare` with a base report holding a case twice",
     "dup-compare-base", f"cases[2]: case id '{CID}' again (first at cases[0])"),
    ("dup-compare-new", "`benchflow compare` with a new report holding a case twice",
     "dup-compare-new", f"cases[2]: case id '{CID}' again (first at cases[0])"),
    ("dup-bless", "`benchflow bless --report R`, R holding a case twice", "dup-bless",
     f"cases[2]: case id '{CID}' again (first at cases[0])"),
    ("dup-check", "`benchflow check --report R`, R holding a case twice", "dup-check",
     f"cases[2]: case id '{CID}' again (first at cases[0])"),
    # --- benchflow validate: reports, results files, suites as the run checks them -----
    ("validate-report-ok", "`benchflow validate report.json`, a valid report",
     "validate-report-ok", "a benchflow report; valid"),
    ("validate-report-bad", "`benchflow validate report.json`, a report holding a case "
     "twice", "validate-report-bad", "expected each case once"),
    ("validate-results-ok", "`benchflow validate OUT.json`, a `benchflow run -o` results "
     "file", "validate-results-ok", "a `benchflow run -o` results file; valid"),
    ("validate-suite-benchfile", "`benchflow validate suite.yaml`, a suite selecting a "
     "benchmark file whose MLIR lies outside its tree (the run refuses it)",
     "validate-suite-benchfile", f"mlir_file_path: {OUTSIDE}"),
    # --- Markdown output: text, never markup --------------------------------------------
    ("md-script", "report.md of a case failing with `<script>alert(1)</script>`",
     "md-script", "&lt;script>alert(1)&lt;/script>"),
    ("md-img", "report.md of a case failing with `<img src=x onerror=\"alert(1)\">`",
     "md-img", '&lt;img src=x onerror="alert(1)">'),
    ("md-ab-error", "report.md's A/B section, a failed pair whose error holds `<script>`",
     "md-ab-error", "&lt;script>alert(1)&lt;/script>"),
    ("md-compare-stage", "`benchflow compare`'s Markdown, a case failed at a stage named "
     "`<img onerror>`", "md-compare-stage", "&lt;img src=x onerror="),
]

# The exit status of a row, by the first word of its id: a refusal exits 1 (a gate's
# bad input 2), a closed pipe 141, a valid file 0; None: no command, a function's text.
EXIT = {"pipe": PIPE_CLOSED, "config": None, "workdir": 1, "results": 1, "dup": 1,
        "validate": 1, "md": None}
EXIT_OF = {"dup-check": 2, "validate-report-ok": 0, "validate-results-ok": 0}


class ClosedPipe(io.TextIOBase):
    """stdout whose reader has gone: every write fails as a pipe's does."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def _report(tmp: Path, *cases, name: str = "r.json") -> Path:
    path = tmp / name
    write_json(path, make_report(*cases))
    return path


def _dup_report(tmp: Path, name: str = "dup.json") -> Path:
    return _report(tmp, make_case(CID, BASE), make_case("host/iree/b-f32/baseline", BASE),
                   make_case(CID, BASE), name=name)


def _run(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out + out.err


def _piped(argv_of):
    def make(tmp, capsys, monkeypatch):
        argv = argv_of(tmp)
        monkeypatch.setattr(sys, "stdout", ClosedPipe())
        code = main(argv)
        monkeypatch.undo()
        return code, capsys.readouterr().err or "(nothing: no traceback)"
    return make


def _override(overrides: dict, suite_file: dict | None = None):
    def make(tmp, capsys, monkeypatch):
        files = []
        if suite_file is not None:
            files = [tmp / "s.yaml"]
            files[0].write_text(yaml.safe_dump(suite_file))
        with pytest.raises(Refused) as refusal:
            load_suite(files, overrides)
        return None, str(refusal.value)
    return make


def _workdir(fill):
    """`benchflow run` of the tiny suite's linear on `host` into a directory `fill` made."""
    def make(tmp, capsys, monkeypatch):
        suite = tmp / "tiny.yaml"
        suite.write_text(yaml.safe_dump(tiny_suite()))
        work = tmp / "work"
        fill(work)
        return _run(["run", "-m", "linear", "--sku", "host", "--configfile", str(suite),
                     "--workdir", str(work)], capsys)
    return make


def _other_suite(work: Path) -> None:
    write_json(work / SUITE_MARKER, {"kind": "benchflow-suite-dir", "suite_name": "other",
                                     "configfiles": ["/elsewhere/other.yaml"]})


def _other_case(work: Path) -> None:
    write_json(work / SUITE_MARKER, {"kind": "benchflow-suite-dir",
                                     "suite_name": "benchflow-run",
                                     "configfiles": [str((work / "suite.yaml").resolve())]})
    write_json(work / "results" / "report.json",
               make_report(make_case("host/iree/mlp-f32/baseline", BASE)))


def _suite_file(work: Path) -> None:
    work.mkdir(parents=True)
    (work / "suite.yaml").write_text(yaml.safe_dump(tiny_suite(suite_name="mine")))


def _results(bad):
    def make(tmp, capsys, monkeypatch):
        out = tmp / "OUT.json"
        write_json(out, {"schema_version": "1.0", "kind": "benchflow-results",
                         "cases": [make_case(CID, BASE), bad]})
        # Refused before anything is planned or run: the model need not exist here.
        return _run(["run", "-m", "linear", "-o", str(out)], capsys)
    return make


def _bench_suite(tmp: Path) -> Path:
    """A suite selecting bench/m/x_cpu.json, whose MLIR lies outside the tree."""
    (tmp / "bench" / "m").mkdir(parents=True)
    (tmp / "outside.mlir").write_text("// not the tree's\n")
    write_json(tmp / "bench" / "m" / "x_cpu.json", {
        "inputs": [], "mlir_file_path": str(tmp / "outside.mlir"), "function_run": "f",
        "device": "local-task", "benchmark_repetitions": 1, "benchmark_min_warmup_time": 0})
    path = tmp / "suite.yaml"
    path.write_text(yaml.safe_dump({
        "suite_name": "benchfiles", "skus": {"cpu-host": {"iree": {"target_cpu": "host"}}},
        "benchmark_files": {"dir": str(tmp / "bench"), "models": ["m"]}}))
    return path


def _failing_report(error: str) -> dict:
    return make_report(make_case(CID, BASE, status="failed", error=error))


def _md(error: str):
    def make(tmp, capsys, monkeypatch):
        return None, markdown.render(_failing_report(error))
    return make


def _md_ab(tmp, capsys, monkeypatch):
    return None, ab_render.markdown({"pairs": [
        {"verdict": "failed", "base": "host", "new": "generic", "workload": "a-f32",
         "failed_stage": "compile", "error": f"iree-compile: {SCRIPT}"}]})


def _md_compare(tmp, capsys, monkeypatch):
    base = make_report(make_case(CID, BASE, status="failed", stage=IMG))
    new = make_report(make_case(CID, BASE))
    return None, compare.to_markdown(compare.compare(base, new))


MAKE = {
    "pipe-list": _piped(lambda tmp: ["list"]),
    "pipe-compare": _piped(lambda tmp: ["compare", str(_report(tmp, make_case(CID, BASE))),
                                        str(_report(tmp, make_case(CID, BASE), name="n.json"))]),
    "pipe-validate": _piped(lambda tmp: ["validate", str(_report(tmp, make_case(CID, BASE)))]),
    "config-unknown-key": _override({"bogus": 1}),
    "config-wrong-type": _override({"skus": "x"}),
    "config-bad-enum": _override({"benchmark_mode": "nope"}),
    "config-unknown-sku": _override({"workloads": [{"model": "linear", "skus": ["nope"]}]}),
    "config-nested": _override({"goldens": {"tolerance": "x"}}),
    "config-file-own-problem": _override({"torch_batch_size": 2},
                                         tiny_suite(max_cases="many")),
    "workdir-other-suite": _workdir(_other_suite),
    "workdir-other-case": _workdir(_other_case),
    "workdir-suite-file": _workdir(_suite_file),
    "results-case-str": _results("a case"),
    "results-case-list": _results([1, 2]),
    "results-case-null": _results(None),
    "results-case-number": _results(7),
    "dup-compare-base": lambda tmp, capsys, mp: _run(
        ["compare", str(_dup_report(tmp)), str(_report(tmp, make_case(CID, BASE)))], capsys),
    "dup-compare-new": lambda tmp, capsys, mp: _run(
        ["compare", str(_report(tmp, make_case(CID, BASE))), str(_dup_report(tmp))], capsys),
    "dup-bless": lambda tmp, capsys, mp: _run(
        ["bless", "--report", str(_dup_report(tmp)), "--goldens", str(tmp / "g")], capsys),
    "dup-check": lambda tmp, capsys, mp: _run(
        ["check", "--report", str(_dup_report(tmp)), "--remeasure-budget", "0"], capsys),
    "validate-report-ok": lambda tmp, capsys, mp: _run(
        ["validate", str(_report(tmp, make_case(CID, BASE)))], capsys),
    "validate-report-bad": lambda tmp, capsys, mp: _run(
        ["validate", str(_dup_report(tmp))], capsys),
    "validate-results-ok": lambda tmp, capsys, mp: _run(["validate", str(_write(
        tmp / "OUT.json", {"schema_version": "1.0", "kind": "benchflow-results",
                           "cases": [make_case(CID, BASE), make_case(CID, BASE)]}))], capsys),
    "validate-suite-benchfile": lambda tmp, capsys, mp: _run(
        ["validate", str(_bench_suite(tmp))], capsys),
    "md-script": _md(f"torch raised RuntimeError: {SCRIPT}"),
    "md-img": _md(f"iree-compile: error: {IMG}"),
    "md-ab-error": _md_ab,
    "md-compare-stage": _md_compare,
}


def _write(path: Path, doc) -> Path:
    write_json(path, doc)
    return path


def test_the_table_is_well_formed():
    ids = [row[0] for row in CASES]
    assert len(ids) == len(set(ids)) >= 16
    assert set(ids) == set(MAKE)
    assert all(len(row) == 4 and row[1] and row[3] for row in CASES)


@pytest.mark.parametrize("case_id, description, how, expected", CASES,
                         ids=[row[0] for row in CASES])
def test_edge(case_id, description, how, expected, tmp_path, capsys, monkeypatch):
    code, text = MAKE[how](tmp_path, capsys, monkeypatch)
    assert expected in text, text
    assert code == EXIT_OF.get(case_id, EXIT[case_id.split("-", 1)[0]]), text
    assert "Traceback" not in text
    if case_id.startswith("md-"):
        assert "<script" not in text and "<img" not in text, text


def test_report_md_of_a_failing_case_holds_no_markup(tmp_path):
    """results/report.md as the render_markdown rule writes it (commands/render.py), for a
    case whose tool failed with HTML in its message, and a failed A/B pair likewise."""
    from workflow.commands.render import render_markdown

    report = _report(tmp_path, make_case(CID, BASE, status="failed",
                                         error=f"boom\n{SCRIPT}\nerror: {IMG} | x"))
    ab = _write(tmp_path / "ab.json", {"pairs": [
        {"verdict": "failed", "base": "host", "new": "generic", "workload": "a-f32",
         "failed_stage": "run", "error": SCRIPT}]})
    out = tmp_path / "report.md"
    render_markdown(str(report), str(out), str(ab))
    text = out.read_text()
    assert "<script" not in text and "<img" not in text
    assert "&lt;script>alert(1)&lt;/script>" in text
    # The failure line stays one line of the list, the pipe escaped, not a table cell end.
    (line,) = [x for x in text.splitlines() if x.startswith(f"- `{CID}`: failed at")]
    assert "error: &lt;img src=x onerror=\"alert(1)\"> \\| x" in line


def test_a_markdown_cell_keeps_code_and_plain_text_readable():
    assert markdown.cell("aten.add.Tensor") == "aten.add.Tensor"
    assert markdown.cell("a | b\nc & d") == "a \\| b c &amp; d"


@pytest.mark.tool
@pytest.mark.parametrize("args", [["list"], ["validate", "config/config.yaml"]])
def test_a_closed_pipe_is_quiet_from_the_console_script(args):
    """The real thing: the reader closes the pipe before benchflow writes (`| head -0`);
    the interpreter's own flush at exit must not complain either."""
    proc = subprocess.Popen([str(REPO / ".venv" / "bin" / "benchflow"), *args], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == PIPE_CLOSED and err == "", err
