"""The export cache (jobs/export_cache.py, opt-in by BENCHFLOW_EXPORT_CACHE): an export
made in one suite directory is copied, verified, into another instead of being made
again; a damaged, cut short or foreign entry is refused and made anew; without the
variable nothing is read or written."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest

from tests.conftest import snakemake, tiny_suite, write_suite
from tests.test_content_keys import MODEL_V1
from workflow.jobs import export_cache
from workflow.jobs.iree import export
from workflow.planning import keys
from workflow.records import blobs
from workflow.records.storage import file_sha256
from workflow.suite.load import Workload

WORKER = "-m workflow.backends.iree.export"  # the export worker's argv in a case log
LINEAR = Workload("linear-8x16x16-f32", "linear", "default", "f32", (8, 16, 16), None)


# -- the store's functions (no process) --------------------------------------------------

def _files(where: Path, tag: str) -> dict[str, dict]:
    """Three export files of distinct bytes (`tag` in each), as export() hands them over."""
    out = {}
    for role in export_cache.ROLES:
        path = where / f"{role}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f"{role} {tag} ".encode() * 1000)
        out[role] = {"path": str(path), "sha256": file_sha256(path)}
    return out


def _dest(where: Path) -> dict[str, str]:
    return {role: str(where / f"out-{role}") for role in export_cache.ROLES}


PARTS = {"spec": {"model": "m"}, "torch": "torch==2 record:abc"}
KEY = keys.digest(PARTS)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(export_cache.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_stored_export_is_copied_back_verified(tmp_path, cache):
    files = _files(tmp_path / "made", "a")
    log = str(tmp_path / "log")
    export_cache.keep(KEY, PARTS, files, {"flops": 1.0, "export_seconds": 4.5}, log)
    dest = _dest(tmp_path)
    got = export_cache.copy_in(KEY, PARTS, dest, log)
    entry = export_cache.entry_path(cache, KEY)
    assert got["flops"] == 1.0 and got["cached_from"] == str(entry)
    # The copy's own seconds, the original export's kept apart.
    assert got["cached_export_seconds"] == 4.5 and got["export_seconds"] < 4.5
    for role in export_cache.ROLES:
        assert Path(dest[role]).read_bytes() == Path(files[role]["path"]).read_bytes()
    lines = Path(log).read_text().splitlines()
    assert lines == [f"export {KEY}: stored in the export cache ({entry})",
                     f"export {KEY}: copied from the export cache ({entry}, made in "
                     f"{os.getcwd()})"]
    # Another key, or the same key with other parts, is no hit.
    assert export_cache.copy_in("0" * 16, PARTS, dest, log) is None
    assert "not in the export cache" in Path(log).read_text()


def _truncate_mlir(cache: Path, entry: Path) -> None:
    blob = blobs.path_of(cache / "files", json.loads(entry.read_text())["files"]["mlir"]
                         ["sha256"])
    blob.write_bytes(blob.read_bytes()[:100])


def _edit_entry(cache: Path, entry: Path) -> None:
    doc = json.loads(entry.read_text())
    doc["data"]["flops"] = 2.0
    entry.write_text(json.dumps(doc))


def _link_inputs(cache: Path, entry: Path) -> None:
    blob = blobs.path_of(cache / "files", json.loads(entry.read_text())["files"]["inputs"]
                         ["sha256"])
    copy = blob.with_name("elsewhere")
    shutil.copyfile(blob, copy)  # the right bytes, but through a link: refused
    blob.unlink()
    blob.symlink_to(copy)


def _link_entry(cache: Path, entry: Path) -> None:
    copy = entry.with_name("elsewhere.json")
    shutil.copyfile(entry, copy)
    entry.unlink()
    entry.symlink_to(copy)


def _cut_entry(cache: Path, entry: Path) -> None:
    entry.write_bytes(entry.read_bytes()[:-40])


def _foreign_entry(cache: Path, entry: Path) -> None:
    """An entry, sealed as ours, of other parts put under this key's name."""
    other = {**PARTS, "torch": "torch==3 record:def"}
    shutil.copyfile(export_cache.store(cache, keys.digest(other), other,
                                       _files(cache.parent / "o", "o"), {}), entry)


DAMAGES = {"truncated file": (_truncate_mlir, "damaged (100 bytes"),
           "edited entry": (_edit_entry, "edited or damaged"),
           "file replaced by a link": (_link_inputs, "not a regular file"),
           "entry replaced by a link": (_link_entry, "not a regular file"),
           "entry cut short": (_cut_entry, "not valid JSON"),
           "foreign entry": (_foreign_entry, "an entry of other inputs (torch changed)")}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_entry_is_refused_then_replaced(tmp_path, cache, damage):
    harm, words = DAMAGES[damage]
    files, log = _files(tmp_path / "made", "a"), str(tmp_path / "log")
    export_cache.keep(KEY, PARTS, files, {"flops": 1.0}, log)
    entry = export_cache.entry_path(cache, KEY)
    harm(cache, entry)
    assert export_cache.copy_in(KEY, PARTS, _dest(tmp_path), log) is None
    refused = Path(log).read_text().splitlines()[-1]
    assert refused.startswith(f"export {KEY}: the export cache's entry was refused: ")
    assert words in refused, refused
    # Made again, the export is stored anew: the entry (and a damaged file) replaced.
    export_cache.keep(KEY, PARTS, files, {"flops": 1.0}, log)
    assert not entry.is_symlink()
    got = export_cache.copy_in(KEY, PARTS, _dest(tmp_path), log)
    assert got is not None and got["flops"] == 1.0, Path(log).read_text()


def test_racing_stores_leave_one_whole_entry(tmp_path, cache):
    """Writers of different bytes for one key, all at once: what is read back is one
    writer's files whole, never a mix."""
    made = [_files(tmp_path / f"w{i}", f"writer{i}") for i in range(6)]
    start = threading.Barrier(len(made))

    def write(files):
        start.wait()
        export_cache.store(cache, KEY, PARTS, files, {"by": files["mlir"]["path"]})

    threads = [threading.Thread(target=write, args=(f,)) for f in made]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dest = _dest(tmp_path)
    got = export_cache.copy_in(KEY, PARTS, dest, str(tmp_path / "log"))
    (winner,) = [f for f in made if f["mlir"]["path"] == got["by"]]
    for role in export_cache.ROLES:
        assert Path(dest[role]).read_bytes() == Path(winner[role]["path"]).read_bytes()
    assert not [p for p in cache.rglob("*") if p.name.startswith(".")]  # no temporary left


def test_unset_the_cache_is_neither_read_nor_written(tmp_path, cache, monkeypatch):
    files, log = _files(tmp_path / "made", "a"), tmp_path / "log"
    export_cache.keep(KEY, PARTS, files, {}, str(log))
    before = sorted(p.relative_to(cache) for p in cache.rglob("*"))
    assert before and log.read_text()
    monkeypatch.delenv(export_cache.CACHE_ENV)
    log.unlink()
    export_cache.keep("1" * 16, PARTS, files, {}, str(log))
    assert export_cache.copy_in(KEY, PARTS, _dest(tmp_path), str(log)) is None
    assert sorted(p.relative_to(cache) for p in cache.rglob("*")) == before
    assert not log.exists()  # not a word: the log is as it was without the feature


def test_an_export_in_the_cache_is_copied_without_a_worker(tmp_path, cache, monkeypatch):
    """export() itself: a cached export of the real key is copied (this test is in the
    tier that may start no process: a worker started would fail it), its meta saying
    where from, its log's first line as it always was."""
    monkeypatch.chdir(tmp_path)
    spec = LINEAR.export_spec()
    parts = keys.export_parts(spec)
    key = keys.digest(parts)
    export_cache.store(cache, key, parts, _files(tmp_path / "made", "m"),
                       {"spec": spec, "dtype": "f32", "export_seconds": 9.0})
    out = {r: str(tmp_path / "suite" / r) for r in ("mlir", "inputs", "reference", "meta")}
    log = tmp_path / "case.log"
    result = export(spec=spec, timeout=60, log=str(log), **out)
    assert result.ok and result.data["cached_from"] == str(export_cache.entry_path(cache, key))
    assert result.data["cached_export_seconds"] == 9.0 and result.data["key"] == key
    lines = log.read_text().splitlines()
    assert lines[0] == f"export {key}: exporting (not exported yet)"
    assert lines[1].startswith(f"export {key}: copied from the export cache (")
    assert len(lines) == 2
    # The suite's own reuse check takes the copy as any export.
    again = export(spec=spec, timeout=60, log=str(log), **out)
    assert again.data["cached_from"] == result.data["cached_from"]
    assert log.read_text().splitlines()[-1].startswith(f"export {key}: reused from")


def test_the_export_key_covers_the_code_that_shapes_an_export():
    """A cache shared by checkouts must not hand out an export other code made: every
    workflow.models module the exporter takes code from is in the exporter's key part,
    but the registry, which only finds the model and loads its file (build passes the
    spec's shape and dtype through)."""
    import ast
    import importlib.util

    source = Path(importlib.util.find_spec(keys.EXPORTER[0]).origin).read_text()
    used = {node.module for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "workflow.models.")}
    assert used - {"workflow.models.registry"} <= set(keys.EXPORTER), used


# -- end to end: suite directories, and exports made by the worker ---------------------

def _run_suite(workdir: Path) -> dict[str, dict]:
    """The tiny suite on its host SKU in `workdir`; its cases by workload."""
    cfg = tiny_suite()
    cfg["skus"].pop("generic")
    workdir.mkdir(parents=True, exist_ok=True)
    write_suite(workdir / "suite.yaml", cfg)
    snakemake(workdir, "results/report.json", "--configfile", str(workdir / "suite.yaml"))
    report = json.loads((workdir / "results" / "report.json").read_text())
    return {c["workload"]: c for c in report["cases"]}


def _exports(workdir: Path) -> dict[str, tuple[dict, str, bytes]]:
    """Each workload's export meta, case log and MLIR bytes."""
    out = {}
    for d in sorted((workdir / "results" / "export").iterdir()):
        log = workdir / "logs" / "iree" / "host" / "cases" / f"{d.name}.log"
        out[d.name] = (json.loads((d / "export.json").read_text()), log.read_text(),
                       (d / "module.mlirbc").read_bytes())
    return out


@pytest.mark.e2e
def test_a_second_suite_directory_copies_its_exports_from_the_cache(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv(export_cache.CACHE_ENV, str(cache))
    first_cases = _run_suite(tmp_path / "a")
    first = _exports(tmp_path / "a")
    assert len(first) == 2
    for meta, log, _ in first.values():
        assert WORKER in log and "stored in the export cache" in log, log
        assert "cached_from" not in meta
        assert export_cache.entry_path(cache, meta["key"]).is_file()
    second_cases = _run_suite(tmp_path / "b")
    for workload, (meta, log, mlir) in _exports(tmp_path / "b").items():
        key = meta["key"]
        assert key == first[workload][0]["key"]
        # Its first line as always, then the copy; no export worker ran.
        assert log.splitlines()[0] == f"export {key}: exporting (not exported yet)", log
        assert f"export {key}: copied from the export cache (" in log, log
        assert WORKER not in log and "stored in the export cache" not in log, log
        assert meta["cached_from"] == str(export_cache.entry_path(cache, key))
        assert meta["cached_made_in"] == str(tmp_path / "a")
        assert mlir == first[workload][2]
        case = second_cases[workload]
        assert case["status"] == "ok", case
        # The case's cost is the copy's, not the original export's seconds.
        assert case["cost"]["export_s"] < first_cases[workload]["cost"]["export_s"]


def _export_in(workdir: Path, spec: dict) -> tuple:
    """export() of `spec` in a fresh suite directory: its result and case log."""
    workdir.mkdir(parents=True, exist_ok=True)
    files = {r: str(workdir / "export" / n) for r, n in (
        ("mlir", "module.mlirbc"), ("inputs", "inputs.npz"),
        ("reference", "reference.npz"), ("meta", "export.json"))}
    log = workdir / "case.log"
    result = export(spec=spec, timeout=600, log=str(log), **files)
    return result, log.read_text()


@pytest.fixture(scope="module")
def made_once(tmp_path_factory):
    """A cache holding the linear workload's export, made once by the worker."""
    where = tmp_path_factory.mktemp("made")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(export_cache.CACHE_ENV, str(where / "cache"))
        result, log = _export_in(where / "suite", LINEAR.export_spec())
    assert result.ok and "stored in the export cache" in log, log
    return where / "cache", result


@pytest.mark.e2e
@pytest.mark.parametrize("damage", ["truncated file", "edited entry",
                                    "file replaced by a link"])
def test_a_damaged_cache_entry_is_refused_and_exported_again(made_once, tmp_path,
                                                             monkeypatch, damage):
    cache = tmp_path / "cache"
    shutil.copytree(made_once[0], cache, symlinks=True)
    monkeypatch.setenv(export_cache.CACHE_ENV, str(cache))
    key = made_once[1].data["key"]
    DAMAGES[damage][0](cache, export_cache.entry_path(cache, key))
    result, log = _export_in(tmp_path / "again", LINEAR.export_spec())
    assert result.ok and "cached_from" not in result.data
    assert f"export {key}: the export cache's entry was refused: " in log, log
    assert WORKER in log and "stored in the export cache" in log, log
    # The entry was replaced: the next suite directory copies it.
    copied, log = _export_in(tmp_path / "third", LINEAR.export_spec())
    assert copied.data["cached_from"] and WORKER not in log, log
    assert (tmp_path / "third" / "export" / "module.mlirbc").read_bytes() == \
        (tmp_path / "again" / "export" / "module.mlirbc").read_bytes()


# test_content_keys's user model under a name of its own.
MODEL = MODEL_V1.replace("def my_model(", "def cached_model(")


@pytest.mark.e2e
def test_an_edited_model_file_misses_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(export_cache.CACHE_ENV, str(tmp_path / "cache"))
    model = tmp_path / "cached_model.py"
    model.write_text(MODEL)
    spec = Workload("cached_model-8x16-f32", "cached_model", "default", "f32", (8, 16), None,
                    model_modules=(str(model),)).export_spec()
    v1, log = _export_in(tmp_path / "v1", spec)
    assert v1.ok and WORKER in log, log
    model.write_text(MODEL.replace("torch.nn.Linear(shape[1], 16)",
                                   "torch.nn.Sequential(torch.nn.Linear(shape[1], 16), "
                                   "torch.nn.ReLU())"))
    v2, log = _export_in(tmp_path / "v2", spec)
    assert v2.data["key"] != v1.data["key"] and "cached_from" not in v2.data
    assert "not in the export cache" in log and WORKER in log, log
    assert v2.data["graph"]["aten_ops"] > v1.data["graph"]["aten_ops"]
    # The file as it was: its export is the cache's again.
    model.write_text(MODEL)
    back, log = _export_in(tmp_path / "back", spec)
    assert back.data["key"] == v1.data["key"] and back.data["cached_from"], log
    assert WORKER not in log, log


@pytest.mark.e2e
def test_without_the_variable_an_export_touches_no_cache(made_once, tmp_path, monkeypatch):
    """Unset, a cache holding this very export is neither read nor written: the worker
    exports, and the log and meta say nothing of a cache."""
    cache = made_once[0]
    listing = {p: p.stat().st_mtime_ns for p in cache.rglob("*")}
    monkeypatch.delenv(export_cache.CACHE_ENV, raising=False)
    result, log = _export_in(tmp_path / "plain", LINEAR.export_spec())
    assert result.ok and WORKER in log and "cache" not in log, log
    assert not [k for k in result.data if k.startswith("cached")]
    assert {p: p.stat().st_mtime_ns for p in cache.rglob("*")} == listing
    assert set(result.data) == set(made_once[1].data)


def test_a_cache_that_is_no_directory_is_one_line_and_the_export_stands(tmp_path,
                                                                        monkeypatch):
    """BENCHFLOW_EXPORT_CACHE naming a file: neither read nor written, each said in one
    line of the case log; no exception reaches the export."""
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv(export_cache.CACHE_ENV, str(tmp_path / "a-file"))
    log = tmp_path / "log"
    assert export_cache.copy_in(KEY, PARTS, _dest(tmp_path), str(log)) is None
    export_cache.keep(KEY, PARTS, _files(tmp_path / "made", "a"), {}, str(log))
    read, stored = log.read_text().splitlines()
    assert read.startswith(f"export {KEY}: the export cache could not be read: ")
    assert read.endswith("Not a directory"), read
    assert stored.startswith(f"export {KEY}: could not be stored in the export cache "
                             f"{tmp_path / 'a-file'}: "), stored


def test_the_goldens_store_still_takes_a_linked_source_but_never_a_linked_copy(tmp_path):
    """records/blobs.py serves the goldens' artifact store too: a model file a user linked
    is stored (its bytes), and a link put in the store in place of a file is refused."""
    from workflow.baselines import artifacts

    real = tmp_path / "model.py"
    real.write_text("x = 1\n")
    (tmp_path / "linked.py").symlink_to(real)
    digest, size = artifacts.planned(tmp_path / "linked.py")
    assert artifacts.put(tmp_path / "store", tmp_path / "linked.py", digest) == size
    stored = artifacts.get(tmp_path / "store", digest)
    stored.unlink()
    stored.symlink_to(real)
    with pytest.raises(artifacts.Missing, match="not in the artifact store"):
        artifacts.get(tmp_path / "store", digest)
    assert artifacts.put(tmp_path / "store", real, digest) == size  # the link replaced
    assert not stored.is_symlink() and artifacts.get(tmp_path / "store", digest) == stored
