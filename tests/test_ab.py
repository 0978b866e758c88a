"""Interleaved A/B pairs: results/ab.json from real iree-benchmark-module rounds, the
`benchflow ab` command, the rendered sections, and the rules at load time."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest

from tests.conftest import FAST_MEASUREMENT, REPO, snakemake, write_suite
from workflow.measure.pairs import interleave
from workflow.measure.protocol import Observation
from workflow.records import schemas
from workflow.render import ab as ab_render
from workflow.stats.sequential import Plan


def sync_sku(cpu: str) -> dict:
    # Single-threaded local-sync: the SKU the README recommends for gating (CV <= 1 %).
    return {"iree": {"target_cpu": cpu, "device": "local-sync"},
            "measurement": {**FAST_MEASUREMENT, "min_time_s": 0.02}}


def ab_suite() -> dict:
    return {
        "suite_name": "ab",
        # A and A': the same settings under two names; generic: portable x86-64 code.
        "skus": {"host": sync_sku("host"), "host-again": sync_sku("host"),
                 "generic": sync_sku("generic")},
        "workloads": [{"model": "linear", "shapes": [[128, 256, 256]]}],
        "ab_pairs": [{"base": "host", "new": "host-again"},
                     {"base": "host", "new": "generic"}],
        # A 5 % margin: what a loaded 2-core CI machine resolves in a few dozen rounds;
        # on a quiet one the plan decides at its first look (7 rounds), under load it
        # may take up to 48 (A/A intervals of 7 rounds reached ±4.3 % here). On an AMD
        # EPYC VM whose invocations of one module are bimodal (0.30 or 0.42 ms, pinned
        # to either core alike), 48 rounds left the A/A interval at [0.94, 1.047] and 96
        # reached [0.957, 1.014]: up to 160 rounds, the width that noise needs.
        "ab": {"margin": 0.05, "max_rounds": 160, "budget_s": 300},
    }


@pytest.fixture(scope="module")
def ab_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("ab")
    suite = write_suite(workdir / "suite.yaml", ab_suite())
    proc = subprocess.run([sys.executable, "-m", "workflow.cli.main", "ab", "--configfile",
                           str(suite), "--cores", "2", "--directory", str(workdir)],
                          capture_output=True, text=True, cwd=REPO, timeout=900)
    return workdir, proc


@pytest.mark.e2e
@pytest.mark.quiet
def test_a_a_is_no_difference_and_host_vs_generic_a_regression(ab_run):
    workdir, proc = ab_run
    doc = json.loads((workdir / "results" / "ab.json").read_text())
    jsonschema.Draft202012Validator(schemas.load("ab")).validate(doc)
    rows = {(r["base"], r["new"]): r for r in doc["pairs"]}
    same, slower = rows[("host", "host-again")], rows[("host", "generic")]
    assert same["verdict"] == "no-difference", same
    assert slower["verdict"] == "regression", slower
    for row in (same, slower):
        assert row["ci95"][0] <= row["ratio"] <= row["ci95"][1]
        assert row["level"] >= 0.95 and 0 <= row["p_value"] <= 1
        assert row["rounds"] == len(row["base_ms"]) == len(row["new_ms"]) >= 6
        assert row["seconds"] > 0 and row["stop_reason"]
        assert set(row["orders"]) <= {"A", "B"} and len(row["orders"]) == row["rounds"]
    assert slower["ci95"][0] > 1.05
    # `benchflow ab` prints every row and exits 1 because one regressed.
    assert proc.returncode == 1, proc.stderr
    assert "REGRESSION" in proc.stdout and "NO-DIFFERENCE" in proc.stdout


@pytest.mark.e2e
@pytest.mark.quiet
def test_the_pairs_need_no_batch_use_the_ab_rounds_and_a_rerun_does_nothing(ab_run):
    workdir, _ = ab_run
    results = workdir / "results"
    # No batch job ran: the pair compiled its own modules and measured only its rounds.
    assert not (results / "iree").exists() and not (results / "cases").exists()
    assert not (results / "compile").exists()
    assert (results / "ab_compile" / "host" / "generic" / "linear-128x256x256-f32" / "new" /
            "module.vmfb").exists()
    # The rounds' invocations are the ab defaults' (3 x 0.01 s after 0.02 s), not the
    # SKUs' measurement settings (0.02 s after 0.05 s).
    row = next(r for r in json.loads((results / "ab.json").read_text())["pairs"]
               if r["new"] == "generic")
    for sku in ("host", "generic"):
        assert row["invocation"][sku] == {"repetitions": 3, "min_time_s": 0.01,
                                          "min_warmup_time_s": 0.02}
        argv = row["commands"][sku]
        assert {"--benchmark_repetitions=3", "--benchmark_min_time=0.01s",
                "--benchmark_min_warmup_time=0.02"} <= set(argv), argv
    proc = snakemake(workdir, "results/ab.json", "--configfile", str(workdir / "suite.yaml"),
                     "-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr


@pytest.mark.e2e
@pytest.mark.quiet
def test_an_edited_flag_of_one_sku_reruns_only_its_pair(ab_run):
    workdir, _ = ab_run
    suite = ab_suite()
    suite["skus"]["generic"]["iree"]["compile_flags"] = ["--iree-opt-level=O1"]
    # Edited in place (the working directory belongs to that file), then put back for
    # the other tests of the module's run.
    path = workdir / "suite.yaml"
    original = path.read_text()
    write_suite(path, suite)
    try:
        out = snakemake(workdir, "results/ab.json", "--configfile", str(path), "-n").stdout
    finally:
        path.write_text(original)
    assert "wildcards: base=host, new=generic, workload=linear-128x256x256-f32" in out, out
    assert "new=host-again" not in out and "rule iree_batch" not in out, out


@pytest.mark.e2e
def test_the_ab_target_plans_no_batch_job(tmp_path):
    path = write_suite(tmp_path / "suite.yaml", ab_suite())
    out = snakemake(tmp_path, "-n", "results/ab.json", "--configfile", str(path)).stdout
    assert out.count("rule ab_pair:") == 2 and "iree_batch" not in out, out


def fake_rounds(ratio: float, noise: float, seed: int):
    import random

    rng = random.Random(seed)
    return (lambda: Observation(1.0 * (1 + rng.gauss(0, noise))),
            lambda: Observation(ratio * (1 + rng.gauss(0, noise))))


@pytest.mark.parametrize(("ratio", "verdict"), [(1.0, "no-difference"), (1.2, "regression"),
                                                (0.8, "improvement")])
def test_interleave_stops_when_decided(ratio, verdict):
    base, new = fake_rounds(ratio, 0.005, seed=1)
    plan = Plan(min_rounds=6, max_rounds=48, target_rel_width=0.01)
    out = interleave(base, new, plan, budget_s=60, seed=3, max_retakes=0)
    assert out["verdict"] == verdict
    assert out["stop_reason"] == "decided" and out["rounds"] in plan.looks[:2]


def test_interleave_keeps_to_the_time_budget():
    base, new = fake_rounds(1.03, 0.2, seed=2)   # too noisy to decide in a few rounds
    out = interleave(base, new, Plan(min_rounds=6, max_rounds=4096), budget_s=0, seed=3,
                     max_retakes=0)
    assert out["stop_reason"] == "time-budget" and out["rounds"] == Plan(6, 4096).first_look
    assert out["verdict"] in ("inconclusive", "no-difference")


def test_interleave_randomizes_the_order_of_each_round():
    calls = []
    out = interleave(lambda: calls.append("A") or Observation(1.0),
                     lambda: calls.append("B") or Observation(1.0),
                     Plan(min_rounds=6, max_rounds=64, target_rel_width=1e-9, margin=0),
                     budget_s=60, seed=5, max_retakes=0)
    firsts = "".join(calls[0::2])
    assert firsts == out["orders"] and {"A", "B"} <= set(firsts)


def test_sections_render_every_row():
    doc = {"pairs": [
        {"base": "a", "new": "b", "workload": "w", "verdict": "regression", "ratio": 1.2,
         "ci95": [1.1, 1.3], "ci": [1.1, 1.3], "level": 0.96, "p_value": 0.001, "rounds": 8,
         "seconds": 3.5, "stop_reason": "decided", "mde": 1.04},
        {"base": "a", "new": "c", "workload": "w", "verdict": "failed",
         "failed_stage": "compile", "error": "c: iree-compile exited with 1"},
        {"base": "a", "new": "d", "workload": "w", "verdict": "inconclusive", "ratio": 1.0,
         "ci95": [0.99, 1.011], "ci": [0.99, 1.011], "level": 0.96, "p_value": 0.9,
         "rounds": 48, "seconds": 9.6, "stop_reason": "max-rounds", "mde": 1.03,
         "to_decide": {"rounds": 154, "seconds": 30.8, "power": 0.8, "limit_s": 1800,
                       "sigma": 0.023, "decidable": True, "max_rounds": 154,
                       "budget_s": None}}]}
    md = ab_render.markdown(doc)
    assert "| **regression** | a → b | w | ×1.200 | [1.100, 1.300] at 96.0% |" in md
    assert "compile: c: iree-compile exited with 1" in md
    assert ("max-rounds; 154 rounds (about 31 s) decide 80% of runs at this noise "
            "(log-ratio spread 2.30% per round): set ab.max_rounds: 154") in md
    page = ab_render.html(doc)
    assert page.count("<tr>") == 4 and "×1.040" in page


@pytest.mark.parametrize(("pairs", "message"), [
    ([{"base": "host", "new": "nope"}], "ab_pairs[0].new: unknown SKU 'nope'"),
    ([{"base": "host", "new": "host"}], "ab_pairs[0]: base and new are both 'host'"),
    ([{"base": "host", "new": "generic"}] * 2, "ab_pairs[1]: the pair host -> generic is "
                                                "listed twice"),
])
@pytest.mark.e2e
def test_bad_pairs_are_refused_before_any_job(tmp_path, pairs, message):
    suite = ab_suite()
    suite["ab_pairs"] = pairs
    path = write_suite(tmp_path / "suite.yaml", suite)
    proc = snakemake(tmp_path, "-n", "--configfile", str(path), check=False)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr
