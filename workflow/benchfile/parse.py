"""Reading one benchmark file: its schema (workflow/schemas/benchmark_file.schema.json),
what the schema cannot say (`file_problems`), and `BenchmarkFile`, the file with what it
means: its id and group, its protocol fields, the dtype and shape its case shows, its
goldens, and (through resolve) where its files are. `load_file` refuses a file with a
problem or a path outside its roots, naming every one."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from workflow.benchfile import resolve
from workflow.benchfile.flags import OWNED_FLAGS, REPETITIONS_FLAG, WARMUP_FLAG
from workflow.benchfile.formats import other_format
from workflow.benchfile.goldens import of_key
from workflow.errors import ConfigError, key_path
from workflow.paths import REPO_ROOT
from workflow.records import schemas
from workflow.records.schemas import schema_problems
from workflow.records.storage import read_json_file

# A file's id, <model>.<name>, matched whole (fullmatch: no trailing newline).
ID_RE = re.compile(r"[A-Za-z0-9_.-]+")
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
    where: resolve.Locations | None = None

    def __post_init__(self):
        if self.where is None:
            self.where = resolve.Locations.beside(self.path)

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
    def config(self) -> str:
        """Its cases' `config` (the reports' Config column): the submodel."""
        return self.submodel

    @property
    def group(self) -> str:
        """`<model>_<submodel>`: the upstream artifact group, and how `modules` name it."""
        return f"{self.model}_{self.submodel}"

    # Where its files are (resolve.py).
    def locate_mlir(self) -> resolve.Found:
        return resolve.locate_mlir(self)

    def locate_weights(self) -> resolve.Found:
        return resolve.locate_weights(self)

    @property
    def mlir(self) -> Path | None:
        return self.locate_mlir().path

    @property
    def weights(self) -> Path | None:
        """The archive passed as --parameters=model=: named ones always (a missing one
        skips the file), the default one when it exists."""
        found = self.locate_weights()
        return found.path if found.required or found.exists else None

    def input_args(self) -> list[str]:
        return resolve.input_args(self)

    def input_files(self) -> list[str]:
        return resolve.input_files(self)

    def confinement_problems(self, source: str | None = None) -> list[str]:
        return resolve.confinement_problems(self, source)

    def not_runnable(self) -> str | None:
        return resolve.not_runnable(self)

    # Its protocol and what its case shows.
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
        return of_key(self.data, key)


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
              where: resolve.Locations | None = None) -> BenchmarkFile:
    """Reads and checks one benchmark file; raises ConfigError naming every problem.
    `where`: how its files are found (default: the file's model directory's parent is
    the benchmarks root, the upstream defaults for the rest)."""
    path = Path(path)
    data = read_json_file(path, unique_keys=True)
    problems = file_problems(data, str(path))
    if problems:
        raise ConfigError([*problems, *other_format(data, str(path), "sharktank")])
    f = BenchmarkFile(path, model or path.parent.name, path.stem, data, where)
    problems = f.confinement_problems()
    if problems:
        raise ConfigError(problems)
    return f
