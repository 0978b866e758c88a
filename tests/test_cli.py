"""The benchflow command line."""

import subprocess
import sys

import pytest

from tests.conftest import REPO, tiny_suite, write_suite
from workflow.cli.main import main


def test_list_prints_every_model_with_configs(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "bert: tiny, base, large" in out
    assert "ln_linear_hardswish: default" in out


def test_list_with_a_suite_prints_skus_and_cases(capsys):
    assert main(["list", "--configfile", str(REPO / "config/config.yaml"), "--cases"]) == 0
    out = capsys.readouterr().out
    assert "cpu-host:" in out and "cpu-host/iree/bert-tiny-1x32-f32/baseline" in out


def test_validate_reports_problems_and_exit_code(tmp_path, capsys):
    good = write_suite(tmp_path / "good.yaml", tiny_suite())
    bad = write_suite(tmp_path / "bad.yaml", tiny_suite(recipes=["int3"]))
    assert main(["validate", str(good)]) == 0
    assert main(["validate", str(good), str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}: recipes[0]: expected a recipe" in err and "int3" in err


@pytest.mark.tool
def test_console_script_runs():
    proc = subprocess.run([sys.executable, "-m", "workflow.cli.main", "list"], capture_output=True,
                          text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0 and "transformer_block" in proc.stdout
