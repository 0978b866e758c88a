"""`benchflow run` (Forge's benchmark.py) and `benchflow list` / `--list`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, tiny_suite, write_suite
from workflow.cli.main import build_parser, main
from workflow.cli.run import parse_dtype, summary_line
from workflow.commands.single_run import plan_run
from workflow.errors import ConfigError


def run_args(*argv: str):
    return build_parser().parse_args(["run", *argv])


@pytest.fixture
def suite_file(tmp_path) -> Path:
    return write_suite(tmp_path / "suite.yaml", tiny_suite())


@pytest.mark.parametrize("name,dtype", [("Fp32", "f32"), ("Fp16", "f16"), ("Fp16_b", "bf16"),
                                        ("f32", "f32"), ("f16", "f16"), ("bf16", "bf16")])
def test_forge_and_own_dtype_names(name, dtype):
    assert parse_dtype(name) == dtype
    assert run_args("-m", "linear", "-df", name).dtype == dtype


def test_forge_block_formats_are_refused_with_the_reason(capsys):
    with pytest.raises(SystemExit):
        run_args("-m", "linear", "-df", "Bfp8_b")
    assert "block-float format" in capsys.readouterr().err


def test_plan_is_a_one_case_suite_from_the_options(suite_file):
    plan = plan_run(run_args("-m", "bert", "-c", "tiny", "--layers", "1", "--shape", "1,16",
                             "-df", "Fp16_b", "--sku", "generic", "--loop-count", "7",
                             "--configfile", str(suite_file)))
    case = plan.case
    # 7 repetitions is not the SKU's 3: another measurement, so a SKU of its own.
    assert case.id == "generic-loop7/iree/bert-tiny-L1-1x16-bf16/baseline"
    assert plan.suite["skus"]["generic-loop7"]["measurement"]["repetitions"] == 7
    # The SKU is the suite's own otherwise: the local-sync device of `generic`.
    assert plan.suite["skus"]["generic-loop7"]["iree"]["device"] == "local-sync"
    assert list(plan.suite["skus"]) == ["generic-loop7"]
    assert plan.workdir == Path(
        "results/cli/generic-loop7+iree+bert-tiny-L1-1x16-bf16+baseline")


@pytest.mark.parametrize("model,config,layers", [
    ("bert", "tiny", 2), ("bert", "base", 12), ("bert", "large", 24), ("gpt2", "tiny", 2),
    ("gpt2", "small", 12), ("llama", "tiny", 2), ("mlp", None, 2),
    ("transformer_block", "small", 1)])
def test_layers_of_the_configs_own_depth_are_the_plain_case(suite_file, model, config, layers):
    opts = ["-m", model, "--configfile", str(suite_file)] + (["-c", config] if config else [])
    plain = plan_run(run_args(*opts))
    same = plan_run(run_args(*opts, "--layers", str(layers)))
    # The same case, suite and work directory: nothing to rerun, nothing to tell apart.
    assert same.case.id == plain.case.id and "-L" not in plain.case.id
    assert same.suite == plain.suite and same.workdir == plain.workdir
    assert same.case.workload == plain.case.workload
    other = plan_run(run_args(*opts, "--layers", str(layers + 1)))
    assert f"-L{layers + 1}-" in other.case.id and other.case.workload.layers == layers + 1


def test_a_suite_workload_with_the_configs_own_depth_is_the_plain_one(tmp_path):
    from workflow.suite.load import load

    suite = load([write_suite(tmp_path / "s.yaml", tiny_suite(workloads=[
        {"model": "bert", "configs": ["tiny", "base"], "layers": 2, "shapes": [[1, 8]]}]))])
    assert sorted(suite.workloads) == ["bert-base-L2-1x8-f32", "bert-tiny-1x8-f32"]
    assert suite.workloads["bert-tiny-1x8-f32"].layers is None


def test_loop_count_is_a_sku_of_its_own_unless_it_is_the_skus(suite_file):
    opts = ["-m", "linear", "--sku", "host", "--configfile", str(suite_file)]
    plain = plan_run(run_args(*opts))
    # The SKU's own repetitions (3): the plain case, the same suite.
    same = plan_run(run_args(*opts, "--loop_count", "3"))
    assert same.case.id == plain.case.id == "host/iree/linear-128x256x256-f32/baseline"
    assert same.suite == plain.suite and same.workdir == plain.workdir
    other = plan_run(run_args(*opts, "--loop_count", "5"))
    assert other.case.id == "host-loop5/iree/linear-128x256x256-f32/baseline"
    assert other.workdir != plain.workdir
    assert other.suite["skus"]["host-loop5"]["measurement"] == {
        **plain.suite["skus"]["host"]["measurement"], "repetitions": 5}
    # Torch backends do not use repetitions: refused rather than silently ignored.
    with pytest.raises(ConfigError, match="--loop_count: sets the repetitions"):
        plan_run(run_args(*opts, "-b", "torch-eager", "--loop_count", "5"))


def test_plan_defaults_take_the_default_suites_first_sku():
    plan = plan_run(run_args("-m", "mnist"))
    assert plan.case.id == "cpu-host/iree/mnist-1-f32/baseline"
    assert plan.suite["skus"]["cpu-host"]["measurement"]["repetitions"] == 10


def test_a_run_names_its_case_as_a_suite_listing_the_shape_does():
    """A run without --shape measures the model's default shape, and names it so: the
    id of the case of a suite that lists that shape (as the default suite lists its
    shapes), whose golden and history it then meets."""
    from workflow.models.registry import get_model

    plan = plan_run(run_args("-m", "bert", "-c", "tiny"))
    shape = list(get_model("bert").default_shape)
    listed = plan_run(run_args("-m", "bert", "-c", "tiny", "--shape",
                               ",".join(map(str, shape))))
    assert plan.case.id == listed.case.id == "cpu-host/iree/bert-tiny-1x128-f32/baseline"
    assert plan.suite == listed.suite


def test_training_flag_selects_training_mode_on_torch_eager():
    plan = plan_run(run_args("-m", "mnist", "-t"))
    assert plan.case.workload.mode == "training" and plan.case.backend == "torch-eager"


def test_option_problems_are_reported_together(suite_file):
    with pytest.raises(ConfigError) as err:
        plan_run(run_args("-m", "linear", "-c", "huge", "--layers", "2", "--sku", "nope",
                          "--configfile", str(suite_file)))
    text = "\n".join(err.value.problems)
    assert "-c huge: linear has configs ['default']" in text
    assert "--layers: linear has no layer count" in text
    assert "--sku nope" in text and "['generic', 'host']" in text
    with pytest.raises(ConfigError, match="-m gpt3: unknown model"):
        plan_run(run_args("-m", "gpt3"))
    # What only the suite schema knows is reported with the option's key path.
    with pytest.raises(ConfigError, match="backends"):
        plan_run(run_args("-m", "linear", "-b", "tvm"))


@pytest.mark.parametrize("argv", [["list"], ["--list"], ["-l"], ["run", "--list"]])
def test_list_prints_models_configs_skus_backends_recipes(capsys, argv):
    assert main(argv) == 0
    out = capsys.readouterr().out
    for expected in ("gpt2: tiny, small;", "llama: tiny;", "mnist: default;", "resnet18:",
                     "minilm:", "bert: tiny, base, large;", "skus (", "cpu-host:",
                     "cpu-generic-sync:", "backends: iree, torch-eager, torch-inductor",
                     "recipes: baseline, int8wo"):
        assert expected in out, expected


def test_summary_line_of_ok_and_failed_records():
    ok = {"id": "h/iree/m-f32/baseline", "status": "ok",
          "timing": {"median_ms": 1.2345, "cv": 0.021, "invocations": 5, "repetitions": 10,
                     "noisy": False},
          "throughput": {"gflops": 12.5}, "accuracy": {"pcc": 0.9999991, "accurate": True},
          "golden": {"verdict": "no-golden"}}
    assert summary_line(ok) == ("ok h/iree/m-f32/baseline  median 1.234 ms (cv 2.1%, 5 "
                                "invocations x 10 repetitions)  12.5 GFLOP/s  pcc 0.999999  "
                                "golden no-golden")
    torch = {"id": "h/torch-eager/m-f32/baseline", "status": "ok",
             "timing": {"median_ms": 0.5, "cv": 0.01, "invocations": 5, "repetitions": None,
                        "calls_per_invocation": 4000, "noisy": False}}
    assert "5 invocations x 4000 calls)" in summary_line(torch)
    failed = {"id": "h/iree/m-f32/baseline", "status": "failed", "stage": "compile",
              "error": "iree-compile exited with 1:\nerror: boom"}
    # The cause from the lines below a first line that gives none (errors.error_line).
    assert summary_line(failed) == ("failed h/iree/m-f32/baseline at compile: "
                                    "iree-compile exited with 1: error: boom")


def test_corrupt_output_file_is_refused_before_anything_runs(tmp_path, capsys):
    out = tmp_path / "perf.json"
    out.write_text('{"cases": [')
    workdir = tmp_path / "work"
    assert main(["run", "-m", "linear", "-o", str(out), "--workdir", str(workdir)]) == 1
    assert "not valid JSON" in capsys.readouterr().err
    assert out.read_text() == '{"cases": [' and not workdir.exists()


@pytest.mark.e2e
def test_run_appends_records_and_reruns_only_what_changes(tmp_path, suite_file, capsys,
                                                          monkeypatch):
    """One small case (mlp, 2 layers by default) through the workflow: repeated, with
    --layers of its own depth, with --loop_count of the SKU's repetitions (all the plain
    case: nothing reruns), with another --loop_count (a SKU of its own, measured once,
    not invalidating the plain case), into a benchflow and a Forge results file."""
    monkeypatch.chdir(tmp_path)  # the default work directories, results/cli/<case>
    out, forge = tmp_path / "perf.json", tmp_path / "forge.json"
    theirs = {"total_time": 2.5, "total_samples": 128, "samples_per_sec": 51.2,
              "args": {"model": "bert", "config": "tiny", "loop_count": 128},
              "arch": "BackendDevice.Wormhole_B0", "machine_name": "tt", "hash": "1a2b3c4",
              "date": "24-05-01"}
    forge.write_text(json.dumps([theirs]))
    base = ["run", "-m", "mlp", "--shape", "16x32x32", "--sku", "host",
            "--configfile", str(suite_file), "--cores", "2"]
    plain_id = "host/iree/mlp-16x32x32-f32/baseline"
    plain_log = Path("results/cli/host+iree+mlp-16x32x32-f32+baseline/snakemake.log")

    def run(*extra: str) -> str:
        assert main([*base, *extra]) == 0
        return capsys.readouterr().out

    first = run("-o", str(out))
    assert first.startswith(f"ok {plain_id}  median ")
    assert "appended to" in first and "(1 records)" in first
    # The case ran through snakemake in its work directory, with the one-case suite.
    assert (plain_log.parent / f"results/cases/{plain_id}.json").exists()
    assert "Nothing to be done" not in plain_log.read_text()
    # The same command, --layers 2 (mlp's own depth), --loop_count 3 (the SKU's own
    # repetitions): all the plain case, up to date; a record is appended each time.
    for extra in ([], ["--layers", "2"], ["--loop_count", "3"]):
        assert run(*extra, "-o", str(out)).startswith(f"ok {plain_id}  ")
        assert "Nothing to be done" in plain_log.read_text(), extra
    # Another loop count is another measurement, in a work directory of its own.
    loop_id = "host-loop2/iree/mlp-16x32x32-f32/baseline"
    assert run("--loop_count", "2", "-o", str(forge)).startswith(f"ok {loop_id}  median ")
    loop_log = Path("results/cli/host-loop2+iree+mlp-16x32x32-f32+baseline/snakemake.log")
    assert "Nothing to be done" not in loop_log.read_text()
    # ... which neither overwrote nor invalidated the plain case's results.
    assert run("-o", str(out)).startswith(f"ok {plain_id}  ")
    assert "Nothing to be done" in plain_log.read_text()

    doc = json.loads(out.read_text())
    assert doc["kind"] == "benchflow-results" and len(doc["cases"]) == 5
    assert {c["id"] for c in doc["cases"]} == {plain_id}
    rec = doc["cases"][0]
    assert rec["status"] == "ok" and rec["timing"]["repetitions"] == 3 and rec["layers"] is None
    assert rec["accuracy"]["accurate"] and rec["sku"] == "host"
    # The Forge list stayed a list: theirs, then a Forge-shaped entry of the loop run.
    theirs_then_ours = json.loads(forge.read_text())
    assert isinstance(theirs_then_ours, list) and theirs_then_ours[0] == theirs
    entry = theirs_then_ours[1]
    assert entry["args"]["loop_count"] == 2 and entry["args"]["model"] == "mlp"
    assert entry["args"]["output"] == str(forge) and entry["samples_per_sec"] > 0
    assert entry["benchflow"]["id"] == loop_id
    assert entry["benchflow"]["timing"]["repetitions"] == 2


@pytest.mark.e2e
def test_unsupported_case_is_recorded_and_exits_non_zero(tmp_path, suite_file):
    """IREE runs inference only: -t -b iree is an `unsupported` record, through the console
    script (the report step records it, no stage runs)."""
    out = tmp_path / "perf.json"
    proc = subprocess.run(
        [sys.executable, "-m", "workflow.cli.main", "run", "-m", "linear", "-t", "-b", "iree",
         "--configfile", str(suite_file), "-o", str(out), "--workdir", str(tmp_path / "w")],
        capture_output=True, text=True, cwd=REPO, timeout=600)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("unsupported host/iree/linear-128x256x256-f32-train/baseline: ")
    [rec] = json.loads(out.read_text())["cases"]
    assert rec["status"] == "unsupported" and rec["mode"] == "training"


def test_coverage_subcommand_prints_the_table(tmp_path, capsys):
    from tests.test_goldens import make_case, make_report

    # A report as the reader accepts it (valid against report.schema.json).
    report = make_report(make_case(
        "h/iree/m-f32/baseline", [1.0], model="m", workload="m-f32",
        accuracy={"pcc": 1.0, "max_abs_err": 0.0, "max_rel_err": 0.0, "allclose": True,
                  "sqnr_db": None, "reference": "fp32 eager", "accurate": True},
        graph={"aten_ops": 3, "aten_ops_unique": 2, "graph_breaks": None,
               "op_histogram": {"aten.linear.default": 2, "aten.relu.default": 1}}))
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    assert main(["coverage", "--report", str(path), "--ops"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:2] == ["model  aten ops  unique  iree",
                                    "m      3         2       pass 1/1"]
    assert "iree: 1/1 models pass" in out and "  aten.linear.default x2" in out
    assert main(["coverage", "--report", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["passing"] == {"iree": {"models": 1, "passing": 1}}
    path.write_text("{")
    assert main(["coverage", "--report", str(path)]) == 1
