"""Misspelt names in a suite get the closest known name (`did you mean ...?`): a key, a
model, a recipe (said to be an unknown recipe, with the known ones, not a length
problem), and the SKUs and backends a workload or pair names."""

from __future__ import annotations

import pytest

from tests.conftest import write_suite
from workflow.cli.main import main

SKUS = {"cpu-host": {"iree": {"target_cpu": "host", "device": "local-sync"}}}
BERT = {"model": "bert", "configs": ["tiny"]}

CASES = [
    ("top-level-keys", {"skuss": SKUS, "workload": [BERT]},
     "<top>: unknown key(s) ['skuss', 'workload']; expected one of ",
     "; did you mean 'skus' for 'skuss', 'workloads' for 'workload'?"),
    ("nested-key", {"skus": {"cpu-host": {"iree": {"target_cpus": "host"}}},
                    "workloads": [BERT]},
     "skus.cpu-host.iree: unknown key(s) ['target_cpus']", "; did you mean 'target_cpu'?"),
    ("model", {"skus": SKUS, "workloads": [{"model": "bertt"}]},
     "workloads[0].model: expected one of [", "got 'bertt'; did you mean 'bert'?"),
    ("recipe", {"skus": SKUS, "workloads": [{**BERT, "recipes": ["baseline", "int8w0"]}]},
     "workloads[0].recipes[1]: expected a recipe: baseline, int8wo, ",
     "got 'int8w0': unknown recipe; did you mean 'int8wo'?"),
    ("grouped-recipe", {"skus": SKUS, "workloads": [{**BERT, "recipes": ["int4wo-1288"]}]},
     "workloads[0].recipes[0]: expected a recipe",
     "got 'int4wo-1288': unknown recipe; did you mean 'int4wo-128'?"),
    ("accuracy-family", {"skus": SKUS, "workloads": [BERT],
                         "accuracy": {"recipes": {"int4w": {"min_sqnr_db": 10}}}},
     "accuracy.recipes: expected a quantizing recipe's name", "got 'int4w'; did you mean "
                                                              "'int4wo'?"),
    ("workload-sku", {"skus": SKUS, "workloads": [{**BERT, "skus": ["cpu-hots"]}]},
     "workloads[0].skus: unknown SKU 'cpu-hots'; expected one of ['cpu-host']",
     "; did you mean 'cpu-host'?"),
    ("workload-backend", {"skus": SKUS, "workloads": [{**BERT, "backends": ["torch-eagr"]}]},
     "workloads[0].backends: unknown backend 'torch-eagr'", "; did you mean 'torch-eager'?"),
    ("pair-sku", {"skus": {**SKUS, "cpu-other": SKUS["cpu-host"]}, "workloads": [BERT],
                  "ab_pairs": [{"base": "cpu-hst", "new": "cpu-other"}]},
     "ab_pairs[0].base: unknown SKU 'cpu-hst'", "; did you mean 'cpu-host'?"),
]


@pytest.mark.parametrize("suite,start,end", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_misspelt_name_gets_the_closest_known_one(tmp_path, capsys, suite, start, end):
    path = write_suite(tmp_path / "s.yaml", suite)
    assert main(["validate", str(path)]) == 1
    lines = [line for line in capsys.readouterr().err.splitlines() if start in line]
    assert len(lines) == 1, lines
    assert lines[0].endswith(end), lines[0]


def test_an_unknown_recipe_is_not_said_to_be_too_long(tmp_path, capsys):
    path = write_suite(tmp_path / "s.yaml", {"skus": SKUS, "workloads": [
        {**BERT, "recipes": ["int8w0", "int8_dynamic_activation_intx_weight-4-1" + "0" * 80]}]})
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    typo = next(line for line in err.splitlines() if "recipes[0]" in line)
    assert "characters" not in typo and "unknown recipe" in typo
    # A known recipe's name too long for a file name is a length problem, said as one.
    assert "recipes[1]: expected at most 100 characters (it names files), got " \
           "'int8_dynamic_activation_intx_weight-4-1000" in err


def test_no_suggestion_when_nothing_is_close():
    from workflow.records.schemas import did_you_mean

    assert did_you_mean(["zzz"], ["skus", "workloads"]) == ""
    assert did_you_mean([3], ["skus"]) == ""  # a YAML key need not be a string
    assert did_you_mean(["skus2"], ["skus"]) == "; did you mean 'skus'?"
