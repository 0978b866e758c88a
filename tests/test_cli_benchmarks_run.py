"""`benchflow benchmarks --run` with selection options (--dir, --model, ...) runs another
selection than the suite's own, so it works in runs/benchmarks-<hash>/ and leaves the
suite's results/ as they are: its report.json, and the report.html, .md and .csv that a
report step in results/ would delete. The same selection finds its own directory again."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FAST_MEASUREMENT, REPO, fast_bench_files, snakemake, write_suite
from workflow.cli.main import main
from workflow.paths import REPORT, REPORT_CSV, REPORT_HTML, REPORT_MD

REPO_BENCH = REPO / "benchmarks"
RENDERS = (REPORT, REPORT_HTML, REPORT_MD, REPORT_CSV)


def files_suite(tmp_path):
    """A suite of one shipped benchmark file; the options below select another. The
    files with 3 repetitions: what is measured where is this test's business, not how
    long it takes."""
    bench = fast_bench_files(tmp_path / "shipped")
    return write_suite(tmp_path / "files.yaml", {
        "suite_name": "files",
        "skus": {"host": {"iree": {"target_cpu": "host"}, "measurement": FAST_MEASUREMENT}},
        "benchmark_files": {"dir": str(bench), "models": ["tiny_pipeline"],
                            "filename": "scale*", "backends": ["cpu"]}})


def the_suites_own_results(tmp_path, suite) -> dict[str, bytes]:
    """results/ of a run of `suite` here: its report and renders, as they are."""
    snakemake(tmp_path, *RENDERS, "--configfile", str(suite))
    return {name: (tmp_path / name).read_bytes() for name in RENDERS}


@pytest.mark.e2e
def test_a_selection_runs_in_its_own_directory(tmp_path, monkeypatch, capfd):
    suite = files_suite(tmp_path)
    before = the_suites_own_results(tmp_path, suite)
    monkeypatch.chdir(tmp_path)
    argv = ["benchmarks", "--configfile", str(suite), "--model", "tiny_mlp", "--filename",
            "matmul*", "--run", "--cores", "1"]
    assert main(argv) == 0, capfd.readouterr()
    out = capfd.readouterr().out
    assert {name: (tmp_path / name).read_bytes() for name in RENDERS} == before
    (own,) = (tmp_path / "runs").iterdir()
    assert own.name.startswith("benchmarks-")
    assert f"this selection works in runs/{own.name}/ (its reports: runs/{own.name}/" \
           "results/); the suite's own results/ are left as they are" in out
    report = json.loads((own / REPORT).read_text())
    assert [c["id"] for c in report["cases"]] == ["host/iree/tiny_mlp.matmul_cpu/baseline"]
    assert report["cases"][0]["status"] == "ok"
    # The same selection again: the same directory, nothing to do.
    assert main(argv) == 0
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [own.name]
    assert "Nothing to be done" in capfd.readouterr().err


@pytest.mark.e2e
def test_relative_options_and_the_suites_paths_are_read_from_the_start(tmp_path,
                                                                        monkeypatch, capfd):
    suite = files_suite(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bench" / "tiny_mlp").mkdir(parents=True)
    for name in ("matmul.mlir", "matmul_cpu.json"):
        (tmp_path / "bench" / "tiny_mlp" / name).write_text(
            (REPO_BENCH / "tiny_mlp" / name).read_text())
    assert main(["benchmarks", "--configfile", str(suite), "--dir", "bench", "--model",
                 "tiny_mlp", "--filename", "matmul*", "--run", "-n", "--cores", "1"]) == 0
    out = capfd.readouterr().out
    command = out.split("$ ", 1)[1]
    assert f'"dir": "{tmp_path / "bench"}"' in command
    assert f'goldens={{"dir": "{tmp_path / "goldens"}"}}' in command
    assert "--directory " + str(tmp_path / "runs" / "benchmarks-") in command
    assert "results/bench_files/cases/host/tiny_mlp.matmul_cpu.json" in out
