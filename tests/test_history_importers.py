"""history/importers: each importer on real upstream files (tests/data/upstream/history,
see its SOURCES.md) and on benchflow's own reports; kinds told by content; run ids
stable; bad files one line naming the file."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from workflow.errors import ConfigError
from workflow.history.importers import read_runs
from workflow.history.importers.run import run_id_of
from workflow.records.results_file import forge_entry
from workflow.render import dashboard

DATA = Path(__file__).parent / "data"
UP = DATA / "upstream" / "history"
T = 1_700_000_000


def _one(path, **kw):
    runs = read_runs(path, **kw)
    assert len(runs) == 1
    return runs[0]


def _ids(run):
    return sorted({r["benchmark"]["extra_info"]["case_id"] for r in run.rows})


# --- benchflow reports ------------------------------------------------------------------

@pytest.mark.parametrize("name,rows,cases", [("report_iree.json", 84, 14),
                                             ("report_torch.json", 150, 30)])
def test_a_1_0_report_imports_as_its_dashboard_records(name, rows, cases):
    report = json.loads((DATA / name).read_text())
    run = _one(DATA / name)
    assert run.source == "benchflow-report"
    from datetime import datetime

    def unix(iso):
        return int(datetime.fromisoformat(iso).timestamp())

    # The dashboard's records, each with its case's measured time (its own timestamp).
    assert [{k: v for k, v in r.items() if k != "timestamp"} for r in run.rows] \
        == dashboard.records(report)
    measured = {c["id"]: unix((c.get("timing") or {}).get("measured_at")
                              or c["provenance"].get("started_at")
                              or report["provenance"]["started_at"])
                for c in report["cases"]}
    assert [r["timestamp"] for r in run.rows] \
        == [measured[r["benchmark"]["extra_info"]["case_id"]] for r in run.rows]
    assert len(run.rows) == rows
    assert len(_ids(run)) <= cases
    assert run.timestamp == unix(report["provenance"]["started_at"])
    assert run.meta == {"name": "benchflow"}  # git_sha null in these reports


def test_the_first_1_0_reports_without_device_and_speedup_import(tmp_path):
    """benchflow 2f2f101's records had neither field; the schema's defaults fill them."""
    report = json.loads((DATA / "report_iree.json").read_text())
    for case in report["cases"]:
        del case["device"], case["speedup"]
    report["provenance"]["git_sha"] = "0123abc"
    path = tmp_path / "old.json"
    path.write_text(json.dumps(report))
    run = _one(path)
    assert run.meta["head_sha"] == "0123abc"
    assert {r["benchmark"]["extra_info"]["device"] for r in run.rows} == {"cpu"}
    assert len(run.rows) == 84


def test_a_results_file_gives_one_run_per_record(tmp_path):
    report = json.loads((DATA / "report_torch.json").read_text())
    ok = [c for c in report["cases"] if c["status"] == "ok"][:2]
    path = tmp_path / "out.json"
    path.write_text(json.dumps({"schema_version": "1.2", "kind": "benchflow-results",
                                "cases": ok}))
    runs = read_runs(path)
    assert [_ids(r) for r in runs] == [[ok[0]["id"]], [ok[1]["id"]]]
    assert runs[0].rows[0]["runners"][0]["extra_info"]["hostname"] == "vm"


# --- Forge -------------------------------------------------------------------------------

def test_tt_forge_fe_perf_report_upstream():
    path = UP / "tt-forge-fe" / "perf_report.json"
    with pytest.raises(ConfigError, match=r"perf_report\.json: .*no date.*--timestamp"):
        read_runs(path)
    run = _one(path, timestamp=T)
    assert run.source == "forge" and run.timestamp == T
    by = {r["metric"]["name"]: r["metric"]["benchmark_values"][0] for r in run.rows}
    # 1024 samples in 0.13095426559448242 s, batches of 32.
    assert by["throughput (samples/s)"] == pytest.approx(1024 / 0.13095426559448242)
    assert by["time per batch (ms)"] == pytest.approx(1e3 * 0.13095426559448242 / 32)
    assert _ids(run) == ["forge/MNIST_Linear/small/inference/f32/32/784/2/-/1"]
    dashboard.validate(run.rows)


def _forge_list(tmp_path):
    """Format (a). No upstream file of it is published (tt-buda and tt-forge-fe write it
    to a user's -o path, never into the repositories): one entry written by benchflow's
    results_file.forge_entry without its "benchflow" record, two hand-written as
    tt-buda's benchmark.py writes them (a success and its error entry)."""
    record = next(c for c in json.loads((DATA / "report_iree.json").read_text())["cases"]
                  if c["status"] == "ok")
    ours = forge_entry(record, output="perf.json", git_hash="abc1234", date="25-01-02")
    del ours["benchflow"]
    args = {"model": "bert", "config": "tiny", "training": False, "dataformat": "Fp16_b",
            "math_fidelity": "HiFi3", "loop_count": 32, "microbatch": 64, "chips": 1,
            "layers": 0}
    hand = [{"total_time": 2.0, "total_samples": 2048, "samples_per_sec": 1024.0,
             "args": args, "arch": "BackendDevice.Wormhole_B0", "machine_name": "tt-host",
             "hash": "1a2b3c4", "date": "24-05-17"},
            {"args": args, "samples_per_sec": 0.0, "error": "No tenstorrent devices found.",
             "machine_name": "tt-host", "hash": "1a2b3c4", "date": "24-05-18"}]
    path = tmp_path / "perf.json"
    path.write_text(json.dumps([ours, *hand]))
    return path, record


def test_forge_legacy_list_each_entry_its_own_run(tmp_path):
    path, record = _forge_list(tmp_path)
    runs = read_runs(path)
    assert [r.source for r in runs] == ["forge"] * 3
    ours, hand, failed = runs
    assert ours.meta["head_sha"] == "abc1234" and ours.timestamp == 1735776000  # 2025-01-02
    by = {r["metric"]["name"]: r["metric"]["benchmark_values"][0] for r in ours.rows}
    # forge_entry wrote calls x the median call: the time per batch gives the median back.
    assert by["time per batch (ms)"] == pytest.approx(record["timing"]["median_ms"])
    by = {r["metric"]["name"]: r["metric"]["benchmark_values"][0] for r in hand.rows}
    assert by == {"throughput (samples/s)": 1024.0, "time per batch (ms)": 62.5}
    assert _ids(hand) == ["forge/bert/tiny/inference/Fp16_b/HiFi3/64/0/1/"
                          "BackendDevice.Wormhole_B0"]
    assert failed.rows == [] and "No tenstorrent devices found." in failed.skipped[0]
    dashboard.validate(ours.rows + hand.rows)


def test_a_forge_list_of_benchflow_records_imports_them_as_reports(tmp_path):
    record = next(c for c in json.loads((DATA / "report_iree.json").read_text())["cases"]
                  if c["status"] == "ok")
    path = tmp_path / "perf.json"
    path.write_text(json.dumps([forge_entry(record, git_hash="abc", date="25-01-02")]))
    (run,) = read_runs(path)
    assert run.source == "benchflow-report" and _ids(run) == [record["id"]]


# --- torchao CSV -------------------------------------------------------------------------

def test_torchao_results_csv_upstream():
    path = UP / "torchao" / "results.csv"
    run = _one(path, timestamp=T)
    assert run.source == "torchao-csv" and len(run.rows) == 10  # 13 lines, 3 repeated
    by = {r["benchmark"]["extra_info"]["case_id"]: r["metric"] for r in run.rows}
    # torchao wrote µs in model_inference_time_in_ms before #2151: 47.87 µs = 0.04787 ms.
    base = by["torchao/small_bf16_linear/baseline/1024x1024x1024/cuda/max-autotune"]
    assert base["name"] == "latency mean (ms)"
    assert base["benchmark_values"] == [pytest.approx(0.047870889538899064)]
    int4 = by["torchao/small_bf16_linear/int4wo-32/1024x1024x1024/cuda/max-autotune"]
    assert int4["benchmark_values"] == pytest.approx([0.09279820020310581,
                                                      0.09279379970394075])
    assert "torchao/cpu_fp32_linear/baseline/4096x4096x1024/cpu/eager" in by
    dashboard.validate(run.rows)


def test_torchao_csv_later_columns_in_ms_and_two_cases_a_line(tmp_path):
    head = ("name,quantization,sparsity,m,k,n,high_precision_dtype,torch_compile_mode,"
            "device,model_type,output_dir,enable_profiler,enable_memory_profiler,"
            "baseline_model_eager_inference_time_in_ms,quantized_model_eager_inference_"
            "time_in_ms,baseline_model_compiled_inference_time_in_ms,quantized_model_"
            "compiled_inference_time_in_ms,eager speedup on baseline,compile speedup on "
            "baseline,eager vs compile speedup,profiler_json_path,memory_profile_path,"
            "memory_visualization_path,memory_stats,timestamp\n")
    line = ("lin,int8wo,None,16,32,64,torch.bfloat16,max-autotune,cuda,linear,"
            "out/inference,False,False,2.0,1.0,1.0,0.5,2.0,2.0,2.0,,,,,2025-08-12T00:00:00\n")
    path = tmp_path / "later.csv"
    path.write_text(head + line)
    run = _one(path)
    assert run.timestamp == 1754956800
    got = {(r["benchmark"]["extra_info"]["case_id"], r["metric"]["name"]):
           r["metric"]["benchmark_values"] for r in run.rows}
    assert got == {
        ("torchao/lin/int8wo/16x32x64/cuda/eager", "latency mean (ms)"): [1.0],
        ("torchao/lin/int8wo/16x32x64/cuda/eager", "speedup vs baseline (x)"): [2.0],
        ("torchao/lin/int8wo/16x32x64/cuda/max-autotune", "latency mean (ms)"): [0.5],
        ("torchao/lin/int8wo/16x32x64/cuda/max-autotune", "speedup vs baseline (x)"): [2.0],
        ("torchao/lin/int8wo/16x32x64/cuda/max-autotune", "speedup vs eager (x)"): [2.0]}
    dashboard.validate(run.rows)


def test_a_torchao_csv_without_a_time_needs_one(tmp_path):
    path = tmp_path / "results.csv"
    shutil.copy(UP / "torchao" / "results.csv", path)
    with pytest.raises(ConfigError) as exc:
        read_runs(path)
    assert str(exc.value).count("\n") == 0
    assert str(exc.value).startswith(f"{path}: ") and "--timestamp" in str(exc.value)


# --- v3 ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name,runs,rows", [
    ("add_loop_eager.json", 1, 1), ("add_loop_eager_dynamic.json", 1, 1),
    ("add_loop_inductor_dynamic_gpu.json", 1, 1), ("do_not_overwrite_runners_info.json", 1, 1),
    ("json-each-row.json", 1, 3), ("mock.json", 0, 0)])
def test_v3_upstream_files(name, runs, rows):
    got = read_runs(UP / "test-infra-v3" / name, timestamp=T)
    assert len(got) == runs and sum(len(r.rows) for r in got) == rows
    for run in got:
        assert run.source == "v3"
        dashboard.validate(run.rows)


def test_v3_values_and_derived_case_ids():
    (run,) = read_runs(UP / "test-infra-v3" / "json-each-row.json", timestamp=T)
    assert [r["metric"]["benchmark_values"] for r in run.rows] == [
        [3086359081.0], [5712213247.0], [40859830085.0]]
    assert _ids(run) == ["v3/pr_time_benchmarks/add_loop_eager/eager/-/cpu/-",
                         "v3/pr_time_benchmarks/add_loop_eager_dynamic/eager/-/cpu/-",
                         "v3/pr_time_benchmarks/add_loop_inductor_dynamic_gpu/inductor/-/"
                         "cuda/-"]
    assert run.rows[0]["benchmark"]["extra_info"]["is_dynamic"] == "false"
    (phone,) = read_runs(UP / "test-infra-v3" / "do_not_overwrite_runners_info.json",
                         timestamp=T)
    row = phone.rows[0]
    assert row["runners"][0]["name"] == "Apple iPhone 15"
    assert row["runners"][0]["extra_info"] == {"total_mem_in_gb": "0"}
    assert row["metric"]["extra_info"]["unit"] == "mb"


def test_v3_rows_grouped_by_their_metadata(tmp_path):
    base = json.loads((UP / "test-infra-v3" / "add_loop_eager.json").read_text())[0]
    rows = [{**base, "timestamp": 100, "head_sha": "a", "workflow_id": 7},
            {**base, "timestamp": 100, "head_sha": "a", "workflow_id": 7},
            {**base, "timestamp": 200, "head_sha": "b", "workflow_id": 8}]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    runs = read_runs(path)
    assert [(r.timestamp, r.meta.get("head_sha"), len(r.rows)) for r in runs] == [
        (100, "a", 2), (200, "b", 1)]
    assert runs[0].meta["workflow_id"] == "7"


def test_benchflow_dashboard_json_keeps_its_case_ids(tmp_path):
    report = json.loads((DATA / "report_iree.json").read_text())
    records = dashboard.records(report)
    path = tmp_path / "dashboard.json"
    path.write_text(json.dumps(records))
    (run,) = read_runs(path, timestamp=T)
    assert run.source == "v3"
    assert [r["benchmark"]["extra_info"]["case_id"] for r in run.rows] == \
        [r["benchmark"]["extra_info"]["case_id"] for r in records]


# --- identity and detection --------------------------------------------------------------

@pytest.mark.parametrize("src", ["tt-forge-fe/perf_report.json", "torchao/results.csv",
                                 "test-infra-v3/json-each-row.json"])
def test_kind_is_told_by_content_not_name(tmp_path, src):
    renamed = tmp_path / "whatever.txt"
    shutil.copy(UP / src, renamed)
    assert [r.run_id for r in read_runs(renamed, timestamp=T)] == \
        [r.run_id for r in read_runs(UP / src, timestamp=T)]


def test_run_id_stable_and_content_bound(tmp_path):
    first = _one(DATA / "report_iree.json").run_id
    assert first == _one(DATA / "report_iree.json").run_id
    assert len(first) == 16 and int(first, 16) >= 0
    report = json.loads((DATA / "report_iree.json").read_text())
    case = next(c for c in report["cases"] if c["status"] == "ok")
    case["timing"]["invocation_medians_ms"][0] += 1.0
    path = tmp_path / "changed.json"
    path.write_text(json.dumps(report))
    assert _one(path).run_id != first
    csv = UP / "torchao" / "results.csv"
    assert _one(csv, timestamp=T).run_id != _one(csv, timestamp=T + 1).run_id
    assert run_id_of([], 1) != run_id_of([], 2)


@pytest.mark.parametrize("content,fragment", [
    (b"\x00\x01garbage", "neither JSON, JSONEachRow nor a CSV"),
    (b'{"a": 1,', "not valid JSON"),
    (b'{"hello": "world"}', "JSON of no known kind (an object with keys ['hello'])"),
    (b"[1, 2]", "JSON of no known kind"),
    (b"", "empty file"),
    (b"name,quantization,m,k,n,device\nx,baseline,1,1,1,cpu\n", "header: no latency column"),
])
def test_bad_files_are_one_line_naming_the_file(tmp_path, content, fragment):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as exc:
        read_runs(path, timestamp=T)
    message = str(exc.value)
    assert "\n" not in message and message.startswith(f"{path}: ")
    assert fragment in message and "expected" in message


def test_a_fifo_is_refused_unread(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match=r"pipe\.json: is a FIFO .*not a regular file"):
        read_runs(fifo)
