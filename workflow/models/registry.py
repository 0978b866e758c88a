"""The model registry, after Forge's `@benchmark_model(configs=[...])`.

Registration records only metadata, so listing models and expanding a suite never
imports torch (the Snakefile does both on every invocation, dry runs included).
The model function imports torch itself when it is called.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DTYPES = ("f32", "f16", "bf16")
# Names a model file may register, matched whole (a trailing newline is no part of one):
# they become parts of file names and case ids and are printed in reports, so a space or
# an escape character is refused where the name enters, not by the report job after the
# suite was measured. A model name as config/schema.yaml's workload `model` pattern, a
# config name as its safe_name.
MODEL_NAME_RE = re.compile(r"[A-Za-z0-9_]{1,64}")
CONFIG_NAME_RE = re.compile(r"(?!\.\.?$)[A-Za-z0-9_.-]{1,64}")


class RegistrationError(ValueError):
    """A model file registers a name that cannot be one (a space, an escape character) or
    one that is taken; the message is one line naming the model and what was expected."""


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
        _check_names(model, configs, default_config)
        if model in REGISTRY:
            raise RegistrationError(f"model {model!r} is registered twice (first by "
                                    f"{_where(REGISTRY[model])}); expected a name of its own")
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


def _check_names(model, configs: list, default_config) -> None:
    """Raises RegistrationError for a model or config name that is no name (see
    MODEL_NAME_RE), shown escaped: the bad character is what the reader must see."""
    if not isinstance(model, str) or not MODEL_NAME_RE.fullmatch(model):
        raise RegistrationError(f"model name {model!r}: expected 1 to 64 letters, digits "
                                "or _ (it names files and case ids)")
    for config in configs:
        if not isinstance(config, str) or not CONFIG_NAME_RE.fullmatch(config):
            raise RegistrationError(
                f"model {model!r}: config name {config!r}: expected 1 to 64 letters, "
                "digits, _ . - (not . or ..: it names files and case ids)")
    if default_config is not None and default_config not in configs:
        raise RegistrationError(f"model {model!r}: default_config {default_config!r}: "
                                f"expected one of its configs {configs}")


def _where(spec: ModelSpec) -> str:
    """Where a registered model came from, for a message: its model file, or built in."""
    return spec.source or f"the built-in {spec.fn.__module__}"


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


def suite_models(model_modules) -> dict[str, ModelSpec]:
    """The models a suite can name: the built-in ones and those of its `model_modules`
    (the absolute paths the suite loader resolved and imported), by name. Not every model
    this process registered: another suite's files, imported earlier in it, are not this
    suite's."""
    own = {str(Path(p).resolve()) for p in model_modules}
    return {n: s for n, s in all_models().items() if s.source is None or s.source in own}


_LOADED_FILES: set[str] = set()
_CURRENT_FILE: list[str] = []  # the model file being imported, recorded as ModelSpec.source


def load_model_files(paths) -> None:
    """Imports Python files whose `@benchmark_model` decorators register more models
    (a suite's `model_modules`), once each per process."""
    import importlib.util
    import sys

    # The built-in names first: a model file that takes one of them is refused by its own
    # decorator, naming the file, instead of the built-in module failing to import later.
    load_builtin_models()
    for path in paths:
        path = str(Path(path).resolve())
        if path in _LOADED_FILES:
            continue
        name = "benchflow_models_" + "".join(c if c.isalnum() else "_" for c in path)
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"{path}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        # A model file may import its own helper files beside it, as a script could; they
        # are part of its sources (model_sources). Appended: they never shadow a package.
        if str(Path(path).parent) not in sys.path:
            sys.path.append(str(Path(path).parent))
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


def model_sources(name: str) -> dict[str, str]:
    """The files a model is built from, by content: {file: sha256 prefix}.

    A model's code decides its module and weights, so every cache of its results is keyed
    by these digests (DESIGN.md, "Content keys"): the file that defines the model (a suite's
    `model_modules` file or the built-in module), and, followed through their imports, the
    `workflow.models` modules it builds on (common.py's seeding and casting) and the files
    beside a model_modules file that it imports. Editing one model's file changes the keys
    of that model's cases only. Built-in files are named relative to the repository."""
    import importlib.util

    spec = get_model(name)
    if spec.source:
        start = Path(spec.source)
    else:
        origin = importlib.util.find_spec(spec.fn.__module__).origin
        start = Path(origin)
    return {_label(path): _digest(path) for path in sorted(_source_closure(start))}


_PACKAGE_DIR = Path(__file__).resolve().parent  # workflow/models
_REPO_DIR = _PACKAGE_DIR.parent.parent


def _label(path: Path) -> str:
    try:
        return str(path.relative_to(_REPO_DIR))
    except ValueError:
        return str(path)


def _stamp(path: Path) -> tuple:
    try:
        st = path.stat()
    except OSError:
        return (str(path), None, None)
    return (str(path), st.st_size, st.st_mtime_ns)


# Digests and import closures, valid while the files keep their size and mtime: a dry run
# of a 10,000-case suite asks for its models' sources once per case.
_DIGESTS: dict[tuple, str] = {}
_CLOSURES: dict[Path, tuple[tuple, frozenset[Path]]] = {}


def _digest(path: Path) -> str:
    """The digest of a source file's syntax tree: an edit of code changes it, an edit of
    comments or layout does not (it re-measures nothing). A file that does not parse is
    taken by its bytes."""
    import ast
    import hashlib

    stamp = _stamp(path)
    if stamp not in _DIGESTS:
        raw = path.read_bytes()
        try:
            raw = ast.dump(ast.parse(raw, filename=str(path))).encode()
        except (SyntaxError, ValueError):
            pass
        _DIGESTS[stamp] = hashlib.sha256(raw).hexdigest()[:16]
    return _DIGESTS[stamp]


def _source_closure(start: Path) -> frozenset[Path]:
    """`start` and the model files it imports, transitively: `workflow.models.X` modules,
    and modules beside `start` (a suite's model file importing its own helper file).
    Read with ast, never imported: planning must not run a model's code."""
    import ast

    cached = _CLOSURES.get(start)
    if cached and cached[0] == tuple(_stamp(p) for p in sorted(cached[1])):
        return cached[1]
    seen: set[Path] = set()
    todo = [start.resolve()]
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except SyntaxError:
            continue  # the model's own import reports it; its bytes are still hashed
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for mod in names:
                todo.extend(_module_file(mod, path.parent))
    closure = frozenset(seen)
    _CLOSURES[start] = (tuple(_stamp(p) for p in sorted(closure)), closure)
    return closure


def _module_file(module: str, beside: Path) -> list[Path]:
    """The file of an imported module that belongs to a model's sources, if any."""
    parts = module.split(".")
    # The registry is left out: it records metadata and calls the model function, whose
    # file and helpers build the module; editing it must not re-measure every model.
    if parts[:2] == ["workflow", "models"] and len(parts) == 3 and parts[2] != "registry":
        return [_PACKAGE_DIR / f"{parts[2]}.py"]
    if len(parts) == 1 and beside != _PACKAGE_DIR:
        return [beside / f"{parts[0]}.py"]
    return []
