"""The history store survives a full disk (issue 47): a write is kept whole or not at all
(history/staging.py), a store chdb cannot open is named with the way out, and `history
repair` rebuilds a damaged one from what survives in it. The full disks are real (a
tmpfs, mounted as tests/test_outside_names.py mounts them; skipped where this process may
not mount); the interrupted swaps are made by stopping the swap's own renames."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.test_outside_names import fill, mount_tmpfs, unmount
from workflow.cli.main import main
from workflow.history import ingest, layout, sql, staging
from workflow.history.store import Store

DATA = Path(__file__).resolve().parent / "data"
IREE, TORCH = str(DATA / "report_iree.json"), str(DATA / "report_torch.json")


def history(capsys, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["history", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def runs(capsys, store: Path) -> list[str]:
    code, out, err = history(capsys, "show", "--store", str(store), "--format", "json")
    assert code == 0, err
    return [r["run_id"] for r in json.loads(out)]


def tree(folder: Path) -> dict[str, int]:
    """Every file and its size, benchflow's lock left out (a reader takes it)."""
    return {str(p.relative_to(folder)): p.stat().st_size for p in folder.rglob("*")
            if p.is_file() and p.name != layout.LOCK_NAME}


@pytest.fixture
def tmpfs(tmp_path):
    where = mount_tmpfs(tmp_path / "mnt", size="8m")
    yield where
    unmount(where)


def fill_to(folder: Path, free: int) -> Path:
    """Fills `folder`'s file system until `free` bytes are left (0: to the last byte)."""
    filler = folder / "filler"
    if free == 0:
        fill(folder)
        return filler
    st = os.statvfs(folder)
    filler.write_bytes(b"\0" * (st.f_bavail * st.f_frsize - free))
    return filler


# Free space left when the ingest starts: none (the copy of the store cannot be made),
# a few KiB (the old code's ALTER left the table's definition at 0 bytes), and less
# than the 1 MiB chdb reserves before it writes a part.
@pytest.mark.parametrize("free", [0, 8192, 100_000], ids=["0B", "8KiB", "100KB"])
@pytest.mark.slow
def test_an_ingest_on_a_full_disk_leaves_the_store_as_it_was(tmpfs, capsys, free):
    store = tmpfs / "store"
    assert history(capsys, "ingest", IREE, "--store", str(store))[0] == 0
    before_runs, before = runs(capsys, store), tree(store)
    filler = fill_to(tmpfs, free)

    code, out, err = history(capsys, "ingest", TORCH, "--store", str(store))
    assert code == 1, out + err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{store}: history store: not enough space on its file system" in err, err
    assert tree(store) == before  # no staging copy left, no file changed
    assert runs(capsys, store) == before_runs  # readable while the disk is still full

    filler.unlink()  # space back: the store opens, and takes the run
    code, out, err = history(capsys, "ingest", TORCH, "--store", str(store))
    assert code == 0 and "1 run(s) ingested" in out, out + err
    assert len(runs(capsys, store)) == 2


def test_a_new_store_on_a_tiny_file_system_is_refused_and_not_left(tmp_path, capsys):
    where = mount_tmpfs(tmp_path / "tiny", size="512k")
    try:
        code, out, err = history(capsys, "ingest", IREE, "--store", str(where / "store"))
        assert code == 1 and "Traceback" not in err and err.count("\n") == 1, err
        assert "not enough space on its file system" in err, err
        assert not (where / "store").exists()  # as before: absent
    finally:
        unmount(where)


@pytest.mark.slow
def test_an_ingest_stopped_between_chunks_is_undone(tmp_path, capsys, monkeypatch):
    """All or nothing: Ctrl-C after the run's first chunk of rows went in adds none."""
    store = tmp_path / "store"
    assert history(capsys, "ingest", IREE, "--store", str(store))[0] == 0
    before_runs, before = runs(capsys, store), tree(store)
    monkeypatch.setattr(ingest, "CHUNK_ROWS", 10)
    sent, original = [], Store.insert

    def second_stops(self, rows):
        sent.append(len(rows))
        if len(sent) == 2:
            raise KeyboardInterrupt
        original(self, rows)

    monkeypatch.setattr(Store, "insert", second_stops)
    code, _, err = history(capsys, "ingest", TORCH, "--store", str(store))
    assert code == 130 and "the store is as it was before it" in err, err
    assert sent == [10, 10]
    monkeypatch.setattr(Store, "insert", original)
    assert tree(store) == before and runs(capsys, store) == before_runs


def _two_runs(tmp_path, capsys) -> Path:
    store = tmp_path / "store"
    assert history(capsys, "ingest", IREE, "--store", str(store))[0] == 0
    return store


@pytest.mark.slow
def test_a_swap_stopped_half_way_is_finished_at_the_next_open(tmp_path, capsys,
                                                              monkeypatch):
    store = _two_runs(tmp_path, capsys)
    renames = []
    real = os.rename

    def crash_after_three(src, dst):
        if len(renames) == 3:
            raise SystemExit("power cut")  # what is left is what a crash leaves
        renames.append(src)
        real(src, dst)

    monkeypatch.setattr(staging.os, "rename", crash_after_three)
    with pytest.raises(SystemExit):
        main(["history", "ingest", TORCH, "--store", str(store)])
    monkeypatch.setattr(staging.os, "rename", real)
    assert (store / layout.STAGING / layout.MARKER).is_file()  # the copy was complete
    assert (store / layout.PREVIOUS).is_dir()
    assert len(runs(capsys, store)) == 2  # the swap finished first, then read
    assert not (store / layout.STAGING).exists() and not (store / layout.PREVIOUS).exists()


@pytest.mark.slow
def test_a_copy_left_incomplete_is_removed_at_the_next_open(tmp_path, capsys, monkeypatch):
    store = _two_runs(tmp_path, capsys)
    before_runs = runs(capsys, store)

    def crash(*_args, **_kwargs):
        raise SystemExit("power cut")

    monkeypatch.setattr(staging.layout, "write_marker", crash)
    with pytest.raises(SystemExit):
        main(["history", "ingest", TORCH, "--store", str(store)])
    monkeypatch.undo()
    before = tree(store)
    os.makedirs(store / layout.STAGING / "store")  # as a kill -9 mid-insert leaves it
    assert runs(capsys, store) == before_runs
    assert not (store / layout.STAGING).exists() and tree(store) == before


@pytest.mark.slow
def test_repair_rebuilds_what_a_full_disk_left_unreadable(tmp_path, capsys):
    """The issue's store: the table's definition at 0 bytes (an older benchflow's ALTER
    on a full disk). Refused with the way out; `history repair` brings every run back
    and keeps the damaged files."""
    store = tmp_path / "store"
    for report in (IREE, TORCH):
        assert history(capsys, "ingest", report, "--store", str(store))[0] == 0
    held = runs(capsys, store)
    (store / layout.TABLE_SQL).write_text("")
    code, out, err = history(capsys, "show", "--store", str(store))
    assert code == 1 and f"benchflow history repair --store {store}" in err, err

    code, out, err = history(capsys, "repair", "--store", str(store))
    assert code == 0, err
    assert f"repaired {store}: 2 run(s), 234 row(s) from the 2 data part(s)" in out, out
    assert runs(capsys, store) == held
    (aside,) = store.glob(layout.SET_ASIDE + "*")
    assert (aside / "store").is_dir() and str(aside) in out
    assert history(capsys, "ingest", TORCH, "--store", str(store))[1].count("already") == 1

    code, out, _ = history(capsys, "repair", "--store", str(store))
    assert code == 0 and "nothing to repair: it opens whole (2 run(s), 234 row(s))" in out


@pytest.mark.slow
def test_repair_leaves_out_a_part_cut_short_and_names_it(tmp_path, capsys):
    store = tmp_path / "store"
    for report in (IREE, TORCH):
        assert history(capsys, "ingest", report, "--store", str(store))[0] == 0
    first = sorted(store.glob("store/*/*/all_1_1_0"))[0]
    os.truncate(first / "data.bin", 50)
    assert history(capsys, "show", "--store", str(store))[0] == 1

    code, out, err = history(capsys, "repair", "--store", str(store))
    assert code == 0 and "1 run(s), 150 row(s)" in out, out + err
    assert f"{first.relative_to(store)}: chdb refused this part" in err, err
    assert len(runs(capsys, store)) == 1
    (aside,) = store.glob(layout.SET_ASIDE + "*")  # the refused part kept there
    assert (aside / first.relative_to(store) / "data.bin").stat().st_size == 50


@pytest.mark.slow
def test_the_ids_held_are_asked_in_statements_chdb_takes(monkeypatch):
    """A report whose 30,000 cases each have their own measured time: the times listed
    in one statement would be past ClickHouse's max_query_size (256 KiB)."""
    statements = []
    store = SimpleNamespace(rows=lambda s: statements.append(s) or [],
                            insert=lambda rows: None, abort=lambda: None)
    rows = [{"benchmark": {"name": "b", "mode": "inference", "dtype": "f32",
                           "extra_info": {"case_id": f"c{i}"}},
             "metric": {"name": sql.LATENCY, "benchmark_values": [1.0]},
             "timestamp": 1_700_000_000 + i} for i in range(30_000)]
    run = SimpleNamespace(run_id="r", source="v3", path="big.json", timestamp=1_700_000_000,
                          meta={}, rows=rows)
    monkeypatch.setattr(ingest, "check_rows", lambda _run: None)  # not what is tested
    ingest.ingest(store, [run], {}, env={})
    assert len(statements) >= 2 and max(map(len, statements)) < 256 * 1024


@pytest.mark.slow
def test_a_repair_stopped_mid_swap_is_finished_and_keeps_the_damaged_files(
        tmp_path, capsys, monkeypatch):
    store = tmp_path / "store"
    for report in (IREE, TORCH):
        assert history(capsys, "ingest", report, "--store", str(store))[0] == 0
    held = runs(capsys, store)
    (store / layout.TABLE_SQL).write_text("")
    renames, real = [], os.rename

    def crash_after_two(src, dst):
        if len(renames) == 2:
            raise SystemExit("power cut")
        renames.append(src)
        real(src, dst)

    monkeypatch.setattr(staging.os, "rename", crash_after_two)
    with pytest.raises(SystemExit):
        main(["history", "repair", "--store", str(store)])
    monkeypatch.setattr(staging.os, "rename", real)
    assert runs(capsys, store) == held  # the next open finished the repair's swap
    (aside,) = store.glob(layout.SET_ASIDE + "*")
    assert (aside / layout.TABLE_SQL).stat().st_size == 0  # the damaged definition, kept
    assert not (store / layout.STAGING).exists() and not (store / layout.PREVIOUS).exists()
