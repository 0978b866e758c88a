"""`type: random` weights of a torch_models test: a parameter archive (.irpa) of random
values for every named parameter an MLIR's globals read, written with iree.runtime's
own archive API (ParameterIndex.add_buffer, create_archive_file), never a format of
ours. As the harness draws them (pytest_iree/irpa_gen.py, the values only: our own
code): numpy's default_rng(seed), in the order of the globals; floats normal with mean
0 and standard deviation 0.01, integers uniform over their type's range.

Archives are kept by content: the seed and every parameter's name, shape and element
type make the file name, so a rerun (or another test of the same parameters and seed)
reuses the archive, and a changed MLIR gets a new one."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np

# `#stream.parameter.named<"scope"::"name">` / `#flow.parameter.named<"name">`: the
# initial value of a global that a parameter archive provides.
NAMED_RE = re.compile(r'#(?:stream|flow)\.parameter\.named<(?:"[^"]*"::)?"([^"]+)">')
# MLIR element types -> numpy dtypes (ml_dtypes for the narrow floats).
INTS = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
        "ui8": np.uint8, "ui16": np.uint16, "ui32": np.uint32, "ui64": np.uint64}
FLOATS = {"f16": np.float16, "f32": np.float32, "f64": np.float64}
NARROW = ("bf16", "f8E4M3FNUZ", "f8E4M3FN")


def parameters(mlir: str | Path) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, shape, element type) of each named parameter of the MLIR's module-level
    util.global ops, in their order. Parsed by IREE's own MLIR bindings."""
    from iree.compiler.ir import Context, MLIRError, Module, RankedTensorType

    out = []
    with Context() as ctx:
        ctx.allow_unregistered_dialects = True
        try:
            module = Module.parse(Path(mlir).read_bytes())
        except MLIRError as exc:  # the MLIR's fault, not ours: a failed case says so
            raise ValueError(" ".join(str(exc).split())[:500]) from None
        for op in module.body.operations:
            if op.operation.name != "util.global" or "initial_value" not in op.attributes:
                continue
            m = NAMED_RE.match(str(op.attributes["initial_value"]))
            if not m:
                continue
            ty = RankedTensorType(op.attributes["type"].value)
            out.append((m.group(1), tuple(ty.shape), str(ty.element_type)))
    return out


def _dtype(element: str):
    if element in INTS:
        return INTS[element]
    if element in FLOATS:
        return FLOATS[element]
    if element in NARROW:
        import ml_dtypes

        return {"bf16": ml_dtypes.bfloat16, "f8E4M3FNUZ": ml_dtypes.float8_e4m3fnuz,
                "f8E4M3FN": ml_dtypes.float8_e4m3fn}[element]
    raise ValueError(f"parameter element type {element} has no random values here "
                     f"(expected one of {[*INTS, *FLOATS, *NARROW]})")


def content_key(seed: int, params: list[tuple[str, tuple[int, ...], str]]) -> str:
    """The archive's key: the seed, every parameter's name, shape and type, and what
    draws the values (this module's code and numpy, whose Generator streams may change
    between releases), so that a change there makes a new archive."""
    from workflow.backends.builds import source_digest

    blob = json.dumps({"seed": seed, "params": [[n, list(s), t] for n, s, t in params],
                       "drawn by": source_digest(__name__), "numpy": np.__version__})
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def values(seed: int, params: list[tuple[str, tuple[int, ...], str]]):
    """(name, array) of each parameter, drawn in order from default_rng(seed)."""
    rng = np.random.default_rng(seed)
    for name, shape, element in params:
        dtype = _dtype(element)
        if element in INTS:
            info = np.iinfo(dtype)
            yield name, rng.integers(info.min, info.max, size=shape, dtype=dtype)
        else:
            yield name, rng.normal(0.0, 0.01, size=shape).astype(dtype)


def archive(mlir: str | Path, seed: int, cache: str | Path) -> Path:
    """The archive of random values for the MLIR's parameters and `seed`, in `cache`
    under its content key; written (atomically) only when it is not there yet."""
    import iree.runtime as rt

    params = parameters(mlir)
    path = Path(cache) / f"random-{content_key(seed, params)}.irpa"
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    index = rt.ParameterIndex()
    for name, array in values(seed, params):
        index.add_buffer(name, array)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    index.create_archive_file(str(partial))
    os.replace(partial, path)  # a crash leaves no half archive under the real name
    return path
