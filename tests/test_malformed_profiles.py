"""Snakemake profile values that make no sense (workflow/planning/profile_check.py): each
refused in one line naming the profile file and the key, before any job; the repository's
own profiles and Snakemake's expressions pass."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, tiny_suite, write_suite
from workflow.errors import ConfigError
from workflow.planning.profile_check import (
    check_profiles,
    profile_files,
    profile_problems,
    profile_refusal,
    resource_problem,
)

SLURM = yaml.safe_load((REPO / "profiles" / "slurm" / "config.v8+.yaml").read_text())
REPLACE = object()  # a row's change that replaces the whole profile


def _merge(base: dict, change: dict) -> dict:
    """The profile with `change` laid over it, one level deep for mappings."""
    out = copy.deepcopy(base)
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


# (id, description, the change to profiles/slurm's values, expected fragment)
CASES = [
    ("profile-jobs-zero", "`jobs: 0`: no job could ever be submitted", {"jobs": 0},
     "jobs: expected a whole number >= 1 or 'unlimited', got int 0"),
    ("profile-jobs-negative-text", "`jobs: '-4'` as a string", {"jobs": "-4"},
     "jobs: expected a whole number >= 1 or 'unlimited', got str '-4'"),
    ("profile-cores-zero", "`cores: 0`", {"cores": 0},
     "cores: expected a whole number >= 1 or 'all', got int 0"),
    ("profile-local-cores-zero", "`local-cores: 0`: no local rule could run",
     {"local-cores": 0}, "local-cores: expected a whole number >= 1, got int 0"),
    ("profile-retries-negative", "`retries: -1`", {"retries": -1},
     "retries: expected a whole number >= 0, got int -1"),
    ("profile-restart-times-bool", "`restart-times: true` (the old name of retries)",
     {"restart-times": True}, "restart-times: expected a whole number >= 0, got bool True"),
    ("profile-latency-wait-negative", "`latency-wait: -3`", {"latency-wait": -3},
     "latency-wait: expected a whole number >= 0, got int -3"),
    ("profile-mem-mb-zero", "`default-resources: {mem_mb: 0}` (the mapping form)",
     {"default-resources": {"mem_mb": 0}},
     "default-resources.mem_mb: expected a positive whole number of MB, got int 0"),
    ("profile-mem-mb-zero-list", "`default-resources: [mem_mb=0]` (the list form)",
     {"default-resources": ["mem_mb=0", "runtime=60"]},
     "default-resources[0] (mem_mb): expected a positive whole number of MB, got str '0'"),
    ("profile-mem-mb-word", "`mem_mb: lots`", {"default-resources": {"mem_mb": "lots"}},
     "default-resources.mem_mb: expected a positive whole number of MB, got str 'lots'"),
    ("profile-mem-mib-negative", "`set-resources: {iree_batch: {mem_mib: -1}}`",
     {"set-resources": {"iree_batch": {"mem_mib": -1}}},
     "set-resources.iree_batch.mem_mib: expected a positive whole number of MiB, got int -1"),
    ("profile-mem-zero", "`mem: '0'` (a human-friendly size)",
     {"default-resources": {"mem": "0"}},
     "default-resources.mem: expected a positive size such as 4GB or a number of MB"),
    ("profile-runtime-forever", "`runtime: forever` (Snakemake blames it on `rule all`)",
     {"default-resources": {"runtime": "forever"}},
     "default-resources.runtime: expected a positive number of minutes or a time span such "
     "as 90m or 2h, got 'forever'"),
    ("profile-runtime-negative", "`runtime: -5`", {"default-resources": {"runtime": -5}},
     "default-resources.runtime: expected a positive number of minutes"),
    ("profile-runtime-unset-variable", "`runtime: \"'$NO_SUCH_VAR'\"` with the variable unset",
     {"default-resources": {"runtime": "'$BENCHFLOW_TEST_NO_SUCH_VAR'"}},
     "got \"'$BENCHFLOW_TEST_NO_SUCH_VAR'\""),
    ("profile-set-runtime-list", "`set-resources: [run_torch:runtime=two hours]`",
     {"set-resources": ["run_torch:runtime=two hours"]},
     "set-resources[0] (runtime): expected a positive number of minutes"),
    ("profile-resource-no-equals", "`default-resources: [mem_mb]`",
     {"default-resources": ["mem_mb"]},
     "default-resources[0]: expected name=value, got str 'mem_mb'"),
    ("profile-resources-text", "`default-resources: mem_mb=0` (text, not a list)",
     {"default-resources": "mem_mb=0"},
     "default-resources: expected a mapping of resource: value, got str 'mem_mb=0'"),
    ("profile-not-mapping", "a profile that is a YAML list", (REPLACE, "- jobs\n- 1\n"),
     "expected a mapping of option: value, got list"),
    ("profile-not-yaml", "a profile that is not YAML", (REPLACE, "jobs: [1\n"),
     "not valid YAML"),
]


def _write(tmp_path: Path, change) -> Path:
    path = tmp_path / "profile" / "config.v8+.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(change, tuple) and change[0] is REPLACE:
        path.write_text(change[1])
    else:
        path.write_text(yaml.safe_dump(_merge(SLURM, change), sort_keys=False))
    return path


@pytest.mark.parametrize("row", CASES, ids=[r[0] for r in CASES])
def test_a_senseless_profile_value_is_one_line_naming_file_and_key(tmp_path, row):
    _id, _what, change, expected = row
    path = _write(tmp_path, change)
    (line,) = profile_problems(path)
    assert line.startswith(f"{path}: ") and expected in line
    assert "\n" not in line


@pytest.mark.parametrize("profile", ["slurm", "local", "default"])
def test_the_repositorys_profiles_pass(profile):
    assert profile_problems(REPO / "profiles" / profile / "config.v8+.yaml") == []


@pytest.mark.parametrize("name, value", [
    ("runtime", 60), ("runtime", "90m"), ("runtime", "2h"), ("runtime", "'1 hour'"),
    ("runtime", "attempt * 60"), ("runtime", "min(30 * attempt, 90)"),
    ("mem_mb", 2048), ("mem_mb", "2048 * attempt"), ("mem_mb", "'4096'"),
    ("mem_mib", 1.5), ("mem", "4GB"), ("mem", "512"), ("slurm_account", "'$X'"),
    ("disk_mb", 0)])  # a resource not judged here
def test_values_snakemake_takes_pass(name, value):
    assert resource_problem(name, value) is None


def test_words_snakemake_takes_for_counts_pass(tmp_path):
    path = _write(tmp_path, {"jobs": "unlimited", "cores": "all", "retries": 0,
                             "latency-wait": 0, "local_cores": 1})
    assert profile_problems(path) == []


def test_every_problem_of_a_profile_is_listed(tmp_path):
    path = _write(tmp_path, {"jobs": 0, "retries": -1,
                             "default-resources": {"mem_mb": 0, "runtime": "forever"}})
    problems = profile_problems(path)
    assert [p.removeprefix(f"{path}: ").split(":")[0] for p in problems] == [
        "jobs", "retries", "default-resources.mem_mb", "default-resources.runtime"]


def test_the_profiles_a_command_line_reads_are_found(tmp_path):
    path = _write(tmp_path, {})
    default = (REPO / "profiles" / "default" / "config.v8+.yaml").resolve()
    bases = [tmp_path / "elsewhere", REPO]
    assert profile_files(["snakemake", "--profile", str(path.parent)], {}, bases) == [
        path.resolve(), default]
    # A relative name, from the Snakefile's directory; --profile=FILE; the environment.
    slurm = (REPO / "profiles" / "slurm" / "config.v8+.yaml").resolve()
    assert profile_files(["--profile=profiles/slurm", "--workflow-profile", "none"], {},
                         bases) == [slurm]
    assert profile_files(["-n"], {"SNAKEMAKE_PROFILE": str(path)}, bases) == [
        path.resolve(), default]
    # The command line's --profile wins over the environment; `none` reads none.
    assert profile_files(["--profile", "none", "--workflow-profile=none"],
                         {"SNAKEMAKE_PROFILE": str(path)}, bases) == []
    # Not found from here: not judged (Snakemake says so itself if it cannot find it).
    assert profile_files(["--profile", "no/such/profile"], {}, [tmp_path]) == []


def test_check_profiles_raises_every_problem(tmp_path):
    path = _write(tmp_path, {"jobs": 0, "retries": -2})
    with pytest.raises(ConfigError) as err:
        check_profiles(["snakemake", "--profile", str(path)], {}, [str(tmp_path)])
    assert len(err.value.problems) == 2
    check_profiles(["snakemake", "--profile", str(_write(tmp_path, {}))], {}, [str(tmp_path)])


@pytest.mark.e2e
def test_snakemake_with_a_senseless_profile_stops_before_any_job(tmp_path):
    path = _write(tmp_path, {"jobs": 0, "default-resources": {"runtime": "forever"}})
    suite = write_suite(tmp_path / "suite.yaml", tiny_suite())
    env = {**os.environ, "BENCHFLOW_SLURM_ACCOUNT": "acct", "BENCHFLOW_SLURM_PARTITION": "p"}
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory",
         str(tmp_path), "--configfile", str(suite), "--profile", str(path.parent), "-n"],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    ours = [ln for ln in proc.stderr.splitlines() if ln.startswith(str(path))]
    assert ours == [
        f"{path}: jobs: expected a whole number >= 1 or 'unlimited', got int 0",
        f"{path}: default-resources.runtime: expected a positive number of minutes or a "
        "time span such as 90m or 2h, got 'forever'"]
    assert "Traceback" not in proc.stderr and "rule all" not in proc.stderr
    assert not (tmp_path / "results").exists()


def test_the_snakefiles_refusal_lines_are_printable(tmp_path):
    path = tmp_path / "odd\x1b]0;title\x07" / "config.v8+.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(_merge(SLURM, {"jobs": 0})))
    (line,) = profile_refusal(["snakemake", "--profile", str(path.parent),
                               "--workflow-profile", "none"], {}, [str(tmp_path)])
    assert "\x1b" not in line and "\x07" not in line
    assert "odd\\x1b]0;title\\x07" in line and line.endswith("jobs: expected a whole number "
                                                              ">= 1 or 'unlimited', got int 0")
    assert profile_refusal(["snakemake", "--profile", str(_write(tmp_path, {}))], {},
                           [str(tmp_path)]) == []
