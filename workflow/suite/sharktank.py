"""IREE sharktank-format benchmark files: loading, selection, and how they run.

A file `<benchmarks root>/<model>/<name>_<backend>.json` is a benchmark of its own: an
MLIR file compiled with the SKU's target flags plus the file's `compile_flags`, then
timed by iree-benchmark-module on the file's `function_run` with its `inputs` (and its
`--parameters` weights), with goldens per SKU. Selection follows sharktank's
`run_benchmarks.py --model --filename --sku --backend`: the suite's `benchmark_files`
picks model directories, a file-name glob, file-name backends and the suite SKUs that
run them. Each (file, SKU) pair becomes the case `{sku}/iree/{model}.{name}/baseline`,
which runs or is skipped with its reason; none is left out.

A file's `device` chooses the SKUs that run it: local-task/local-sync files run on
llvm-cpu SKUs, `hip` files on rocm SKUs, `cuda` files on cuda SKUs (vulkan on
vulkan-spirv); on any other SKU the pair is skipped. A GPU file is compiled on any
machine with the SKU's chip; where its device is absent (decided on the measuring
machine) the case is `compile-only`: its dispatch count and binary size are judged
against the file's golden_dispatch / golden_size of the SKU's golden key, its time is
not measured and says why.

Files are found as iree-test-suites' runner (sharktank_models/benchmarks/
model_benchmark_run.py and conftest.py) finds them; `<group>` is `<model>_<submodel>`,
the submodel being the file name without its `_<backend>` suffix:

- `mlir_file_path`: relative to the benchmarks root (the runner's own directory), not
  to the JSON's folder;
- `mlir_file_name`: a file of the external test files directory (the runner's
  `--external-file-directory`, README: `PATH_TO_EXTERNAL_FILES`);
- neither (every current upstream file): the MLIR the quality tests downloaded to
  `<artifacts>/<group>/`, named after its URL (`mlir_url`, the quality-test file's
  `mlir`), else `model.mlir`;
- weights: `real_weights_file_path` (relative to the benchmarks root), else
  `<artifacts>/<group>/<real_weights_file_name>`, default name `real_weights.irpa`
  (passed when that file exists: an MLIR without parameters needs none);
- `modules` name other benchmarks by their `<group>` with the same backend (upstream:
  `<model>_<submodel>_vmfbs/model.<backend>.vmfb`), compiled here like any file, with
  their weights;
- `@file` inputs: relative to the JSON's folder.

`<artifacts>` is the suite's `benchmark_files.artifacts_dir`, else `$IREE_TEST_FILES/
artifacts` (the runner's variable), else `<benchmarks root>/../artifacts` (the runner's
default). Nothing is downloaded: a file whose MLIR, weights, inputs or modules are absent
is skipped with what is missing and where it was looked for.

Nothing from a file reaches a shell: every value becomes one argument of an argument
list. Nothing a file names is read from outside the benchmarks root, the artifact
directory and the external test files directory (`Locations.roots`): every path it
names (its MLIR, weights, `@` inputs, modules, and the files its `compile_flags` and
`benchmark_flags` name) must resolve, symlinks followed, inside one of them, or loading
the file fails naming the key (`confinement_problems`). A path outside them that does
not exist is absent like any other (the file is skipped): upstream's files name inputs
such as `@/shark-dev/...` that exist only on IREE's machines, and nothing is read from
it; a flag's path is refused wherever it would be, existing or not. Flags that write
files or run programs are refused outright.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from workflow.errors import ConfigError
from workflow.paths import BF_CASE
from workflow.records import schemas
from workflow.records.storage import read_json_file
from workflow.suite.schema import REPO_ROOT, key_path, schema_problems

ID_RE = re.compile(r"^[A-Za-z0-9_.-]+$")

def backend_devices() -> dict[str, tuple[str, ...]]:
    """Devices each IREE target backend of a SKU can run (a file for another device is
    skipped): llvm-cpu local-task/local-sync, cuda cuda, rocm hip, vulkan-spirv vulkan."""
    from workflow.backends.iree.tools import TARGETS

    return {backend: t.devices for backend, t in TARGETS.items()}


# benchmark_flags that stand for the file's own fields, or that benchflow must own.
REPETITIONS_FLAG = "--benchmark_repetitions="
WARMUP_FLAG = "--benchmark_min_warmup_time="
OWNED_FLAGS = (REPETITIONS_FLAG, WARMUP_FLAG, "--benchmark_format=", "--benchmark_out")
# compile_flags benchflow owns (compile_argv sets them; upstream files carry the first).
OWNED_COMPILE_FLAGS = ("--iree-scheduling-dump-statistics-file=",
                       "--iree-scheduling-dump-statistics-format=")
# Flags of iree-compile / iree-benchmark-module whose value names a file the tool reads,
# and where in the value: "path" the value itself; "input" after its `@` (`[type=]@file`;
# no `@`: a literal value); "scoped" after its scope (`[scope=]file`).
READ_FLAGS = {
    "--module": "path", "--flagfile": "path", "--input": "input", "--function_input": "input",
    "--expected_output": "input", "--parameters": "scoped",
    "--iree-opt-import-parameters": "scoped",
    "--iree-codegen-transform-dialect-library": "path",
    "--iree-codegen-tuning-spec-path": "path",
    "--iree-hal-executable-object-search-path": "path",
    "--iree-rocm-bc-dir": "path", "--iree-hip-bc-dir": "path",
}
# Flags that write files or run programs: refused in a benchmark file, wherever they point.
WRITE_OR_RUN_FLAGS = (
    "--output", "--o", "--output-file", "--executable_plugin",
    "--iree-llvmcpu-embedded-linker-path", "--iree-llvmcpu-system-linker-path",
    "--iree-hal-preprocess-executables-with", "--iree-opt-export-parameters",
    "--iree-opt-splat-parameters", "--mlir-pass-pipeline-crash-reproducer",
    "--dump-compilation-phases-to", "--iree-flow-dump-dispatch-graph-output-file",
    "--mlir-print-ir-tree-dir", "--iree-scheduling-dump-statistics-file",
)
WRITE_OR_RUN_PREFIXES = ("--iree-hal-dump-executable-", "--iree-dump-", "--dump-")
# Any other flag names a file when its name ends in one of these words (or its value
# looks like a path: it starts with @ / ~ . or holds a /).
PATH_WORDS = {"file", "filename", "files", "path", "dir", "directory", "library", "to",
              "flagfile"}
LITERAL_RE = re.compile(r"^(true|false|[0-9.]+[a-z]*|-?[0-9]+)$", re.IGNORECASE)
OUTSIDE = "path resolves outside the benchmarks tree and the artifact directory"
# Compiled from MLIR of any dialect: the hand-written benchmarks are linalg, IREE's torch.
INPUT_TYPE = "auto"
# The upstream runner's environment: its artifacts live in $IREE_TEST_FILES/artifacts;
# its README passes the external test files directory as $PATH_TO_EXTERNAL_FILES.
ARTIFACTS_ENV = "IREE_TEST_FILES"
EXTERNAL_ENV = "PATH_TO_EXTERNAL_FILES"
# Names in an artifact group when the file names none (the quality tests download the
# MLIR from .../model.mlir; the runner's default weights).
DEFAULT_MLIR_NAME = "model.mlir"
DEFAULT_WEIGHTS_NAME = "real_weights.irpa"


def file_schema() -> dict:
    return schemas.load("benchmark_file")


def default_dir() -> Path:
    return REPO_ROOT / "benchmarks"


@dataclass(frozen=True)
class Locations:
    """Where a benchmark file's MLIR, weights and external files are looked for."""

    root: Path                       # the benchmarks root: mlir_file_path is relative to it
    artifacts: Path                  # <artifacts>/<model>_<submodel>/{model.mlir, ...}
    artifacts_from: str              # which setting chose `artifacts` (for skip reasons)
    external: Path | None = None     # mlir_file_name's directory
    external_from: str | None = None

    @classmethod
    def of(cls, spec: dict, root: Path, env=None) -> Locations:
        """The suite's settings first, then the upstream runner's environment, then its
        defaults (artifacts beside the benchmarks root; no external directory)."""
        env = os.environ if env is None else env
        if spec.get("artifacts_dir"):
            artifacts, frm = Path(spec["artifacts_dir"]), "benchmark_files.artifacts_dir"
        elif env.get(ARTIFACTS_ENV):
            artifacts = Path(os.path.expanduser(env[ARTIFACTS_ENV])) / "artifacts"
            frm = f"${ARTIFACTS_ENV}/artifacts"
        else:
            artifacts = root.parent / "artifacts"
            frm = "the runner's default <benchmarks root>/../artifacts"
        external, efrm = None, None
        if spec.get("external_files_dir"):
            external, efrm = Path(spec["external_files_dir"]), "benchmark_files.external_files_dir"
        elif env.get(EXTERNAL_ENV):
            external, efrm = Path(os.path.expanduser(env[EXTERNAL_ENV])), f"${EXTERNAL_ENV}"
        return cls(root, artifacts, frm, external, efrm)

    def roots(self) -> tuple[Path, ...]:
        """The directories a benchmark file's paths must resolve inside (symlinks
        resolved): the benchmarks root, the artifact and the external files directory."""
        return tuple(p.resolve() for p in (self.root, self.artifacts, self.external)
                     if p is not None)

    def outside(self, path: Path | str) -> Path | None:
        """`path` resolved (symlinks followed, relative to the working directory) when it
        is outside every root; None when it is inside one."""
        resolved = Path(path).resolve()
        return None if any(resolved.is_relative_to(r) for r in self.roots()) else resolved

    @classmethod
    def beside(cls, path: Path) -> Locations:
        """The defaults for a file read on its own: its model directory's parent is the
        benchmarks root."""
        return cls.of({}, path.parent.parent, env={})


@dataclass(frozen=True)
class Found:
    """A file benchflow needs: where it is (or would be) and how that was decided."""

    path: Path | None
    how: str
    required: bool = True
    key: str = ""     # the file's key that named it (confinement problems name it)

    @property
    def exists(self) -> bool:
        return self.path is not None and self.path.is_file()

    def missing(self, what: str) -> str | None:
        """Why the file cannot be used, or None."""
        if self.exists or not self.required:
            return None
        if self.path is None:
            return f"{what} cannot be located: {self.how}"
        return (f"{what} is absent: expected {self.path} ({self.how}); benchflow never "
                "downloads")


@dataclass(eq=False)
class BenchmarkFile:
    path: Path
    model: str     # its directory: sharktank's --model
    name: str      # the file name without .json: what --filename matches
    data: dict
    where: Locations | None = None

    def __post_init__(self):
        if self.where is None:
            self.where = Locations.beside(self.path)

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

    @property
    def group(self) -> str:
        """`<model>_<submodel>`: the upstream artifact group, and how `modules` name it."""
        return f"{self.model}_{self.submodel}"

    def beside(self, rel: str) -> Path:
        """A path relative to this JSON's folder (@file inputs)."""
        p = Path(rel)
        return p if p.is_absolute() else self.path.parent / p

    def from_root(self, rel: str) -> Path:
        """A path relative to the benchmarks root (mlir_file_path, real_weights_file_path)."""
        p = Path(rel)
        return p if p.is_absolute() else self.where.root / p

    def _in_group(self, name: str, because: str, key: str) -> Found:
        w = self.where
        return Found(w.artifacts / self.group / name,
                     f"{because}, in <artifacts>/{self.group}/ where <artifacts> is "
                     f"{w.artifacts_from}; set benchmark_files.artifacts_dir or "
                     f"${ARTIFACTS_ENV} to point elsewhere", key=key)

    def _quality_mlir_name(self) -> str | None:
        """The name the upstream quality test of this benchmark downloads its MLIR as
        (sharktank_models/quality_tests/<model>/<name>.json beside the benchmarks root)."""
        q = self.where.root.parent / "quality_tests" / self.model / f"{self.name}.json"
        try:
            url = json.loads(q.read_text()).get("mlir")
        except (OSError, ValueError, AttributeError):
            return None
        return _url_name(url) if isinstance(url, str) else None

    def locate_mlir(self) -> Found:
        d = self.data
        if d.get("mlir_file_path"):
            rel = d["mlir_file_path"]
            return Found(self.from_root(rel), f"mlir_file_path {rel!r} is relative to the "
                                              f"benchmarks root {self.where.root}",
                         key="mlir_file_path")
        if d.get("mlir_file_name"):
            name, ext = d["mlir_file_name"], self.where.external
            if ext is None:
                return Found(None, f"mlir_file_name {name!r} is a file of the external test "
                                   f"files directory: set benchmark_files.external_files_dir "
                                   f"or ${EXTERNAL_ENV}", key="mlir_file_name")
            return Found(ext / name, f"mlir_file_name {name!r}, in the external test files "
                                     f"directory ({self.where.external_from})",
                         key="mlir_file_name")
        url = d.get("mlir_url") or d.get("mlir_file_url")
        if url and _url_name(url):
            return self._in_group(_url_name(url), f"the file name of its mlir_url {url}",
                                  "mlir_url" if d.get("mlir_url") else "mlir_file_url")
        quality = self._quality_mlir_name()
        if quality:
            return self._in_group(quality, "the file name of its quality test's mlir URL",
                                  "(its quality test's mlir)")
        return self._in_group(DEFAULT_MLIR_NAME, "it names no MLIR, so the one upstream's "
                                                 "quality tests download",
                              f"(the default <artifacts>/<group>/{DEFAULT_MLIR_NAME})")

    def locate_weights(self) -> Found:
        d = self.data
        if d.get("real_weights_file_path"):
            rel = d["real_weights_file_path"]
            return Found(self.from_root(rel), f"real_weights_file_path {rel!r} is relative to "
                                              f"the benchmarks root {self.where.root}",
                         key="real_weights_file_path")
        if d.get("real_weights_file_name"):
            return self._in_group(d["real_weights_file_name"], "its real_weights_file_name",
                                  "real_weights_file_name")
        found = self._in_group(DEFAULT_WEIGHTS_NAME, "the runner's default weights",
                               f"(the default <artifacts>/<group>/{DEFAULT_WEIGHTS_NAME})")
        return Found(found.path, found.how, required=False, key=found.key)

    @property
    def mlir(self) -> Path | None:
        return self.locate_mlir().path

    @property
    def weights(self) -> Path | None:
        """The archive passed as --parameters=model=: named ones always (a missing one
        skips the file), the default one when it exists."""
        found = self.locate_weights()
        return found.path if found.required or found.exists else None

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
            out.append(f"{head}@{self.beside(rel)}" if at else spec)
        return out

    def input_files(self) -> list[str]:
        return [spec.partition("@")[2] for spec in self.input_args() if "@" in spec]

    def confinement_problems(self, source: str | None = None) -> list[str]:
        """Every path this file names that resolves (symlinks followed) outside the
        benchmarks root, the artifact and the external files directory, and every flag
        that writes files or runs a program, each 'file: key: why'. A named path outside
        them that does not exist is left to not_runnable (absent: the file is skipped)."""
        source = source or str(self.path)
        problems = []

        def check(key: str, raw: str, path: Path | str, must_exist: bool = True) -> None:
            if must_exist and not os.path.lexists(path):
                return
            resolved = self.where.outside(path)
            if resolved is not None:
                problems.append(f"{source}: {key}: {OUTSIDE}: {raw!r} is {resolved}")

        for found in (self.locate_mlir(), self.locate_weights()):
            if found.path is not None:
                check(found.key, str(self.data.get(found.key, found.path)), found.path)
        for i, spec in enumerate(self.data["inputs"]):
            head, at, rel = spec.partition("@")
            if at:
                check(key_path(["inputs", i]), spec, self.beside(rel))
        for flags_key, owned in (("compile_flags", OWNED_COMPILE_FLAGS),
                                 ("benchmark_flags", OWNED_FLAGS)):
            for i, flag in enumerate(self.data.get(flags_key, [])):
                if flag.startswith(owned):
                    continue  # dropped: benchflow sets its own
                key = key_path([flags_key, i])
                try:
                    paths = flag_paths(flag)
                except ValueError as exc:
                    problems.append(f"{source}: {key}: {exc}")
                    continue
                for p in paths:
                    check(key, flag, p, must_exist=False)
        return problems

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
        """Why this file cannot run here at all (its MLIR, weights or an @input absent),
        or None. Its modules are the selection's to check (Selection.unavailable)."""
        why = self.locate_mlir().missing("its MLIR") or self.locate_weights().missing(
            "its weights file")
        if why:
            return why
        for i, rel in enumerate(self.input_files()):
            if not Path(rel).is_file():
                return f"its input inputs[{i}] is absent: expected {rel} (benchflow never " \
                       "downloads)"
        return None


def _url_name(url: str) -> str:
    """The file name a URL is downloaded as (upstream's FetchedArtifact)."""
    return Path(urlparse(url).path).name


def flag_paths(flag: str) -> list[str]:
    """The files a flag makes iree-compile or iree-benchmark-module read (relative ones
    are relative to the working directory); ValueError for a flag that writes files or
    runs a program, or that takes a file but has no `=value`."""
    name, eq, value = flag.partition("=")
    if name in WRITE_OR_RUN_FLAGS or name.startswith(WRITE_OR_RUN_PREFIXES):
        raise ValueError(f"{name} writes files or runs a program: benchflow does not pass it "
                         "from a benchmark file")
    kind = READ_FLAGS.get(name)
    if kind is None:
        last = re.split(r"[-_]", name.lstrip("-"))[-1].lower()
        if not eq and last in PATH_WORDS:
            raise ValueError(f"{name} may name a file: give it as {name}=FILE (without `=`, "
                             "iree-compile would take the next argument as its value)")
        looks = value.startswith(("@", "/", "~", ".")) or "/" in value
        if not eq or (not looks and (last not in PATH_WORDS or LITERAL_RE.match(value))):
            return []
        kind = "input" if "@" in value else "path"
    if not eq:
        raise ValueError(f"{name} names a file: give it as {name}=FILE (without `=`, "
                         "iree-compile would take the next argument as its value)")
    if kind == "input":
        _, at, path = value.partition("@")
        return [path] if at else []
    if kind == "scoped":
        scope, sep, path = value.partition("=")
        return [path if sep else scope]
    return [value]


def file_problems(data, source: str) -> list[str]:
    """Schema problems plus what the schema cannot say, each 'file: key: expected'."""
    problems = schema_problems(data, file_schema(), source)
    if problems or not isinstance(data, dict):
        return problems
    flags = data.get("benchmark_flags", [])
    for field_name, prefix, pattern, what in (
            ("benchmark_repetitions", REPETITIONS_FLAG, r"[1-9][0-9]{0,8}(\.0*)?", "N"),
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


def load_file(path: str | Path, model: str | None = None,
              where: Locations | None = None) -> BenchmarkFile:
    """Reads and checks one benchmark file; raises ConfigError naming every problem.
    `where`: how its files are found (default: the file's model directory's parent is
    the benchmarks root, the upstream defaults for the rest)."""
    path = Path(path)
    data = read_json_file(path)
    problems = file_problems(data, str(path))
    if problems:
        raise ConfigError(problems)
    f = BenchmarkFile(path, model or path.parent.name, path.stem, data, where)
    problems = f.confinement_problems()
    if problems:
        raise ConfigError(problems)
    return f


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
    or the file's chips to ignore (the SKU's name, golden key, target chip or CPU)."""
    devices = backend_devices().get(sku["iree"]["target_backend"], ())
    if f.data["device"] not in devices:
        return (f"device {f.data['device']!r} does not run on a "
                f"{sku['iree']['target_backend']} SKU (expected one of {list(devices)})")
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
        self.index: dict[tuple[str, str], Path] = {}
        for path in sorted(where.root.glob("*/*.json"), reverse=True):  # first wins
            stem = path.stem
            sub, _, backend = stem.rpartition("_") if "_" in stem else (stem, "", "")
            self.index[(f"{path.parent.name}_{sub}", backend)] = path
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
            path = self.index.get((name, f.backend))
            if path is None:
                why = (f"modules[{i}] {name!r}: no benchmark file <model>/<submodel>_"
                       f"{f.backend}.json under {self.where.root} whose <model>_<submodel> "
                       f"is {name!r}")
                break
            resolved = self.where.outside(path)
            if resolved is not None:
                self.problems.append(f"{f.path}: {key_path(['modules', i])}: {OUTSIDE}: "
                                     f"{name!r} is {resolved}")
                why = f"modules[{i}] {name!r}: {path} is outside the benchmarks tree"
                break
            dep_id = f"{path.parent.name}.{path.stem}"
            if dep_id not in self.sel.files:
                try:
                    self.sel.files[dep_id] = load_file(path, path.parent.name, self.where)
                except ConfigError as exc:
                    self.problems += exc.problems
                    why = f"modules[{i}] {name!r}: {path} is not a valid benchmark file"
                    break
            dep_why = self.unavailable(dep_id, (*visiting, fid))
            if dep_why:
                why = f"modules[{i}] {name!r} ({path}) cannot run: {dep_why}"
                break
            ids.append(dep_id)
        if why is None:
            self.sel.modules[fid] = ids
        self.verdicts[fid] = why
        return why


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
        raise ConfigError([f"{where}.dir: expected a directory of benchmark files, "
                           f"{root} is not one"])
    locations = Locations.of(spec, root, env)
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
    modules = Availability(sel, locations)
    for model in chosen:
        for path in sorted((root / model).glob("*.json")):
            if not fnmatch.fnmatch(path.stem, spec["filename"]):
                continue
            try:
                f = load_file(path, model, locations)
            except ConfigError as exc:
                problems += exc.problems
                continue
            if backends and f.backend not in backends:
                continue
            if not ID_RE.match(f.id):
                problems.append(f"{path}: expected a file name of [A-Za-z0-9_.-] only "
                                f"(it becomes a case id)")
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


def compile_flags(f: BenchmarkFile, sku: dict) -> list[str]:
    """The SKU's target flags (and its own extra flags), then the file's compile_flags
    but those benchflow owns (its statistics file)."""
    from workflow.backends.iree.tools import compile_flags as sku_flags

    own = [x for x in f.data.get("compile_flags", []) if not x.startswith(OWNED_COMPILE_FLAGS)]
    return [*sku_flags(sku, input_type=INPUT_TYPE), *own]


def run_spec(f: BenchmarkFile, sku: dict, weights: list | None = None) -> dict:
    """What the run stage needs (and its params: a change reruns the timing). `weights`:
    the parameter archives to pass (Selection.weights; default: the file's own)."""
    m = sku["measurement"]
    if weights is None:
        weights = [f.weights] if f.weights else []
    return {
        "function": f.data["function_run"],
        "inputs": f.input_args(),
        "device": f.data["device"],
        "parameters": [f"--parameters=model={w}" for w in weights],
        "benchmark_flags": f.extra_benchmark_flags(),
        # The file's own repetitions and warm-up; invocations and min_time are the SKU's
        # protocol (DESIGN.md: the invocation is the unit).
        "measurement": {**m, "repetitions": f.repetitions, "min_warmup_time_s": f.warmup_s},
    }


def data_files(f: BenchmarkFile, weights: list | None = None) -> list[str]:
    """Files a run reads besides the modules: @inputs and the weights (rule inputs)."""
    if weights is None:
        weights = [f.weights] if f.weights else []
    return [*f.input_files(), *(str(w) for w in weights)]


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
