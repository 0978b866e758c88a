"""The -o OUT.json appender: created when missing, appended, never losing records to
concurrent writers, and refusing (untouched) a file it cannot read."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat

import pytest

from workflow.records.results_file import KIND, ResultsFileError, append_records, read_results


def rec(i: int, writer: int = 0) -> dict:
    return {"id": f"w{writer}/case{i}", "status": "ok", "timing": {"median_ms": float(i)}}


def test_created_when_missing_then_appended(tmp_path):
    out = tmp_path / "sub" / "perf.json"
    assert append_records(out, [rec(0)]) == 1
    assert append_records(out, [rec(1), rec(2)]) == 3
    doc = json.loads(out.read_text())
    assert doc["kind"] == KIND and doc["schema_version"].startswith("1.")
    assert [c["id"] for c in doc["cases"]] == ["w0/case0", "w0/case1", "w0/case2"]
    # Nothing but the file and its lock file is left in the directory.
    assert sorted(p.name for p in out.parent.iterdir()) == ["perf.json", "perf.json.lock"]


def test_empty_file_is_taken_as_no_records(tmp_path):
    out = tmp_path / "perf.json"
    out.write_text("\n")
    assert append_records(out, [rec(0)]) == 1


@pytest.mark.parametrize("content,why", [
    ('{"cases": [{"id": "a"}', "not valid JSON"),
    ('[{"id": "a"}]', "not a benchflow results file"),
    ('{"results": []}', "not a benchflow results file"),
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
    assert sorted(p.name for p in tmp_path.iterdir()) == ["perf.json", "perf.json.lock"]


def _writer(path: str, writer: int, count: int, start) -> None:
    start.wait()  # every writer starts at once
    for i in range(count):
        append_records(path, [rec(i, writer)])


def test_concurrent_writers_lose_no_record(tmp_path):
    out = tmp_path / "perf.json"
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
    ids = [c["id"] for c in read_results(out)["cases"]]
    assert len(ids) == writers * count
    assert set(ids) == {f"w{w}/case{i}" for w in range(writers) for i in range(count)}
    # Each writer's records are in its own order: appends are never reordered.
    for w in range(writers):
        mine = [int(i.split("case")[1]) for i in ids if i.startswith(f"w{w}/")]
        assert mine == list(range(count))


@pytest.mark.parametrize("mode", [0o644, 0o640])
def test_an_existing_file_keeps_its_mode(tmp_path, mode):
    out = tmp_path / "perf.json"
    out.write_text("")
    out.chmod(mode)
    append_records(out, [rec(0)])
    append_records(out, [rec(1)])
    assert stat.S_IMODE(out.stat().st_mode) == mode
    assert len(read_results(out)["cases"]) == 2


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_a_new_file_gets_the_umask_mode_not_mkstemps_0600(tmp_path, umask):
    out = tmp_path / "perf.json"
    old = os.umask(umask)
    try:
        append_records(out, [rec(0)])
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask


def test_the_new_content_is_on_disk_before_it_replaces_the_file(tmp_path, monkeypatch):
    out = tmp_path / "perf.json"
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
