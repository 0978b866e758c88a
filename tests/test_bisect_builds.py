"""A revision's builds are kept by content key (bisect/prepare.built_under), for bisect and
the two-revision `benchflow ab` alike: two bisections at once in one cache, one per SKU
(host and generic code), each timed the other's compiled module while builds were kept
by revision and written without a lock."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import FAST_MEASUREMENT, write_suite
from workflow.bisect.run import call_prepare

pytestmark = [pytest.mark.tool]

CASES = ["host/iree/linear-16x32x32-f32/baseline", "generic/iree/linear-16x32x32-f32/baseline"]


@pytest.fixture
def tree(tmp_path) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    write_suite(tree / "suite.yaml", {
        "suite_name": "builds",
        "skus": {"host": {"iree": {"target_cpu": "host", "device": "local-sync"},
                          "measurement": dict(FAST_MEASUREMENT)},
                 "generic": {"iree": {"target_cpu": "generic", "device": "local-sync"},
                             "measurement": dict(FAST_MEASUREMENT)}},
        "workloads": [{"model": "linear", "shapes": [[16, 32, 32]]}]})
    return tree


def build(tree: Path, root: Path, cases: list[str], log: str) -> dict:
    return call_prepare({"tree": str(tree), "suite": "suite.yaml", "label": "r1",
                         "cases": cases, "build": str(root)}, root.parent / "logs" / log)


def test_two_skus_of_one_revision_never_share_a_build(tree, tmp_path):
    root = tmp_path / "cache" / "builds"
    answer = build(tree, root, CASES, "one.log")["cases"]
    host, generic = (answer[c] for c in CASES)
    assert host["key"] != generic["key"]
    assert Path(host["vmfb"]).parent.parent == root / host["key"]
    assert Path(host["vmfb"]) != Path(generic["vmfb"])
    for side, cpu in ((host, "host"), (generic, "generic")):
        compiled = json.loads((Path(side["vmfb"]).parent / "compile.json").read_text())
        assert f"--iree-llvmcpu-target-cpu={cpu}" in compiled["flags"], compiled["flags"]


def test_two_processes_building_one_case_at_once_share_one_build(tree, tmp_path):
    """Both answers name the same module, which one of them made while holding its lock
    and the other reused: the export's log says `exporting` once and `reused` once."""
    root = tmp_path / "cache" / "builds"
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda i: build(tree, root, CASES[:1], f"p{i}.log")["cases"],
                                range(2)))
    (a,), (b,) = (list(x.values()) for x in answers)
    assert a["vmfb"] == b["vmfb"] and not a["failed"] and not b["failed"]
    log = (Path(a["vmfb"]).parent.parent / "bisect.log").read_text()
    assert log.count("exporting (") == 1 and log.count("reused from") == 1, log
