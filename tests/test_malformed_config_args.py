"""`snakemake --config` overrides that Snakemake itself would refuse with a traceback
(snakemake_logger_plugin_benchflow/config_args.py): one line each, exit 2, before
Snakemake parses them; a valid override still reaches the Snakefile. Also: a ConfigError
printed by the benchflow CLI has its control characters escaped (cli/main.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from snakemake_logger_plugin_benchflow.config_args import (
    config_entries,
    config_problems,
    is_snakemake_cli,
    refuse_bad_config,
)
from tests.conftest import REPO, tiny_suite, write_suite

# (id, description, the words after `snakemake`, expected fragment)
CASES = [
    ("config-dotted-key", "`--config a.b=1`: a dotted key meant as a nested one",
     ["-n", "--config", "a.b=1"],
     "--config a.b=1: 'a.b' is not a top-level key; Snakemake takes key=value with a "
     "suite's top-level key and a YAML value, e.g. --config 'a={b: 1}'"),
    ("config-deep-dotted-key", "`--config=goldens.tolerance.time=0.2`, joined to the flag",
     ["--config=goldens.tolerance.time=0.2"],
     "e.g. --config 'goldens={tolerance: {time: 0.2}}'"),
    ("config-no-value", "`--config a=1 all`: the target taken for an entry (nargs=*)",
     ["--config", "suite_name=x", "all", "--cores", "1"],
     "--config all: expected KEY=VALUE; every word after --config up to the next option "
     "is an entry, so put targets before it"),
    ("config-digit-key", "`-C 1x=2`: a key starting with a digit",
     ["-C", "1x=2"], "'1x' is not a key Snakemake takes; expected a name of letters"),
    ("config-one-char-key", "`-Ca=1`: a one-character key (Snakemake's rule wants two)",
     ["-Ca=1"], "(2 characters at least)"),
    ("config-trailing-dash", "`--config ab-=1`: a key ending with -",
     ["--config", "ab-=1"], "does not end with -"),
    ("config-escape-in-key", "a key carrying ESC [2J (clear screen)",
     ["--config", "a\x1b[2J=1"], "--config a\\x1b[2J=1: 'a\\x1b[2J' is not a key"),
]


@pytest.mark.parametrize("row", CASES, ids=[r[0] for r in CASES])
def test_an_override_snakemake_refuses_is_one_line(row):
    _id, _what, argv, expected = row
    (line,) = config_problems(argv)
    assert expected in line
    assert "\n" not in line and "\x1b" not in line


def test_valid_overrides_are_left_to_snakemake_and_the_suite():
    argv = ["-n", "all", "--config", "suite_name=x", "skus={a: 1}", "ab_1='q'",
            "workloads=", "-C", "name-2=[1, 2]", "--cores", "1", "-p", "report"]
    assert config_entries(argv) == ["suite_name=x", "skus={a: 1}", "ab_1='q'", "workloads=",
                                    "name-2=[1, 2]"]
    assert config_problems(argv) == []
    # Other options are not read: --configfile's path, a target with a dot.
    assert config_problems(["--configfile", "a.b.yaml", "results/report.json"]) == []


def test_every_bad_entry_gets_its_line():
    problems = config_problems(["--config", "a.b=1", "ok_key=2", "x.y=3"])
    assert [p.split(":")[0] for p in problems] == ["--config a.b=1", "--config x.y=3"]


@pytest.mark.parametrize("argv0, cli", [
    ("/venv/bin/snakemake", True), ("snakemake", True),
    ("/venv/lib/python3.11/site-packages/snakemake/__main__.py", True),
    ("/venv/bin/pytest", False), ("-c", False), ("/repo/scripts/report.py", False),
    ("/x/snakemake_helper.py", False)])
def test_only_snakemakes_command_line_is_judged(argv0, cli):
    assert is_snakemake_cli(argv0) is cli


def test_refusal_exits_2_only_in_snakemakes_process(capsys):
    refuse_bad_config(["/venv/bin/pytest", "--config", "a.b=1"])  # not snakemake: nothing
    refuse_bad_config(["/venv/bin/snakemake", "--config", "ab=1"])  # valid: nothing
    with pytest.raises(SystemExit) as stop:
        refuse_bad_config(["/venv/bin/snakemake", "-n", "--config", "a.b=1"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("--config a.b=1: 'a.b' is not a top-level")


def _snakemake(tmp_path, *args):
    suite = write_suite(tmp_path / "suite.yaml", tiny_suite())
    return subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
                           "--directory", str(tmp_path), "--configfile", str(suite), "-n",
                           "--cores", "1", *args],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)


@pytest.mark.e2e
def test_snakemake_refuses_a_dotted_override_in_one_line(tmp_path):
    proc = _snakemake(tmp_path, "--config", "a.b=1")
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines == ["--config a.b=1: 'a.b' is not a top-level key; Snakemake takes key=value "
                     "with a suite's top-level key and a YAML value, e.g. --config 'a={b: 1}'"]
    assert "Traceback" not in proc.stdout + proc.stderr
    # A valid override gets past Snakemake to the Snakefile, whose suite check judges it.
    proc = _snakemake(tmp_path, "--config", "suite_name=other")
    assert proc.returncode == 0, proc.stderr
    proc = _snakemake(tmp_path, "--config", "no_such_key=1")
    assert proc.returncode == 1 and "benchflow: invalid suite" in proc.stderr, proc.stderr
    assert "no_such_key" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_config_errors_have_control_characters_escaped(tmp_path, capsys):
    from workflow.cli.main import main

    path = tmp_path / "x\x1b[2Jy.yaml"
    assert main(["list", "--configfile", str(path)]) == 1
    err = capsys.readouterr().err
    assert "x\\x1b[2Jy.yaml" in err and "\x1b" not in err
