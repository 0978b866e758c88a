"""The model registry, after Forge's `@benchmark_model(configs=[...])`.

Registration records only metadata, so listing models and expanding a suite never
imports torch (the Snakefile does both on every invocation, dry runs included).
The model function imports torch itself when it is called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

DTYPES = ("f32", "f16", "bf16")


@dataclass
class ModelInstance:
    """What a model function returns: an fp32 module in eval mode and seeded example inputs."""

    module: Any
    inputs: tuple
    flops: float | None = None  # floating-point operations of one forward call, where known


@dataclass(frozen=True)
class ModelSpec:
    name: str
    fn: Callable[..., ModelInstance]
    configs: tuple[str, ...]
    default_config: str
    default_shape: tuple[int, ...]
    shape_doc: str
    supports_layers: bool
    description: str
    source: str | None = None  # the file of a model from a suite's model_modules; None if built in
    # The model's own accuracy threshold per dtype ({"f32": 0.9999}): it replaces the suite's
    # `accuracy.<dtype>.min_pcc`, because how close a backend can get depends on the model
    # (depth, softmax saturation, normalised outputs), not only on the dtype.
    min_pcc: dict[str, float] = field(default_factory=dict, hash=False)
    # Python modules the model needs beyond benchflow's own dependencies (an optional extra),
    # and how to get them; without them the model is listed as unavailable, not hidden.
    requires: tuple[str, ...] = ()
    install_hint: str = ""
    # Each config's own depth ({"tiny": 2}), for models that take `layers`: a workload
    # asking for exactly that many layers is the same workload as one asking for none.
    default_layers: dict[str, int] = field(default_factory=dict, hash=False)

    def unavailable_reason(self) -> str | None:
        """None when the model can be built; else what is missing and how to install it.
        find_spec only locates the modules: nothing is imported, so listing stays fast."""
        import importlib.util

        missing = [m for m in self.requires if importlib.util.find_spec(m) is None]
        if not missing:
            return None
        return f"needs the module(s) {', '.join(missing)}; install with: {self.install_hint}"

    def tolerance(self, dtype: str, suite_tolerance: dict) -> dict:
        """The suite's tolerance for `dtype` with this model's min_pcc, where it has one."""
        tol = dict(suite_tolerance)
        if dtype in self.min_pcc:
            tol["min_pcc"] = self.min_pcc[dtype]
        return tol

    def build(
        self, config: str, dtype: str = "f32", layers: int | None = None, shape=None
    ) -> ModelInstance:
        shape = tuple(shape) if shape else self.default_shape
        return self.fn(config=config, dtype=dtype, layers=layers, shape=shape)


REGISTRY: dict[str, ModelSpec] = {}


def benchmark_model(
    configs: list[str] | None = None,
    *,
    name: str | None = None,
    default_config: str | None = None,
    default_shape: tuple[int, ...],
    shape_doc: str,
    supports_layers: bool = False,
    description: str = "",
    min_pcc: dict[str, float] | None = None,
    requires: tuple[str, ...] = (),
    install_hint: str = "",
    default_layers: dict[str, int] | None = None,
):
    """Registers `fn(config, dtype, layers, shape) -> ModelInstance` as `name` (default: its own).

    `dtype` is one of DTYPES; the same config and shape always give the same weights
    and inputs (seeded), so an f16 module is the f32 one cast down.
    """
    configs = list(configs or ["default"])

    def register(fn: Callable[..., ModelInstance]):
        model = name or fn.__name__
        if model in REGISTRY:
            raise ValueError(f"model {model!r} registered twice")
        REGISTRY[model] = ModelSpec(
            name=model,
            fn=fn,
            configs=tuple(configs),
            default_config=default_config or configs[0],
            default_shape=tuple(default_shape),
            shape_doc=shape_doc,
            supports_layers=supports_layers,
            description=description or _first_line(fn.__doc__),
            source=_CURRENT_FILE[-1] if _CURRENT_FILE else None,
            min_pcc=dict(min_pcc or {}),
            requires=tuple(requires),
            install_hint=install_hint,
            default_layers=dict(default_layers or {}),
        )
        return fn

    return register


def _first_line(doc: str | None) -> str:
    """A model's description from its docstring: the first line, "" without one (a model
    file written for a suite need not document its functions)."""
    lines = (doc or "").strip().splitlines()
    return lines[0].strip() if lines else ""


def get_model(name: str) -> ModelSpec:
    load_builtin_models()
    return REGISTRY[name]


def all_models() -> dict[str, ModelSpec]:
    load_builtin_models()
    return dict(sorted(REGISTRY.items()))


_LOADED_FILES: set[str] = set()
_CURRENT_FILE: list[str] = []  # the model file being imported, recorded as ModelSpec.source


def load_model_files(paths) -> None:
    """Imports Python files whose `@benchmark_model` decorators register more models
    (a suite's `model_modules`), once each per process."""
    import importlib.util
    from pathlib import Path

    for path in paths:
        path = str(Path(path).resolve())
        if path in _LOADED_FILES:
            continue
        name = "benchflow_models_" + "".join(c if c.isalnum() else "_" for c in path)
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"{path}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        _CURRENT_FILE.append(path)
        try:
            spec.loader.exec_module(module)
        finally:
            _CURRENT_FILE.pop()
        _LOADED_FILES.add(path)


def tolerance_for(spec: dict, suite_tolerances: dict) -> dict:
    """The accuracy tolerance of an exported workload (`spec` as in export.json): the
    suite's for its dtype, with the model's own min_pcc where the model declares one."""
    load_model_files(spec.get("model_modules", []))
    return get_model(spec["model"]).tolerance(spec["dtype"], suite_tolerances[spec["dtype"]])


def unavailable_problems(raw, source: str) -> list[str]:
    """Config problems for workloads naming a model whose optional extra is missing."""
    if not isinstance(raw, dict) or not isinstance(raw.get("workloads"), list):
        return []
    load_builtin_models()
    problems = []
    for i, entry in enumerate(raw["workloads"]):
        name = entry.get("model") if isinstance(entry, dict) else None
        spec = REGISTRY.get(name) if isinstance(name, str) else None
        reason = spec.unavailable_reason() if spec else None
        if reason:
            problems.append(f"{source}: workloads[{i}].model: {name!r} is not available: {reason}")
    return problems


# The built-in model files, registered by name: the registry never imports them at
# module level (they import it for the decorator), so there is no import circle.
BUILTIN_MODULES = ("bert", "decoders", "layers", "minilm", "vision")


def load_builtin_models() -> None:
    """Imports the built-in model files once; their decorators register the models.
    torch is not imported here (builders import it when they build)."""
    import importlib

    for name in BUILTIN_MODULES:
        importlib.import_module(f"workflow.models.{name}")
