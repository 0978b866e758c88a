"""The -o OUT.json appender: created when missing, appended in the file's own format
(benchflow's results document or Forge benchmark.py's list), never losing records to
concurrent writers, and refusing (untouched) a file it cannot read."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat

import pytest

from workflow.records.results_file import (
    FORGE_RECORD_KEY,
    KIND,
    ResultsFileError,
    append_records,
    forge_entry,
    read_results,
)


def rec(i: int, writer: int = 0) -> dict:
    return {"id": f"w{writer}/case{i}", "status": "ok", "timing": {"median_ms": float(i)}}


# What Forge's benchmark.py appends (tt-forge-fe forge/test/benchmark/benchmark.py): run()'s
# result plus "hash" and "date"; a failure has zeros and an "error".
FORGE_OK = {"total_time": 2.5, "total_samples": 128, "samples_per_sec": 51.2,
            "args": {"model": "bert", "config": "tiny", "training": False,
                     "dataformat": "Fp16_b", "loop_count": 128, "layers": 0, "chips": 1,
                     "microbatch": 1, "output": "perf.json"},
            "arch": "BackendDevice.Wormhole_B0", "machine_name": "tt-box", "hash": "1a2b3c4",
            "date": "24-05-01"}
FORGE_FAILED = {"args": {"model": "bert", "config": "large"}, "samples_per_sec": 0.0,
                "error": "out of memory", "machine_name": "tt-box", "hash": "1a2b3c4",
                "date": "24-05-01"}

IREE_RECORD = {
    "id": "host/iree/bert-tiny-4x32-bf16/baseline", "model": "bert", "config": "tiny",
    "dtype": "bf16", "shape": [4, 32], "sku": "host", "backend": "iree", "recipe": "baseline",
    "mode": "inference", "layers": None, "status": "ok", "stage": None, "error": None,
    "timing": {"median_ms": 2.0, "invocations": 5, "repetitions": 10,
               "calls_per_invocation": None},
    "provenance": {"host": "bench-1"},
}


def test_created_when_missing_then_appended(tmp_path):
    out = tmp_path / "sub" / "perf.json"
    assert append_records(out, [rec(0)]) == 1
    assert append_records(out, [rec(1), rec(2)]) == 3
    doc = json.loads(out.read_text())
    assert doc["kind"] == KIND and doc["schema_version"].startswith("1.")
    assert [c["id"] for c in doc["cases"]] == ["w0/case0", "w0/case1", "w0/case2"]
    # Nothing but the file is left in the directory: its lock file is gone once released.
    assert sorted(p.name for p in out.parent.iterdir()) == ["perf.json"]


def test_empty_file_is_taken_as_no_records(tmp_path):
    out = tmp_path / "perf.json"
    out.write_text("\n")
    assert append_records(out, [rec(0)]) == 1


@pytest.mark.parametrize("content,why", [
    ('{"cases": [{"id": "a"}', "not valid JSON"),
    ('[{"id": "a"}]', "neither a benchflow results file"),
    ('[1, 2]', "neither a benchflow results file"),
    # One entry without Forge's keys: not Forge's list, whatever the others are.
    (json.dumps([FORGE_OK, {"args": {}}]), "nor a Forge benchmark.py one"),
    ('{"results": []}', "neither a benchflow results file"),
    ('"perf"', "neither a benchflow results file"),
    (b"\xff\xfe\x00garbage", "cannot read it"),
])
def test_unreadable_file_is_refused_and_left_untouched(tmp_path, content, why):
    out = tmp_path / "perf.json"
    if isinstance(content, bytes):
        out.write_bytes(content)
    else:
        out.write_text(content)
    before = out.read_bytes()
    with pytest.raises(ResultsFileError, match=why) as err:
        append_records(out, [rec(0)])
    assert str(out) in str(err.value) and "not appending" in str(err.value)
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["perf.json"]


def test_a_benchflow_document_keeps_its_format_and_keys(tmp_path):
    out = tmp_path / "perf.json"
    doc = {"schema_version": "1.0", "kind": KIND, "cases": [rec(0)], "note": "kept"}
    out.write_text(json.dumps(doc))
    assert append_records(out, [rec(1)], forge={"git_hash": "abc"}) == 2
    assert json.loads(out.read_text()) == {**doc, "cases": [rec(0), rec(1)]}


@pytest.mark.parametrize("existing", [[FORGE_OK, FORGE_FAILED], []])
def test_a_forge_results_list_stays_a_list_with_a_forge_entry_appended(tmp_path, existing):
    out = tmp_path / "perf.json"
    out.write_text(json.dumps(existing))  # Forge writes json.dumps(all_results)
    assert read_results(out) == existing
    n = append_records(out, [IREE_RECORD], forge={"output": "perf.json", "git_hash": "abc1234",
                                                  "date": "25-01-02"})
    assert n == len(existing) + 1
    doc = json.loads(out.read_text())
    assert isinstance(doc, list) and doc[:-1] == existing  # Forge's entries untouched
    entry = doc[-1]
    assert entry == forge_entry(IREE_RECORD, output="perf.json", git_hash="abc1234",
                                date="25-01-02")
    assert "\n" not in out.read_text()  # one line, as Forge writes it
    # Appended again: still a list, now read as Forge's (the new entry has its keys).
    assert append_records(out, [IREE_RECORD]) == len(existing) + 2


def test_forge_entry_maps_the_case_record_to_forges_fields():
    entry = forge_entry(IREE_RECORD, output="perf.json", git_hash="abc1234", date="25-01-02")
    # 5 invocations x 10 repetitions, each call one microbatch of 4 (shape[0], as Forge's
    # inputs[0].shape[0]) in the 2 ms median.
    assert entry["total_samples"] == 200
    assert entry["total_time"] == pytest.approx(0.1)
    assert entry["samples_per_sec"] == pytest.approx(2000.0)
    assert entry["samples_per_sec"] == pytest.approx(entry["total_samples"] / entry["total_time"])
    assert entry["args"] == {
        "model": "bert", "config": "tiny", "training": False, "dataformat": "Fp16_b",
        "loop_count": 10, "layers": 0, "microbatch": 4, "output": "perf.json",
        "sku": "host", "backend": "iree", "recipe": "baseline", "shape": [4, 32]}
    assert (entry["arch"], entry["machine_name"], entry["hash"], entry["date"]) == (
        "host", "bench-1", "abc1234", "25-01-02")
    assert "error" not in entry and entry[FORGE_RECORD_KEY] == IREE_RECORD
    assert set(FORGE_OK) <= set(entry)  # every key Forge writes for a result

    torch = {**IREE_RECORD, "backend": "torch-eager", "mode": "training", "layers": 3,
             "dtype": "f32", "timing": {"median_ms": 4.0, "invocations": 5,
                                        "repetitions": None, "calls_per_invocation": 50}}
    entry = forge_entry(torch)
    assert entry["args"]["loop_count"] == 50 and entry["total_samples"] == 5 * 50 * 4
    assert entry["args"]["training"] and entry["args"]["layers"] == 3
    assert entry["args"]["dataformat"] == "Fp32" and entry["args"]["output"] is None

    failed = {**IREE_RECORD, "status": "failed", "stage": "compile", "timing": None,
              "error": "iree-compile exited with 1"}
    entry = forge_entry(failed)
    assert (entry["total_time"], entry["total_samples"], entry["samples_per_sec"]) == (0.0, 0, 0.0)
    assert entry["error"] == "failed at compile: iree-compile exited with 1"


def _writer(path: str, writer: int, count: int, start) -> None:
    start.wait()  # every writer starts at once
    for i in range(count):
        append_records(path, [rec(i, writer)])


@pytest.mark.parametrize("forge", [False, True])
@pytest.mark.slow
def test_concurrent_writers_lose_no_record(tmp_path, forge):
    out = tmp_path / "perf.json"
    if forge:
        out.write_text("[]")
    writers, count = 6, 25
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(writers)
    procs = [ctx.Process(target=_writer, args=(str(out), w, count, start))
             for w in range(writers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    doc = read_results(out)
    ids = ([e[FORGE_RECORD_KEY]["id"] for e in doc] if forge
           else [c["id"] for c in doc["cases"]])
    assert len(ids) == writers * count
    assert set(ids) == {f"w{w}/case{i}" for w in range(writers) for i in range(count)}
    # Each writer's records are in its own order: appends are never reordered.
    for w in range(writers):
        mine = [int(i.split("case")[1]) for i in ids if i.startswith(f"w{w}/")]
        assert mine == list(range(count))
    # The lock file, taken and removed 150 times by writers racing for it, is gone.
    assert [p.name for p in tmp_path.iterdir()] == ["perf.json"]


@pytest.mark.parametrize("content", ["", "[]"])
@pytest.mark.parametrize("mode", [0o644, 0o640])
def test_an_existing_file_keeps_its_mode(tmp_path, mode, content):
    out = tmp_path / "perf.json"
    out.write_text(content)
    out.chmod(mode)
    append_records(out, [rec(0)])
    append_records(out, [rec(1)])
    assert stat.S_IMODE(out.stat().st_mode) == mode
    doc = read_results(out)
    assert len(doc if content else doc["cases"]) == 2


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_a_new_file_gets_the_umask_mode_not_mkstemps_0600(tmp_path, umask):
    out = tmp_path / "perf.json"
    old = os.umask(umask)
    try:
        append_records(out, [rec(0)])
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask


@pytest.mark.parametrize("content", ["", "[]"])
def test_the_new_content_is_on_disk_before_it_replaces_the_file(tmp_path, monkeypatch, content):
    out = tmp_path / "perf.json"
    out.write_text(content)
    calls = []

    def spy(name, real):
        def call(*args):
            calls.append(name)
            return real(*args)
        monkeypatch.setattr(os, name, call)

    spy("fsync", os.fsync)
    spy("replace", os.replace)
    append_records(out, [rec(0)])
    assert calls == ["fsync", "replace"]


def test_a_results_file_created_by_another_writer_meanwhile_is_appended_to(tmp_path,
                                                                           monkeypatch):
    """CI caught test_concurrent_writers_lose_no_record losing a writer: the file was
    judged absent, another writer created it, and the second look (does it exist?) then
    refused it with the first look's "does not exist". The file another writer made in
    between is judged as it is now."""
    from workflow import files

    out = tmp_path / "perf.json"
    judged, looks = files.file_problem, []

    def another_writer_between(path):
        problem = judged(path)
        looks.append(problem)
        if len(looks) == 1:  # the first look: absent; then another writer makes it
            monkeypatch.setattr(files, "file_problem", judged)
            append_records(out, [rec(0, 9)])
            monkeypatch.setattr(files, "file_problem", another_writer_between)
        return problem

    monkeypatch.setattr(files, "file_problem", another_writer_between)
    assert files.write_target(out, what="a JSON results file") == out
    assert looks == ["does not exist", None]
    monkeypatch.undo()
    append_records(out, [rec(1, 0)])
    assert [c["id"] for c in read_results(out)["cases"]] == ["w9/case0", "w0/case1"]
