"""A suite's own models (its `model_modules` files) everywhere a built-in model goes:
`benchflow list --configfile`, `benchflow run -m --configfile`, `benchflow validate`;
and `benchflow run -o` saying when the record it appends is an earlier run's (cached)
rather than a measurement of its own (issue 24)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import tiny_suite, write_suite
from workflow.cli.main import build_parser, main
from workflow.cli.run import cached_line
from workflow.commands.single_run import is_cached, plan_run, snakemake_argv
from workflow.errors import ConfigError
from workflow.records.report import read_report
from workflow.records.results_file import CACHED_KEY, cached_record, forge_entry

# Names of their own: the registry is one per process, and a name registered twice fails.
MODEL = "h24_user_scale"
OTHER = "h24_other_suites_model"
MODEL_FILE = f'''"""A user's model file, as the README's example writes one."""
from workflow.models.common import finish, seeded
from workflow.models.registry import benchmark_model


@benchmark_model(default_shape=(4, 8), shape_doc="[rows, cols]")
def {MODEL}(config, dtype, layers, shape):
    """Doubles its input."""
    import torch

    class Scale(torch.nn.Module):
        def forward(self, x):
            return x * 2

    return finish(Scale(), (torch.randn(*shape, generator=seeded()),), dtype)
'''


@pytest.fixture(scope="module")
def user_suite(tmp_path_factory) -> Path:
    """A suite naming its model file relatively (models/mine.py beside it), so that only
    resolving it against the suite's directory finds it: the tests run in the repository."""
    root = tmp_path_factory.mktemp("user_models")
    (root / "models").mkdir()
    (root / "models" / "mine.py").write_text(MODEL_FILE)
    return write_suite(root / "my.yaml", tiny_suite(
        model_modules=["models/mine.py"], workloads=[{"model": MODEL, "shapes": [[2, 4]]}]))


@pytest.fixture(scope="module")
def other_suite(tmp_path_factory) -> Path:
    """Another suite with a model file of its own."""
    root = tmp_path_factory.mktemp("other_models")
    (root / "theirs.py").write_text(MODEL_FILE.replace(MODEL, OTHER))
    return write_suite(root / "other.yaml", tiny_suite(
        model_modules=["theirs.py"], workloads=[{"model": OTHER}]))


def run_args(*argv: str):
    return build_parser().parse_args(["run", *argv])


def test_list_shows_the_suites_models_with_their_file(user_suite, capsys):
    assert main(["list", "--configfile", str(user_suite)]) == 0
    out = capsys.readouterr().out
    source = (user_suite.parent / "models" / "mine.py").resolve()
    assert (f"  {MODEL}: default; [4, 8] [rows, cols]; Doubles its input. "
            f"[model_modules: {source}]") in out.splitlines()
    # Built-in models stay listed, unmarked.
    assert any(line.startswith("  linear: default;") and "model_modules" not in line
               for line in out.splitlines())


def test_run_plans_the_suites_model_with_its_file_absolute(user_suite):
    plan = plan_run(run_args("-m", MODEL, "-b", "torch-eager", "--configfile",
                             str(user_suite)))
    assert plan.case.id == f"host/torch-eager/{MODEL}-4x8-f32/baseline"
    # suite.yaml goes to the work directory, where the suite's relative path names
    # nothing: the one-case suite carries the file resolved.
    assert plan.suite["model_modules"] == [str((user_suite.parent / "models/mine.py")
                                               .resolve())]
    # A built-in model's case carries no model file at all.
    assert plan_run(run_args("-m", "linear", "--configfile", str(user_suite))
                    ).suite["model_modules"] == []


def test_an_unknown_model_lists_the_suites_models_not_another_suites(user_suite, other_suite):
    plan_run(run_args("-m", OTHER, "--configfile", str(other_suite)))  # registers OTHER
    with pytest.raises(ConfigError) as err:
        plan_run(run_args("-m", OTHER, "--configfile", str(user_suite)))
    [problem] = err.value.problems
    assert problem.startswith(f"benchflow run: -m {OTHER}: unknown model; expected one of [")
    listed = problem[problem.index("["):problem.index("]") + 1]
    assert f"'{MODEL}'" in listed and "'linear'" in listed and OTHER not in listed
    assert f"model_modules of {user_suite}" in problem
    assert f"`benchflow list --configfile {user_suite}` describes them" in problem


def test_validate_accepts_a_suite_naming_its_own_model(user_suite, capsys):
    assert main(["validate", str(user_suite)]) == 0
    assert f"{user_suite}: a benchflow suite; valid" in capsys.readouterr().out


TIMING = {"median_ms": 1.0, "measured_at": "2026-01-01T00:00:00+00:00"}
RECORD = {"id": "h/torch-eager/m-f32/baseline", "status": "ok", "timing": TIMING,
          "golden": {"verdict": "no-golden"}, "provenance": {"started_at": "x"}}
FAILED = {**RECORD, "status": "failed", "timing": None}
# (case id, record before snakemake, record after, cached?)
CASES = [
    ("first-run", None, RECORD, False),
    ("nothing-ran", RECORD, RECORD, True),
    ("report-remade-timing-kept", RECORD,
     {**RECORD, "golden": {"verdict": "pass"}}, True),
    ("measured-again", RECORD,
     {**RECORD, "timing": {**TIMING, "measured_at": "2026-01-01T00:05:00+00:00"}}, False),
    ("failed-nothing-ran", FAILED, FAILED, True),
    ("failed-again", FAILED, {**FAILED, "provenance": {"started_at": "y"}}, False),
    ("failed-then-measured", FAILED, RECORD, False),
]


@pytest.mark.parametrize("earlier,record,cached", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_a_record_is_cached_when_its_measurement_is_the_earlier_one(earlier, record, cached):
    assert is_cached(copy.deepcopy(earlier), record) is cached


def test_a_cached_record_is_marked_in_both_results_formats():
    marked = cached_record(RECORD)
    assert CACHED_KEY not in RECORD["provenance"]  # the report's record stays as it was
    assert marked["provenance"]["started_at"] == "x"
    assert set(marked["provenance"][CACHED_KEY]) == {"appended_at"}
    assert {k: v for k, v in marked.items() if k != "provenance"} == \
        {k: v for k, v in RECORD.items() if k != "provenance"}
    assert forge_entry(marked)[CACHED_KEY] is True
    assert CACHED_KEY not in forge_entry(RECORD)
    assert cached_line(RECORD) == ("cached: h/torch-eager/m-f32/baseline measured at "
                                   "2026-01-01T00:00:00+00:00 (no job of it ran; --force "
                                   "to measure again)")


def test_force_reruns_every_job_of_the_case(user_suite):
    plan = plan_run(run_args("-m", MODEL, "--configfile", str(user_suite)))
    suite = Path("suite.yaml")
    assert "--forceall" in snakemake_argv(plan, suite, 1, force=True)
    assert "--forceall" not in snakemake_argv(plan, suite, 1)
    assert run_args("-m", MODEL, "--force").force and not run_args("-m", MODEL).force


@pytest.mark.e2e
def test_the_console_lists_the_suites_model_from_anywhere(user_suite, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "workflow.cli.main", "list", "--configfile",
                           str(user_suite)], capture_output=True, text=True, cwd=tmp_path,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"  {MODEL}: default;" in proc.stdout


@pytest.mark.e2e
def test_run_measures_the_suites_model_then_says_cached(user_suite, tmp_path, capsys):
    """The model through snakemake (torch-eager, a 2x4 input, the fast settings), run
    three times into one results file: measured, then cached (marked so), then --force
    measured again."""
    out, workdir = tmp_path / "out.json", tmp_path / "work"
    case_id = f"host/torch-eager/{MODEL}-2x4-f32/baseline"
    argv = ["run", "-m", MODEL, "--shape", "2,4", "-b", "torch-eager", "--configfile",
            str(user_suite), "-o", str(out), "--workdir", str(workdir), "--cores", "1"]

    assert main(argv) == 0, capsys.readouterr().err
    first = capsys.readouterr().out
    assert first.startswith(f"ok {case_id}  median ") and "cached" not in first
    # Snakemake found the model through the one-case suite's absolute path.
    assert str((user_suite.parent / "models/mine.py").resolve()) in \
        (workdir / "suite.yaml").read_text()

    assert main(argv) == 0
    second = capsys.readouterr().out.splitlines()
    [measured, cached] = read_report(out, results_files=True)["cases"]
    assert second[0].startswith(f"ok {case_id}  median ")
    assert second[1] == cached_line(measured)
    assert second[1].startswith(f"cached: {case_id} measured at 20")
    assert CACHED_KEY not in measured["provenance"]
    assert set(cached["provenance"].pop(CACHED_KEY)) == {"appended_at"}
    assert cached == measured
    assert main(["validate", str(out)]) == 0
    assert "results file; valid" in capsys.readouterr().out

    assert main([*argv, "--force"]) == 0
    third = capsys.readouterr().out
    assert third.startswith(f"ok {case_id}  median ") and "cached" not in third
    forced = json.loads(out.read_text())["cases"][2]
    assert CACHED_KEY not in forced["provenance"]
    assert forced["timing"] != measured["timing"]  # a measurement of its own
