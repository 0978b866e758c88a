"""Which benchmark files a suite runs, on which SKUs, and why the others are skipped.

Selection follows sharktank's `run_benchmarks.py --model --filename --sku --backend`:
the suite's `benchmark_files` picks model directories, a file-name glob, file-name
backends and the suite SKUs that run them. Each (file, SKU) pair becomes a case
`{sku}/iree/{model}.{name}/baseline` or a skipped pair with its reason; none is left
out. A file's `device` chooses the SKUs that run it (`sku_reason`); its MLIR, weights,
inputs and the files its `modules` name must exist here (`Availability`).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path

from workflow.benchfile.parse import ID_RE, BenchmarkFile, default_dir, load_file
from workflow.benchfile.resolve import OUTSIDE, Locations
from workflow.errors import ConfigError, key_path
from workflow.files import directory_problem
from workflow.paths import MAX_ID
from workflow.records.schemas import did_you_mean


def backend_devices() -> dict[str, tuple[str, ...]]:
    """Devices each IREE target backend of a SKU can run (a file for another device is
    skipped): llvm-cpu local-task/local-sync, cuda cuda, rocm hip, vulkan-spirv vulkan."""
    from workflow.backends.iree.tools import TARGETS

    return {backend: t.devices for backend, t in TARGETS.items()}


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
    """The benchmark files a suite runs: cases, every file they need, what is skipped."""

    cases: list[BenchCase] = field(default_factory=list)
    files: dict[str, BenchmarkFile] = field(default_factory=dict)  # by id, modules included
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # (file id, sku, why)
    golden_keys: dict[str, str] = field(default_factory=dict)
    modules: dict[str, list[str]] = field(default_factory=dict)  # file id -> module file ids

    def file(self, benchmark: str) -> BenchmarkFile:
        return self.files[benchmark]

    def golden_key(self, sku: str) -> str:
        return self.golden_keys.get(sku, sku)

    def module_ids(self, benchmark: str) -> list[str]:
        """The benchmark files whose compiled modules a pipeline loads (--module) first."""
        return list(self.modules.get(benchmark, []))

    def weights(self, benchmark: str) -> list[Path]:
        """The parameter archives of a run: its modules' (as upstream passes them for
        pipelines), then its own."""
        own = self.files[benchmark].weights
        out = [w for m in self.module_ids(benchmark) for w in self.weights(m)]
        return [*dict.fromkeys(out), *([own] if own and own not in out else [])]

    def skipped_cases(self) -> list[BenchCase]:
        return [BenchCase(self.files[fid], sku) for fid, sku, _ in self.skipped]


def files_dir(spec: dict) -> Path:
    return Path(spec["dir"]) if spec.get("dir") else default_dir()


def sku_reason(f: BenchmarkFile, sku_name: str, sku: dict, golden_key: str) -> str | None:
    """Why a SKU does not run a file: its device (not one the SKU's target backend runs),
    its chip chosen only where it measures (`auto`), or the file's chips to ignore (the
    SKU's name, golden key, target chip or CPU)."""
    devices = backend_devices().get(sku["iree"]["target_backend"], ())
    if f.data["device"] not in devices:
        return (f"device {f.data['device']!r} does not run on a "
                f"{sku['iree']['target_backend']} SKU (expected one of {list(devices)})")
    from workflow.backends.iree.gpu_chip import AUTO_CHIP

    if sku["iree"].get("target_chip") == AUTO_CHIP:
        # `auto` is chosen where an IREE batch measures (jobs/iree.py); a benchmark
        # file compiles in a job of its own, which need not run on the GPU's machine,
        # and its specific_chip_to_ignore could not be judged before the choice.
        return (f"SKU {sku_name}'s target_chip is {AUTO_CHIP!r}, which only the suite's "
                "IREE batches resolve (on the machine that measures them); benchmark files "
                "compile in a job of their own: name the chip (e.g. sm_80) to run them")
    ignored = set(f.data.get("specific_chip_to_ignore", []))
    chip = (sku["iree"].get("target_chip") if sku["iree"]["target_backend"] != "llvm-cpu"
            else sku["iree"]["target_cpu"])
    hit = ignored & {sku_name, golden_key, chip}
    if hit:
        return f"specific_chip_to_ignore lists {sorted(hit)}"
    return None


class Availability:
    """Decides, once per file, whether it can run here: its MLIR, weights and @inputs
    exist, and so do the files its `modules` name (`<model>_<submodel>` with the
    pipeline's backend, anywhere under the benchmarks root), recursively. Module files
    are loaded into the selection (so that they are compiled) and their ids kept in
    `Selection.modules`; a module that is invalid is a problem of the suite."""

    def __init__(self, sel: Selection, where: Locations):
        self.sel, self.where = sel, where
        # Every file a module name finds: `a_b/c_cpu.json` and `a/b_c_cpu.json` are both
        # a_b_c; such a name is refused as ambiguous, never resolved to either.
        self.index: dict[tuple[str, str], list[Path]] = {}
        for path in sorted(where.root.glob("*/*.json")):
            stem = path.stem
            sub, _, backend = stem.rpartition("_") if "_" in stem else (stem, "", "")
            self.index.setdefault((f"{path.parent.name}_{sub}", backend), []).append(path)
        self.verdicts: dict[str, str | None] = {}
        self.problems: list[str] = []

    def unavailable(self, fid: str, visiting: tuple[str, ...] = ()) -> str | None:
        if fid in self.verdicts:
            return self.verdicts[fid]
        if fid in visiting:
            return f"its modules form a cycle: {' -> '.join([*visiting, fid])}"
        f = self.sel.files[fid]
        why = f.not_runnable()
        ids: list[str] = []
        for i, name in enumerate(f.data.get("modules", []) if not why else []):
            dep_id, why = self._module(f, i, name, (*visiting, fid))
            if why:
                break
            ids.append(dep_id)
        if why is None:
            self.sel.modules[fid] = ids
        self.verdicts[fid] = why
        return why

    def _module(self, f: BenchmarkFile, i: int, name: str, visiting: tuple[str, ...]
                ) -> tuple[str | None, str | None]:
        """(the id of the file `modules[i]` names, None) when it can run; (None, why)
        when it cannot."""
        paths = self.index.get((name, f.backend), [])
        if not paths:
            return None, (f"modules[{i}] {name!r}: no benchmark file <model>/<submodel>_"
                          f"{f.backend}.json under {self.where.root} whose <model>_<submodel> "
                          f"is {name!r}")
        if len(paths) > 1:
            self.problems.append(f"{f.path}: {key_path(['modules', i])}: {name!r} is the "
                                 f"<model>_<submodel> of both {paths[0]} and {paths[1]}; "
                                 "expected one benchmark file per name (rename one)")
            return None, f"modules[{i}] {name!r} is ambiguous"
        path = paths[0]
        resolved = self.where.outside(path)
        if resolved is not None:
            self.problems.append(f"{f.path}: {key_path(['modules', i])}: {OUTSIDE}: "
                                 f"{name!r} is {resolved}")
            return None, f"modules[{i}] {name!r}: {path} is outside the benchmarks tree"
        dep_id = f"{path.parent.name}.{path.stem}"
        clash = id_clash(self.sel.files.get(dep_id), path)
        if clash:
            self.problems.append(clash)
            return None, f"modules[{i}] {name!r}: {clash}"
        if dep_id not in self.sel.files:
            try:
                self.sel.files[dep_id] = load_file(path, path.parent.name, self.where)
            except ConfigError as exc:
                self.problems += exc.problems
                return None, f"modules[{i}] {name!r}: {path} is not a valid benchmark file"
        dep_why = self.unavailable(dep_id, visiting)
        if dep_why:
            return None, f"modules[{i}] {name!r} ({path}) cannot run: {dep_why}"
        return dep_id, None


def _setting_problems(config: dict, spec: dict, where: str) -> list[str]:
    """SKUs named in benchmark_files.skus and .golden_keys that the suite lacks."""
    problems = []
    for key in ("skus", "golden_keys"):
        for bad in sorted(set(spec[key]) - set(config["skus"])):
            problems.append(f"{where}.{key}: unknown SKU {bad!r}; expected one of "
                            f"{sorted(config['skus'])}{did_you_mean([bad], config['skus'])}")
    return problems


def _models(spec: dict, root: Path, where: str, problems: list[str]) -> list[str]:
    """The model directories the suite's globs choose, in the order they name them."""
    models = sorted(p.name for p in root.iterdir() if p.is_dir())
    chosen = []
    for i, pattern in enumerate(spec["models"]):
        hits = fnmatch.filter(models, pattern)
        if not hits:
            problems.append(f"{where}.models[{i}]: no model directory matches {pattern!r} in "
                            f"{root}; expected one of {models}")
        chosen += [m for m in hits if m not in chosen]
    return chosen


def _file_of(path: Path, model: str, spec: dict, locations: Locations,
             problems: list[str]) -> BenchmarkFile | None:
    """The file at `path` when it is valid and its backend selected; its problems noted.
    Its name is checked first: a path with a newline must not start a line of its own."""
    fid = f"{model}.{path.stem}"
    if not ID_RE.fullmatch(fid) or len(fid) > MAX_ID:
        backend = path.stem.rsplit("_", 1)[1] if "_" in path.stem else ""
        if not spec["backends"] or backend in spec["backends"]:
            shown = str(path) if str(path).isprintable() else repr(str(path))
            problems.append(f"{shown}: expected a file name of [A-Za-z0-9_.-] only, at most "
                            f"{MAX_ID} characters with its model directory (<model>.<name> "
                            f"becomes a case id and a file name), got {fid!r}")
        return None
    try:
        f = load_file(path, model, locations)
    except ConfigError as exc:
        problems += exc.problems
        return None
    if spec["backends"] and f.backend not in spec["backends"]:
        return None
    return f


def id_clash(known: BenchmarkFile | None, path: Path) -> str | None:
    """Two files of one id: <model>.<name> joins with a dot, so `a/b.c_cpu.json` and
    `a.b/c_cpu.json` are both a.b.c_cpu (one would run twice, the other never)."""
    if known is None or known.path.resolve() == path.resolve():
        return None
    return (f"{path}: its id {known.id} (<model>.<name>) is also that of {known.path}; "
            "expected one benchmark file per id (rename one of the two)")


def select(config: dict, source: str, env=None) -> Selection:
    """The benchmark files of a validated suite; raises ConfigError naming every problem.
    Every selected (file, SKU) pair is a case or a skipped pair with its reason."""
    spec = config["benchmark_files"]
    sel = Selection(golden_keys=dict(spec["golden_keys"]))
    if not spec["models"]:
        return sel
    where = f"{source}: benchmark_files"
    root = files_dir(spec)
    if not root.is_dir():
        # Said as what it is: a file, a FIFO, a link loop (files.directory_problem).
        found = directory_problem(root) or "does not exist"
        raise ConfigError([f"{where}.dir: expected a directory of benchmark files, "
                           f"{root} {found}"])
    locations = Locations.of(spec, root, env)
    problems = _setting_problems(config, spec, where)
    chosen = _models(spec, root, where, problems)
    skus = spec["skus"] or list(config["skus"])
    modules = Availability(sel, locations)
    for model in chosen:
        for path in sorted((root / model).glob("*.json")):
            if not fnmatch.fnmatch(path.stem, spec["filename"]):
                continue
            f = _file_of(path, model, spec, locations, problems)
            clash = id_clash(sel.files.get(f.id), path) if f is not None else None
            if clash:
                problems.append(clash)
            if f is None or clash:
                continue
            sel.files.setdefault(f.id, f)
            for sku in skus:
                why = (sku_reason(f, sku, config["skus"][sku], sel.golden_key(sku))
                       or modules.unavailable(f.id))
                if why:
                    sel.skipped.append((f.id, sku, why))
                else:
                    sel.cases.append(BenchCase(sel.files[f.id], sku))
    problems += modules.problems
    if problems:
        raise ConfigError(problems)
    return sel
