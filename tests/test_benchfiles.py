"""sharktank-format benchmark files: schema, IREE's own layout, selection, command lines."""

import json
from pathlib import Path

import pytest

from tests.conftest import REPO, tiny_suite
from workflow.backends.iree import tools as iree
from workflow.benchfile.flags import compile_flags, data_files, run_spec
from workflow.benchfile.parse import file_problems, load_file
from workflow.benchfile.plan import identity
from workflow.benchfile.select import select
from workflow.cli.main import main
from workflow.errors import ConfigError
from workflow.suite.schema import validate_suite

# Every field of the format's README, with a value of the documented type.
EVERY_FIELD = {
    "inputs": ["1x64xi64", "4xf32=@x.bin"],
    "compilation_required": True,
    "compiled_file_name": "clip_cpu",
    "compile_flags": ["--iree-opt-level=O3"],
    "mlir_file_path": "model.mlir",
    "modules": [],
    "function_run": "encode_prompts",
    "benchmark_repetitions": 10.0,
    "benchmark_min_warmup_time": 3.0,
    "device": "local-task",
    "golden_time_tolerance_multiplier": {"cpu": 1.1},
    "golden_time_ms": {"cpu": 275.5},
    "golden_dispatch": {"cpu": 2089},
    "golden_size": {"cpu": 540000},
    "specific_chip_to_ignore": ["gfx90a"],
    "real_weights_file_name": "real_weights.irpa",
}

# Layouts of IREE's own files (sharktank_models/benchmarks/**), with other values:
# repetitions and warm-up only in benchmark_flags, URLs for the MLIR, extra fields.
IREE_LAYOUTS = {
    "cpu_flags_only": {
        "inputs": ["1x64xi64", "1x64xi64"], "function_run": "encode_prompts",
        "benchmark_flags": ["--benchmark_repetitions=10", "--benchmark_min_warmup_time=3.0",
                            "--device_allocator=caching"],
        "device": "local-task", "golden_time_tolerance_multiplier": {"cpu": 1.1},
        "golden_time_ms": {"cpu": 2000.0}, "golden_dispatch": {"cpu": 2000},
        "golden_size": {"cpu": 500000}},
    "rocm_pipeline": {
        "inputs": ["1x4x128x128xf16", "1xf16"], "compilation_required": True,
        "compiled_file_name": "pipeline_fp16_rocm",
        "compile_flags": ["--iree-hal-target-backends=rocm", "--iree-opt-outer-dim-concat=true"],
        "mlir_file_url": "https://example.invalid/pipeline.mlir",
        "modules": ["clip", "unet_fp16", "vae"], "function_run": "tokens_to_image",
        "benchmark_flags": ["--benchmark_repetitions=10", "--benchmark_min_warmup_time=3.0"],
        "device": "hip", "golden_time_tolerance_multiplier": {"mi250": 1.3, "mi300": 1.1},
        "golden_time_ms": {"mi250": 1100, "mi300": 325}},
    "decode_with_url": {
        "inputs": ["4x1xi64", "4xi64", "261x2097152xf8E4M3FNUZ"], "function_run": "decode_bs4",
        "benchmark_flags": ["--benchmark_repetitions=10", "--benchmark_min_warmup_time=3.0"],
        "device": "hip", "golden_time_tolerance_multiplier": {"mi300": 1.1},
        "golden_time_ms": {"mi300": 11.5}, "compilation_required": True,
        "mlir_url": "https://example.invalid/llama.mlir",
        "compile_flags": ["--iree-hal-target-device=hip"],
        "compiled_file_name": "llama_decode_vmfbs/model.rocm_gfx942",
        "real_weights_file_path": "/data/weights.irpa", "submodel_name": "8b-fp8"},
    "weights_and_chips": {
        "inputs": ["1x4x128x128xf16", "2x64x2048xf16"], "function_run": "main",
        "benchmark_flags": ["--benchmark_repetitions=10", "--benchmark_min_warmup_time=3.0"],
        "device": "hip", "golden_time_tolerance_multiplier": {"mi300": 1.1},
        "golden_time_ms": {"mi300": 50}, "golden_dispatch": {"mi300": 1424},
        "golden_size": {"mi300": 2560000}, "specific_chip_to_ignore": ["gfx90a"],
        "real_weights_file_name": "punet_weights.irpa"},
}


def write(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=4))
    return path


def test_every_readme_field_loads(tmp_path):
    f = load_file(write(tmp_path / "sdxl" / "clip_cpu.json", EVERY_FIELD))
    assert (f.id, f.model, f.submodel, f.backend) == ("sdxl.clip_cpu", "sdxl", "clip", "cpu")
    assert f.repetitions == 10 and f.warmup_s == 3.0
    # As sharktank's runner: mlir_file_path from the benchmarks root (the model
    # directory's parent), the named weights from <artifacts>/<model>_<submodel>/.
    assert f.mlir == tmp_path / "model.mlir"
    assert f.weights == tmp_path.parent / "artifacts" / "sdxl_clip" / "real_weights.irpa"
    assert f.goldens("cpu") == {"median_ms": 275.5, "tolerance": 1.1, "dispatch_count": 2089,
                                "binary_bytes": 540000}
    assert f.goldens("mi300") == {}


@pytest.mark.parametrize("name", sorted(IREE_LAYOUTS))
def test_files_in_iree_layouts_load_unchanged(tmp_path, name):
    f = load_file(write(tmp_path / "m" / f"{name}.json", IREE_LAYOUTS[name]))
    assert f.repetitions == 10 and f.warmup_s == 3.0
    assert all(not x.startswith("--benchmark_repetitions") for x in f.extra_benchmark_flags())


@pytest.mark.parametrize("field, bad, expected", [
    ("inputs", "1x64xi64", "expected array, got str"),
    ("inputs", [1], "expected string, got int 1"),
    ("compilation_required", "yes", "expected boolean"),
    ("compiled_file_name", 3, "expected string"),
    ("compile_flags", ["-O3"], "expected a string matching"),
    ("compile_flags", "--x", "expected array"),
    ("mlir_file_path", ["a.mlir"], "expected string"),
    ("modules", ["a b"], "expected a string matching"),
    ("function_run", "main; rm -rf /", "expected a string matching"),
    ("benchmark_repetitions", 2.5, "multipleOf"),
    ("benchmark_repetitions", "10", "expected number"),
    ("benchmark_min_warmup_time", -1, "minimum"),
    ("device", 7, "expected string"),
    ("golden_time_tolerance_multiplier", {"cpu": "1.1"}, "expected number"),
    ("golden_time_ms", {"cpu": 0}, "exclusiveMinimum"),
    ("golden_time_ms", [100], "expected object"),
    ("golden_dispatch", {"cpu": 10.5}, "expected integer"),
    ("golden_size", {"cpu": -1}, "minimum"),
    ("golden_size", {"bad key": 1}, "expected a string matching"),
    ("specific_chip_to_ignore", "gfx90a", "expected array"),
    ("real_weights_file_name", 1, "expected string"),
])
def test_every_mistyped_field_is_named(field, bad, expected):
    problems = file_problems({**EVERY_FIELD, field: bad}, "m/x_cpu.json")
    assert problems and all(p.startswith(f"m/x_cpu.json: {field}") for p in problems), problems
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize("field", ["inputs", "function_run", "device"])
def test_missing_required_field_is_named(field):
    data = {k: v for k, v in EVERY_FIELD.items() if k != field}
    assert file_problems(data, "x.json") == [
        f"x.json: <top>: '{field}' is a required property"]


@pytest.mark.parametrize("field, flag", [
    ("benchmark_repetitions", "--benchmark_repetitions="),
    ("benchmark_min_warmup_time", "--benchmark_min_warmup_time="),
])
def test_repetitions_and_warmup_come_from_the_field_or_the_flags(field, flag):
    data = {k: v for k, v in EVERY_FIELD.items() if k != field}
    (problem,) = file_problems(data, "x.json")
    assert problem == f"x.json: {field}: required (or {flag}{'N' if 'rep' in flag else 'S'} " \
                      "in benchmark_flags)"
    assert file_problems({**data, "benchmark_flags": [f"{flag}4"]}, "x.json") == []
    bad = file_problems({**data, "benchmark_flags": [f"{flag}many"]}, "x.json")
    assert bad and bad[0].startswith("x.json: benchmark_flags[0]: expected")


def test_unknown_keys_and_broken_json_are_reported(tmp_path):
    problems = file_problems({**EVERY_FIELD, "golden_tme_ms": {}}, "x.json")
    assert problems == ["x.json: <top>: unknown key(s) ['golden_tme_ms']; expected one of "
                        + str(sorted(json.loads((REPO / "workflow/schemas/"
                                                 "benchmark_file.schema.json").read_text())
                                     ["properties"])) + "; did you mean 'golden_time_ms'?"]
    path = tmp_path / "broken.json"
    path.write_text("{")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_file(path)
    # A field given twice (a hand edit): JSON readers keep the second, so it is refused.
    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps(EVERY_FIELD)[:-1] + ', "function_run": "other"}')
    with pytest.raises(ConfigError) as err:
        load_file(twice)
    assert err.value.problems == [f"{twice}: function_run: given twice; expected each key "
                                  "once in an object (a JSON reader keeps the last value and "
                                  "drops the first)"]


def test_shipped_benchmarks_are_valid_and_cover_every_field(capsys):
    files = sorted((REPO / "benchmarks").glob("*/*.json"))
    assert len(files) >= 2
    seen = set()
    for path in files:
        f = load_file(path)
        assert f.not_runnable() is None
        assert f.mlir.exists() and all(Path(p).exists() for p in data_files(f))
        seen |= set(f.data)
    # The shipped files carry their weights (real_weights_file_path, from the benchmarks
    # root); real_weights_file_name names a file of the artifact directory.
    readme_fields = set(EVERY_FIELD) - {"real_weights_file_name"}
    assert readme_fields <= seen | {"benchmark_repetitions", "benchmark_min_warmup_time"}
    assert main(["validate", *map(str, files)]) == 0


# --- selection ---------------------------------------------------------------------------

def bench_dir(tmp_path) -> Path:
    """Two models: a CPU pair (one a pipeline over the other), a ROCm file, an
    ignored-chip file, a file without MLIR."""
    root = tmp_path / "benchmarks"
    base = {"inputs": ["4xf32=1"], "function_run": "main", "benchmark_repetitions": 3,
            "benchmark_min_warmup_time": 0.1, "device": "local-task",
            "mlir_file_path": "m.mlir"}  # relative to the benchmarks root
    write(root / "alpha" / "stage_cpu.json", base)
    write(root / "alpha" / "pipe_cpu.json", {**base, "modules": ["alpha_stage"],
                                             "golden_time_ms": {"cpu": 2.0}})
    write(root / "alpha" / "pipe_rocm.json", {**base, "device": "hip"})
    write(root / "beta" / "odd_cpu.json", {**base, "specific_chip_to_ignore": ["generic"]})
    write(root / "beta" / "nomlir_cpu.json", {k: v for k, v in base.items()
                                              if k != "mlir_file_path"})
    (root / "m.mlir").write_text("// placeholder module for selection tests\n")
    return root


def suite_with(root, **spec) -> dict:
    return validate_suite(tiny_suite(benchmark_files={"dir": str(root), **spec}), "s.yaml")


def ids(sel) -> list[str]:
    return sorted(c.id for c in sel.cases)


def test_no_models_selects_nothing(tmp_path):
    assert select(suite_with(bench_dir(tmp_path)), "s.yaml").cases == []


def test_select_by_model_filename_backend_and_sku(tmp_path):
    root = bench_dir(tmp_path)
    sel = select(suite_with(root, models=["alpha"]), "s.yaml")
    assert ids(sel) == ["generic/iree/alpha.pipe_cpu/baseline", "generic/iree/alpha.stage_cpu/"
                        "baseline", "host/iree/alpha.pipe_cpu/baseline",
                        "host/iree/alpha.stage_cpu/baseline"]
    sel = select(suite_with(root, models=["a*"], filename="pipe*", skus=["host"]), "s.yaml")
    assert ids(sel) == ["host/iree/alpha.pipe_cpu/baseline"]
    # The pipeline's module is loaded (to be compiled) though the glob left it out.
    assert set(sel.files) == {"alpha.pipe_cpu", "alpha.stage_cpu"}
    assert sel.module_ids("alpha.pipe_cpu") == ["alpha.stage_cpu"]
    # A ROCm file selected by its backend cannot run on a CPU SKU: skipped, with why.
    sel = select(suite_with(root, models=["alpha"], backends=["rocm"]), "s.yaml")
    assert sel.cases == [] and {s[1] for s in sel.skipped} == {"host", "generic"}
    assert "device 'hip' does not run on a llvm-cpu SKU" in sel.skipped[0][2]


def test_skipped_chips_and_files_without_mlir(tmp_path, monkeypatch):
    monkeypatch.delenv("IREE_TEST_FILES", raising=False)  # the runner's default artifacts
    sel = select(suite_with(bench_dir(tmp_path), models=["beta"]), "s.yaml")
    assert ids(sel) == ["host/iree/beta.odd_cpu/baseline"]  # generic's target_cpu is ignored
    reasons = {(f, s): why for f, s, why in sel.skipped}
    assert "specific_chip_to_ignore lists ['generic']" in reasons[("beta.odd_cpu", "generic")]
    # No MLIR named: the quality tests' download in the artifact directory, absent here.
    expected = tmp_path / "artifacts" / "beta_nomlir" / "model.mlir"
    assert reasons[("beta.nomlir_cpu", "host")].startswith(
        f"its MLIR is absent: expected {expected} (")


def test_golden_keys_map_suite_skus_to_file_keys(tmp_path):
    sel = select(suite_with(bench_dir(tmp_path), models=["alpha"], golden_keys={"host": "cpu"}),
                 "s.yaml")
    f = sel.file("alpha.pipe_cpu")
    assert f.goldens(sel.golden_key("host")) == {"median_ms": 2.0}
    assert f.goldens(sel.golden_key("generic")) == {}


def test_selection_problems_name_file_and_key(tmp_path):
    root = bench_dir(tmp_path)
    with pytest.raises(ConfigError) as exc:
        select(suite_with(root, models=["gamma"], skus=["nope"], golden_keys={"x": "cpu"}),
               "s.yaml")
    text = "\n".join(exc.value.problems)
    assert "s.yaml: benchmark_files.skus: unknown SKU 'nope'" in text
    assert "s.yaml: benchmark_files.golden_keys: unknown SKU 'x'" in text
    assert "s.yaml: benchmark_files.models[0]: no model directory matches 'gamma'" in text
    write(root / "alpha" / "broken_cpu.json", {"inputs": "x", "function_run": "main",
                                               "device": "local-task"})
    (root / "alpha" / "stage_cpu.json").unlink()
    with pytest.raises(ConfigError) as exc:
        select(suite_with(root, models=["alpha"]), "s.yaml")
    text = "\n".join(exc.value.problems)
    assert f"{root / 'alpha' / 'broken_cpu.json'}: inputs: expected array, got str 'x'" in text
    # A pipeline whose module is missing is no refusal: it is skipped with why.
    sel = select(suite_with(root, models=["alpha"], filename="pipe*"), "s.yaml")
    assert sel.cases == [] and {s[1] for s in sel.skipped} == {"host", "generic"}
    assert sel.skipped[0][2].startswith("modules[0] 'alpha_stage': no benchmark file "
                                        "<model>/<submodel>_cpu.json under")
    with pytest.raises(ConfigError, match="benchmark_files.dir: expected a directory"):
        select(suite_with(tmp_path / "none", models=["*"]), "s.yaml")


# --- what runs --------------------------------------------------------------------------

def test_compile_flags_are_the_skus_then_the_files(tmp_path):
    f = load_file(write(tmp_path / "m" / "x_cpu.json", EVERY_FIELD))
    sku = validate_suite(tiny_suite(), "s")["skus"]["generic"]
    flags = compile_flags(f, sku)
    assert flags[0] == "--iree-input-type=auto"
    assert "--iree-llvmcpu-target-cpu=generic" in flags and flags[-1] == "--iree-opt-level=O3"


def test_run_spec_and_command_line(tmp_path):
    f = load_file(write(tmp_path / "m" / "x_cpu.json", {
        **EVERY_FIELD, "benchmark_flags": ["--device_allocator=caching",
                                           "--benchmark_format=console"]}))
    sku = validate_suite(tiny_suite(), "s")["skus"]["host"]
    spec = run_spec(f, sku)
    assert spec["inputs"] == ["1x64xi64", f"4xf32=@{tmp_path / 'm' / 'x.bin'}"]
    weights = tmp_path.parent / "artifacts" / "m_x" / "real_weights.irpa"
    assert spec["parameters"] == [f"--parameters=model={weights}"]
    assert spec["benchmark_flags"] == ["--device_allocator=caching"]  # format is benchflow's
    m = spec["measurement"]
    assert (m["repetitions"], m["min_warmup_time_s"]) == (10, 3.0)
    assert m["invocations"] == sku["measurement"]["invocations"]
    assert data_files(f) == [str(tmp_path / "m" / "x.bin"), str(weights)]
    argv = iree.benchmark_argv("ibm", "main.vmfb", spec["function"], spec["inputs"], sku,
                               modules=["dep.vmfb"], extra_flags=spec["parameters"] +
                               spec["benchmark_flags"], repetitions=10, warmup_s=3.0,
                               min_time="0.01s")
    assert argv[:4] == ["ibm", "--module=dep.vmfb", "--module=main.vmfb",
                        "--function=encode_prompts"]
    assert argv[-3:] == [spec["parameters"][0], "--device_allocator=caching",
                         "--benchmark_format=json"]


def test_identity_of_a_benchmark_case(tmp_path):
    root = bench_dir(tmp_path)
    sel = select(suite_with(root, models=["alpha"], filename="stage*", skus=["host"]), "s.yaml")
    ident = identity(sel.cases[0])
    assert ident["id"] == "host/iree/alpha.stage_cpu/baseline"
    assert (ident["model"], ident["config"], ident["dtype"], ident["shape"]) == (
        "alpha", "stage", "f32", [4])
    assert ident["workload"] == "alpha.stage_cpu" and ident["backend"] == "iree"


def test_cli_lists_the_selection_with_sharktank_options(tmp_path, capsys):
    root = bench_dir(tmp_path)
    suite = tmp_path / "s.yaml"
    suite.write_text(json.dumps(tiny_suite()))
    assert main(["benchmarks", "--configfile", str(suite), "--dir", str(root), "--model",
                 "alpha", "--filename", "pipe*", "--sku", "generic", "--backend", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "generic/iree/alpha.pipe_cpu/baseline" in out and "host/" not in out
    assert "1 benchmark case(s) selected" in out


@pytest.mark.e2e
def test_cli_runs_the_selection_through_snakemake(tmp_path, monkeypatch, capfd):
    suite = tmp_path / "s.yaml"
    suite.write_text(json.dumps(tiny_suite()))
    monkeypatch.chdir(tmp_path)
    assert main(["benchmarks", "--configfile", str(suite), "--model", "tiny_mlp",
                 "--filename", "matmul*", "--sku", "host", "--run", "-n", "--cores", "1"]) == 0
    out = capfd.readouterr().out
    assert '--config benchmark_files={"models": ["tiny_mlp"], "filename": "matmul*", ' \
           '"skus": ["host"]}' in out
    # The dry run plans exactly the selected file on the selected SKU.
    assert "results/bench_files/cases/host/tiny_mlp.matmul_cpu.json" in out
    assert "tiny_mlp.mlp_cpu" not in out.split("$ ", 1)[1]
    assert "bench_files/cases/generic" not in out


# --- names and ids: a file's <model>.<name> names its case and files ---------------------
# CASES (also a table of docs/malformed-inputs.md): (id, description, the files under the
# benchmarks root as {path: fields over BENCH}, the model globs selected, a fragment of
# the refusal). Every file has BENCH's fields unless its row changes them.
BENCH = {"inputs": ["4xf32=1"], "function_run": "main", "benchmark_repetitions": 1,
         "benchmark_min_warmup_time": 0, "device": "local-task", "mlir_file_path": "m.mlir"}
CASES = [
    ("bf-id-collision", "a/b.c_cpu.json and a.b/c_cpu.json: both are a.b.c_cpu",
     {"a/b.c_cpu.json": {}, "a.b/c_cpu.json": {}}, ["*"],
     "a.b/c_cpu.json: its id a.b.c_cpu (<model>.<name>) is also that of "),
    ("bf-module-ambiguous", "modules names x_a_b, the <model>_<submodel> of x/a_b_cpu.json "
     "and of x_a/b_cpu.json", {"m/p_cpu.json": {"modules": ["x_a_b"]}, "x/a_b_cpu.json": {},
                               "x_a/b_cpu.json": {}}, ["m"],
     "p_cpu.json: modules[0]: 'x_a_b' is the <model>_<submodel> of both "),
    ("bf-dir-newline", "a model directory whose name ends in a newline",
     {"m\n/x_cpu.json": {}}, ["*"], "expected a file name of [A-Za-z0-9_.-] only"),
    ("bf-id-too-long", "a file name of 204 characters (its id would be 206)",
     {f"m/{'n' * 200}_cpu.json": {}}, ["m"], "at most 200 characters with its model "
     "directory (<model>.<name> becomes a case id and a file name), got 'm.nnn"),
    ("bf-golden-key-newline", "a golden key ending in a newline",
     {"m/x_cpu.json": {"golden_time_ms": {"cpu\n": 1.0}}}, ["m"],
     "x_cpu.json: golden_time_ms: expected a string matching ^[A-Za-z0-9_.-]{1,64}$, got "
     "'cpu\\n'"),
    ("bf-golden-key-too-long", "a golden key of 65 characters",
     {"m/x_cpu.json": {"golden_dispatch": {"k" * 65: 1}}}, ["m"],
     "x_cpu.json: golden_dispatch: expected a string matching ^[A-Za-z0-9_.-]{1,64}$"),
    ("bf-function-newline", "a function_run ending in a newline",
     {"m/x_cpu.json": {"function_run": "main\n"}}, ["m"],
     "x_cpu.json: function_run: expected a string matching"),
    ("bf-module-name-newline", "a modules entry ending in a newline",
     {"m/x_cpu.json": {"modules": ["m_x\n"]}}, ["m"],
     "x_cpu.json: modules[0]: expected a string matching"),
]


def test_the_id_table_is_well_formed():
    assert len({row[0] for row in CASES}) == len(CASES) >= 8


@pytest.mark.parametrize("case_id, description, files, models, expected", CASES,
                         ids=[row[0] for row in CASES])
def test_names_and_ids_of_benchmark_files(tmp_path, case_id, description, files, models,
                                          expected):
    root = tmp_path / "benchmarks"
    for rel, fields in files.items():
        write(root / rel, {**BENCH, **fields})
    (root / "m.mlir").write_text("// placeholder\n")
    with pytest.raises(ConfigError) as err:
        select(suite_with(root, models=models, backends=[]), "s.yaml")
    hits = [p for p in err.value.problems if expected in p]
    assert len(hits) == 1, err.value.problems
    # One line, starting with the file it is about (both files, for a collision).
    assert "\n" not in hits[0] and hits[0].lstrip("'").startswith(f"{root}/"), hits


def test_a_file_selected_twice_by_two_globs_is_no_collision(tmp_path):
    """One file is one id however often the globs name it: no refusal, one case a SKU."""
    root = tmp_path / "benchmarks"
    write(root / "a.b" / "c_cpu.json", BENCH)
    (root / "m.mlir").write_text("// placeholder\n")
    sel = select(suite_with(root, models=["a.b", "a.*"], skus=["host"]), "s.yaml")
    assert [c.id for c in sel.cases] == ["host/iree/a.b.c_cpu/baseline"]
