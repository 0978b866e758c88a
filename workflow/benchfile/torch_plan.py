"""A suite's `torch_models` tests as cases of the benchmark-file path: each selected
test becomes the record the sharktank path already compiles, times and judges (a
`TorchFile`: a parse.BenchmarkFile whose fields come from the test and its modules).

- a test's last module is compiled as the test's own module (`--function` is the last
  loaded module's, as iree-benchmark-module resolves it); its other modules are module
  files of their own (`torch_models-module.<name>`), loaded first, as `modules` are;
- compiler flags are the module's own (they carry its target, as the harness compiles
  it); the SKU says only where it runs (its device must run the test's `--device`);
- a benchmark test is timed; a compstat test is compiled only (its dispatch count and
  binary size judged against golden_dispatch_count / golden_binary_size, as the
  harness checks them: `<=`); a quality test runs iree-run-module with its
  `--expected_output`s and tolerances, which is how the harness compares.

Selection is the harness's: every `**/*.json` under the test directory that has a
`type` (others are not tests), whose markers and type the suite's `markers` (pytest's
-m) select. Each selected (test, SKU) pair is a case or a skipped pair with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from workflow.benchfile import torch_models as tm
from workflow.benchfile.markers import MarkerError, compile_expression
from workflow.benchfile.parse import ID_RE, BenchmarkFile
from workflow.benchfile.resolve import Locations
from workflow.benchfile.select import BenchCase, Selection, sku_reason
from workflow.errors import ConfigError
from workflow.files import directory_problem, file_problem
from workflow.paths import MAX_ID
from workflow.records.storage import read_json_file

MODEL, MODULE_MODEL = "torch_models", "torch_models-module"
# Where `type: random` weights are generated, by content (random_weights.py), relative
# to the working directory: beside the other artifacts of a run.
RANDOM_DIR = "artifacts/torch_models/random_weights"
# The runtime device of a HAL target device when run_args name none.
DEVICES = {"local": "local-task", "hip": "hip", "cuda": "cuda", "vulkan": "vulkan"}


@dataclass(eq=False)
class TorchFile(BenchmarkFile):
    """A torch_models test or module as a benchmark-file record."""

    kind: str = "module"                 # benchmark | quality | compstat | module
    why: str | None = None               # why it cannot run here (absent files, flags)
    params: list[Path] = field(default_factory=list)   # the weights files it reads
    extra: dict = field(default_factory=dict)         # run_spec's torch_models fields
    golden: dict = field(default_factory=dict)        # benchflow's names (goldens.py)
    own_target = True  # flags.compile_flags: its compiler flags carry the target

    @property
    def weights(self) -> Path | None:
        return None  # passed as --parameters=<scope>=<file> in benchmark_flags

    @property
    def config(self) -> str:
        """The test's whole name (clip_cpu_benchmark, clip_cpu_quality): a test's file
        name ends in its type, not in a backend, and a benchmark and a quality test of
        one module would otherwise share a row's every column (config clip_cpu both)."""
        return self.name

    def input_files(self) -> list[str]:
        return [*super().input_files(), *map(str, self.params)]

    def not_runnable(self) -> str | None:
        return self.why

    def confinement_problems(self, source: str | None = None) -> list[str]:
        return []  # every path was looked up inside its directory (torch_models.py)

    def goldens(self, key: str) -> dict:
        return dict(self.golden)  # one golden for every SKU: the test's own

    def run_extra(self) -> dict:
        return dict(self.extra)


def goldens_of(data: dict) -> dict:
    """A test's goldens in benchflow's names (benchfile/goldens.py's GOLDEN_FIELDS)."""
    out = {}
    if data.get("golden_time_ms") is not None:
        out = {"median_ms": data["golden_time_ms"],
               "tolerance": data.get("tolerance_factor", 1.1)}  # the harness's default
    for theirs, ours in (("golden_dispatch_count", "dispatch_count"),
                         ("golden_binary_size", "binary_bytes")):
        if data.get(theirs) is not None:
            out[ours] = data[theirs]
    return out


def _locations(dirs: tm.Dirs) -> Locations:
    return Locations(dirs.tests, dirs.artifacts, "torch_models.artifacts", dirs.external,
                     "torch_models.external_files")


def _args(dirs: tm.Dirs, specs: list[dict], why: list[str]) -> list[str]:
    """argspecs as the harness writes them: <value>=@<file of url>."""
    out = []
    for spec in specs:
        parts = [spec["value"]] if "value" in spec else []
        if "url" in spec:
            path, missing = tm.url_file(dirs.artifacts, spec["url"])
            why += [missing] if missing else []
            parts.append(f"@{(path or Path(spec['url']).name)}")
        out.append("=".join(parts))
    return out


class Planner:
    """Builds the TorchFiles of a suite's tests into a Selection."""

    def __init__(self, sel: Selection, dirs: tm.Dirs, random_dir: str):
        self.sel, self.dirs, self.where = sel, dirs, _locations(dirs)
        self.random_dir = random_dir
        self.problems: list[str] = []

    def module(self, name: str) -> tuple[dict | None, Path | None, str | None]:
        """(its data, its MLIR, why it cannot be used)."""
        path = tm.module_path(self.dirs, name)
        try:
            data = tm.load_module(path)
            mlir, why = tm.mlir_file(self.dirs, data, str(path))
        except ConfigError as exc:
            if file_problem(path) == "does not exist":
                return None, None, f"module {name!r}: {path} does not exist"
            self.problems += exc.problems
            return None, None, f"module {name!r} is not a valid module file"
        return data, mlir, why or tm.refused_flags(data, str(path))

    def module_file(self, name: str) -> str:
        """The id of a module loaded before a test's own (compiled once per SKU)."""
        fid = f"{MODULE_MODEL}.{name.replace('/', '.')}"
        if fid not in self.sel.files:
            data, mlir, why = self.module(name)
            self.sel.files[fid] = TorchFile(
                tm.module_path(self.dirs, name), MODULE_MODEL, name.replace("/", "."),
                self._data(data, mlir, {}), self.where, why=why)
        return fid

    def _data(self, module: dict | None, mlir: Path | None, test: dict) -> dict:
        flags = [f for f in test.get("run_args", [])
                 if not f.startswith((tm.FUNCTION_FLAG, tm.DEVICE_FLAG, *tm.THRESHOLD_FLAGS))]
        given = [f.partition("=")[2] for f in test.get("run_args", [])
                 if f.startswith(tm.DEVICE_FLAG)]
        target = tm.target_device(module) if module else None
        function = [f.partition("=")[2] for f in test.get("run_args", [])
                    if f.startswith(tm.FUNCTION_FLAG)]
        return {"device": given[-1] if given else DEVICES.get(target or "", "local-task"),
                "function_run": function[-1] if function else "main",
                "compile_flags": list(module["compiler_flags"]) if module else [],
                "mlir_file_path": str(mlir or "(none)"), "inputs": [],
                "benchmark_flags": flags}

    def weights(self, test: dict, why: list[str]) -> tuple[list[str], list[Path], list]:
        """(--parameters flags, their files, the random archives to generate)."""
        flags, files, random = [], [], []
        for w in test.get("weights", []):
            if w["type"] == "url":
                path, missing = tm.url_file(self.dirs.artifacts, w["url"])
                why += [missing] if missing else []
                flags.append(f"--parameters={w['scope']}={path}")
                files += [path] if path and not missing else []
            else:
                _, mlir, missing = self.module(w["module"])
                why += [f"weights of {w['module']!r}: {missing}"] if missing else []
                random.append({"scope": w["scope"], "seed": w["seed"], "mlir": str(mlir)})
        return flags, files, random

    def test(self, path: Path, name: str, data: dict) -> TorchFile:
        why: list[str] = []
        names = data.get("modules") or [data["module"]]
        module, mlir, missing = self.module(names[-1])
        why += [missing] if missing else []
        loaded = [self.module_file(n) for n in names[:-1]]
        for n, fid in zip(names[:-1], loaded, strict=True):
            dep = self.sel.files[fid].not_runnable()
            why += [f"module {n!r} cannot run: {dep}"] if dep else []
        fdata = self._data(module, mlir, data)
        fdata["inputs"] = _args(self.dirs, data.get("inputs", []), why)
        flags, files, random = self.weights(data, why)
        fdata["benchmark_flags"] = [*flags, *fdata["benchmark_flags"]]
        expected = _args(self.dirs, data.get("expected_outputs", []), why)
        thresholds = [f for f in data.get("run_args", []) if f.startswith(tm.THRESHOLD_FLAGS)]
        extra = {"torch_models": {"type": data["type"], "random_weights": random,
                                  "expected_outputs": expected, "thresholds": thresholds,
                                  "random_weights_dir": self.random_dir}}
        self.sel.modules[f"{MODEL}.{name}"] = loaded
        return TorchFile(path, MODEL, name, fdata, self.where, kind=data["type"],
                         why=why[0] if why else None, params=files, extra=extra,
                         golden=goldens_of(data))


def _settings(spec: dict, config: dict, where: str):
    """(the directories, the marker matcher, the SKUs) of the suite's torch_models key;
    ConfigError naming every problem of it."""
    problems = [f"{where}.skus: unknown SKU {bad!r}; expected one of {sorted(config['skus'])}"
                for bad in spec["skus"] if bad not in config["skus"]]
    if not spec.get("modules"):
        problems.append(f"{where}.modules: expected the module directory (the harness's "
                        "--module-directory) with test_files")
    dirs = tm.Dirs.of({**spec, "modules": spec.get("modules") or spec["test_files"]})
    for key, d in (("test_files", dirs.tests), ("modules", dirs.modules)):
        if spec.get(key) and not d.is_dir():
            problems.append(f"{where}.{key}: expected a directory, {d} "
                            f"{directory_problem(d) or 'does not exist'}")
    selects = None
    try:
        selects = compile_expression(spec["markers"])
    except MarkerError as exc:
        problems.append(f"{where}.markers: {exc}")
    if problems:
        raise ConfigError(problems)
    return dirs, selects, spec["skus"] or list(config["skus"])


def _name(path: Path, root: Path, problems: list[str]) -> str | None:
    name = path.relative_to(root).with_suffix("").as_posix().replace("/", ".")
    if ID_RE.fullmatch(name) and len(name) + len(MODEL) < MAX_ID:
        return name
    problems.append(f"{path}: expected a path of [A-Za-z0-9_.-] only, at most {MAX_ID} "
                    f"characters (it becomes a case id and a file name), got {name!r}")
    return None


def add_tests(sel: Selection, config: dict, source: str) -> None:
    """Adds the suite's torch_models tests to `sel`: cases and skipped pairs; raises
    ConfigError naming every problem."""
    spec = config.get("torch_models") or {}
    if not spec.get("test_files"):
        return
    dirs, selects, skus = _settings(spec, config, f"{source}: torch_models")
    planner = Planner(sel, dirs, spec.get("random_weights_dir") or RANDOM_DIR)
    problems: list[str] = []
    for path in sorted(dirs.tests.glob("**/*.json")):
        try:
            data = read_json_file(path, unique_keys=True)
        except ConfigError as exc:
            problems += exc.problems
            continue
        if not isinstance(data, dict) or "type" not in data:
            continue  # the harness collects nothing from it (module files live here too)
        found = tm.test_problems(data, str(path))
        name = None if found else _name(path, dirs.tests, problems)
        problems += found
        if name is None or not selects(frozenset([*data["markers"], data["type"]])):
            continue
        known = sel.files.get(f"{MODEL}.{name}")
        if known is not None:  # a/b.json and a.b.json: one id, one would never run
            problems.append(f"{path}: its id {MODEL}.{name} is also that of {known.path}; "
                            "expected one test file per id (rename one of the two)")
            continue
        f = sel.files[f"{MODEL}.{name}"] = planner.test(path, name, data)
        for sku in skus:
            why = sku_reason(f, sku, config["skus"][sku], sku) or f.not_runnable()
            if why:
                sel.skipped.append((f.id, sku, why))
            else:
                sel.cases.append(BenchCase(f, sku))
    problems += planner.problems
    if problems:
        raise ConfigError(problems)
