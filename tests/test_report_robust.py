"""The report step never crashes on a damaged case record (absent, cut short, `{}`, `[]`,
another case's, missing fields): the case is failed with the reason and the next run
measures it again. It never loses the previous report.json when it fails, and it leaves
no render of an older report beside a new one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import FAST_MEASUREMENT, fast_bench_files, snakemake, tiny_suite, write_suite
from workflow.backends.git import git_sha
from workflow.commands.report import RECORD_STAGE, aggregate, damage_note
from workflow.paths import BF_CASE, REPO_ROOT, REPORT, REPORT_DAMAGED, REPORT_DERIVED
from workflow.planning.plan import report_records
from workflow.records.case import unsupported_case
from workflow.suite.load import load

PROVENANCE = {"suite_name": "robust", "config_hash": "0", "config_source": "suite.yaml"}
DAMAGES = ["deleted", "truncated", "empty object", "empty list", "another case's",
           "missing status"]


@pytest.fixture
def planned(tmp_path, monkeypatch):
    """A tiny suite's planned records (IREE and torch cases), each written as a valid
    record, in a working directory of its own; with their producing outputs."""
    monkeypatch.chdir(tmp_path)
    suite = load([write_suite(tmp_path / "suite.yaml",
                              tiny_suite(backends=["iree", "torch-eager"]))])
    records = report_records(suite, None)
    for r in records:
        path = Path(r["record"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(unsupported_case(r["identity"], "stand-in")))
        redo = Path(r["redo"])
        if "/torch/" in r["redo"]:  # a torch batch's directory, else an IREE batch list
            redo.mkdir(parents=True, exist_ok=True)
        else:
            redo.parent.mkdir(parents=True, exist_ok=True)
            redo.write_text("{}")
    return suite, records


def damage(records: list[dict], kinds: list[str] = DAMAGES) -> dict[str, str]:
    """Damages the first records, one per kind (case id -> kind); "another case's" gets
    the next record's text as it was."""
    texts = [Path(r["record"]).read_text() for r in records]
    done = {}
    for i, (kind, r) in enumerate(zip(kinds, records, strict=False)):
        path, text = Path(r["record"]), texts[i]
        if kind == "deleted":
            path.unlink()
        elif kind == "truncated":
            path.write_text(text[:len(text) // 2])
        elif kind == "empty object":
            path.write_text("{}")
        elif kind == "empty list":
            path.write_text("[]")
        elif kind == "another case's":
            path.write_text(texts[(i + 1) % len(records)])
        else:
            data = json.loads(text)
            del data["status"]
            path.write_text(json.dumps(data))
        done[r["identity"]["id"]] = kind
    return done


REASONS = {"deleted": "file not found", "truncated": "not valid JSON (truncated?)",
           "empty object": "no `id`: expected the case record of",
           "empty list": "(a JSON object), got list []",
           "another case's": "expected the case record of",
           "missing status": "'status' is a required property"}


@pytest.mark.tool
def test_each_damaged_record_is_a_failed_case_with_its_reason(planned):
    suite, records = planned
    assert {r["identity"]["backend"] for r in records} == {"iree", "torch-eager"}
    # Damage IREE and torch records alike.
    order = sorted(records, key=lambda r: r["identity"]["backend"] != "torch-eager")
    # One as a benchmark file's record is planned: its own case step makes it again.
    order[1]["redo"] = order[1]["record"]
    damaged = damage(order)
    report = aggregate(records, REPORT, gate=suite.config["goldens"], note=REPORT_DAMAGED,
                       **PROVENANCE)
    cases = {c["id"]: c for c in report["cases"]}
    assert len(cases) == len(records)
    for r in records:
        case, path = cases[r["identity"]["id"]], r["record"]
        kind = damaged.get(case["id"])
        if kind is None:
            assert case["status"] == "unsupported" and case["error"] == "stand-in"
            continue
        assert case["status"] == "failed" and case["stage"] == RECORD_STAGE, kind
        assert case["error"].startswith(f"{path}: "), case["error"]
        assert REASONS[kind] in case["error"], (kind, case["error"])
        assert case["error"].endswith("the next run measures this case again")
        assert case["golden"]["verdict"] == "no-golden"
        assert case["model"] == r["identity"]["model"]  # the identity of the plan
    assert json.loads(Path(REPORT).read_text()) == report
    # The next run makes them again: the benchmark file's record is removed (its case
    # step makes it again), the batches' are left to the Snakefile's check at load, and
    # a new damage note (a param of the report rule) reruns the report.
    assert not Path(order[1]["record"]).exists()
    assert all(Path(r["redo"]).exists() for r in records if r is not order[1])
    note = damage_note(REPORT_DAMAGED)
    assert note["count"] == 1 and sorted(note["records"].values()) == sorted(damaged)
    aggregate(records, REPORT, note=REPORT_DAMAGED, **PROVENANCE)
    assert damage_note(REPORT_DAMAGED)["count"] == 2


def test_the_report_names_the_checkouts_commit_from_a_directory_outside_it(planned):
    """`snakemake --directory D` runs in D, often no repository: the commit is the
    checkout's that holds the Snakefile, as `benchflow run` records it."""
    assert git_sha(".") is None  # the fixture's directory is no repository
    report = aggregate(planned[1], REPORT, **PROVENANCE)
    assert report["provenance"]["git_sha"] == git_sha(REPO_ROOT) is not None


def test_a_new_report_removes_the_renders_of_the_old_one(planned):
    records = planned[1]
    for path in REPORT_DERIVED:
        Path(path).write_text("of an older report")
    aggregate(records, REPORT, derived=REPORT_DERIVED, **PROVENANCE)
    assert Path(REPORT).exists()
    assert not any(Path(p).exists() for p in REPORT_DERIVED)


@pytest.mark.tool
def test_a_failing_report_step_keeps_the_previous_report_and_its_renders(planned,
                                                                          monkeypatch):
    records = planned[1]
    aggregate(records, REPORT, derived=REPORT_DERIVED, **PROVENANCE)
    before = Path(REPORT).read_bytes()
    for path in REPORT_DERIVED:
        Path(path).write_text("of the previous report")

    def broken(report):
        raise RuntimeError("a bug in the report step")

    monkeypatch.setattr("workflow.commands.report.validate_report", broken)
    damage(records)
    with pytest.raises(RuntimeError, match="a bug"):
        aggregate(records, REPORT, derived=REPORT_DERIVED, **PROVENANCE)
    assert Path(REPORT).read_bytes() == before
    assert all(Path(p).read_text() == "of the previous report" for p in REPORT_DERIVED)
    assert all(Path(r["redo"]).exists() for r in records)  # nothing measured again yet


# --- end to end ------------------------------------------------------------------------

def report_cases(workdir: Path) -> dict:
    return {c["id"]: c for c in json.loads((workdir / REPORT).read_text())["cases"]}


@pytest.mark.e2e
def test_damaged_benchmark_file_records_fail_in_the_report_then_are_made_again(tmp_path):
    # IREE and torch records are checked when the Snakefile loads (their batches then
    # measure them again), and Snakemake makes a deleted record again: a benchmark
    # file's record damaged in place reaches the report step itself. The shipped files
    # with 3 repetitions: how long they take is none of this test's business.
    bench = fast_bench_files(tmp_path / "benchmarks")
    path = str(write_suite(tmp_path / "suite.yaml", {
        "skus": {"host": {"iree": {"target_cpu": "host"}, "measurement": FAST_MEASUREMENT}},
        "benchmark_files": {"dir": str(bench), "models": ["tiny_*"]}}))
    snakemake(tmp_path, REPORT, "--configfile", path)
    cases = report_cases(tmp_path)
    assert len(cases) == 4 and all(c["status"] == "ok" for c in cases.values()), cases
    kinds = ["truncated", "empty object", "empty list", "another case's"]
    damaged = damage([{"record": str(tmp_path / BF_CASE.format(sku=c["sku"],
                                                                benchmark=c["workload"])),
                       "identity": {"id": case_id}} for case_id, c in sorted(cases.items())],
                     kinds)
    snakemake(tmp_path, REPORT, "--configfile", path)
    cases = report_cases(tmp_path)
    assert len(cases) == 4
    for case_id, kind in damaged.items():
        case = cases[case_id]
        assert case["status"] == "failed" and case["stage"] == RECORD_STAGE, (kind, case)
        assert REASONS[kind] in case["error"] and "next run measures" in case["error"]
    assert "failed:" in (tmp_path / "logs" / "report.log").read_text()
    # The next run makes the records again (their case step) and the report is whole.
    again = snakemake(tmp_path, REPORT, "--configfile", path)
    assert "rule case_bench_file:" in again.stdout + again.stderr
    assert "rule run_bench_file:" not in again.stdout + again.stderr
    assert all(c["status"] == "ok" for c in report_cases(tmp_path).values())
    again = snakemake(tmp_path, REPORT, "--configfile", path)
    assert "Nothing to be done" in again.stdout + again.stderr


def unmeasured_suite(tmp_path: Path) -> str:
    """A suite whose one case is known unsupported while planning: a report, its renders
    and the peak, and no measurement."""
    return str(write_suite(tmp_path / "suite.yaml", {
        "skus": {"host": {"iree": {"target_cpu": "host"}}},
        "recipes": ["int8wo"], "workloads": [{"model": "linear"}]}))


@pytest.mark.e2e
def test_renders_never_show_an_older_report_and_a_failed_step_keeps_the_last(tmp_path):
    suite = unmeasured_suite(tmp_path)
    snakemake(tmp_path, "all", "--configfile", suite)
    report = tmp_path / REPORT
    renders = [tmp_path / p for p in REPORT_DERIVED if not p.endswith("gate.json")]
    assert all(p.stat().st_mtime_ns >= report.stat().st_mtime_ns for p in renders)
    # The documented target alone: the renders of the previous report are gone...
    snakemake(tmp_path, REPORT, "--configfile", suite, "--forcerun", "report")
    assert report.exists() and not any(p.exists() for p in renders)
    # ... and `all` makes them from this report, measuring nothing.
    proc = snakemake(tmp_path, "all", "--configfile", suite)
    assert "rule report:" not in proc.stdout + proc.stderr
    generated = json.loads(report.read_text())["generated_at"]
    assert all(p.stat().st_mtime_ns >= report.stat().st_mtime_ns for p in renders)
    assert generated[:10] in (tmp_path / "results" / "report.md").read_text()

    # Our own code failing in the report step (injected: every Python process of the run
    # imports this sitecustomize) keeps the previous report.json whole and in place.
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(
        "import workflow.records.report as r\n"
        "def broken(report):\n"
        "    raise RuntimeError('injected bug in the report step')\n"
        "r.validate_report = broken\n")
    before = report.read_bytes()
    env = {**os.environ, "PYTHONPATH": f"{inject}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = snakemake(tmp_path, REPORT, "--configfile", suite, "--forcerun", "report",
                     env=env, check=False)
    assert proc.returncode != 0
    assert "injected bug in the report step" in proc.stdout + proc.stderr
    assert report.read_bytes() == before
    assert all(p.exists() for p in renders)  # they still show that report
