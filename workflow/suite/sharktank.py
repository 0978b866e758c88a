"""IREE sharktank-format benchmark files: loading, selection, and how they run.

A file `benchmarks/<model>/<name>_<backend>.json` is a benchmark of its own: an MLIR
file compiled with the SKU's target flags plus the file's `compile_flags`, then timed
by iree-benchmark-module on the file's `function_run` with its `inputs` (and its
`--parameters` weights when given), with goldens per SKU. Selection follows sharktank's
`run_benchmarks.py --model --filename --sku --backend`: the suite's `benchmark_files`
picks model directories, a file-name glob, file-name backends and the suite SKUs that
run them. Each (file, SKU) pair becomes the case `{sku}/iree/{model}.{name}/baseline`.

Nothing from a file reaches a shell: every value becomes one argument of an argument
list.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from workflow.errors import ConfigError
from workflow.paths import BF_CASE
from workflow.records import schemas
from workflow.suite.schema import REPO_ROOT, key_path, schema_problems

ID_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
# Devices each IREE target backend of a SKU can run; a file for another device is skipped.
BACKEND_DEVICES = {"llvm-cpu": ("local-task", "local-sync")}
# benchmark_flags that stand for the file's own fields, or that benchflow must own.
REPETITIONS_FLAG = "--benchmark_repetitions="
WARMUP_FLAG = "--benchmark_min_warmup_time="
OWNED_FLAGS = (REPETITIONS_FLAG, WARMUP_FLAG, "--benchmark_format=", "--benchmark_out")
# Compiled from MLIR of any dialect: the hand-written benchmarks are linalg, IREE's torch.
INPUT_TYPE = "auto"


def file_schema() -> dict:
    return schemas.load("benchmark_file")


def default_dir() -> Path:
    return REPO_ROOT / "benchmarks"


@dataclass(eq=False)
class BenchmarkFile:
    path: Path
    model: str     # its directory: sharktank's --model
    name: str      # the file name without .json: what --filename matches
    data: dict

    @property
    def id(self) -> str:
        return f"{self.model}.{self.name}"

    @property
    def backend(self) -> str:
        """The file-name suffix after the last `_` (sharktank's backend type: cpu, rocm)."""
        return self.name.rsplit("_", 1)[1] if "_" in self.name else ""

    @property
    def submodel(self) -> str:
        return self.name.rsplit("_", 1)[0] if "_" in self.name else self.name

    def resolve(self, rel: str) -> Path:
        p = Path(rel)
        return p if p.is_absolute() else self.path.parent / p

    @property
    def mlir(self) -> Path | None:
        rel = self.data.get("mlir_file_path") or self.data.get("mlir_file_name")
        return self.resolve(rel) if rel else None

    @property
    def weights(self) -> Path | None:
        rel = self.data.get("real_weights_file_name") or self.data.get("real_weights_file_path")
        return self.resolve(rel) if rel else None

    def _flag(self, prefix: str) -> str | None:
        found = [f[len(prefix):] for f in self.data.get("benchmark_flags", [])
                 if f.startswith(prefix)]
        return found[-1] if found else None  # as on a command line: the last one wins

    @property
    def repetitions(self) -> int | None:
        if "benchmark_repetitions" in self.data:
            return int(self.data["benchmark_repetitions"])
        value = self._flag(REPETITIONS_FLAG)
        return int(float(value)) if value is not None else None

    @property
    def warmup_s(self) -> float | None:
        if "benchmark_min_warmup_time" in self.data:
            return float(self.data["benchmark_min_warmup_time"])
        value = self._flag(WARMUP_FLAG)
        return float(value) if value is not None else None

    def extra_benchmark_flags(self) -> list[str]:
        """benchmark_flags other than those benchflow sets from the fields (or must own)."""
        return [f for f in self.data.get("benchmark_flags", []) if not f.startswith(OWNED_FLAGS)]

    def input_args(self) -> list[str]:
        """--input values with relative @files made relative to the working directory."""
        out = []
        for spec in self.data["inputs"]:
            head, at, rel = spec.partition("@")
            out.append(f"{head}@{self.resolve(rel)}" if at else spec)
        return out

    def input_files(self) -> list[str]:
        return [spec.partition("@")[2] for spec in self.input_args() if "@" in spec]

    def dtype(self) -> str:
        """The element type of the inputs (e.g. f32); `mixed` when they differ."""
        types = {spec.partition("=")[0].rsplit("x", 1)[-1] for spec in self.data["inputs"]
                 if "=@" in spec or "@" not in spec}
        return types.pop() if len(types) == 1 else ("mixed" if types else "unknown")

    def shape(self) -> list[int]:
        """The first input's dimensions (what the case record's `shape` shows)."""
        for spec in self.data["inputs"]:
            dims = spec.partition("=")[0].split("x")[:-1]
            if dims and all(d.isdigit() for d in dims):
                return [int(d) for d in dims]
        return []

    def goldens(self, key: str) -> dict:
        """This file's goldens for one SKU key; only the fields it has."""
        d = self.data
        names = {"golden_time_ms": "median_ms", "golden_time_tolerance_multiplier": "tolerance",
                 "golden_dispatch": "dispatch_count", "golden_size": "binary_bytes"}
        return {ours: d[theirs][key] for theirs, ours in names.items()
                if key in d.get(theirs, {})}

    def not_runnable(self) -> str | None:
        """Why this file cannot run here at all, or None."""
        if self.mlir is None:
            where = self.data.get("mlir_url") or self.data.get("mlir_file_url")
            return ("its MLIR is only at " + where + " (benchflow never downloads: set "
                    "mlir_file_path)") if where else "it names no mlir_file_path"
        return None


def file_problems(data, source: str) -> list[str]:
    """Schema problems plus what the schema cannot say, each 'file: key: expected'."""
    problems = schema_problems(data, file_schema(), source)
    if problems or not isinstance(data, dict):
        return problems
    flags = data.get("benchmark_flags", [])
    for field_name, prefix, pattern, what in (
            ("benchmark_repetitions", REPETITIONS_FLAG, r"[1-9][0-9]*(\.0*)?", "N"),
            ("benchmark_min_warmup_time", WARMUP_FLAG, r"[0-9]+(\.[0-9]*)?", "S")):
        given = [(i, f[len(prefix):]) for i, f in enumerate(flags) if f.startswith(prefix)]
        if field_name not in data and not given:
            problems.append(f"{source}: {field_name}: required (or {prefix}{what} in "
                            f"benchmark_flags)")
        for i, value in given:
            if not re.fullmatch(pattern, value):
                problems.append(f"{source}: {key_path(['benchmark_flags', i])}: expected "
                                f"{prefix}{what} ({field_name}), got {value!r}")
    return problems


def load_file(path: str | Path, model: str | None = None) -> BenchmarkFile:
    """Reads and checks one benchmark file; raises ConfigError naming every problem."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError([f"{path}: file not found"]) from None
    except json.JSONDecodeError as exc:
        raise ConfigError([f"{path}: not valid JSON: {exc}"]) from None
    problems = file_problems(data, str(path))
    if problems:
        raise ConfigError(problems)
    return BenchmarkFile(path, model or path.parent.name, path.stem, data)


@dataclass(frozen=True)
class BenchCase:
    """One benchmark file on one SKU."""

    file: BenchmarkFile = field(compare=False)
    sku: str

    @property
    def benchmark(self) -> str:
        return self.file.id

    @property
    def id(self) -> str:
        return f"{self.sku}/iree/{self.file.id}/baseline"


@dataclass
class Selection:
    """The benchmark files a suite runs: cases, every file they need, what was left out."""

    cases: list[BenchCase] = field(default_factory=list)
    files: dict[str, BenchmarkFile] = field(default_factory=dict)  # by id, modules included
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # (file id, sku, why)
    golden_keys: dict[str, str] = field(default_factory=dict)

    def file(self, benchmark: str) -> BenchmarkFile:
        return self.files[benchmark]

    def golden_key(self, sku: str) -> str:
        return self.golden_keys.get(sku, sku)

    def module_ids(self, benchmark: str) -> list[str]:
        f = self.files[benchmark]
        return [f"{f.model}.{module_stem(f, m)}" for m in f.data.get("modules", [])]


def module_stem(f: BenchmarkFile, module: str) -> str:
    """The file name (without .json) of a module a pipeline loads: same directory, same
    backend suffix, as sharktank finds `<module>_vmfbs/model.<backend>.vmfb`."""
    return f"{module}_{f.backend}" if f.backend else module


def files_dir(spec: dict) -> Path:
    return Path(spec["dir"]) if spec.get("dir") else default_dir()


def skip_reason(f: BenchmarkFile, sku_name: str, sku: dict, golden_key: str) -> str | None:
    """Why a SKU does not run a file (its device, or the file's chips to ignore)."""
    why = f.not_runnable()
    if why:
        return why
    devices = BACKEND_DEVICES.get(sku["iree"]["target_backend"], ())
    if f.data["device"] not in devices:
        return (f"device {f.data['device']!r} does not run on a "
                f"{sku['iree']['target_backend']} SKU (expected one of {list(devices)})")
    ignored = set(f.data.get("specific_chip_to_ignore", []))
    hit = ignored & {sku_name, golden_key, sku["iree"]["target_cpu"]}
    if hit:
        return f"specific_chip_to_ignore lists {sorted(hit)}"
    return None


def select(config: dict, source: str) -> Selection:
    """The benchmark files of a validated suite; raises ConfigError naming every problem."""
    spec = config["benchmark_files"]
    sel = Selection(golden_keys=dict(spec["golden_keys"]))
    if not spec["models"]:
        return sel
    where = f"{source}: benchmark_files"
    root = files_dir(spec)
    if not root.is_dir():
        raise ConfigError([f"{where}.dir: expected a directory of benchmark files, "
                           f"{root} is not one"])
    problems: list[str] = []
    for bad in sorted(set(spec["skus"]) - set(config["skus"])):
        problems.append(f"{where}.skus: unknown SKU {bad!r}; expected one of "
                        f"{sorted(config['skus'])}")
    for bad in sorted(set(spec["golden_keys"]) - set(config["skus"])):
        problems.append(f"{where}.golden_keys: unknown SKU {bad!r}; expected one of "
                        f"{sorted(config['skus'])}")
    models = sorted(p.name for p in root.iterdir() if p.is_dir())
    chosen = []
    for i, pattern in enumerate(spec["models"]):
        hits = fnmatch.filter(models, pattern)
        if not hits:
            problems.append(f"{where}.models[{i}]: no model directory matches {pattern!r} in "
                            f"{root}; expected one of {models}")
        chosen += [m for m in hits if m not in chosen]
    skus = spec["skus"] or list(config["skus"])
    backends = spec["backends"]
    for model in chosen:
        for path in sorted((root / model).glob("*.json")):
            if not fnmatch.fnmatch(path.stem, spec["filename"]):
                continue
            try:
                f = load_file(path, model)
            except ConfigError as exc:
                problems += exc.problems
                continue
            if backends and f.backend not in backends:
                continue
            if not ID_RE.match(f.id):
                problems.append(f"{path}: expected a file name of [A-Za-z0-9_.-] only "
                                f"(it becomes a case id)")
                continue
            sel.files[f.id] = f
            for sku in skus:
                why = skip_reason(f, sku, config["skus"][sku], sel.golden_key(sku))
                if why:
                    sel.skipped.append((f.id, sku, why))
                else:
                    sel.cases.append(BenchCase(f, sku))
    problems += _add_modules(sel)
    if problems:
        raise ConfigError(problems)
    return sel


def _add_modules(sel: Selection) -> list[str]:
    """Loads the files that selected pipelines load as --module (they need not be selected)."""
    problems = []
    pending = [c.benchmark for c in sel.cases]
    while pending:
        f = sel.files[pending.pop()]
        for i, module in enumerate(f.data.get("modules", [])):
            dep = f"{f.model}.{module_stem(f, module)}"
            if dep in sel.files:
                continue
            path = f.path.parent / f"{module_stem(f, module)}.json"
            try:
                sel.files[dep] = load_file(path, f.model)
            except ConfigError:
                problems.append(f"{f.path}: modules[{i}]: expected a benchmark file {path}")
                continue
            why = sel.files[dep].not_runnable()
            if why:
                problems.append(f"{f.path}: modules[{i}]: {path} cannot be compiled: {why}")
            pending.append(dep)
    return problems


def compile_flags(f: BenchmarkFile, sku: dict) -> list[str]:
    """The SKU's target flags (and its own extra flags), then the file's compile_flags."""
    from workflow.backends.iree.tools import compile_flags as sku_flags

    return [*sku_flags(sku, input_type=INPUT_TYPE), *f.data.get("compile_flags", [])]


def run_spec(f: BenchmarkFile, sku: dict) -> dict:
    """What the run stage needs (and its params: a change reruns the timing)."""
    m = sku["measurement"]
    weights = f.weights
    return {
        "function": f.data["function_run"],
        "inputs": f.input_args(),
        "device": f.data["device"],
        "parameters": [f"--parameters=model={weights}"] if weights else [],
        "benchmark_flags": f.extra_benchmark_flags(),
        # The file's own repetitions and warm-up; invocations and min_time are the SKU's
        # protocol (DESIGN.md: the invocation is the unit).
        "measurement": {**m, "repetitions": f.repetitions, "min_warmup_time_s": f.warmup_s},
    }


def data_files(f: BenchmarkFile) -> list[str]:
    """Files a run reads besides the modules: @inputs and the weights (rule inputs)."""
    return [*f.input_files(), *([str(f.weights)] if f.weights else [])]


def identity(case: BenchCase) -> dict:
    f = case.file
    return {"id": case.id, "model": f.model, "config": f.submodel, "dtype": f.dtype(),
            "shape": f.shape(), "sku": case.sku, "backend": "iree", "recipe": "baseline",
            "mode": "inference", "workload": f.id, "layers": None}


def attach(suite) -> Selection:
    """Selects a suite's benchmark files and keeps them on it (suite.benchmark_files)."""
    suite.benchmark_files = select(suite.config, suite.source)
    return suite.benchmark_files


def case_paths(sel: Selection | None) -> list[str]:
    """Case records of a suite's benchmark files, from attach() (the report's further
    inputs). The Snakefile refuses a bad selection with every problem listed
    (workflow.stages.plan.attach_benchmark_files)."""
    if sel is None:
        return []
    return [BF_CASE.format(sku=c.sku, benchmark=c.benchmark) for c in sel.cases]
