"""Suite expansion: a validated suite config becomes workloads and cases.

A workload is what gets exported once (model x config x dtype x shape x layers x
mode); a case is a workload measured on one SKU, backend and recipe. Ids are built
from [A-Za-z0-9_.-] only, so they are safe as file names and Snakemake wildcards.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from workflow.backends.torch.recipes import parse, static_reason
from workflow.errors import ConfigError
from workflow.measure.plans import ab_plan, invocation_plan
from workflow.models.registry import all_models
from workflow.paths import MAX_ID
from workflow.records.schemas import did_you_mean
from workflow.stats.sequential import TooFewRounds
from workflow.suite import shapes as shape_generators
from workflow.suite.batches import by_workload_hash
from workflow.suite.overrides import yaml_scalars
from workflow.suite.schema import read_yaml, validate_suite
from workflow.suite.torchao import sku_name_problems, translate_model_params

ID_PATTERN = r"[A-Za-z0-9_.-]+"
IREE = "iree"
# The names an id is made of are capped by the schema (64 characters each, config/
# schema.yaml safe_name), so only a combination of long ones passes paths.MAX_ID (e.g. a
# 64-character model registered by model_modules with a 64-character config).


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
    device: str = "cpu"
    group: str | None = None
    profiler: bool = False
    memory_profiler: bool = False
    memory_visualizer: bool = False

    def spec(self) -> dict:
        """What the stages need; also Snakemake params (a change reruns what uses it)."""
        d = asdict(self)
        d["shape"] = list(self.shape)
        d["model_modules"] = list(self.model_modules)
        return d

    def export_spec(self) -> dict:
        """The part of spec() that the export depends on: profiling flags, group and mode
        do not change an exported module, so they must not rerun an export."""
        d = self.spec()
        for key in ("group", "profiler", "memory_profiler", "memory_visualizer", "mode",
                    "device"):
            d.pop(key)
        return d


@dataclass(frozen=True)
class Case:
    workload: Workload
    sku: str
    backend: str
    recipe: str
    backend_kind: str = IREE            # iree | eager | inductor
    compile_mode: str | None = None
    unsupported: str | None = None      # known before anything runs (e.g. IREE x int8wo)

    @property
    def id(self) -> str:
        return f"{self.sku}/{self.backend}/{self.workload.id}/{self.recipe}"

    def identity(self) -> dict:
        w = self.workload
        return {
            "id": self.id, "model": w.model, "config": w.config, "dtype": w.dtype,
            "shape": list(w.shape), "layers": w.layers, "sku": self.sku,
            "backend": self.backend, "recipe": self.recipe, "mode": w.mode,
            "workload": w.id, "device": w.device, "compile_mode": self.compile_mode,
            "group": w.group,
        }


@dataclass
class Suite:
    config: dict
    source: str
    workloads: dict[str, Workload] = field(default_factory=dict)
    cases: list[Case] = field(default_factory=list)
    # (sku, batch id) -> torch cases measured by one job (one worker), every backend and
    # recipe of the SKU together
    torch_batches: dict[tuple[str, str], list[Case]] = field(default_factory=dict)
    # (sku, batch id) -> IREE cases measured by one job
    iree_batches: dict[tuple[str, str], list[Case]] = field(default_factory=dict)
    # (base SKU, new SKU) -> the IREE workloads both measure: one A/B job each
    ab_pairs: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    # (base label, new label, workload) -> suite.pairs.TorchPair: one torch A/B job each
    torch_ab_pairs: dict[tuple[str, str, str], object] = field(default_factory=dict)
    # SKU -> the timing slots that measure its torch batches at once, where the batches
    # were spread over them (planning/slot_plan.spread_over_slots); empty: one.
    torch_batch_slots: dict[str, int] = field(default_factory=dict)
    # The selected sharktank-format benchmark files (a benchfiles.Selection), attached
    # by benchfile/attach.py when the suite runs or is listed.
    benchmark_files: object | None = None

    def __post_init__(self):
        self._index = {}

    def sku(self, name: str) -> dict:
        return self.config["skus"][name]

    def case(self, sku: str, backend: str, workload: str, recipe: str) -> Case:
        return self._index[(sku, backend, workload, recipe)]

    def add(self, case: Case) -> None:
        self.cases.append(case)
        self._index[(case.sku, case.backend, case.workload.id, case.recipe)] = case

    @property
    def iree_cases(self) -> list[Case]:
        return [c for c in self.cases if c.backend_kind == IREE and not c.unsupported]

    @property
    def unsupported_cases(self) -> list[Case]:
        return [c for c in self.cases if c.unsupported]

    def iree_workloads(self) -> dict[str, Workload]:
        return {c.workload.id: c.workload for c in self.iree_cases}

    @property
    def has_ab(self) -> bool:
        """Whether the suite has A/B pairs of either kind (then `all` builds ab.json)."""
        return bool(self.ab_pairs or self.torch_ab_pairs)

    def torch_batch(self, sku: str, batch: str) -> list[Case]:
        return self.torch_batches[(sku, batch)]

    def config_hash(self) -> str:
        blob = json.dumps(self.config, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def workload_id(model: str, config: str, dtype: str, shape, layers, explicit_shape: bool,
                mode: str = "inference", device: str = "cpu") -> str:
    parts = [model]
    if config != "default":
        parts.append(config)
    if layers:
        parts.append(f"L{layers}")
    if explicit_shape:
        parts.append("x".join(str(d) for d in shape))
    parts.append(dtype)
    if device != "cpu":
        parts.append(device)
    if mode == "training":
        parts.append("train")
    return "-".join(parts)


def own_layers(spec, config: str, layers: int | None) -> int | None:
    """`layers` as the workload records it: None when it is the config's own depth
    (bert tiny with 2 layers is bert tiny), so both spellings are one workload, one id
    and one set of cached results."""
    if layers is not None and spec.default_layers.get(config) == layers:
        return None
    return layers


def _backend_kind(config: dict, backend: str) -> tuple[str, str | None]:
    if backend == IREE:
        return IREE, None
    b = config["torch_backends"][backend]
    return b["kind"], (b["compile_mode"] if b["kind"] == "inductor" else None)


def _static_unsupported(recipe: str, kind: str, w: Workload) -> str | None:
    """What is known unsupported while planning. What only the measuring machine can
    tell (CUDA, its compute capability) is decided by the torch job itself."""
    if kind == IREE and w.device != "cpu":
        return f"the IREE SKUs compile for the CPU; device {w.device} is not one"
    return static_reason(parse(recipe), backend_kind=kind, mode=w.mode)


@dataclass
class _Expansion:
    """One expansion under way: the suite so far, the problems found, and the entry
    that first defined each workload (named when another defines it differently)."""
    suite: Suite
    models: dict
    known_backends: list[str]
    memory: int | None
    problems: list[str] = field(default_factory=list)
    origin: dict[str, str] = field(default_factory=dict)

    @property
    def config(self) -> dict:
        return self.suite.config

    @property
    def source(self) -> str:
        return self.suite.source


@dataclass(frozen=True)
class _Axes:
    """What a workload entry crosses its shapes with, its own lists or the suite's."""
    configs: list[str]
    skus: list[str]
    backends: list[str]
    recipes: list[str]

    def per_shape(self, entry: dict) -> int:
        return (len(self.configs) * len(entry["dtypes"]) * len(entry["modes"])
                * len(self.skus) * len(self.backends) * len(self.recipes))


def expand(config: dict, source: str) -> Suite:
    """Expands a validated suite; raises ConfigError naming every semantic problem."""
    models = all_models()
    suite = Suite(config=config, source=source)
    # Translated first: it may define inductor backends for torchao's compile modes.
    workloads = config["workloads"] + translate_model_params(config)
    ex = _Expansion(suite, models, [IREE, *config["torch_backends"]],
                    shape_generators.physical_memory_bytes())
    ex.problems += _suite_problems(ex, workloads)
    _expand_workloads(ex, workloads)
    ex.problems += _pair_skus(suite, source)
    if ex.problems:
        raise ConfigError(ex.problems)
    batch_torch_cases(suite)
    _batch_iree_cases(suite)
    return suite


def _suite_problems(ex: _Expansion, workloads: list[dict]) -> list[str]:
    """The problems of the suite as a whole: unknown backends, nothing to measure."""
    problems = []
    for bad in sorted(set(ex.config["backends"]) - set(ex.known_backends)):
        problems.append(f"{ex.source}: backends: unknown backend {bad!r}; expected one of "
                        f"{ex.known_backends} (define torch backends under torch_backends)"
                        f"{did_you_mean([bad], ex.known_backends)}")
    # A suite of benchmark files (sharktank's, torch_models') only needs no workload.
    if not (workloads or ex.config["benchmark_files"]["models"]
            or ex.config["torch_models"]["test_files"]):
        problems.append(f"{ex.source}: workloads: expected at least one workload (or torchao "
                        "model_params, benchmark_files.models or torch_models.test_files)")
    return problems


def _expand_workloads(ex: _Expansion, workloads: list[dict]) -> None:
    """Each workload entry in order into workloads and cases; once a problem is found,
    the entries after it are only checked, and past max_cases nothing more is built."""
    for i, entry in enumerate(workloads):
        here = entry.get("_origin", f"workloads[{i}]")
        where = f"{ex.source}: {here}"
        # Model names, configs, layers and shape ranks are checked by the schema
        # (config.suite_schema); what is left needs the whole suite.
        spec = ex.models.get(entry["model"])
        if spec is None:  # only translated torchao entries can get here
            ex.problems.append(f"{where}.model_type: unknown model {entry['model']!r}; "
                               f"expected one of {sorted(ex.models)}")
            continue
        ex.problems += _entry_problems(ex, entry, spec, where)
        if ex.problems:
            continue
        if not _expand_entry(ex, entry, spec, here):
            break


def _entry_problems(ex: _Expansion, entry: dict, spec, where: str) -> list[str]:
    """A workload entry's SKUs, backends and shape generators that the suite lacks or
    its model cannot take."""
    problems = []
    for bad in sorted(set(entry["skus"]) - set(ex.config["skus"])):
        problems.append(f"{where}.skus: unknown SKU {bad!r}; expected one of "
                        f"{sorted(ex.config['skus'])}{did_you_mean([bad], ex.config['skus'])}")
    for bad in sorted(set(entry["backends"]) - set(ex.known_backends)):
        problems.append(f"{where}.backends: unknown backend {bad!r}; expected one of "
                        f"{ex.known_backends}{did_you_mean([bad], ex.known_backends)}")
    problems += sku_name_problems(ex.config, entry, _entry_axes(ex.config, entry, spec), where)
    rank = len(spec.default_shape)
    if entry["matrix_shapes"] and rank != 3:
        problems.append(f"{where}.matrix_shapes: {spec.name} takes {spec.shape_doc}, "
                        "not [M, K, N] shapes")
    for j, gen in enumerate(entry["matrix_shapes"]):
        problems += [f"{where}.matrix_shapes[{j}].{p}"
                     for p in shape_generators.spec_problems(gen)]
    return problems


def _entry_axes(config: dict, entry: dict, spec) -> _Axes:
    return _Axes(configs=entry["configs"] or [spec.default_config],
                 skus=entry["skus"] or list(config["skus"]),
                 backends=entry["backends"] or config["backends"],
                 recipes=entry["recipes"] or config["recipes"])


def _expand_entry(ex: _Expansion, entry: dict, spec, here: str) -> bool:
    """One workload entry's workloads and cases into the suite; False (and the problem
    recorded) when its shapes would take the suite past max_cases."""
    axes = _entry_axes(ex.config, entry, spec)
    explicit = _entry_shapes(ex, entry, axes.per_shape(entry), f"{ex.source}: {here}")
    if explicit is None:
        return False
    # A GEMM whose tensors alone exceed this machine's memory is recorded, not run
    # (suites may be planned here and measured on a bigger node: not refused).
    gemm = spec.shape_doc.startswith("[M, K, N]") and entry["device"] == "cpu"
    for cfg, dtype, shape, mode in itertools.product(
            axes.configs, entry["dtypes"], explicit or [spec.default_shape], entry["modes"]):
        w = _workload(ex, entry, spec, cfg, dtype, shape, mode, bool(explicit))
        if not _register_workload(ex, w, here):
            continue
        too_big = shape_generators.memory_reason(
            shape, dtype, ex.memory) if gemm and len(shape) == 3 else None
        _add_cases(ex, entry, w, axes, here, too_big)
    return True


def _entry_shapes(ex: _Expansion, entry: dict, per_shape: int, where: str) -> list | None:
    """The entry's explicit and generated shapes, made only up to what max_cases leaves
    room for; None (and the problem recorded) when there are more."""
    config, cases = ex.config, ex.suite.cases
    # Counted before any case is built: shapes are made only up to the suite's limit.
    room = max(config["max_cases"] - len(cases), 0) // max(per_shape, 1)
    explicit = shape_generators.unique_shapes(entry["shapes"], entry["matrix_shapes"], room)
    if explicit is None:
        listed = len(entry["shapes"]) + sum(map(shape_generators.count,
                                                entry["matrix_shapes"]))
        before = f" after the {len(cases):,} cases before it" if cases else ""
        ex.problems.append(
            f"{where}: expands to more than max_cases ({config['max_cases']:,}) "
            f"cases{before}: up to {listed:,} shapes x {per_shape:,} (configs x dtypes "
            f"x modes x SKUs x backends x recipes) = {listed * per_shape:,}; expected at "
            "most max_cases: raise max_cases to run it, or narrow its matrix_shapes, "
            "SKUs, backends or recipes")
    return explicit


def _workload(ex: _Expansion, entry: dict, spec, cfg: str, dtype: str, shape,
              mode: str, explicit_shape: bool) -> Workload:
    """The workload of one config, dtype, shape and mode of an entry."""
    layers = own_layers(spec, cfg, entry["layers"])
    wid = workload_id(spec.name, cfg, dtype, shape, layers, explicit_shape=explicit_shape,
                      mode=mode, device=entry["device"])
    w = Workload(
        wid, spec.name, cfg, dtype, shape, layers, mode=mode,
        model_modules=(spec.source,) if spec.source else (),
        device=entry["device"], group=entry["group"],
        profiler=entry["profiler"], memory_profiler=entry["memory_profiler"],
        memory_visualizer=entry["memory_visualizer"])
    if "_origin" in entry and ex.suite.workloads.get(wid, w) != w and w.group:
        # torchao measures each model_params entry apart (its name tells them apart):
        # so do we, naming the workload after it.
        w = replace(w, id=f"{wid}-{re.sub(r'[^A-Za-z0-9_.-]', '_', w.group)}")
    return w


def _register_workload(ex: _Expansion, w: Workload, here: str) -> bool:
    """Adds the workload to the suite; False (and the problem recorded) when another
    entry defines one of that id differently."""
    # Two entries may share a workload (e.g. one for IREE, one for torch backends) if
    # they define it alike and no case twice.
    if len(w.id) > MAX_ID:
        ex.problems.append(f"{ex.source}: {here}: workload id {w.id[:40]}... is {len(w.id)} "
                           f"characters; expected at most {MAX_ID} (it names files: use "
                           "shorter model, config or model_params names)")
        return False
    if ex.suite.workloads.get(w.id, w) != w:
        ex.problems.append(f"{ex.source}: {here}: workload {w.id} is defined differently "
                           f"by {ex.origin[w.id]}; expected the same settings")
        return False
    ex.origin.setdefault(w.id, here)
    ex.suite.workloads[w.id] = w
    return True


def _add_cases(ex: _Expansion, entry: dict, w: Workload, axes: _Axes, here: str,
               too_big: str | None) -> None:
    """The workload's cases on each SKU, backend and recipe of the entry, each once."""
    suite = ex.suite
    for sku, backend in itertools.product(axes.skus, axes.backends):
        kind, compile_mode = _backend_kind(ex.config, backend)
        for recipe in axes.recipes:
            case = Case(w, sku, backend, recipe, kind, compile_mode,
                        _static_unsupported(recipe, kind, w) or too_big)
            known = suite._index.get((sku, backend, w.id, recipe))
            if known is None:
                suite.add(case)
            elif not ("_origin" in entry and known == case):  # torchao entries alike: once
                ex.problems.append(f"{ex.source}: {here}: case {case.id} is already defined "
                                   f"by {ex.origin[w.id]}; expected each case once")


def _pair_skus(suite: Suite, source: str) -> list[str]:
    """suite.ab_pairs from the suite's ab_pairs, or the problems with them, and those of
    the SKU settings A/B pairs and adaptive invocations rely on (tools, plans)."""
    from workflow.suite.pairs import pair_problems

    problems = pair_problems(suite, source)
    m_problems = []
    for name, sku in suite.config["skus"].items():
        tools = [("iree", "compile_tool"), ("iree", "benchmark_tool"), ("torch", "python")]
        for section, key in tools:
            tool = sku[section][key]
            if tool and not (os.path.isfile(tool) and os.access(tool, os.X_OK)):
                m_problems.append(f"{source}: skus.{name}.{section}.{key}: {tool!r} is not an "
                                  "executable file; expected the path of a build of the tool")
        m = sku["measurement"]
        if m["max_invocations"] > m["invocations"]:
            try:
                invocation_plan(m)
            except TooFewRounds as exc:
                m_problems.append(
                    f"{source}: skus.{name}.measurement.max_invocations: "
                    f"{exc.max_rounds} invocations are too few for a "
                    f"{100 * (1 - exc.alpha):g} % interval (alpha {exc.alpha:g}, split over "
                    "the looks of the adaptive schedule); expected max_invocations: "
                    f"{exc.needed} or more, or max_invocations equal to invocations "
                    f"({m['invocations']}) for a fixed count")
            except ValueError as exc:
                m_problems.append(f"{source}: skus.{name}.measurement: {exc}")
    ab = suite.config["ab"]
    if suite.has_ab:
        try:
            ab_plan(ab)
        except TooFewRounds as exc:
            m_problems.append(f"{source}: ab.max_rounds: {exc.max_rounds} rounds are too few "
                              f"for a {100 * (1 - exc.alpha):g} % interval (alpha "
                              f"{exc.alpha:g}, split over the looks of the schedule); "
                              f"expected ab.max_rounds: {exc.needed} or more")
        except ValueError as exc:
            m_problems.append(f"{source}: ab: {exc}")
    return problems + m_problems


def torch_skus(suite: Suite) -> dict[str, list[Case]]:
    """Each SKU with torch cases to measure, and those cases."""
    by_sku: dict[str, list[Case]] = {}
    for case in suite.cases:
        if case.backend_kind != IREE and not case.unsupported:
            by_sku.setdefault(case.sku, []).append(case)
    return by_sku


def batch_torch_cases(suite: Suite, slots: dict[str, int] | None = None) -> None:
    """Groups each SKU's torch cases, every backend and recipe together, into jobs of
    about torch_batch_size cases (by_workload_hash): one worker, so one interpreter
    start and one torch import, measures eager, compiled and quantized cases of a SKU
    alike, and interleaves their invocations (backends/torch/worker.py). A workload's
    cases stay in one batch, consecutive. `slots`: the timing slots that can measure a
    SKU's batches at once (none when loading: that asks nothing of the machine;
    planning/slot_plan.spread_over_slots gives the run's machine's)."""
    suite.torch_batches.clear()
    suite.torch_batch_slots = {sku: n for sku, n in (slots or {}).items() if n > 1}
    size = suite.config["torch_batch_size"]
    for sku, cases in torch_skus(suite).items():
        for batch, members in by_workload_hash(cases, size, (slots or {}).get(sku, 1)):
            suite.torch_batches[(sku, batch)] = members


def _batch_iree_cases(suite: Suite) -> None:
    """Groups each SKU's IREE cases into about count / iree_batch_size jobs
    (by_workload_hash)."""
    by_sku: dict[str, list[Case]] = {}
    for case in suite.iree_cases:
        by_sku.setdefault(case.sku, []).append(case)
    for sku, cases in by_sku.items():
        for batch, members in by_workload_hash(cases, suite.config["iree_batch_size"]):
            suite.iree_batches[(sku, batch)] = members


def load(paths: list[str | Path] | None = None, overrides: dict | None = None) -> Suite:
    """Loads, merges (later files win, as Snakemake's --configfile), validates and expands."""
    from workflow.suite.schema import DEFAULT_CONFIG, deep_merge

    paths = [Path(p) for p in (paths or [DEFAULT_CONFIG])]
    raw: dict = {}
    for p in paths:
        data = read_yaml(p)
        if data is not None and not isinstance(data, dict):
            raise ConfigError([f"{p}: <top>: expected a mapping of suite keys, "
                               f"got {type(data).__name__}"])
        raw = deep_merge(raw, data or {})
    if overrides:
        raw = deep_merge(raw, {k: yaml_scalars(v) for k, v in overrides.items()})
    source = ", ".join(str(p) for p in paths)
    # model_modules are relative to the (last) suite file that names them.
    return expand(validate_suite(raw, source, base_dir=paths[-1].parent), source)
