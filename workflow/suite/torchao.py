"""torchao microbenchmark files (`benchmark_mode`, `quantization_config_recipe_names`,
`model_params`, ...) as benchflow workloads, so such a file runs unchanged as a suite."""

from __future__ import annotations

DTYPES = {"torch.float32": "f32", "torch.float16": "f16", "torch.bfloat16": "bf16"}


def _compile_mode(entry: dict) -> str | None:
    """torchao spells it use_torch_compile + torch_compile_mode, or (older) compile."""
    if entry.get("use_torch_compile"):
        return entry.get("torch_compile_mode") or "default"
    old = entry.get("compile")
    if old in (None, False, "false", "False", ""):
        return None
    return "default" if old is True else str(old)


def translate_model_params(config: dict) -> list[dict]:
    """Workload entries (with every workload key set) for the suite's model_params.

    Inductor backends for the compile modes used are added to config["torch_backends"]
    (named torch-inductor, or torch-inductor-<mode> for a mode other than default).
    """
    params = config.get("model_params") or []
    if isinstance(params, dict):
        params = [params]
    mode = config.get("benchmark_mode", "inference")
    recipes = list(config.get("quantization_config_recipe_names") or [])
    if mode == "inference" and "baseline" not in recipes:
        recipes.insert(0, "baseline")  # torchao always measures the baseline for inference
    out = []
    for i, entry in enumerate(params):
        backends = ["torch-eager"]
        cmode = _compile_mode(entry)
        if cmode:
            name = "torch-inductor" if cmode == "default" else f"torch-inductor-{cmode}"
            config["torch_backends"].setdefault(name, {"kind": "inductor", "compile_mode": cmode,
                                                       "fullgraph": False})
            backends.append(name)
        config["torch_backends"].setdefault("torch-eager", {"kind": "eager",
                                                            "compile_mode": "default",
                                                            "fullgraph": False})
        out.append({
            "_origin": f"model_params[{i}]",
            "model": entry.get("model_type", "linear"),
            "configs": [], "layers": None, "skus": [],
            "dtypes": [DTYPES[entry.get("high_precision_dtype", "torch.bfloat16")]],
            "shapes": [], "matrix_shapes": entry.get("matrix_shapes") or [],
            "backends": backends, "recipes": recipes or ["baseline"], "modes": [mode],
            "device": entry.get("device", "cpu"), "group": entry.get("name") or None,
            "profiler": bool(entry.get("enable_profiler")),
            "memory_profiler": bool(entry.get("enable_memory_profiler")),
        })
    return out
