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
    accepted_shape_ranks: tuple[int, ...] = field(default=())

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
            description=description or (fn.__doc__ or "").strip().splitlines()[0],
            accepted_shape_ranks=(len(default_shape),),
        )
        return fn

    return register


def get_model(name: str) -> ModelSpec:
    load_builtin_models()
    return REGISTRY[name]


def all_models() -> dict[str, ModelSpec]:
    load_builtin_models()
    return dict(sorted(REGISTRY.items()))


def load_builtin_models() -> None:
    # Importing the modules runs their decorators; torch is not imported here.
    from workflow.models import bert, layers  # noqa: F401
