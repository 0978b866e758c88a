"""Goldens keep their baselines, and `check` decides each case by what changed since it
was blessed (baselines/): on real runs of a suite with two user models on IREE
and torch-eager, blessed once.

- unchanged: the same run checked against goldens whose times were quartered (what a
  machine that drifted by x4 shows): ok by construction, each case's drift said;
  --gate-on-machine and --unpaired judge the times as measured and fail;
- paired: a rerun after one model's second layer was widened x8 and a variable of the
  other renamed: the widened cases are regressions decided by interleaved pairs with
  their blessed baselines (the IREE one names its dispatch), the renamed model's IREE
  case is unchanged (the same program without debug locations), its torch case is
  paired and not a regression;
- not measurable: the artifact store moved away: the changed cases are judged from the
  numbers as before, each line saying why.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.conftest import FAST_MEASUREMENT, REPO, snakemake, write_suite
from tests.model_sources import RENAMED, growing_model
from workflow.baselines import artifacts

WIDENING = growing_model("widening", (64, 256))
IREE_WIDE = "sync/iree/widening-64x256-f32/baseline"
EAGER_WIDE = "sync/torch-eager/widening-64x256-f32/baseline"
IREE_RENAMED = "sync/iree/scaling-32x64-f32/baseline"
EAGER_RENAMED = "sync/torch-eager/scaling-32x64-f32/baseline"


def suite() -> dict:
    return {"suite_name": "paired",
            "skus": {"sync": {"iree": {"target_cpu": "host", "device": "local-sync"},
                              "torch": {"threads": 1},
                              "measurement": {**FAST_MEASUREMENT, "invocations": 4,
                                              "max_invocations": 4, "noisy_cv": 5.0,
                                              "min_time_s": 0.02, "torch_warmup_calls": 2,
                                              "torch_warmup_s": 0.02,
                                              "torch_min_run_time_s": 0.05}}},
            "backends": ["iree", "torch-eager"],
            "workloads": [{"model": "widening", "shapes": [[64, 256]]},
                          {"model": "scaling", "shapes": [[32, 64]]}],
            "model_modules": ["models/widening.py", "models/scaling.py"],
            # Short torch blocks, one pair of workers: a x4 change decides in 8 rounds;
            # check's pairs take four times these rounds and seconds (pair.PAIR_SCALE),
            # what bounds the renamed torch model's A/A pair.
            "ab": {"margin": 0.05, "max_rounds": 32, "budget_s": 8, "torch_block_s": 0.05,
                   "torch_worker_rounds": 16}}


def write_models(wd, *, width: int, name: str) -> None:
    (wd / "models").mkdir(exist_ok=True)
    (wd / "models" / "widening.py").write_text(WIDENING.format(width=width))
    (wd / "models" / "scaling.py").write_text(RENAMED.format(name=name))


def benchflow(*args: str) -> tuple[int, str]:
    """The command in a process of its own, as a user runs it: bless and check import the
    suite's model files, whose names another test's files in this worker may hold."""
    proc = subprocess.run([sys.executable, "-c", "import sys; from workflow.cli.main import "
                           "main; sys.exit(main(sys.argv[1:]))", *args],
                          capture_output=True, text=True, timeout=900)
    return proc.returncode, proc.stdout + proc.stderr


def check(capsys, *args: str) -> tuple[int, str]:
    return benchflow("check", *args)


@pytest.fixture(scope="module")
def blessed(tmp_path_factory):
    """A run of the suite, blessed with its baselines kept."""
    wd = tmp_path_factory.mktemp("paired")
    write_models(wd, width=256, name="m")
    write_suite(wd / "suite.yaml", suite())
    snakemake(wd, "results/report.json", "--configfile", str(wd / "suite.yaml"))
    report = wd / "results" / "report.json"
    code, out = benchflow("bless", "--report", str(report), "--goldens", str(wd / "goldens"),
                          "--allow-noisy", "--yes")
    assert code == 0, out
    return wd, report


@pytest.mark.e2e
def test_bless_keeps_each_baseline_by_content(blessed, capsys):
    wd, report = blessed
    data = json.loads((wd / "goldens" / "sync.json").read_text())
    assert data["schema_version"] == "1.3"
    iree = data["cases"][IREE_WIDE]["baseline"]
    assert set(iree["files"]) == {"module", "inputs"} and iree["store"] == "artifacts"
    assert iree["identity"]["kind"] == "iree" and iree["identity"]["program"]
    # The CPU that `target_cpu: host` resolved on is part of what was measured.
    assert iree["identity"]["host"]["cpu_model"] and iree["identity"]["host"]["cores"]
    eager = data["cases"][EAGER_WIDE]["baseline"]
    assert set(eager["files"]) == {"widening.py"}
    stored = artifacts.get(wd / "goldens" / "artifacts", eager["files"]["widening.py"]["sha256"])
    assert stored.read_text() == (wd / "models" / "widening.py").read_text()
    # A dry run says what it would keep, and how large.
    code, out = benchflow("bless", "--report", str(report), "--goldens", str(wd / "g-dry"),
                          "--allow-noisy")
    assert code == 0, out
    assert "baselines: 4 case(s) keep what measures them again" in out, out
    assert not (wd / "g-dry").exists()
    # Numbers only: no baseline, no store.
    assert benchflow("bless", "--report", str(report), "--goldens", str(wd / "g-numbers"),
                     "--allow-noisy", "--numbers-only", "--yes")[0] == 0
    numbers = json.loads((wd / "g-numbers" / "sync.json").read_text())
    assert all("baseline" not in e for e in numbers["cases"].values())
    assert not (wd / "g-numbers" / "artifacts").exists()


@pytest.fixture(scope="module")
def drifted(blessed):
    """The goldens with every time quartered: what this machine shows after drifting x4.
    (x2 was too little: on CI's loaded machine a run's interval of the widened case
    reached back below x2's margin, and the numbers' verdict was inconclusive.)"""
    wd, _ = blessed
    drifted = wd / "g-drifted"
    shutil.copytree(wd / "goldens", drifted)
    data = json.loads((drifted / "sync.json").read_text())
    for entry in data["cases"].values():
        entry["invocation_medians_ms"] = [x / 4 for x in entry["invocation_medians_ms"]]
        entry["median_ms"] /= 4
    (drifted / "sync.json").write_text(json.dumps(data))
    return drifted


@pytest.mark.e2e
def test_an_unchanged_case_is_ok_by_construction_and_its_drift_is_said(blessed, drifted,
                                                                       capsys):
    wd, report = blessed
    code, out = check(capsys, "--report", str(report), "--goldens", str(drifted),
                      "--remeasure-budget", "0")
    assert code == 0, out
    assert out.count("MACHINE DRIFT ") == 4, out
    assert f"MACHINE DRIFT {IREE_WIDE}: unchanged since blessed" in out
    assert "4 unchanged since blessed, 0 paired with their baseline, 0 unpaired" in out
    # The machine itself gated, or the numbers judged across runs as before: regressions.
    for flag in ("--gate-on-machine", "--unpaired"):
        code, out = check(capsys, "--report", str(report), "--goldens", str(drifted),
                          "--remeasure-budget", "0", flag)
        assert code == 1 and f"REGRESSED {IREE_WIDE}" in out, (flag, out)


def nightly_check_lines() -> dict[str, str]:
    """docs/ci.md's nightly check step, GitHub's and GitLab's, as written."""
    blocks = [yaml.safe_load(b) for b in
              re.findall(r"```yaml\n(.*?)```", (REPO / "docs" / "ci.md").read_text(), re.S)]
    github = next(b for b in blocks if "nightly" in (b.get("jobs") or {}))["jobs"]["nightly"]
    gitlab = next(b for b in blocks if "nightly" in b)["nightly"]
    return {"github": next(s["run"] for s in github["steps"] if "benchflow check" in
                           s.get("run", "")),
            "gitlab": next(line for line in gitlab["script"] if "benchflow check" in line)}


@pytest.mark.e2e
@pytest.mark.parametrize("service", ["github", "gitlab"])
def test_the_nightly_recipes_check_step_as_written(blessed, drifted, service, tmp_path):
    """The check step of docs/ci.md's nightly jobs, run by bash as the services run it
    (GitHub: -eo pipefail), in the run's directory, against the drifted goldens: exit 0,
    each case unchanged since blessed; against goldens that do not exist: exit 2."""
    wd, _ = blessed
    line = nightly_check_lines()[service].replace(".venv/bin/",
                                                  f"{sys.executable.rpartition('/')[0]}/")
    summary = tmp_path / "summary.md"
    outs = []
    for goldens, code in ((drifted, 0), (tmp_path / "no-goldens", 2)):
        env = {"PATH": "/usr/bin:/bin", "GOLDENS": str(goldens), "SUITE": "suite.yaml",
               "GITHUB_STEP_SUMMARY": str(summary), "HOME": str(tmp_path)}
        proc = subprocess.run(["bash", "-eo", "pipefail", "-c", line], cwd=wd, env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == code, (line, proc.stdout, proc.stderr)
        outs.append(proc.stdout)
    assert "4 unchanged since blessed" in outs[0], outs[0]
    if service == "github":  # the job summary shows the check's lines
        assert "4 unchanged since blessed" in summary.read_text()


@pytest.mark.e2e
def test_the_gate_rule_decides_unchanged_cases_too(blessed, drifted):
    """snakemake results/gate.json against the drifted goldens: the report step judges
    each case a x4 regression from the numbers, the gate rule finds every case unchanged
    since blessed and passes; with goldens.gate_on_machine it fails on the drift."""
    wd, _ = blessed
    for on_machine in (False, True):
        # The suite's own file (a working directory belongs to one suite file).
        gated = write_suite(wd / "suite.yaml", {**suite(), "goldens": {
            "dir": str(drifted), "gate_on_machine": on_machine}})
        proc = snakemake(wd, "results/gate.json", "--configfile", str(gated), check=False)
        if on_machine:
            assert proc.returncode != 0 and not (wd / "results" / "gate.json").exists()
            assert f"{IREE_WIDE}: time regressed" in proc.stdout + proc.stderr
            continue
        assert proc.returncode == 0, proc.stdout + proc.stderr
        gate = json.loads((wd / "results" / "gate.json").read_text())
        decided = {r["case_id"]: r for r in gate["remeasured"] if "basis" in r}
        assert {r["basis"] for r in decided.values()} == {"unchanged"}, gate
        assert len(decided) == 4 and all(r["line"].startswith("MACHINE DRIFT ")
                                         for r in decided.values()), gate
        (wd / "results" / "gate.json").unlink()
    write_suite(wd / "suite.yaml", suite())


@pytest.mark.e2e
def test_changed_cases_are_decided_by_pairs_with_their_blessed_baselines(blessed, capsys):
    wd, report = blessed
    write_models(wd, width=2048, name="renamed")
    snakemake(wd, "results/report.json", "--configfile", str(wd / "suite.yaml"))
    code, out = check(capsys, "--report", str(report), "--goldens", str(wd / "goldens"),
                      "--remeasure-budget", "150")
    assert code == 1, out
    for cid in (IREE_WIDE, EAGER_WIDE):
        assert f"PAIRED {cid}: regression: paired with its blessed baseline" in out, out
        # (the IREE case's module also grew: its size regressed too)
        assert f"REGRESSED {cid}: time" in out, out
    assert out.count("regressed (time paired with its blessed baseline: x") == 2, out
    assert "matmul_64x2048x256" in out, out  # the widened dispatch, from the pair
    assert f"PAIRED {IREE_RENAMED}" not in out and f"UNPAIRED {IREE_RENAMED}" not in out
    assert "1 unchanged since blessed, 3 paired with their baseline, 0 unpaired" in out, out
    assert f"REGRESSED {EAGER_RENAMED}" not in out, out

    # The artifacts pruned: the changed cases judged from the numbers, saying why.
    shutil.move(wd / "goldens" / "artifacts", wd / "pruned")
    code, out = check(capsys, "--report", str(report), "--goldens", str(wd / "goldens"),
                      "--remeasure-budget", "0")
    assert code in (1, 3), out
    assert f"UNPAIRED {IREE_WIDE}: changed since blessed, judged from the numbers" in out
    assert "its baseline's module cannot be read" in out and "not in the artifact store" in out
    assert f"UNPAIRED {EAGER_WIDE}" in out and "its baseline's widening.py" in out, out
    shutil.move(wd / "pruned", wd / "goldens" / "artifacts")


def test_a_damaged_artifact_is_refused_not_measured(tmp_path):
    src = tmp_path / "module.vmfb"
    src.write_bytes(b"module bytes")
    digest, size = artifacts.planned(src)
    assert artifacts.put(tmp_path / "store", src, digest) == size
    assert artifacts.put(tmp_path / "store", src, digest) == 0  # held already
    stored = artifacts.get(tmp_path / "store", digest)
    assert stored.read_bytes() == b"module bytes"
    stored.write_bytes(b"module bytez")
    with pytest.raises(artifacts.Missing, match="damaged"):
        artifacts.get(tmp_path / "store", digest)
    src.write_bytes(b"changed after planning")
    with pytest.raises(artifacts.Missing, match="changed since bless read it"):
        artifacts.put(tmp_path / "other", src, digest)
    with pytest.raises(artifacts.Missing, match="not in the artifact store"):
        artifacts.get(tmp_path / "none", digest)


def test_a_changed_runtime_release_times_the_baseline_on_its_own(monkeypatch, tmp_path):
    """The blessed module runs on the runtime release it was blessed on (a package
    environment), today's on today's; a release that cannot be installed here leaves the
    case unpaired, naming both releases."""
    from types import SimpleNamespace

    from workflow.backends import packages
    from workflow.baselines import pair
    from workflow.errors import ConfigError

    sku = {"iree": {"device": "local-sync"}, "measurement": {}}
    asked = []

    def environment(package, version, cache):
        asked.append((package, version))
        if version == "3.9.0":
            raise ConfigError([f"{package}=={version}: pip: no matching distribution"])
        return SimpleNamespace(tools={"iree-benchmark-module": tmp_path / "old" / "bm"})

    monkeypatch.setattr(packages, "environment", environment)
    assert pair._runtime_sku(sku, "3.13.0", "3.13.0") is sku and not asked
    moved = pair._runtime_sku(sku, "3.12.0", "3.13.0")
    assert moved["iree"]["benchmark_tool"] == str(tmp_path / "old" / "bm")
    assert sku["iree"] == {"device": "local-sync"}  # today's settings untouched
    with pytest.raises(pair.NotKept, match=r"runtime release changed \(3\.9\.0 -> 3\.13\.0\)"
                                           r" and the blessed one cannot be installed"):
        pair._runtime_sku(sku, "3.9.0", "3.13.0")
    assert asked == [("iree-base-runtime", "3.12.0"), ("iree-base-runtime", "3.9.0")]
