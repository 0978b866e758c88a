"""Suite expansion: a validated suite config becomes workloads and cases.

A workload is what gets exported once (model x config x dtype x shape x layers); a
case is a workload measured on one SKU, backend and recipe. Ids are built from
[A-Za-z0-9_.-] only, so they are safe as file names and as Snakemake wildcards.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workflow.config import read_yaml, validate_suite
from workflow.errors import ConfigError
from workflow.models.registry import all_models

ID_PATTERN = r"[A-Za-z0-9_.-]+"


@dataclass(frozen=True)
class Workload:
    id: str
    model: str
    config: str
    dtype: str
    shape: tuple[int, ...]
    layers: int | None
    mode: str = "inference"
    model_modules: tuple[str, ...] = ()

    def spec(self) -> dict:
        """What the export stage needs; also its Snakemake params (a change reruns the export)."""
        d = asdict(self)
        d["shape"] = list(self.shape)
        d["model_modules"] = list(self.model_modules)
        return d


@dataclass(frozen=True)
class Case:
    workload: Workload
    sku: str
    backend: str
    recipe: str

    @property
    def id(self) -> str:
        return f"{self.sku}/{self.backend}/{self.workload.id}/{self.recipe}"

    def identity(self) -> dict:
        w = self.workload
        return {
            "id": self.id, "model": w.model, "config": w.config, "dtype": w.dtype,
            "shape": list(w.shape), "layers": w.layers, "sku": self.sku,
            "backend": self.backend, "recipe": self.recipe, "mode": w.mode,
            "workload": w.id,
        }


@dataclass
class Suite:
    config: dict
    source: str
    workloads: dict[str, Workload] = field(default_factory=dict)
    cases: list[Case] = field(default_factory=list)

    def sku(self, name: str) -> dict:
        return self.config["skus"][name]

    def case(self, sku: str, backend: str, workload: str, recipe: str) -> Case:
        return self._index[(sku, backend, workload, recipe)]

    def __post_init__(self):
        self._index = {}

    def add(self, case: Case) -> None:
        self.cases.append(case)
        self._index[(case.sku, case.backend, case.workload.id, case.recipe)] = case

    def config_hash(self) -> str:
        blob = json.dumps(self.config, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def workload_id(model: str, config: str, dtype: str, shape, layers, explicit_shape: bool) -> str:
    parts = [model]
    if config != "default":
        parts.append(config)
    if layers:
        parts.append(f"L{layers}")
    if explicit_shape:
        parts.append("x".join(str(d) for d in shape))
    parts.append(dtype)
    return "-".join(parts)


def expand(config: dict, source: str) -> Suite:
    """Expands a validated suite; raises ConfigError naming every semantic problem."""
    models = all_models()
    suite = Suite(config=config, source=source)
    problems: list[str] = []
    origin: dict[str, str] = {}
    for i, entry in enumerate(config["workloads"]):
        where = f"{source}: workloads[{i}]"
        # Model names, configs, layers and shape ranks are checked by the schema
        # (config.suite_schema); what is left needs the whole suite.
        spec = models[entry["model"]]
        for bad in sorted(set(entry["skus"]) - set(config["skus"])):
            problems.append(f"{where}.skus: unknown SKU {bad!r}; expected one of "
                            f"{sorted(config['skus'])}")
        if problems:
            continue
        configs = entry["configs"] or [spec.default_config]
        shapes = [tuple(s) for s in entry["shapes"]] or [spec.default_shape]
        skus = entry["skus"] or list(config["skus"])
        backends = entry["backends"] or config["backends"]
        for cfg in configs:
            for dtype in entry["dtypes"]:
                for shape in shapes:
                    wid = workload_id(spec.name, cfg, dtype, shape, entry["layers"],
                                      explicit_shape=bool(entry["shapes"]))
                    if wid in origin:
                        problems.append(f"{where}: workload {wid} is already defined by "
                                        f"{origin[wid]}; expected each workload once")
                        continue
                    origin[wid] = f"workloads[{i}]"
                    w = Workload(wid, spec.name, cfg, dtype, shape, entry["layers"],
                                 model_modules=(spec.source,) if spec.source else ())
                    suite.workloads[wid] = w
                    for sku in skus:
                        for backend in backends:
                            for recipe in config["recipes"]:
                                suite.add(Case(w, sku, backend, recipe))
    if problems:
        raise ConfigError(problems)
    return suite


def load(paths: list[str | Path] | None = None, overrides: dict | None = None) -> Suite:
    """Loads, merges (later files win, as Snakemake's --configfile), validates and expands."""
    from workflow.config import DEFAULT_CONFIG, deep_merge

    paths = [Path(p) for p in (paths or [DEFAULT_CONFIG])]
    raw: dict = {}
    for p in paths:
        data = read_yaml(p)
        if data is not None and not isinstance(data, dict):
            raise ConfigError([f"{p}: <top>: expected a mapping of suite keys, "
                               f"got {type(data).__name__}"])
        raw = deep_merge(raw, data or {})
    if overrides:
        raw = deep_merge(raw, overrides)
    source = ", ".join(str(p) for p in paths)
    # model_modules are relative to the (last) suite file that names them.
    return expand(validate_suite(raw, source, base_dir=paths[-1].parent), source)
