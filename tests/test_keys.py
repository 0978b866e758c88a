"""Content keys and file fingerprints (planning/keys.py, records/storage.py): unit tests."""

from __future__ import annotations

import json
import os

from workflow.backends.builds import file_build, package_build, tool_build
from workflow.jobs import iree, iree_batch
from workflow.models.registry import load_model_files, model_sources
from workflow.planning import keys
from workflow.records.storage import fingerprint, fingerprint_problem

MODEL = '''
from workflow.models.common import finish, seeded
from workflow.models.registry import benchmark_model
import helper_{n}


@benchmark_model(default_shape=(4, 4), shape_doc="[rows, cols]")
def keyed_model_{n}(config, dtype, layers, shape):
    import torch

    return finish(torch.nn.Linear(4, helper_{n}.WIDTH), (torch.ones(*shape),), dtype)
'''


def test_a_models_sources_follow_its_imports_and_ignore_comments(tmp_path):
    (tmp_path / "helper_a.py").write_text("WIDTH = 4\n")
    (tmp_path / "models_a.py").write_text(MODEL.format(n="a"))
    load_model_files([tmp_path / "models_a.py"])
    first = model_sources("keyed_model_a")
    assert set(first) == {str(tmp_path / "models_a.py"), str(tmp_path / "helper_a.py"),
                          "workflow/models/common.py"}
    # A comment or a blank line is not code: the same digests.
    (tmp_path / "helper_a.py").write_text("# the width\n\nWIDTH = 4  # four\n")
    assert model_sources("keyed_model_a") == first
    # The helper's code changes: its digest, and only its, changes.
    (tmp_path / "helper_a.py").write_text("WIDTH = 8\n")
    os.utime(tmp_path / "helper_a.py", ns=(1, 1))  # whatever the clock says
    second = model_sources("keyed_model_a")
    changed = {f for f in first if first[f] != second[f]}
    assert changed == {str(tmp_path / "helper_a.py")}
    assert keys.changed_parts({"model sources": first}, {"model sources": second}) == \
        f"model sources changed: {tmp_path / 'helper_a.py'}"


def test_built_in_models_are_keyed_by_their_own_module_and_helpers():
    assert set(model_sources("linear")) == {"workflow/models/layers.py",
                                            "workflow/models/common.py"}
    assert set(model_sources("mnist")) == {"workflow/models/vision.py",
                                           "workflow/models/common.py"}


def test_fingerprints_see_content_not_mtimes(tmp_path):
    f = tmp_path / "module.vmfb"
    f.write_bytes(b"x" * 100)
    fp = fingerprint(f)
    assert fingerprint_problem(f, fp) is None
    os.utime(f, ns=(5, 5))  # touched: a quick check hashes it, and it is the same file
    assert fingerprint_problem(f, fp, quick=True) is None
    f.write_bytes(b"y" * 100)
    os.utime(f, ns=(fp["mtime_ns"], fp["mtime_ns"]))  # same size and mtime
    assert fingerprint_problem(f, fp) == "its content changed since it was written " \
                                         "(sha256 differs)"
    f.write_bytes(b"x" * 50)
    assert fingerprint_problem(f, fp, quick=True) == "its size changed (100 -> 50 bytes)"
    f.unlink()
    assert fingerprint_problem(f, fp) == "it is missing"
    f.mkdir()
    assert fingerprint_problem(f, fp) == "it is not a regular file"
    assert fingerprint_problem(f, None) == "no fingerprint was recorded for it"


def test_builds_are_named_by_content():
    torch = package_build("torch")
    assert torch.startswith("torch==") and " record:" in torch
    assert package_build("no-such-dist-xyz") == "no-such-dist-xyz not installed"
    assert tool_build(None, "iree-base-compiler") == package_build("iree-base-compiler")


def test_a_rebuilt_tool_is_another_build(tmp_path):
    tool = tmp_path / "iree-compile"
    tool.write_text("#!/bin/sh\n")
    before = file_build(str(tool))
    os.utime(tool, ns=(10**18, 10**18))
    assert file_build(str(tool)) != before


def _entry(tmp_path, monkeypatch, status="ok"):
    """A member entry for a case whose files are in tmp_path."""
    monkeypatch.chdir(tmp_path)
    ident = {"id": "s/iree/w/baseline", "sku": "s", "workload": "w", "recipe": "baseline"}
    parts = {"identity": ident, "x": 1}
    record = iree.case_files(ident)["record"]
    os.makedirs(os.path.dirname(record))
    with open(record, "w") as fh:
        json.dump({"id": ident["id"], "status": status}, fh)
    return ident, parts, iree_batch.member_entry(ident, parts, {"run_s": 1}, {"status": status})


def test_a_record_is_reused_only_as_written(tmp_path, monkeypatch):
    ident, parts, entry = _entry(tmp_path, monkeypatch)
    check = lambda **kw: iree_batch.reuse_problem(entry, ident["id"], parts, {"run_s": 1},  # noqa: E731
                                            retry_failures=False, **kw)
    assert check() is None
    assert iree_batch.reuse_problem(entry, ident["id"], {**parts, "x": 2}, {"run_s": 1},
                              retry_failures=False) == "its inputs changed: x changed"
    record = iree.case_files(ident)["record"]
    with open(record, "w") as fh:
        json.dump({"id": "other/iree/w/baseline", "status": "ok"}, fh)
    assert check() == f"{record}: its size changed (43 -> 47 bytes)"
    os.unlink(record)
    assert check() == f"{record}: it is missing"


def test_a_failure_is_retried_with_other_timeouts_or_when_forced(tmp_path, monkeypatch):
    ident, parts, entry = _entry(tmp_path, monkeypatch, status="failed")
    monkeypatch.setenv(iree.RUN_ID_ENV, "run-2")
    assert iree_batch.reuse_problem(entry, ident["id"], parts, {"run_s": 1},
                              retry_failures=False) is None
    assert iree_batch.reuse_problem(entry, ident["id"], parts, {"run_s": 9},
                              retry_failures=False) == \
        "it failed, and the timeouts changed since"
    assert iree_batch.reuse_problem(entry, ident["id"], parts, {"run_s": 1},
                              retry_failures=True) == "it failed, and this rerun was forced"
    # A failure made by this same run is shared, not tried again.
    monkeypatch.setenv(iree.RUN_ID_ENV, entry["run_id"] or "none")
    entry["run_id"] = os.environ[iree.RUN_ID_ENV]
    assert iree_batch.reuse_problem(entry, ident["id"], parts, {"run_s": 1},
                              retry_failures=True) is None


def test_the_compile_flag_opt_in_and_the_description_are_not_results():
    """Whether a SKU may pass unlisted compile flags decides only whether the suite is
    accepted: adding the opt-in (or rewording the description) keeps every key; a flag
    itself changes it."""
    from workflow.planning.plan import sku_settings
    from workflow.suite.load import load

    sku = {"iree": {"target_cpu": "host", "compile_flags": ["--iree-opt-level=O2"]},
           "measurement": {"invocations": 3}}
    opted = {**sku, "description": "reworded",
             "iree": {**sku["iree"], "allow_any_compile_flags": True}}
    flagged = {**sku, "iree": {**sku["iree"], "compile_flags": ["--iree-opt-level=O3"]}}
    assert keys.sku_settings(opted) == keys.sku_settings(sku)
    assert keys.sku_settings(flagged) != keys.sku_settings(sku)
    assert sku["iree"] == keys.sku_settings(sku)["iree"]  # nothing else is dropped
    # The rule param (planning/plan.sku_settings) is the same function on a loaded suite.
    suite = load(["config/config.yaml"])
    name = next(iter(suite.config["skus"]))
    assert sku_settings(suite, name) == keys.sku_settings(suite.config["skus"][name])
    assert "allow_any_compile_flags" not in sku_settings(suite, name).get("iree", {})
