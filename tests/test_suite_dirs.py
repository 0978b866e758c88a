"""Suites kept apart: a working directory belongs to one suite (workflow/planning/
suite_dir.py); another suite started there without --directory works in runs/<name>/,
and a --directory of another suite is refused before any job."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import FAST_MEASUREMENT, REPO, snakemake, write_suite
from workflow.paths import REPORT, SUITE_MARKER
from workflow.planning.plan import Refused
from workflow.planning.suite_dir import owner, suite_dir, suite_identity
from workflow.suite.schema import DEFAULT_CONFIG


def a_suite(name: str | None, target_cpu: str = "host") -> dict:
    suite = {"skus": {"cpu-host": {"iree": {"target_cpu": target_cpu},
                                   "measurement": dict(FAST_MEASUREMENT)}},
             "workloads": [{"model": "linear", "shapes": [[16, 32, 32]]}]}
    return {"suite_name": name, **suite} if name else suite


def config(goldens: str = "goldens") -> SimpleNamespace:
    """What suite_dir reads of a loaded suite: its config."""
    return SimpleNamespace(config={"goldens": {"dir": goldens},
                                   "benchmark_files": {"dir": None, "artifacts_dir": "art",
                                                       "external_files_dir": "/abs/ext"}})


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_an_unowned_directory_is_the_suites_own_and_its_first_job_claims_it(home):
    a = write_suite(home / "a.yaml", a_suite("a"))
    where = suite_dir(config(), [a], directory_given=False)
    assert where.path == home and not where.moved
    assert owner(home) is None  # not before it runs a job (a dry run claims nothing)
    where.claim()
    assert owner(home) == suite_identity([a])
    marker = json.loads((home / SUITE_MARKER).read_text())
    assert marker == {"kind": "benchflow-suite-dir", "suite_name": "a",
                      "configfiles": [str(a.resolve())]}
    # Edited, and with --config overrides (not an argument here), it is the same suite.
    write_suite(a, {**a_suite("a", "generic")})
    assert suite_dir(config(), [a], directory_given=True).path == home


def test_another_suite_moves_to_runs_and_keeps_its_paths(home, monkeypatch):
    a = write_suite(home / "a.yaml", a_suite("a"))
    b = write_suite(home / "b.yaml", a_suite("b", "generic"))
    suite_dir(config(), [a], directory_given=False).claim()
    suite = config()
    where = suite_dir(suite, [b], directory_given=False)
    assert where.moved and where.path == home / "runs" / "b"
    assert "suite b" in where.notice and "runs/b/" in where.notice
    assert "holds the results of suite a" in where.notice
    # Paths relative to the directory snakemake was started in still name the same.
    assert suite.config["goldens"]["dir"] == str(home / "goldens")
    assert suite.config["benchmark_files"] == {"dir": None, "artifacts_dir": str(home / "art"),
                                               "external_files_dir": "/abs/ext"}
    where.claim()
    # A nested snakemake decides the same: a SLURM job's, started where the run was...
    assert suite_dir(config(), [b], directory_given=False).path == where.path
    # ... and one started in the suite's directory stays there.
    monkeypatch.chdir(where.path)
    assert not suite_dir(config(), [b], directory_given=False).moved
    monkeypatch.chdir(home)
    # A third suite of the same name gets runs/b-<hash>.
    (home / "other").mkdir()
    other = write_suite(home / "other" / "b.yaml", a_suite("b"))
    third = suite_dir(config(), [other], directory_given=False)
    assert third.path.parent == home / "runs" and third.path.name.startswith("b-")


def test_a_directory_of_another_suite_is_refused_with_directory(home):
    a = write_suite(home / "a.yaml", a_suite("a"))
    b = write_suite(home / "b.yaml", a_suite("b"))
    suite_dir(config(), [a], directory_given=True).claim()
    with pytest.raises(Refused) as refused:
        suite_dir(config(), [b], directory_given=True)
    text = str(refused.value)
    assert text.startswith("benchflow: working directory of another suite, no job was run:")
    assert f"{home}: belongs to suite a ({a.resolve()}); this run's suite is b " \
           f"({b.resolve()})" in text
    assert "run without --directory" in text and "runs/b/" in text


def test_owners_from_before_markers_and_damaged_markers(home, monkeypatch):
    # A report from before markers names its suite.
    a = write_suite(home / "a.yaml", a_suite("a"))
    (home / "results").mkdir()
    (home / REPORT).write_text(json.dumps({"provenance": {"suite_name": "a",
                                                          "config_source": str(a)}}))
    assert owner(home) == suite_identity([a])
    # A marker that cannot be read belongs to no suite that runs: named, with the remedy.
    (home / SUITE_MARKER).write_text("{\"kind\": ")
    found = owner(home)
    assert isinstance(found, str) and str(home / SUITE_MARKER) in found
    assert "remove it" in found
    # The repository's own directory is the default suite's, results or none.
    empty = home / "checkout"
    empty.mkdir()
    monkeypatch.setattr("workflow.planning.suite_dir.REPO_ROOT", empty.resolve())
    assert owner(empty) == suite_identity([]) == suite_identity([DEFAULT_CONFIG])


def test_a_suite_without_a_name_is_named_after_its_file(home):
    torchao = write_suite(home / "microbenchmark.yml", {"model_params": []})
    assert suite_identity([torchao]).label() == "microbenchmark"
    assert suite_identity([]).label() == "default"


# --- end to end ------------------------------------------------------------------------

def run_here(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """snakemake as a user runs it: started in `cwd`, without --directory."""
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
                           "--cores", "2", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout}\n"
                             f"{proc.stderr}")
    return proc


@pytest.mark.e2e
def test_two_suites_with_one_sku_name_never_overwrite_each_other(tmp_path):
    # The default suite's story in small: suite A's SKU cpu-host, then suite B (another
    # file) whose SKU is also cpu-host with other flags, in the same directory, then A.
    a = write_suite(tmp_path / "a.yaml", a_suite("a"))
    b = write_suite(tmp_path / "b.yaml", a_suite("b", "generic"))
    run_here(tmp_path, REPORT, "--configfile", str(a))
    report_a = (tmp_path / REPORT).read_bytes()
    proc = run_here(tmp_path, REPORT, "--configfile", str(b))
    assert f"suite b ({b}) works in runs/b/ (its reports: runs/b/results/)" in proc.stderr
    b_report = json.loads((tmp_path / "runs" / "b" / REPORT).read_text())
    assert b_report["provenance"]["suite_name"] == "b"
    (case,) = b_report["cases"]
    assert case["id"].startswith("cpu-host/") and case["status"] == "ok"
    assert "--iree-llvmcpu-target-cpu=generic" in case["compile"]["flags"]
    again = run_here(tmp_path, REPORT, "--configfile", str(a))
    assert "Nothing to be done" in again.stdout + again.stderr
    assert (tmp_path / REPORT).read_bytes() == report_a
    # B again finds its own directory, and its results there.
    again = run_here(tmp_path, REPORT, "--configfile", str(b))
    assert "Nothing to be done" in again.stdout + again.stderr
    # B with --directory on A's directory is refused, naming both suites; no job runs.
    refused = snakemake(tmp_path, REPORT, "--configfile", str(b), check=False)
    assert refused.returncode == 1
    assert "benchflow: working directory of another suite, no job was run:" in refused.stderr
    assert f"belongs to suite a ({a}); this run's suite is b ({b})" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert (tmp_path / REPORT).read_bytes() == report_a
