"""Where a benchmark file's files are, and that none is outside its roots.

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
- `@file` inputs: relative to the JSON's folder.

`<artifacts>` is the suite's `benchmark_files.artifacts_dir`, else `$IREE_TEST_FILES/
artifacts` (the runner's variable), else `<benchmarks root>/../artifacts` (the runner's
default). Nothing is downloaded: a file whose MLIR, weights or inputs are absent is
skipped with what is missing and where it was looked for (`not_runnable`).

Confinement (`confinement_problems`): every path a file names must resolve, symlinks
followed, inside the roots of its kind (`Locations.roots`): a directory named by an
environment variable is a root of its own lookup only; a flag not on the allow-list is
refused (flags.flag_paths). The functions here take a parse.BenchmarkFile, whose methods of
the same names call them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from workflow.benchfile.flags import OWNED_COMPILE_FLAGS, OWNED_FLAGS, TOOLS, flag_paths
from workflow.errors import ConfigError, key_path
from workflow.files import LOOP, file_problem, read_bytes
from workflow.records.storage import MAX_JSON_BYTES

OUTSIDE = "path resolves outside the directories a benchmark file may read"
# The upstream runner's environment: its artifacts live in $IREE_TEST_FILES/artifacts;
# its README passes the external test files directory as $PATH_TO_EXTERNAL_FILES.
ARTIFACTS_ENV = "IREE_TEST_FILES"
EXTERNAL_ENV = "PATH_TO_EXTERNAL_FILES"
# Names in an artifact group when the file names none (the quality tests download the
# MLIR from .../model.mlir; the runner's default weights).
DEFAULT_MLIR_NAME = "model.mlir"
DEFAULT_WEIGHTS_NAME = "real_weights.irpa"
# The kinds of path, each confined to its own roots (Locations.roots).
TREE, ARTIFACTS, EXTERNAL = "tree", "artifacts", "external"


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

    def roots(self, kind: str = TREE) -> tuple[Path, ...]:
        """The directories a path of `kind` must resolve inside (symlinks resolved):
        EXTERNAL (mlir_file_name) the external files directory; ARTIFACTS (a name in the
        file's artifact group) the artifact directory; TREE (whatever else a file names:
        mlir_file_path, real_weights_file_path, @inputs, flag paths, modules) the
        benchmarks root and the artifact and external directories that the suite or the
        runner's default chose. A directory from $IREE_TEST_FILES or
        $PATH_TO_EXTERNAL_FILES is a root of the one lookup it names: the environment
        of whoever runs benchflow (PATH_TO_EXTERNAL_FILES=/) must not widen what every
        file may read."""
        if kind == EXTERNAL:
            dirs = [self.external]
        elif kind == ARTIFACTS:
            dirs = [self.artifacts]
        else:  # `of` writes a directory taken from the environment as from `$NAME...`
            dirs = [self.root, *(d for d, frm in ((self.artifacts, self.artifacts_from),
                                                  (self.external, self.external_from))
                                 if d is not None and not frm.startswith("$"))]
        return tuple(p.resolve() for p in dirs if p is not None)

    def outside(self, path: Path | str, kind: str = TREE) -> Path | None:
        """`path` resolved (symlinks followed, relative to the working directory) when it
        is outside every root of its kind; None when it is inside one."""
        resolved = Path(path).resolve()
        inside = any(resolved.is_relative_to(r) for r in self.roots(kind))
        return None if inside else resolved

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
    kind: str = TREE  # which roots it must be inside (Locations.roots)

    @property
    def exists(self) -> bool:
        """A regular file is there (a FIFO, a directory or a link loop is none)."""
        return self.path is not None and file_problem(self.path) is None

    def missing(self, what: str) -> str | None:
        """Why the file cannot be used, or None. An optional file that is absent is no
        problem; one that is there but no regular file (a FIFO, a directory, a link
        loop) is, said as what it is: the tool would block on it or fail."""
        if self.path is None:
            return f"{what} cannot be located: {self.how}" if self.required else None
        problem = file_problem(self.path)
        if problem is None or (problem == "does not exist" and not self.required):
            return None
        if problem == "does not exist":
            return (f"{what} is absent: expected {self.path} ({self.how}); benchflow never "
                    "downloads")
        return f"{what} {self.path} {problem} ({self.how})"


def url_name(url: str) -> str:
    """The file name a URL is downloaded as (upstream's FetchedArtifact)."""
    return Path(urlparse(url).path).name


def beside(f, rel: str) -> Path:
    """A path relative to the file's JSON folder (@file inputs)."""
    p = Path(rel)
    return p if p.is_absolute() else f.path.parent / p


def from_root(f, rel: str) -> Path:
    """A path relative to the benchmarks root (mlir_file_path, real_weights_file_path)."""
    p = Path(rel)
    return p if p.is_absolute() else f.where.root / p


def in_group(f, name: str, because: str, key: str) -> Found:
    """`name` in the file's artifact group, <artifacts>/<model>_<submodel>/."""
    w = f.where
    return Found(w.artifacts / f.group / name,
                 f"{because}, in <artifacts>/{f.group}/ where <artifacts> is "
                 f"{w.artifacts_from}; set benchmark_files.artifacts_dir or "
                 f"${ARTIFACTS_ENV} to point elsewhere", key=key, kind=ARTIFACTS)


def quality_mlir_name(f) -> str | None:
    """The name the upstream quality test of this benchmark downloads its MLIR as
    (sharktank_models/quality_tests/<model>/<name>.json beside the benchmarks root)."""
    q = f.where.root.parent / "quality_tests" / f.model / f"{f.name}.json"
    try:
        # Optional: a quality file that is absent, no regular file or no JSON names none.
        url = json.loads(read_bytes(q, cap=MAX_JSON_BYTES, what="a JSON file")).get("mlir")
    except (ConfigError, ValueError, AttributeError):
        return None
    return url_name(url) if isinstance(url, str) else None


def _named_mlir(f) -> Found | None:
    """The MLIR a file names by path (from the benchmarks root) or by name (in the
    external test files directory); None when it names neither."""
    d, w = f.data, f.where
    if d.get("mlir_file_path"):
        rel = d["mlir_file_path"]
        return Found(from_root(f, rel), f"mlir_file_path {rel!r} is relative to the "
                                        f"benchmarks root {w.root}", key="mlir_file_path")
    if d.get("mlir_file_name"):
        name = d["mlir_file_name"]
        if w.external is None:
            return Found(None, f"mlir_file_name {name!r} is a file of the external test "
                               f"files directory: set benchmark_files.external_files_dir "
                               f"or ${EXTERNAL_ENV}", key="mlir_file_name")
        return Found(w.external / name, f"mlir_file_name {name!r}, in the external test "
                                        f"files directory ({w.external_from})",
                     key="mlir_file_name", kind=EXTERNAL)
    return None


def locate_mlir(f) -> Found:
    named = _named_mlir(f)
    if named is not None:
        return named
    d = f.data
    url = d.get("mlir_url") or d.get("mlir_file_url")
    if url and url_name(url):
        return in_group(f, url_name(url), f"the file name of its mlir_url {url}",
                        "mlir_url" if d.get("mlir_url") else "mlir_file_url")
    quality = quality_mlir_name(f)
    if quality:
        return in_group(f, quality, "the file name of its quality test's mlir URL",
                        "(its quality test's mlir)")
    return in_group(f, DEFAULT_MLIR_NAME, "it names no MLIR, so the one upstream's "
                                          "quality tests download",
                    f"(the default <artifacts>/<group>/{DEFAULT_MLIR_NAME})")


def locate_weights(f) -> Found:
    d = f.data
    if d.get("real_weights_file_path"):
        rel = d["real_weights_file_path"]
        return Found(from_root(f, rel), f"real_weights_file_path {rel!r} is relative to "
                                        f"the benchmarks root {f.where.root}",
                     key="real_weights_file_path")
    if d.get("real_weights_file_name"):
        return in_group(f, d["real_weights_file_name"], "its real_weights_file_name",
                        "real_weights_file_name")
    found = in_group(f, DEFAULT_WEIGHTS_NAME, "the runner's default weights",
                     f"(the default <artifacts>/<group>/{DEFAULT_WEIGHTS_NAME})")
    return Found(found.path, found.how, required=False, key=found.key, kind=found.kind)


def input_args(f) -> list[str]:
    """--input values with relative @files made relative to the working directory."""
    out = []
    for spec in f.data["inputs"]:
        head, at, rel = spec.partition("@")
        out.append(f"{head}@{beside(f, rel)}" if at else spec)
    return out


def input_files(f) -> list[str]:
    return [spec.partition("@")[2] for spec in input_args(f) if "@" in spec]


def _outside(f, source: str, key: str, raw: str, path: Path | str,
             must_exist: bool = True, kind: str = TREE) -> list[str]:
    """The problem of a path outside the roots of its kind (none for an absent path,
    unless `must_exist` is False: a flag's path is refused wherever it would be)."""
    if must_exist and not os.path.lexists(path):
        return []
    if file_problem(path) == LOOP:  # Path.resolve() would raise RuntimeError on it
        return [f"{source}: {key}: {raw!r} {LOOP}; expected a path inside the benchmarks "
                "tree or the artifact directory"]
    resolved = f.where.outside(path, kind)
    if resolved is None:
        return []
    inside = " or ".join(str(r) for r in f.where.roots(kind)) or "(none is set)"
    return [f"{source}: {key}: {OUTSIDE}: {raw!r} is {resolved}; expected a path inside "
            f"{inside}"]


def _flag_problems(f, source: str) -> list[str]:
    """Flags not on the allow-list, and every file a flag reads that is outside the
    roots, in the order of the flags."""
    problems = []
    for flags_key, owned in (("compile_flags", OWNED_COMPILE_FLAGS),
                             ("benchmark_flags", OWNED_FLAGS)):
        for i, flag in enumerate(f.data.get(flags_key, [])):
            if flag.startswith(owned):
                continue  # dropped: benchflow sets its own
            key = key_path([flags_key, i])
            try:
                paths = flag_paths(flag, TOOLS[flags_key])
            except ValueError as exc:
                problems.append(f"{source}: {key}: {exc}")
                continue
            for p in paths:
                problems += _outside(f, source, key, flag, p, must_exist=False)
    return problems


def confinement_problems(f, source: str | None = None) -> list[str]:
    """Every path the file names that resolves (symlinks followed) outside the roots
    of its kind (Locations.roots), and every flag not on the allow-list, each
    'file: key: why'. A named path outside
    them that does not exist is left to not_runnable (absent: the file is skipped)."""
    source = source or str(f.path)
    problems = []
    for found in (locate_mlir(f), locate_weights(f)):
        if found.path is not None:
            problems += _outside(f, source, found.key,
                                 str(f.data.get(found.key, found.path)), found.path,
                                 kind=found.kind)
    for i, spec in enumerate(f.data["inputs"]):
        head, at, rel = spec.partition("@")
        if at:
            problems += _outside(f, source, key_path(["inputs", i]), spec, beside(f, rel))
    return problems + _flag_problems(f, source)


def not_runnable(f) -> str | None:
    """Why the file cannot run here at all (its MLIR, weights or an @input absent), or
    None. Its modules are the selection's to check (select.Availability)."""
    why = locate_mlir(f).missing("its MLIR") or locate_weights(f).missing("its weights file")
    if why:
        return why
    for i, rel in enumerate(input_files(f)):
        problem = file_problem(rel)
        if problem == "does not exist":
            return f"its input inputs[{i}] is absent: expected {rel} (benchflow never " \
                   "downloads)"
        if problem:
            return f"its input inputs[{i}] {rel} {problem}"
    return None
