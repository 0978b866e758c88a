"""Goldens: bless (dry and real), golden files, lookup, `check` and the gate rule."""

import json

import jsonschema
import pytest

from workflow.cli.main import main
from workflow.errors import ConfigError
from workflow.records.storage import write_json
from workflow.regression import gate, goldens


def make_case(cid: str, medians, *, status="ok", dispatch=2, size=10_000, noisy=False,
              golden=None, provenance=None, **fields) -> dict:
    """A case record valid against report.schema.json (the report reader checks it)."""
    sku, backend, workload = (cid.split("/") + ["", ""])[:3]
    ok = status == "ok"
    median = sorted(medians)[len(medians) // 2]
    return {
        "id": cid, "model": workload.split("-", 1)[0] or "m", "workload": workload or "m",
        "config": "default",
        "dtype": "f32", "shape": [1, 4], "sku": sku, "backend": backend or "iree",
        "recipe": "baseline", "mode": "inference", "device": "cpu",
        "status": status, "stage": None if ok else "compile", "error": None if ok else "boom",
        "compile": {"seconds": 0.5, "dispatch_count": dispatch, "binary_bytes": size,
                    "flags": []} if ok else None,
        "timing": {"median_ms": median, "min_ms": min(medians), "p90_ms": max(medians),
                   "cv": 0.02, "ci95_ms": [min(medians), max(medians)],
                   "invocations": len(medians), "repetitions": 10,
                   "invocation_medians_ms": list(medians), "first_run_ms": None,
                   "noisy": noisy}
        if ok else None,
        "throughput": None, "memory": None, "accuracy": None, "graph": None,
        "golden": {"value_ms": None, "tolerance": None, "ratio": None, "p_value": None,
                   **(golden or {"verdict": "no-golden", "dispatch_verdict": "no-golden",
                                 "size_verdict": "no-golden"})},
        "provenance": provenance or {}, "speedup": {},
        **fields,
    }


def make_report(*cases, sha="abc123") -> dict:
    """A report valid against report.schema.json."""
    return {"schema_version": "1.0", "generated_at": "2026-01-02T03:04:05+00:00",
            "provenance": {"git_sha": sha, "config_hash": "c0ffee",
                           "host": {"name": "ci-box", "cpu_model": "x", "cores": 2,
                                    "memory_bytes": 1 << 30},
                           "versions": {"iree-base-compiler": "3.13.0"},
                           "started_at": None, "finished_at": "2026-01-02T03:04:05+00:00"},
            "cases": list(cases)}


BASE = (1.00, 1.01, 0.99, 1.02, 0.98)


@pytest.fixture
def report_file(tmp_path):
    report = make_report(
        make_case("host/iree/a-f32/baseline", BASE, size=10_001),
        make_case("host/iree/b-f32/baseline", [2 * x for x in BASE]),
        make_case("generic/iree/a-f32/baseline", [3 * x for x in BASE]),
        make_case("host/iree/broken-f32/baseline", BASE, status="failed"),
    )
    path = tmp_path / "report.json"
    write_json(path, report)
    return path


def test_bless_without_yes_prints_and_writes_nothing(report_file, tmp_path, capsys):
    gdir = tmp_path / "goldens"
    assert main(["bless", "--report", str(report_file), "--goldens", str(gdir)]) == 0
    out = capsys.readouterr().out
    assert "+ host/iree/a-f32/baseline" in out and "+ generic/iree/a-f32/baseline" in out
    assert "size 10240 B (10001 B rounded up to 1024)" in out
    assert "host/iree/broken-f32/baseline: not blessed (status failed at compile)" in out
    assert "dry run: nothing written" in out
    assert not gdir.exists()


def test_bless_yes_writes_one_valid_file_per_sku(report_file, tmp_path, capsys):
    gdir = tmp_path / "goldens"
    assert main(["bless", "--report", str(report_file), "--goldens", str(gdir), "--yes",
                 "--size-granularity", "4096"]) == 0
    assert sorted(p.name for p in gdir.iterdir()) == ["generic.json", "host.json"]
    host = json.loads((gdir / "host.json").read_text())
    jsonschema.Draft202012Validator(goldens.goldens_schema()).validate(host)
    assert host["sku"] == "host" and list(host["cases"]) == ["host/iree/a-f32/baseline",
                                                             "host/iree/b-f32/baseline"]
    e = host["cases"]["host/iree/a-f32/baseline"]
    assert e["invocation_medians_ms"] == list(BASE) and e["median_ms"] == 1.00
    assert (e["binary_bytes"], e["binary_bytes_measured"], e["size_granularity"]) == (
        12288, 10_001, 4096)
    assert e["dispatch_count"] == 2 and e["cv"] == 0.02
    assert e["git_sha"] == "abc123" and e["taken_at"] == "2026-01-02T03:04:05+00:00"
    assert e["host"] == "ci-box" and e["report"] == str(report_file)


def test_bless_filters_by_sku_and_case_glob_and_updates(report_file, tmp_path, capsys):
    gdir = tmp_path / "goldens"
    assert main(["bless", "--report", str(report_file), "--goldens", str(gdir), "--yes",
                 "--sku", "host", "--cases", "*/a-*"]) == 0
    assert [p.name for p in gdir.iterdir()] == ["host.json"]
    assert list(json.loads((gdir / "host.json").read_text())["cases"]) == [
        "host/iree/a-f32/baseline"]
    capsys.readouterr()
    newer = make_report(make_case("host/iree/a-f32/baseline", [1.1 * x for x in BASE]))
    write_json(report_file, newer)
    assert main(["bless", "--report", str(report_file), "--goldens", str(gdir)]) == 0
    assert "~ host/iree/a-f32/baseline" in capsys.readouterr().out
    assert goldens.read(gdir / "host.json")["cases"]["host/iree/a-f32/baseline"][
        "median_ms"] == 1.00  # the dry run kept the old golden
    assert main(["bless", "--report", str(report_file), "--goldens", str(gdir),
                 "--cases", "nothing*"]) == 1


def test_bless_pools_the_invocations_of_several_runs(report_file, tmp_path, capsys):
    second = tmp_path / "second.json"
    write_json(second, make_report(make_case("host/iree/a-f32/baseline", [1.2 * x for x in BASE],
                                             size=11_000)))
    gdir = tmp_path / "goldens"
    assert main(["bless", "--report", str(report_file), str(second), "--goldens", str(gdir),
                 "--yes"]) == 0
    assert "(cv 9.7%, 10 invocations of 2 run(s))" in capsys.readouterr().out
    e = goldens.read(gdir / "host.json")["cases"]["host/iree/a-f32/baseline"]
    assert e["invocation_medians_ms"] == list(BASE) + [1.2 * x for x in BASE]
    assert e["median_ms"] == pytest.approx((1.02 + 1.2 * 0.98) / 2) and e["runs"] == 2
    # Sizes and dispatches are the newest run's; a case only in the newest is one run.
    assert e["binary_bytes_measured"] == 11_000 and e["report"] == str(second)
    assert list(goldens.read(gdir / "host.json")["cases"]) == ["host/iree/a-f32/baseline"]


def test_golden_file_problems_name_file_and_key(tmp_path, capsys):
    path = tmp_path / "host.json"
    data = goldens.empty("host")
    data["cases"]["generic/iree/a/baseline"] = {"median_ms": -1}
    write_json(path, data)
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}: cases.generic/iree/a/baseline: 'invocation_medians_ms' is a required " \
           "property" in err
    assert f"{path}: cases.generic/iree/a/baseline.median_ms: expected exclusiveMinimum" in err
    data["cases"] = {"generic/iree/a/baseline": goldens.entry_from_case(
        make_case("generic/iree/a/baseline", BASE), make_report(), "r.json", 1024, "now")}
    write_json(path, data)
    assert main(["validate", str(path)]) == 1
    assert "expected a case of SKU 'host'" in capsys.readouterr().err
    assert goldens.check_dir(tmp_path, ["host", "other"]) != []
    with pytest.raises(ConfigError):
        goldens.read(path)


def test_lookup_prefers_the_golden_file_and_keeps_the_files_tolerance(tmp_path):
    path = tmp_path / "host.json"
    data = goldens.empty("host")
    data["cases"]["host/iree/m.x_cpu/baseline"] = goldens.entry_from_case(
        make_case("host/iree/m.x_cpu/baseline", BASE), make_report(), "r.json", 1024, "now")
    write_json(path, data)
    file_goldens = {"median_ms": 5.0, "tolerance": 1.3, "dispatch_count": 7}
    ref = goldens.lookup("host/iree/m.x_cpu/baseline", path, file_goldens, "x_cpu.json")
    assert ref.source == str(path) and ref.invocation_medians_ms == BASE
    assert ref.tolerance == 1.3 and ref.dispatch_count == 2
    ref = goldens.lookup("host/iree/m.y_cpu/baseline", path, file_goldens, "y_cpu.json")
    assert ref.source == "y_cpu.json" and ref.median_ms == 5.0
    assert ref.invocation_medians_ms is None
    assert goldens.lookup("host/iree/z/baseline", tmp_path / "none.json") is None


def test_bless_benchmark_files_records_the_files_goldens(tmp_path, capsys):
    bench = tmp_path / "m" / "x_cpu.json"
    bench.parent.mkdir()
    bench.write_text(json.dumps({"inputs": [], "function_run": "f", "device": "local-task",
                                 "benchmark_repetitions": 3, "benchmark_min_warmup_time": 0,
                                 "golden_time_ms": {"mi300": 9.0}}))
    report = tmp_path / "report.json"
    write_json(report, make_report(make_case(
        "host/iree/m.x_cpu/baseline", BASE, size=5000,
        provenance={"benchmark_file": str(bench), "golden_key": "cpu"})))
    args = ["bless", "--report", str(report), "--goldens", str(tmp_path / "g"),
            "--benchmark-files"]
    assert main(args) == 0
    assert "golden_size[cpu] None -> 5120" in capsys.readouterr().out
    assert "cpu" not in json.loads(bench.read_text())["golden_time_ms"]
    assert main([*args, "--yes"]) == 0
    data = json.loads(bench.read_text())
    assert data["golden_time_ms"] == {"mi300": 9.0, "cpu": 1.0}
    assert data["golden_dispatch"] == {"cpu": 2} and data["golden_size"] == {"cpu": 5120}
    assert main(["validate", str(bench)]) == 0


def test_blessing_a_benchmark_file_replaces_it_whole_or_not_at_all(tmp_path, monkeypatch):
    """The user's file is written beside itself and renamed over (records.storage): a
    write that fails leaves it as it was; a file that is a link is updated where it
    points, the link kept."""
    import os

    from workflow.records.storage import WriteError

    target = tmp_path / "checkout" / "x_cpu.json"
    target.parent.mkdir()
    before = json.dumps({"inputs": [], "function_run": "f", "device": "local-task"}, indent=2)
    target.write_text(before)
    link = tmp_path / "m" / "x_cpu.json"
    link.parent.mkdir()
    link.symlink_to(target)
    report = make_report(make_case("host/iree/m.x_cpu/baseline", BASE, size=5000,
                                   provenance={"benchmark_file": str(link), "golden_key": "cpu"}))

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(os, "replace", refuse)
        with pytest.raises(WriteError, match="No space left on device"):
            goldens.bless_benchmark_files(report, 1024, write=True)
    assert target.read_text() == before and list(target.parent.iterdir()) == [target]
    goldens.bless_benchmark_files(report, 1024, write=True)
    assert link.is_symlink() and json.loads(link.read_text())["golden_size"] == {"cpu": 5120}


# --- check and the gate -----------------------------------------------------------------

REGRESSED = {"verdict": "regression", "ratio": 1.5, "p_value": 0.004, "tolerance": 1.1,
             "dispatch_verdict": "pass", "size_verdict": "regression", "size_ratio": 1.2,
             "size_golden_bytes": 1000, "size_tolerance": 1.05}
PASSED = {"verdict": "pass", "ratio": 1.0, "p_value": 0.5, "tolerance": 1.1,
          "dispatch_verdict": "pass", "size_verdict": "pass"}


def test_check_exits_1_naming_every_regressed_case(tmp_path, capsys):
    path = tmp_path / "r.json"
    write_json(path, make_report(make_case("host/iree/a/baseline", BASE, golden=REGRESSED),
                                 make_case("host/iree/b/baseline", BASE, golden=PASSED),
                                 make_case("host/iree/c/baseline", BASE,
                                           golden={**PASSED, "dispatch_verdict": "regression",
                                                   "dispatch_ratio": 2.0,
                                                   "dispatch_golden": 1})))
    assert main(["check", "--report", str(path)]) == 1
    out = capsys.readouterr().out
    assert "REGRESSED host/iree/a/baseline: time, size regressed (time x1.500 vs tolerance " \
           "x1.1, p=0.0040; size x1.200 of 1000 B (tolerance x1.05))" in out
    assert "REGRESSED host/iree/c/baseline: dispatch regressed" in out
    assert "host/iree/b/baseline" not in out and "FAIL: 2 of 3" in out
    write_json(path, make_report(make_case("host/iree/b/baseline", BASE, golden=PASSED)))
    assert main(["check", "--report", str(path)]) == 0


def test_check_against_a_goldens_directory_judges_afresh(tmp_path, capsys):
    report = tmp_path / "r.json"
    write_json(report, make_report(make_case("host/iree/a/baseline", BASE),
                                   make_case("host/iree/b/baseline", BASE)))
    gdir = tmp_path / "goldens"
    # A goldens directory that does not exist is bad input (exit 2), not "0 regressed"
    # (issue 20); an empty one judges nothing, and a gate that judged nothing could not
    # judge (exit 3), unless inconclusive and no-golden cases are allowed.
    assert main(["check", "--report", str(report), "--goldens", str(gdir)]) == 2
    assert f"{gdir}: no such directory: --goldens takes" in capsys.readouterr().err
    gdir.mkdir()
    assert main(["check", "--report", str(report), "--goldens", str(gdir)]) == 3
    out = capsys.readouterr().out
    assert "COULD NOT JUDGE host/iree/a/baseline: no golden" in out
    assert "no case of the report was judged" in out and "COULD NOT JUDGE: 0 of 2" in out
    assert main(["check", "--report", str(report), "--goldens", str(gdir),
                 "--allow-inconclusive"]) == 0
    assert "NOT JUDGED host/iree/b/baseline: no golden" in capsys.readouterr().out
    assert main(["bless", "--report", str(report), "--goldens", str(gdir), "--yes"]) == 0
    slower = make_report(make_case("host/iree/a/baseline", [1.5 * x for x in BASE], dispatch=3),
                         make_case("host/iree/b/baseline", [1.01 * x for x in BASE]))
    write_json(report, slower)
    capsys.readouterr()
    assert main(["check", "--report", str(report), "--goldens", str(gdir)]) == 1
    out = capsys.readouterr().out
    assert "REGRESSED host/iree/a/baseline: time, dispatch regressed" in out
    assert "host/iree/b/baseline" not in out
    assert main(["check", "--report", str(report), "--goldens", str(gdir),
                 "--tolerance", "2.0"]) == 1  # the dispatch increase still regresses


def test_gate_rule_writes_its_json_only_when_nothing_regressed(tmp_path):
    report, out, log = tmp_path / "r.json", tmp_path / "gate.json", tmp_path / "gate.log"
    write_json(report, make_report(make_case("host/iree/b/baseline", BASE, golden=PASSED)))
    result = gate.run_gate(str(report), str(out), str(log))
    assert result["passed"] and json.loads(out.read_text())["time_verdicts"] == {"pass": 1}
    out.unlink()
    write_json(report, make_report(make_case("host/iree/a/baseline", BASE, golden=REGRESSED)))
    with pytest.raises(gate.GateFailed, match="host/iree/a/baseline: time, size regressed"):
        gate.run_gate(str(report), str(out), str(log))
    assert not out.exists()
    assert json.loads(log.read_text())["regressed"][0]["id"] == "host/iree/a/baseline"


def test_golden_section_is_a_complete_record_golden(tmp_path):
    from workflow.records.report import report_schema

    names = set(report_schema()["$defs"]["case"]["properties"]["golden"]["properties"])
    section = gate.golden_section(make_case("host/iree/a/baseline", BASE), [], None)
    assert set(section) == names and section["verdict"] == "no-golden"
    report = tmp_path / "r.json"
    write_json(report, make_report(make_case("host/iree/a/baseline", BASE)))
    assert main(["bless", "--report", str(report), "--goldens", str(tmp_path), "--yes"]) == 0
    section = gate.golden_section(make_case("host/iree/a/baseline", [2 * x for x in BASE]),
                                  [str(tmp_path / "host.json")], {"tolerance": 1.5})
    assert set(section) == names and section["verdict"] == "regression"
    assert section["tolerance"] == 1.5 and section["ratio"] == 2.0


def test_check_with_the_suite_finds_its_goldens(tmp_path, monkeypatch, capsys):
    """`check --configfile SUITE` judges against the suite's goldens.dir (relative to the
    working directory, as a run reads it), as `--goldens` that directory would."""
    from tests.conftest import tiny_suite, write_suite

    monkeypatch.chdir(tmp_path)
    suite = write_suite(tmp_path / "s.yaml", tiny_suite(goldens={"dir": "mine"}))
    report = tmp_path / "r.json"
    write_json(report, make_report(make_case("host/iree/a/baseline", BASE)))
    argv = ["check", "--report", str(report), "--configfile", str(suite),
            "--remeasure-budget", "0"]
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith(
        f"mine: no such directory (from {tmp_path}): goldens.dir of {suite} takes")
    assert main(["bless", "--report", str(report), "--goldens", "mine", "--yes"]) == 0
    write_json(report, make_report(make_case("host/iree/a/baseline", [1.5 * x for x in BASE])))
    capsys.readouterr()
    assert main(argv) == 1
    assert "REGRESSED host/iree/a/baseline: time regressed" in capsys.readouterr().out


def test_bless_says_n_a_for_a_count_the_case_has_none_of(tmp_path, capsys):
    """A torch case has no IREE dispatches nor module size: bless prints n/a for them,
    on the new line and the updated one, never Python's None."""
    report = tmp_path / "r.json"
    torch = "host/torch-eager/lin/baseline"
    write_json(report, make_report(make_case(torch, BASE, dispatch=None, size=None)))
    gdir = tmp_path / "g"
    assert main(["bless", "--report", str(report), "--goldens", str(gdir), "--yes"]) == 0
    out = capsys.readouterr().out
    assert "dispatch n/a, size n/a" in out and "None" not in out
    assert main(["bless", "--report", str(report), "--goldens", str(gdir), "--yes"]) == 0
    out = capsys.readouterr().out
    assert "dispatch n/a -> n/a, size n/a -> n/a" in out and "None" not in out
