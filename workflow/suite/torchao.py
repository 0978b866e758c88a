"""torchao microbenchmark files (`benchmark_mode`, `quantization_config_recipe_names`,
`model_params`, ...) as benchflow workloads, so such a file runs unchanged as a suite.

torchao's microbenchmarks (pytorch/ao benchmarks/microbenchmarks, published 2025-03-17
in 6b76adbe, deleted 2026-07-30 in ac7bcee7) changed their semantics over time. "v1" is
6b76adbe .. 317179ea^ (2025-03-17 .. 2025-08-12), "v2" is 317179ea .. dbef6992
(2025-08-12 .. 2026-07-30, the last published version). Which version each key follows:

key                               follows      meaning here
--------------------------------  -----------  ----------------------------------------------
benchmark_mode                    v1 = v2      inference; training becomes training workloads
                                               (v2 printed "not implemented")
quantization_config_recipe_names  v2 (= v1)    recipes; baseline is added for inference (v1
                                               added it; v2 measures it in every row)
sparsity_config_recipe_names      v2 (= v1)    get_quantization_sparsity_recipes' pairs: block
                                               with baseline; semi / 2:4 with marlin*,
                                               int8dq*, float8dq* and a listed baseline;
                                               named <quantization>.sparsity-<name>
output_dir                        v1 = v2      recorded only (benchflow writes results/)
model_params                      v1 = v2      a list of entries (or one mapping, as the
                                               README shows)
name                              v1 = v2      the cases' `group`; tells apart the same shape
                                               in two entries (workload id + "-<name>")
matrix_shapes                     v2           get_shapes_for_config's generators at dbef6992
high_precision_dtype              v1 = v2      torch.float32/float16/bfloat16 (`torch.` is
                                               optional, as getattr(torch, name) reads it)
torch_compile_mode                v2           no use_torch_compile: eager AND
                                               torch.compile(mode, fullgraph=True) cases
                                               (default mode "default"), as v2 always
                                               measures both
use_torch_compile                 v1           true: torch.compile(torch_compile_mode,
                                               fullgraph=True) cases only; false: eager only
                                               (v2 ignores the key)
device                            v1 = v2      cpu, cuda, mps, xpu; one the machine lacks is
                                               recorded unsupported (torchao ran on the CPU);
                                               a file without `skus` runs each entry on a
                                               SKU named for its device (cpu-host, cuda);
                                               the suite key torchao_device (benchflow's)
                                               runs every entry on one device instead
model_type                        v2           a registered model; transformer_block is
                                               torchao's [M, K, N] block with K the hidden
                                               size (torchao_transformer_block)
enable_profiler                   v1 = v2      a Chrome trace per case
enable_memory_profiler            v1 = v2      a CUDA memory snapshot per case; on the CPU
                                               recorded as unsupported
enable_memory_visualizer          27179874     an HTML view of the snapshot; recorded why not
                                  (PR #3346's  where it cannot be made
                                  branch)
scaling_*, use_fast_accum,        training     recorded only
repeat_n                          branch

Keys of torchao's drafts before v1 (`compile`, `m`/`k`/`n`, `quantization(s)`,
`precision`, ...) were never read by a published runner: the schema refuses them,
naming the current spelling (its `x-obsolete` tables).
"""

from __future__ import annotations

import copy

from workflow.backends.torch.recipes import sparsity_kind, sparsity_recipe_name

# torchao parses high_precision_dtype as getattr(torch, value.split(".")[-1]).
DTYPES = {f"{prefix}{name}": dtype
          for prefix in ("torch.", "")
          for name, dtype in (("float32", "f32"), ("float", "f32"), ("float16", "f16"),
                              ("half", "f16"), ("bfloat16", "bf16"))}
# torchao model_type -> benchflow model, where the names differ in meaning.
MODEL_TYPES = {"transformer_block": "torchao_transformer_block"}
V1_COMPILE_KEY = "use_torch_compile"
# torchao's runner times every case with Timer(num_threads=1) (its utils.py,
# model_inference_time_in_ms): a torchao file that names no SKUs of its own measures on
# one thread too, so that its numbers compare with torchao's and a batch's thread count
# never depends on the machine's load when it starts. Its invocations are short, as
# torchao's own timing is (100 calls after 100 warm-up calls): each is a child of the
# warm worker, at least 3 warm-up calls and a 0.1 s block (the forks of one worker timed
# a 22 ms linear alike after 3 calls and 0.1 s, 10 calls and 0.2 s, or 30 calls and
# 0.1 s: within 1.2 %), and the interval comes from 10 to 14 invocations: at 10 the
# median's interval is the second-lowest to the second-highest, so one stray invocation
# on a shared machine no longer sets its width, as [min, max] at 7 did (0.1 s blocks at
# 6 to 12 invocations: widths of 12-48 % where one invocation in seven ran long). Its
# question is a speedup (a recipe against baseline, compiled against eager), which a
# 5 % wide interval of each side answers where a change is worth a dashboard's row;
# torchao's own figure has no interval at all (issue 34).
CPU_SKU = "cpu-host"
CPU_SETTINGS = {"torch": {"threads": 1},
                "measurement": {"torch_warmup_calls": 3, "torch_warmup_s": 0.0,
                                "torch_min_run_time_s": 0.1,
                                "invocations": 10, "max_invocations": 14,
                                "target_rel_width": 0.05}}
# An accelerator's (cuda, and mps or xpu alike) invocations are in-process blocks of the
# warm worker, never forked children: a CUDA context does not survive fork
# (backends/torch/invocations.py, _can_fork). A block comes right after another case's
# block in the same process (the cases of a batch take turns), so the process, its
# allocator and the GPU's clocks are warm, but its fresh input buffers and the kernels
# of its own case are not: the warm-up is a time, 0.05 s, because 3 calls of a 50 us
# kernel (a bf16 linear on an H100) are 150 us of warm-up, too little for the GPU's
# clocks to settle after the host-side work between blocks. One host thread launches
# the kernels, as torchao's Timer(num_threads=1) does; the 0.1 s block holds thousands
# of such calls, and the interval comes from 10 to 14 blocks as on the CPU.
ACCELERATOR_SETTINGS = {"torch": {"threads": 1},
                        "measurement": {"torch_warmup_calls": 3, "torch_warmup_s": 0.05,
                                        "torch_min_run_time_s": 0.1,
                                        "invocations": 10, "max_invocations": 14,
                                        "target_rel_width": 0.05}}
# The devices a torchao entry may name (config/schema.yaml's model_params device).
DEVICES = ("cpu", "cuda", "mps", "xpu")
# The SKUs of a torchao file whose entries name no device the schema knows (it reports
# them), or none at all: the CPU's.
TORCHAO_SKUS = {CPU_SKU: CPU_SETTINGS}


# The suite key that runs every entry on one device instead of its own (`--config
# torchao_device=cpu`: torchao's published files are all `device: cuda`, and a CPU
# machine would otherwise record every case unsupported).
OVERRIDE_KEY = "torchao_device"


def device_sku(device: str) -> str:
    """The SKU a torchao entry's device runs on where the file names no SKUs: cpu-host
    for the CPU, else the device's own name (cuda), so that a GPU case's id, folder,
    report row and dashboard row say where it ran."""
    return CPU_SKU if device == "cpu" else device


# The device each name that device_sku gives stands for: such a name is what a report
# row, a dashboard row and a golden file show as where a case ran.
NAMED_DEVICES = {device_sku(d): d for d in DEVICES}


def _entries(raw: dict) -> list:
    params = raw.get("model_params")
    return [params] if isinstance(params, dict) else params if isinstance(params, list) else []


def device_override(raw) -> str | None:
    """The suite's torchao_device where it is a device the schema takes (the schema
    reports any other value), else None. Read before validation too."""
    value = raw.get(OVERRIDE_KEY) if isinstance(raw, dict) else None
    return value if isinstance(value, str) and value in DEVICES else None


def override_problems(raw, source: str) -> list[str]:
    """torchao_device in a suite without model_params entries would change nothing: it is
    refused, not ignored, so that `--config torchao_device=cpu` never seems to have run
    a suite somewhere it did not."""
    if device_override(raw) is None or _entries(raw):
        return []
    return [f"{source}: {OVERRIDE_KEY}: {raw[OVERRIDE_KEY]!r} given to a suite without "
            "torchao model_params entries; expected a torchao microbenchmark file (it moves "
            "their `device`), or no torchao_device"]


def override_note(config: dict) -> str | None:
    """What the report's provenance says of a torchao_device that moved entries off the
    device the file asked for, e.g. "torchao file asked cuda; run on cpu by
    torchao_device=cpu"; None where it moved none."""
    device = device_override(config)
    asked = {e.get("device", "cpu") for e in _entries(config) if isinstance(e, dict)}
    if device is None or not asked - {device}:
        return None
    return (f"torchao file asked {' and '.join(sorted(asked))}; run on {device} by "
            f"{OVERRIDE_KEY}={device}")


def sku_name_problems(config: dict, entry: dict, axes, where: str) -> list[str]:
    """A SKU named for one device (cpu-host, cuda, mps, xpu: NAMED_DEVICES) that would
    hold the torch cases of an entry of another: one line per SKU. An entry's torch cases
    run on the entry's device (a SKU's settings name no torch device, and its name never
    decides one), so such a name would file, report and send to the dashboard a CPU
    measurement as a cuda one, or a cuda one as cpu-host's. `axes` are the SKUs and
    backends the entry's cases go to (load._Axes); its IREE cases ("iree", load.IREE)
    run where their SKU's iree section says, whatever the entry's device."""
    if all(backend == "iree" for backend in axes.backends):
        return []
    device, out = entry["device"], []
    moved = " (torchao_device)" if "_origin" in entry and device_override(config) else ""
    for sku in axes.skus:
        named = NAMED_DEVICES.get(sku)
        if named is None or named == device:
            continue
        fix = (f"add a SKU {device_sku(device)} to the file's skus for its {device} entries"
               if "_origin" in entry else f"list the entry's skus without {sku!r}")
        key = "device" if "_origin" in entry else "skus"
        out.append(f"{where}.{key}: its {device}{moved} torch cases would be measured and "
                   f"reported under SKU {sku!r}, whose name says {named}; expected SKUs "
                   f"named for where their cases run: {fix}, or rename SKU {sku!r} (e.g. "
                   "after the machine)")
    return out


def with_torchao_skus(raw):
    """A torchao file (it has model_params) without `skus`: a SKU for each device its
    entries use (device_sku: CPU_SETTINGS for the CPU, ACCELERATOR_SETTINGS for the
    others), so that a file of `device: cuda` entries measures on a SKU named cuda, and
    a file mixing devices gets both; with torchao_device, the SKU of that device alone.
    Entries not yet validated are read defensively: a device the schema refuses makes
    no SKU (the schema reports it)."""
    if not (isinstance(raw, dict) and "model_params" in raw and "skus" not in raw):
        return raw
    devices = {e.get("device", "cpu") for e in _entries(raw)
               if isinstance(e, dict) and isinstance(e.get("device", "cpu"), str)}
    if devices and device_override(raw):
        devices = {device_override(raw)}
    skus = {device_sku(d): CPU_SETTINGS if d == "cpu" else ACCELERATOR_SETTINGS
            for d in DEVICES if d in devices}
    return {**raw, "skus": copy.deepcopy(skus or TORCHAO_SKUS)}


def entry_skus(config: dict, device: str) -> list[str]:
    """The SKUs a torchao entry of `device` runs on: the one named for its device where
    the suite's SKUs are all named for devices (as with_torchao_skus makes them, or as a
    file names them itself) and one is its device's; else every SKU of the suite ([]),
    as a file that names its own SKUs has always had. The names pick a SKU for a device,
    never a device: where every SKU would hold an entry of another device than its name
    says, the suite is refused (sku_name_problems), never filed under that name."""
    names = set(config["skus"])
    if names <= {device_sku(d) for d in DEVICES} and device_sku(device) in names:
        return [device_sku(device)]
    return []


def torchao_recipes(config: dict) -> list[str]:
    """Recipe names of a torchao file, in torchao's order: baseline (inference), the
    quantization recipes, then the sparsity pairs of get_quantization_sparsity_recipes."""
    quant = list(config["quantization_config_recipe_names"])
    recipes = list(quant)
    if config["benchmark_mode"] == "inference" and "baseline" not in recipes:
        recipes.insert(0, "baseline")
    for sparse in config["sparsity_config_recipe_names"]:
        if sparsity_kind(sparse) == "block":
            recipes.append(sparsity_recipe_name("baseline", sparse))
            continue
        for q in quant:
            if "marlin" in q or "int8dq" in q or "float8dq" in q or q == "baseline":
                recipes.append(sparsity_recipe_name(q, sparse))
    return list(dict.fromkeys(recipes)) or ["baseline"]


def _backends(entry: dict, config: dict) -> list[str]:
    """torch-eager and/or a torch.compile backend, as the torchao version whose keys the
    entry uses would measure it (see the table above)."""
    mode = entry.get("torch_compile_mode") or "default"
    name = f"torch-inductor-{mode}"
    # torchao compiles with fullgraph=True; a backend of this name the suite defines wins.
    config["torch_backends"].setdefault(name, {"kind": "inductor", "compile_mode": mode,
                                               "fullgraph": True})
    config["torch_backends"].setdefault("torch-eager", {"kind": "eager",
                                                        "compile_mode": "default",
                                                        "fullgraph": False})
    if V1_COMPILE_KEY in entry:
        return [name] if entry[V1_COMPILE_KEY] else ["torch-eager"]
    return ["torch-eager", name]


def translate_model_params(config: dict) -> list[dict]:
    """Workload entries (with every workload key set) for the suite's model_params.

    The torch.compile backends used are added to config["torch_backends"] as
    torch-inductor-<torch_compile_mode> (fullgraph, as torchao compiles). Each entry
    runs on its device, the suite's torchao_device where it sets one, and on the SKU of
    that device (entry_skus).
    """
    params = config.get("model_params") or []
    if isinstance(params, dict):
        params = [params]
    mode = config["benchmark_mode"]
    recipes = torchao_recipes(config)
    out = []
    for i, entry in enumerate(params):
        model_type = entry.get("model_type", "linear")
        device = device_override(config) or entry.get("device", "cpu")
        out.append({
            "_origin": f"model_params[{i}]",
            "model": MODEL_TYPES.get(model_type, model_type),
            "configs": [], "layers": None, "skus": entry_skus(config, device),
            "dtypes": [DTYPES[entry.get("high_precision_dtype", "torch.bfloat16")]],
            "shapes": [], "matrix_shapes": entry.get("matrix_shapes") or [],
            "backends": _backends(entry, config), "recipes": recipes, "modes": [mode],
            "device": device, "group": entry.get("name") or None,
            "profiler": bool(entry.get("enable_profiler")),
            "memory_profiler": bool(entry.get("enable_memory_profiler")),
            "memory_visualizer": bool(entry.get("enable_memory_visualizer")),
        })
    return out
