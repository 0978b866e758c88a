"""Malformed suite files: each gives one clear `file: key.path: what was expected` line
(a ConfigError, printed without a traceback), never a Python traceback or a hang.

CASES is also the source of the docs' table of malformed inputs and their messages:
(id, description, file content as text or bytes, a fragment of the expected message).
A row whose id starts with `json-file` is written as `suite.json`, every other one as
`suite.yaml`; the message starts with that file's path.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from workflow.errors import ConfigError
from workflow.paths import MAX_ID
from workflow.suite import shapes
from workflow.suite.load import load
from workflow.suite.schema import MAX_SUITE_BYTES, MAX_YAML_NODES, load_schema

REPO = Path(__file__).resolve().parent.parent
BENCHFLOW = Path(sys.executable).parent / "benchflow"
# A hang guard, not a speed goal: a refusal must come back, where a hang never would.
HANG_GUARD_S = 10

# One workload, so that a row's own problem is the only one.
W = "workloads: [{model: linear}]\n"
# "Billion laughs": 9 levels of 9 aliases each, 9^9 (387 million) strings once expanded.
BOMB = "\n".join(["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"] + [
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]"
    for p, c in zip("abcdefgh", "bcdefghi", strict=True)]) + "\n"
NAME = "expected a name of 1 to 64 letters, digits, _ . - (not . or ..: it names files"
MP = "model_params: [{name: a, matrix_shapes: [{name: %s}]}]\n"

CASES = [
    # --- the file itself ---------------------------------------------------------------
    ("not-utf8", "Latin-1 bytes (é as 0xe9)", b"suite_name: caf\xe9\n" + W.encode(),
     "not UTF-8 text (byte 0xe9 at offset 15)"),
    ("utf16", "a UTF-16 file (with its byte-order mark)", W.encode("utf-16"),
     "not UTF-8 text (byte 0xff at offset 0)"),
    ("too-large", f"a file larger than MAX_SUITE_BYTES ({MAX_SUITE_BYTES // 2**20} MiB)",
     "#" * (MAX_SUITE_BYTES + 1), f"larger than {MAX_SUITE_BYTES // 2**20} MiB"),
    ("alias-bomb", "a YAML alias bomb (billion laughs)", BOMB,
     f"expands to more than {MAX_YAML_NODES:,} YAML nodes"),
    ("recursive-alias", "an alias inside its own anchor", "a: &a [*a]\n" + W,
     "a[0]: an alias refers to its own anchor (line 1)"),
    ("deep-nesting", "100,000 nested lists", "x: " + "[" * 100_000 + "]" * 100_000 + "\n",
     "line 1: nested deeper than 64 levels"),
    ("yaml-syntax", "a YAML syntax error", "workloads:\n  - model: linear\n bad: [\n",
     "not valid YAML: while parsing a block mapping: did not find expected key at line 3, "
     "column 2"),
    ("two-documents", "two YAML documents in one file", W + "---\n" + W,
     "not valid YAML: expected a single document"),
    ("top-level-list", "a list instead of a mapping", "- model: linear\n",
     "<top>: expected a mapping of suite keys, got list"),
    ("duplicate-key", "a top-level key twice (YAML keeps the last silently)",
     "suite_name: a\n" + W + "suite_name: b\n",
     "suite_name: duplicate key 'suite_name' at lines 1 and 3; expected each key once"),
    ("duplicate-sku", "a SKU defined twice", "skus:\n  cpu: {}\n  cpu: {}\n" + W,
     "skus.cpu: duplicate key 'cpu' at lines 2 and 3"),
    ("duplicate-json-key", "a JSON document with a key twice",
     '{\n  "workloads": [],\n  "workloads": [{"model": "linear"}]\n}\n',
     "workloads: duplicate key 'workloads' at lines 2 and 3"),
    ("json-file-truncated", "a truncated .json suite", '{"workloads": [{"model": "linear"}',
     "not valid JSON: Expecting ',' delimiter at line 1, column 35"),
    ("json-document-broken", "a JSON document (in a .yaml file) missing a comma",
     '{"workloads": [{"model": "linear"}]\n"skus": {}}\n',
     "not valid JSON: Expecting ',' delimiter at line 2, column 1"),
    # --- keys and values -----------------------------------------------------------------
    ("wrong-type", "a string for an integer", W + "torch_batch_size: many\n",
     "torch_batch_size: expected integer, got str 'many'"),
    ("unknown-key", "a misspelt top-level key", "workload: [{model: linear}]\n",
     "<top>: unknown key(s) ['workload']; expected one of"),
    ("bad-enum", "a dtype that does not exist", "workloads: [{model: linear, dtypes: [f64]}]\n",
     "workloads[0].dtypes[0]: expected one of ['f32', 'f16', 'bf16'], got 'f64'"),
    ("negative-count", "a negative invocation count",
     W + "skus: {cpu: {measurement: {invocations: -1}}}\n",
     "skus.cpu.measurement.invocations: expected minimum 1: -1 is less than the minimum of 1"),
    ("empty-workloads", "no workload at all", "workloads: []\n",
     "workloads: expected at least one workload"),
    ("unknown-model", "a model nobody registered", "workloads: [{model: resnet9000}]\n",
     "workloads[0].model: expected one of ["),
    ("unknown-config", "a config the model lacks",
     "workloads: [{model: bert, configs: [huge]}]\n",
     "workloads[0].configs[0]: expected one of ['tiny', 'base', 'large'], got 'huge'"),
    ("shape-rank", "a 2-D shape for an [M, K, N] model",
     "workloads: [{model: linear, shapes: [[1, 2]]}]\n",
     "workloads[0].shapes[0]: expected 3 items (minItems), got 2: [1, 2]"),
    ("shape-zero", "a zero dimension", "workloads: [{model: linear, shapes: [[0, 2, 2]]}]\n",
     "workloads[0].shapes[0][0]: expected minimum 1"),
    ("layers-without-layers", "layers for a model that has none",
     "workloads: [{model: linear, layers: 2}]\n", "workloads[0].layers: expected null, got int 2"),
    ("unknown-recipe", "a recipe torchao never had", W + "recipes: [int3wo]\n",
     "recipes[0]: expected a recipe: baseline, int8wo"),
    ("accuracy-baseline-sqnr", "an SQNR threshold for baseline (judged by PCC)",
     W + "accuracy: {recipes: {baseline: {min_sqnr_db: 10}}}\n",
     "accuracy.recipes: expected a quantizing recipe's name (see `recipes`) or family"),
    ("accuracy-unknown-recipe", "an SQNR threshold for a recipe family that does not exist",
     W + "accuracy: {recipes: {int4w: {min_sqnr_db: 10}}}\n",
     "not baseline (the PCC rule judges it), got 'int4w'"),
    ("unknown-backend", "a backend that is not defined", W + "backends: [torch-nope]\n",
     "backends: unknown backend 'torch-nope'"),
    ("unknown-sku", "a workload naming a SKU the suite lacks",
     "workloads: [{model: linear, skus: [gpu]}]\n",
     "workloads[0].skus: unknown SKU 'gpu'; expected one of ['cpu-host']"),
    # --- IREE GPU targets (the chip is asked of the installed iree-compile) ----------------
    ("gpu-unknown-chip", "a ROCm chip iree-compile does not know",
     W + "skus: {gpu: {iree: {target_backend: rocm, target_chip: gfx9999, device: hip}}}\n",
     "skus.gpu.iree.target_chip: iree-compile"),
    ("gpu-unknown-chip-reason", "a CUDA chip iree-compile does not know (its own words)",
     W + "skus: {gpu: {iree: {target_backend: cuda, target_chip: bogus, device: cuda}}}\n",
     "does not compile for 'bogus' (--iree-cuda-target=bogus: Unknown CUDA target 'bogus'); "
     "expected a cuda chip it knows, e.g. sm_80"),
    ("gpu-device-mismatch", "a CUDA SKU left on the default local-task device",
     W + "skus: {gpu: {iree: {target_backend: cuda, target_chip: sm_80}}}\n",
     "skus.gpu.iree.device: 'local-task' does not run cuda code; expected cuda for "
     "target_backend 'cuda' (set iree.device)"),
    ("gpu-no-chip", "a ROCm SKU without a target chip",
     W + "skus: {gpu: {iree: {target_backend: rocm, device: hip}}}\n",
     "skus.gpu.iree.target_chip: required for target_backend 'rocm'; expected a chip "
     "iree-compile knows, e.g. gfx942"),
    ("cpu-with-chip", "a target chip on an llvm-cpu SKU",
     W + "skus: {cpu: {iree: {target_chip: sm_80}}}\n",
     "skus.cpu.iree.target_chip: target_backend 'llvm-cpu' takes target_cpu, not a chip"),
    ("ab-unknown-sku", "an A/B pair naming a SKU the suite lacks",
     W + "ab_pairs: [{base: cpu-host, new: cpu-nope}]\n",
     "ab_pairs[0].new: unknown SKU 'cpu-nope'; expected one of ['cpu-host']"),
    ("ab-same-sku", "an A/B pair of one SKU with itself",
     W + "ab_pairs: [{base: cpu-host, new: cpu-host}]\n",
     "ab_pairs[0]: base and new are both 'cpu-host'; expected two SKUs"),
    ("ab-placed-apart", "an A/B pair of SKUs that SLURM would place on different nodes",
     W + "skus: {cpu: {}, gpu: {slurm: {partition: gpu, gres: 'gpu:1'}}}\n"
     "ab_pairs: [{base: cpu, new: gpu}]\n",
     "ab_pairs[0]: SKU 'cpu' runs on SLURM with the profile's defaults, SKU 'gpu' with "
     "gres 'gpu:1', partition 'gpu'; expected the same `slurm` settings on both SKUs"),
    ("ab-torch-placed-apart", "a torch A/B pair whose sides' SKUs SLURM would place apart",
     "workloads: [{model: linear, backends: [torch-eager]}]\n"
     "skus: {a: {slurm: {partition: p1}}, b: {slurm: {partition: p2}}}\n"
     "ab_pairs: [{base: {sku: a, backend: torch-eager}, new: {sku: b, backend: torch-eager}}]\n",
     "ab_pairs[0]: SKU 'a' runs on SLURM with partition 'p1', SKU 'b' with partition 'p2'; "
     "expected the same `slurm` settings"),
    ("tool-not-executable", "a SKU's own iree-compile that is not there",
     W + "skus: {cpu: {iree: {compile_tool: /nonexistent/iree-compile}}}\n",
     "skus.cpu.iree.compile_tool: '/nonexistent/iree-compile' is not an executable file"),
    ("adaptive-too-few", "adaptive invocations whose maximum allows no 95 % interval",
     W + "skus: {cpu: {measurement: {invocations: 3, max_invocations: 5}}}\n",
     "skus.cpu.measurement.max_invocations: 5 invocations are too few for a 95 % interval "
     "(alpha 0.05, split over the looks of the adaptive schedule); expected "
     "max_invocations: 7 or more"),
    ("ab-rounds-too-few", "A/B rounds whose maximum allows no 95 % interval",
     W + "skus: {a: {}, b: {iree: {target_cpu: generic}}}\nab: {min_rounds: 2, "
     "max_rounds: 4}\nab_pairs: [{base: a, new: b}]\n",
     "ab.max_rounds: 4 rounds are too few for a 95 % interval (alpha 0.05, split over the "
     "looks of the schedule); expected ab.max_rounds: 7 or more"),
    ("gpu-unknown-backend", "a target backend benchflow does not drive",
     W + "skus: {gpu: {iree: {target_backend: metal-spirv}}}\n",
     "skus.gpu.iree.target_backend: expected one of ['llvm-cpu', 'cuda', 'rocm', "
     "'vulkan-spirv'], got 'metal-spirv'"),
    # --- torchao microbenchmark keys -----------------------------------------------------
    ("torchao-obsolete-key", "a key of torchao's unpublished drafts",
     "model_params: [{name: a, compile: true}]\n",
     "model_params[0].compile: obsolete torchao key 'compile'"),
    ("torchao-unknown-key", "a key torchao never had", "model_params: [{name: a, foo: 1}]\n",
     "model_params[0]: unknown key(s) ['foo']"),
    ("torchao-dtype", "a high_precision_dtype benchflow does not run",
     "model_params: [{name: a, high_precision_dtype: torch.float64}]\n",
     "model_params[0].high_precision_dtype: expected one of"),
    ("torchao-model-type", "an unknown model_type",
     "model_params: [{name: a, model_type: resnet}]\n",
     "model_params[0].model_type: unknown model 'resnet'"),
    ("torchao-mode", "an unknown benchmark_mode", "benchmark_mode: serving\n" + MP % "pow2",
     "benchmark_mode: expected one of ['inference', 'training'], got 'serving'"),
    ("torchao-min-above-max", "min_power above max_power (an empty sweep)",
     MP % "pow2, min_power: 12, max_power: 10",
     "model_params[0].matrix_shapes[0].min_power: expected min_power <= max_power, got "
     "min_power 12 > max_power 10"),
    ("torchao-min-above-default", "min_power above the generator's default max_power",
     MP % "sweep, min_power: 16",
     "min_power: expected min_power <= max_power, got min_power 16 > max_power 15 "
     "(sweep's default)"),
    ("torchao-pow2-extended-0", "pow2_extended from 2^0 (2^0 + 2^-1 is no integer)",
     MP % "pow2_extended, min_power: 0, max_power: 2",
     "matrix_shapes[0].min_power: expected at least 1 for pow2_extended"),
    ("torchao-power-21", "a power above 20", MP % "pow2, max_power: 21",
     "matrix_shapes[0].max_power: expected maximum 20"),
    ("torchao-device-override", "a torchao_device (`--config torchao_device=tpu`)",
     "model_params: [{name: a}]\ntorchao_device: tpu\n",
     "torchao_device: expected cpu, cuda, mps or xpu (the device every model_params entry "
     "then runs on), or null, got 'tpu'"),
    ("torchao-device-no-entries", "torchao_device in a suite without torchao entries",
     W + "torchao_device: cpu\n",
     "torchao_device: 'cpu' given to a suite without torchao model_params entries; expected "
     "a torchao microbenchmark file"),
    ("sku-named-for-another-device", "a torchao cpu entry and the file's one SKU named cuda",
     "skus: {cuda: {}}\nmodel_params: [{name: a, device: cpu}]\n",
     "model_params[0].device: its cpu torch cases would be measured and reported under SKU "
     "'cuda', whose name says cuda; expected SKUs named for where their cases run"),
    # --- size of the expansion -----------------------------------------------------------
    ("max-cases", "a sweep of powers 0..20 (9,261 shapes, up to 2^20)",
     MP % "sweep, min_power: 0, max_power: 20",
     "model_params[0]: expands to more than max_cases (10,000) cases: up to 9,261 shapes x 2"),
    ("max-cases-zero", "max_cases 0", W + "max_cases: 0\n", "max_cases: expected minimum 1"),
    ("torch-compile-budget-zero", "a torch compile budget of 0 s",
     W + "timeouts: {torch_compile_s: 0}\n",
     "timeouts.torch_compile_s: expected exclusiveMinimum 0: 0 is less than or equal to "
     "the minimum of 0"),
    ("torch-compile-budget-text", "a torch compile budget as text",
     W + "timeouts: {torch_compile_s: ten}\n",
     "timeouts.torch_compile_s: expected number, got str 'ten'"),
    # --- names that become file and folder names -----------------------------------------
    ("sku-dotdot", "a SKU named .. (its stages would write outside results/)",
     W + "skus: {'..': {}}\n", f"skus: {NAME}"),
    ("sku-dot", "a SKU named .", W + "skus: {'.': {}}\n", f"skus: {NAME}"),
    ("sku-slash", "a SKU name with a path separator", W + "skus: {a/b: {}}\n",
     f"skus: {NAME} and folders), got 'a/b'"),
    ("sku-empty", "an empty SKU name", W + "skus: {'': {}}\n",
     f"skus: {NAME} and folders), got ''"),
    ("suite-name", "suite_name ..", W + "suite_name: ..\n", f"suite_name: {NAME}"),
    ("group", "a workload group with a path separator",
     "workloads: [{model: linear, group: ../logs}]\n", f"workloads[0].group: {NAME}"),
    ("torchao-name", "a model_params name with a space", "model_params: [{name: a b}]\n",
     "model_params[0].name: expected a name of at most 64 letters, digits, _ . - (not . or ..: "
     "it names files and folders), got 'a b'"),
    ("torch-backend-name", "a torch backend not named torch-<name>",
     W + "torch_backends: {eager: {kind: eager}}\n",
     "torch_backends: expected torch-<name> with <name> of 1 to 58 letters, digits, _ . - (64 "
     "characters in all), got 'eager'"),
    ("torch-backend-slash", "a torch backend name with a path separator",
     W + "torch_backends: {torch-a/b: {kind: eager}}\n",
     "torch_backends: expected torch-<name> with <name> of 1 to 58 letters, digits, _ . - (64 "
     "characters in all), got 'torch-a/b'"),
    # --- keys that are no strings (YAML reads 3090, ~, true, 1.5 unquoted as such) -------
    ("key-int-sku", "a SKU named 3090, unquoted (an integer key)", W + "skus: {3090: {}}\n",
     'skus: key 3090 is an integer; expected a string name (quote it: "3090", line 2)'),
    ("key-null-sku", "a SKU named ~ (a null key)", W + "skus: {~: {}}\n",
     'skus: key ~ is null; expected a string name (quote it: "~"'),
    ("key-bool-top", "a top-level key true (a boolean key)", W + "true: 1\n",
     '<top>: key true is a boolean; expected a string name (quote it: "true"'),
    ("key-float-top", "a top-level key 1.5 (a float key)", W + "1.5: x\n",
     '<top>: key 1.5 is a number; expected a string name (quote it: "1.5"'),
    ("key-int-measurement", "an integer key in a SKU's measurement mapping",
     W + "skus:\n  cpu:\n    measurement: {3: 1}\n",
     'skus.cpu.measurement: key 3 is an integer; expected a string name (quote it: "3", '
     "line 4)"),
    ("key-int-workload", "an integer key in a workload entry",
     "workloads: [{model: linear, 7: x}]\n", "workloads[0]: key 7 is an integer"),
    ("key-bool-ab-side", "a key yes (YAML 1.1's boolean) in an A/B pair's side",
     W + "ab_pairs: [{base: {sku: cpu-host, backend: torch-eager, yes: 1}, new: cpu-host}]\n",
     'ab_pairs[0].base: key yes is a boolean; expected a string name (quote it: "yes"'),
    ("key-int-torchao", "an integer key in a torchao model_params entry",
     "model_params: [{name: a, 10: 1}]\n", "model_params[0]: key 10 is an integer"),
    ("key-null-goldens", "a null key among the gate's settings", W + "goldens: {null: 1}\n",
     'goldens: key null is null; expected a string name (quote it: "null"'),
    ("key-date-sku", "a SKU named 2024-01-01 (YAML reads a date)",
     W + "skus: {2024-01-01: {}}\n", "skus: key 2024-01-01 is a date"),
    ("key-list", "a list as a key", W + "? [a, b]\n: 1\n",
     "<top>: a key is a list; expected a string name (line 2)"),
    # --- names matched whole: a trailing newline is no part of a name -------------------
    ("sku-newline", "a SKU name ending in a newline (\"cpu\\n\")", W + 'skus: {"cpu\\n": {}}\n',
     f"skus: {NAME} and folders), got 'cpu\\n'"),
    ("suite-name-block-scalar", "suite_name as a block scalar (which keeps its newline)",
     W + "suite_name: |\n  nightly\n", f"suite_name: {NAME} and folders), got 'nightly\\n'"),
    ("model-newline", "a model name ending in a newline",
     'workloads: [{model: "linear\\n"}]\n', "workloads[0].model: expected"),
    ("recipe-newline", "a recipe name ending in a newline", W + 'recipes: ["baseline\\n"]\n',
     "recipes[0]: expected a recipe: baseline"),
    ("torch-backend-newline", "a torch backend name ending in a newline",
     W + 'torch_backends: {"torch-x\\n": {kind: eager}}\n',
     "torch_backends: expected torch-<name> with <name> of 1 to 58 letters"),
    ("golden-key-newline", "a golden key ending in a newline",
     W + 'benchmark_files: {golden_keys: {cpu-host: "cpu\\n"}}\n',
     "benchmark_files.golden_keys.cpu-host: expected a string matching"),
    ("chip-newline", "a target chip ending in a newline (never asked of iree-compile)",
     W + 'skus: {gpu: {iree: {target_backend: cuda, target_chip: "sm_80\\n", device: cuda}}}\n',
     "skus.gpu.iree.target_chip: expected a string matching"),
    # --- names that are too long for a file name ----------------------------------------
    ("sku-300-chars", "a SKU name of 300 characters", W + f"skus: {{{'s' * 300}: {{}}}}\n",
     f"skus: {NAME} and folders), got 'sss"),
    ("suite-name-65-chars", "a suite_name of 65 characters", W + f"suite_name: {'n' * 65}\n",
     f"suite_name: {NAME}"),
    ("recipe-too-long", "a recipe of torchao's form, 223 characters long",
     W + f"recipes: [int8_dynamic_activation_intx_weight-4-{'1' * 180}-asym]\n",
     "at most 100 characters (it names files), got 'int8_dynamic_activation_intx_weight-4-1"),
    ("sparsity-too-long", "a sparsity recipe name of 40 characters",
     W + f"sparsity_config_recipe_names: [{'x' * 36}semi]\n",
     "sparsity_config_recipe_names[0]: expected a torchao sparsity recipe of at most 32"),
    # --- dimensions: integers as written, within 2^20 ------------------------------------
    ("dim-float", "a dimension written 16.0",
     "workloads: [{model: linear, shapes: [[16.0, 2, 2]]}]\n",
     "workloads[0].shapes[0][0]: expected integer, got float 16.0"),
    ("dim-negative-zero", "a dimension written -0 (YAML's integer 0)",
     "workloads: [{model: linear, shapes: [[-0, 2, 2]]}]\n",
     "workloads[0].shapes[0][0]: expected minimum 1: 0 is less than the minimum of 1"),
    ("dim-2-63", "a dimension of 2^63 (past int64)",
     f"workloads: [{{model: linear, shapes: [[{2**63}, 2, 2]]}}]\n",
     "workloads[0].shapes[0][0]: expected maximum 1048576"),
    ("dim-custom-float", "a torchao custom shape with a float dimension",
     MP % "custom, shapes: [[1024, 1024.0, 1024]]",
     "matrix_shapes[0].shapes[0][1]: expected integer, got float 1024.0"),
    ("layers-float", "layers written 2.0", "workloads: [{model: bert, layers: 2.0}]\n",
     "workloads[0].layers: expected ['integer', 'null'], got float 2.0"),
    ("layers-too-many", "layers 100000", "workloads: [{model: bert, layers: 100000}]\n",
     "workloads[0].layers: expected maximum 1024"),
    ("batch-size-float", "torch_batch_size written 64.0", W + "torch_batch_size: 64.0\n",
     "torch_batch_size: expected integer, got float 64.0"),
    ("cpu-slots-zero", "cpu_slots 0 (at least one slot times)", W + "cpu_slots: 0\n",
     "cpu_slots: expected minimum 1"),
    ("cpu-slots-word", "cpu_slots written as a word", W + "cpu_slots: two\n",
     "cpu_slots: expected integer, got str 'two'"),
    ("slurm-exclusive-word", "a SKU's slurm.exclusive written yes-please",
     "skus: {host: {slurm: {exclusive: yes-please}}}\n",
     "skus.host.slurm.exclusive: expected true, false or null"),
    # --- ids that two entries spell alike ------------------------------------------------
    ("workload-id-twice", "two entries whose workloads get one id but differ (their group)",
     "workloads:\n  - {model: linear, shapes: [[2, 2, 2]], group: a}\n"
     "  - {model: linear, shapes: [[2, 2, 2]], group: b}\n",
     "workloads[1]: workload linear-2x2x2-f32 is defined differently by workloads[0]"),
    ("case-twice-two-spellings", "one case from shapes in one entry and matrix_shapes in another",
     "workloads:\n  - {model: linear, shapes: [[16, 2, 2]]}\n"
     "  - {model: linear, matrix_shapes: [{name: custom, shapes: [[16, 2, 2]]}]}\n",
     "workloads[1]: case cpu-host/iree/linear-16x2x2-f32/baseline is already defined by "
     "workloads[0]"),
]


def write(tmp_path: Path, case_id: str, content: str | bytes) -> Path:
    path = tmp_path / ("suite.json" if case_id.startswith("json-file") else "suite.yaml")
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


@pytest.mark.tool
@pytest.mark.parametrize(("case_id", "description", "content", "expected"), CASES,
                         ids=[c[0] for c in CASES])
def test_malformed_suite_is_refused_with_file_key_and_expectation(
        tmp_path, case_id, description, content, expected):
    path = write(tmp_path, case_id, content)
    start = time.monotonic()
    with pytest.raises(ConfigError) as err:
        load([path])
    assert time.monotonic() - start < HANG_GUARD_S  # guards against a hang, not a speed goal
    problems = err.value.problems
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{path}: "), problems
    assert expected in problems[0], problems


def test_the_table_is_large_and_its_ids_unique():
    assert len(CASES) >= 25
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.tool
@pytest.mark.parametrize("case_id", ["not-utf8", "alias-bomb", "duplicate-key",
                                     "json-file-truncated", "deep-nesting", "sku-dotdot",
                                     "max-cases", "key-int-sku", "key-null-sku"])
def test_benchflow_validate_prints_the_problem_without_a_traceback(tmp_path, case_id):
    _, _, content, expected = next(c for c in CASES if c[0] == case_id)
    path = write(tmp_path, case_id, content)
    proc = subprocess.run([str(BENCHFLOW), "validate", str(path)], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr + proc.stdout
    assert expected in proc.stderr


@pytest.mark.tool
def test_a_non_utf8_json_file_is_refused_by_validate_too(tmp_path):
    path = tmp_path / "suite.json"
    path.write_bytes(b'{"suite_name": "caf\xe9"}')
    proc = subprocess.run([str(BENCHFLOW), "validate", str(path)], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"{path}: not UTF-8 text (byte 0xe9 at offset 19)" in proc.stderr


# --- keys, names and ids beyond one file's text -------------------------------------------

def test_keys_that_are_no_strings_in_overrides_are_named_too(tmp_path):
    """--config overrides (Snakemake parses their values as YAML) and suites built in code
    never pass a file's reader: the same refusal, before any name is matched."""
    path = write(tmp_path, "ok", W)
    with pytest.raises(ConfigError) as err:
        load([path], {"skus": {3090: {}, "cpu": {"measurement": {None: 1}}}})
    assert err.value.problems == [
        f'{path}: skus.cpu.measurement: key null is null; expected a string name (quote it: '
        '"null")',
        f'{path}: skus: key 3090 is an integer; expected a string name (quote it: "3090")']


def test_a_name_of_64_characters_is_fine_and_65_is_not(tmp_path):
    ok = write(tmp_path, "ok", W + f"skus: {{{'s' * 64}: {{}}}}\nsuite_name: {'n' * 64}\n")
    assert [c.sku for c in load([ok]).cases] == ["s" * 64]
    ok.write_text(W + f"skus: {{{'s' * 65}: {{}}}}\n")
    with pytest.raises(ConfigError, match="skus: expected a name of 1 to 64 letters"):
        load([ok])


def test_a_dimension_of_2_to_the_20_is_fine_and_one_more_is_not(tmp_path):
    path = write(tmp_path, "ok", f"workloads: [{{model: linear, shapes: [[{2**20}, 1, 1]]}}]\n")
    assert load([path]).cases[0].workload.shape == (2**20, 1, 1)
    path.write_text(f"workloads: [{{model: linear, shapes: [[{2**20 + 1}, 1, 1]]}}]\n")
    with pytest.raises(ConfigError, match=r"shapes\[0\]\[0\]: expected maximum 1048576"):
        load([path])


def test_a_workload_id_longer_than_a_file_name_allows_is_refused(tmp_path):
    """Every name is capped at 64 characters; only a combination of long ones (here a
    model registered with a 64-character name and config and nine dimensions of 2^20)
    makes a workload id past paths.MAX_ID, which is refused naming the entry."""
    model, config = "long_" + "m" * 59, "c" * 64
    (tmp_path / "models.py").write_text(
        "from workflow.models.registry import benchmark_model\n\n\n"
        f"@benchmark_model(configs=[{config!r}], default_shape=(1,) * 9, shape_doc='9-D')\n"
        f"def {model}(config, dtype, layers, shape):\n"
        "    \"\"\"A model whose names are as long as names may be.\"\"\"\n")
    path = write(tmp_path, "long", f"model_modules: [models.py]\nworkloads: [{{model: {model}, "
                 f"shapes: [[{', '.join([str(2**20)] * 9)}]]}}]\n")
    wid = f"{model}-{config}-{'x'.join([str(2**20)] * 9)}-f32"
    with pytest.raises(ConfigError) as err:
        load([path])
    assert err.value.problems == [
        f"{path}: workloads[0]: workload id {wid[:40]}... is {len(wid)} characters; expected "
        f"at most {MAX_ID} (it names files: use shorter model, config or model_params names)"]
    assert len(wid) == 205


def test_a_torch_pair_whose_side_label_is_too_long_is_refused(tmp_path):
    sku, backend = "s" * 64, "torch-" + "b" * 58
    recipe = f"int8_dynamic_activation_intx_weight-4-{'1' * 40}-asym"
    side = f"{{sku: %s, backend: {backend}, recipe: {recipe}}}"
    path = write(tmp_path, "pair", f"skus: {{{sku}: {{}}, other: {{}}}}\n"
                 f"torch_backends: {{{backend}: {{kind: eager}}}}\nbackends: [{backend}]\n"
                 f"recipes: [{recipe}]\n{W}ab_pairs: [{{base: {side % sku}, "
                 f"new: {side % 'other'}}}]\n")
    with pytest.raises(ConfigError) as err:
        load([path])
    assert err.value.problems == [
        f"{path}: ab_pairs[0]: {'s' * 40}... is 213 characters; expected at most {MAX_ID} "
        "for a side (sku+backend+recipe) or a pair's workloads (base+new): it names a folder"]


def test_loop_count_may_not_take_the_name_of_another_sku(tmp_path):
    """`--loop-count 3` on cpu-host runs SKU cpu-host-loop3: a SKU of that name with other
    settings would share its case ids, work directory and results."""
    from workflow.cli.main import build_parser
    from workflow.commands.single_run import plan_run

    path = write(tmp_path, "loop", W + "skus: {cpu-host: {}, cpu-host-loop3: "
                 "{iree: {target_cpu: generic}}}\n")
    opts = build_parser().parse_args(["run", "-m", "linear", "--sku", "cpu-host",
                                      "--configfile", str(path), "--loop-count", "3"])
    with pytest.raises(ConfigError) as err:
        plan_run(opts)
    assert err.value.problems == [
        f"benchflow run: --loop_count 3: SKU cpu-host with 3 repetitions is named "
        f"cpu-host-loop3, which is also a SKU of {path} with other settings; expected a name "
        "of its own (rename that SKU, or run --sku cpu-host-loop3)"]
    # The same settings under that name: the same SKU, the same results; not refused.
    path.write_text(W + "skus: {cpu-host: {}, cpu-host-loop3: {measurement: "
                    "{repetitions: 3}}}\n")
    assert plan_run(opts).case.id == "cpu-host-loop3/iree/linear-128x256x256-f32/baseline"


def test_benchflow_runs_work_directory_stays_one_short_path_component():
    """results/cli/<case id with / as +>: four names of up to 64 characters and a workload
    id can pass 255 bytes; past MAX_ID the name keeps its start and a hash of the id."""
    from workflow.commands.single_run import flat_id

    short = "cpu-host/iree/linear-f32/baseline"
    assert flat_id(short) == "cpu-host+iree+linear-f32+baseline"
    longs = [f"{'s' * 64}/torch-{'b' * 58}/linear-{n}x1x1-f32/{'r' * 100}" for n in (1, 2)]
    flat = [flat_id(i) for i in longs]
    assert all(len(f) == MAX_ID and "/" not in f for f in flat) and flat[0] != flat[1]


def test_yaml_merge_keys_are_no_duplicates(tmp_path):
    """`<<: *anchor` then a key of the anchor's overrides it: YAML's merge, not a duplicate."""
    path = write(tmp_path, "merge", "workloads:\n  - &w {model: linear, dtypes: [f32]}\n"
                 "  - {<<: *w, dtypes: [bf16]}\n")
    suite = load([path])
    assert {w.dtype for w in suite.workloads.values()} == {"f32", "bf16"}


def test_an_empty_file_and_a_bom_are_fine(tmp_path):
    path = write(tmp_path, "bom", "\ufeff" + W)
    assert load([path]).workloads
    (tmp_path / "empty.yaml").write_text("")
    with pytest.raises(ConfigError, match="expected at least one workload"):
        load([tmp_path / "empty.yaml"])


def test_a_directory_is_refused_not_raised(tmp_path):
    with pytest.raises(ConfigError) as err:
        load([tmp_path])
    assert err.value.problems == [f"{tmp_path}: is a directory, not a regular file; "
                                  "expected a suite file"]


def test_a_json_file_that_is_fine_loads(tmp_path):
    path = tmp_path / "suite.json"
    path.write_text('{"workloads": [{"model": "linear"}], "suite_name": "j"}')
    assert load([path]).config["suite_name"] == "j"


# --- max_cases ----------------------------------------------------------------------------

@pytest.mark.slow
def test_raising_max_cases_runs_the_large_suite(tmp_path):
    path = write(tmp_path, "big", "max_cases: 20000\n" + MP % "sweep, min_power: 0, "
                 "max_power: 20")
    suite = load([path])
    assert len(suite.cases) == 9261 * 2


@pytest.mark.slow
def test_many_alike_huge_generators_are_refused_without_building_their_shapes(tmp_path):
    gens = ", ".join(["{name: sweep, min_power: 0, max_power: 20}",
                      "{name: small_sweep, min_power: 0, max_power: 20}"] * 5000)
    path = write(tmp_path, "gens", f"model_params: [{{name: a, matrix_shapes: [{gens}]}}]\n")
    start = time.monotonic()
    with pytest.raises(ConfigError, match="expands to more than max_cases"):
        load([path])
    assert time.monotonic() - start < HANG_GUARD_S  # guards against a hang, not a speed goal


def test_max_cases_counts_the_cases_before_the_entry(tmp_path):
    path = write(tmp_path, "two", "max_cases: 3\nworkloads:\n"
                 "  - {model: linear, shapes: [[2, 2, 2], [4, 4, 4]]}\n"
                 "  - {model: linear, shapes: [[8, 8, 8], [16, 16, 16]]}\n")
    with pytest.raises(ConfigError) as err:
        load([path])
    assert err.value.problems == [
        f"{path}: workloads[1]: expands to more than max_cases (3) cases after the 2 cases "
        "before it: up to 2 shapes x 1 (configs x dtypes x modes x SKUs x backends x "
        "recipes) = 2; expected at most max_cases: raise max_cases to run it, or narrow "
        "its matrix_shapes, SKUs, backends or recipes"]
    path.write_text(path.read_text().replace("max_cases: 3", "max_cases: 4"))
    assert len(load([path]).cases) == 4


def test_max_cases_is_described_with_a_default_in_the_schema():
    prop = load_schema()["properties"]["max_cases"]
    assert prop["default"] == 10000 and prop["minimum"] == 1 and "description" in prop


# --- memory -------------------------------------------------------------------------------

def test_a_gemm_larger_than_this_machines_memory_is_recorded_unsupported(tmp_path,
                                                                         monkeypatch):
    monkeypatch.setattr(shapes, "physical_memory_bytes", lambda: int(23.4 * 2**30))
    path = write(tmp_path, "mem", "backends: [iree, torch-eager]\nworkloads:\n"
                 "  - {model: linear, dtypes: [bf16, f32], "
                 "shapes: [[65536, 65536, 65536], [1024, 1024, 1024]]}\n")
    suite = load([path])  # planned here, maybe measured on a larger node: not refused
    reasons = {(c.workload.shape, c.workload.dtype, c.backend): c.unsupported
               for c in suite.cases}
    big = (65536,) * 3
    assert reasons[(big, "bf16", "torch-eager")] == (
        "[65536, 65536, 65536] needs ~24.0 GiB (inputs, weights and output in bf16) but "
        "this machine has 23.4 GiB")
    assert reasons[(big, "f32", "iree")] == (
        "[65536, 65536, 65536] needs ~48.0 GiB (inputs, weights and output in f32) but "
        "this machine has 23.4 GiB")
    assert reasons[((1024,) * 3, "f32", "iree")] is None
    # Unsupported cases are in no torch batch: no job runs them.
    batched = {c.id for cases in suite.torch_batches.values() for c in cases}
    assert not any(c.id in batched for c in suite.unsupported_cases)


def test_memory_is_not_judged_where_the_os_does_not_tell(tmp_path, monkeypatch):
    monkeypatch.setattr(shapes, "physical_memory_bytes", lambda: None)
    path = write(tmp_path, "mem", "workloads: [{model: linear, shapes: [[65536, 65536, "
                 "65536]]}]\n")
    assert not load([path]).unsupported_cases


def test_gemm_bytes_and_physical_memory():
    assert shapes.gemm_bytes([2, 3, 4], "bf16") == (6 + 12 + 8) * 2
    assert shapes.physical_memory_bytes() > 2**28


@pytest.mark.parametrize("spec", [
    {"name": "sweep", "min_power": 0, "max_power": 20}, {"name": "small_sweep"},
    {"name": "small_sweep", "min_power": 3, "max_power": 9}, {"name": "pow2_extended"},
    {"name": "pow2"}, {"name": "llama"}, {"name": "llama4"},
    {"name": "custom", "shapes": [[1, 2, 3]]}, {"name": "sweep", "min_power": 9,
                                                 "max_power": 8}])
def test_count_is_the_number_of_generated_shapes(spec):
    assert shapes.count(spec) == len(shapes.generate(spec))


def test_the_value_a_too_few_refusal_asks_for_is_accepted(tmp_path):
    """adaptive-too-few and ab-rounds-too-few name the value to set: it loads."""
    load([write(tmp_path, "inv", W + "skus: {cpu: {measurement: {invocations: 3, "
                                       "max_invocations: 7}}}\n")])
    load([write(tmp_path, "ab", W + "skus: {a: {}, b: {iree: {target_cpu: generic}}}\n"
                                    "ab: {min_rounds: 2, max_rounds: 7}\n"
                                    "ab_pairs: [{base: a, new: b}]\n")])
