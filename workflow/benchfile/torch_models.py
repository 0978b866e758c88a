"""iree-test-suites' torch_models test files (torch_models/README.md and the pytest_iree
plugin at iree-org/iree-test-suites 612f936): their format, and where their files are.

A test file is `{"type": benchmark | quality | compstat, "markers": [...], ...}`; its
`modules` (a compstat test: `module`) name module files `<module directory>/<name>.json`
holding `{"mlir": URL or path, "compiler_flags": [...]}`. The harness downloads every
URL to `<artifact directory>/azure/<uuid>.<ext>` and keeps the URL -> name map in
`<artifact directory>/azure/manifest.json` (pytest_iree/azure.py); benchflow reads that
map and never downloads: a URL without a local copy makes its test a skipped case naming
the URL and the path looked for. A relative MLIR path is relative to the external file
directory (the harness compiles there). The plan of their cases is torch_plan.py's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from workflow.backends.iree.allowed_flags import refusal
from workflow.benchfile.formats import other_format
from workflow.errors import ConfigError, key_path
from workflow.files import file_problem
from workflow.records import schemas
from workflow.records.schemas import schema_problems
from workflow.records.storage import read_json_file

# The harness's URL -> local file map, under its --artifact-directory.
MANIFEST = Path("azure") / "manifest.json"
# run_args benchflow takes as the case's own fields (function, device), and the
# tolerances of iree-run-module's --expected_output comparison (quality tests only).
FUNCTION_FLAG, DEVICE_FLAG = "--function=", "--device="
THRESHOLD_FLAGS = ("--expected_f16_threshold=", "--expected_f32_threshold=",
                   "--expected_f64_threshold=", "--expected_bf16_threshold=")
NEVER_DOWNLOADS = "benchflow never downloads"


@dataclass(frozen=True)
class Dirs:
    """The harness's directories (its --test-file-directory, --module-directory,
    --external-file-directory, --artifact-directory)."""

    tests: Path
    modules: Path
    external: Path
    artifacts: Path

    @classmethod
    def of(cls, spec: dict) -> Dirs:
        """The suite's directories, made absolute here, once, from the directory the
        suite is read in (as its other paths are: planning/suite_dir.CWD_RELATIVE). A
        relative one passed on would be read again against another directory: a module's
        MLIR becomes the record's `mlir_file_path`, which the run reads relative to the
        benchmarks root (the test file directory), not to where the listing found it."""
        def absolute(path: str) -> Path:
            return Path(os.path.abspath(os.path.expanduser(path)))

        external = absolute(spec["external_files"] or spec["modules"])
        return cls(absolute(spec["test_files"]), absolute(spec["modules"]), external,
                   absolute(spec["artifacts"]) if spec.get("artifacts") else external)


def _run_arg_problems(data: dict, source: str) -> list[str]:
    """run_args off benchflow's allow-list (those of iree-benchmark-module; a quality
    test's --expected_*_threshold tolerances too), each 'file: key: why'."""
    problems = []
    for i, flag in enumerate(data.get("run_args", [])):
        if flag.startswith((FUNCTION_FLAG, DEVICE_FLAG)):
            continue
        if flag.startswith(THRESHOLD_FLAGS):
            if data["type"] != "quality":
                problems.append(f"{source}: {key_path(['run_args', i])}: {flag!r} is a "
                                "tolerance of a quality test's expected outputs; expected "
                                "it in a test of type quality")
            continue
        why = refusal(flag, "iree-benchmark-module", "a torch_models test file")
        if why:
            problems.append(f"{source}: {key_path(['run_args', i])}: {why}")
    if data["type"] != "compstat" and not any(
            f.startswith(FUNCTION_FLAG) for f in data.get("run_args", [])):
        problems.append(f"{source}: run_args: expected --function=NAME (the function the "
                        "harness's iree tools run)")
    return problems


def test_problems(data, source: str) -> list[str]:
    """Every problem of a test file, 'file: key: expected'; [] when it is valid."""
    problems = schema_problems(data, schemas.load("torch_models_test"), source)
    if problems or not isinstance(data, dict):
        return problems
    return _run_arg_problems(data, source)


def module_problems(data, source: str) -> list[str]:
    """Every problem of a module file's format. Its compiler flags off the allow-list
    are its tests' skip reason (torch_plan.py), not a problem of the format."""
    return schema_problems(data, schemas.load("torch_models_module"), source)


def _load(path: str | Path, problems_of, kind: str) -> dict:
    """A file read and checked; its problems, and the format it looks like instead."""
    data = read_json_file(path, unique_keys=True)
    problems = problems_of(data, str(path))
    if problems:
        raise ConfigError([*problems, *other_format(data, str(path), kind)])
    return data


def load_test(path: str | Path) -> dict:
    return _load(path, test_problems, "torch_models test")


def module_path(dirs: Dirs, name: str) -> Path:
    """`<module directory>/<name>.json`, as the harness's ModuleArtifact finds it."""
    return dirs.modules / f"{name}.json"


def load_module(path: str | Path) -> dict:
    return _load(path, module_problems, "torch_models module")


def refused_flags(module: dict, source: str) -> str | None:
    """Why a module's compiler flags cannot be passed (the first flag off the
    allow-list), or None. The statistics flags are benchflow's own (it dumps them)."""
    from workflow.benchfile.flags import OWNED_COMPILE_FLAGS

    for i, flag in enumerate(module["compiler_flags"]):
        if flag.startswith(OWNED_COMPILE_FLAGS):
            continue
        why = refusal(flag, "iree-compile", "a torch_models module file")
        if why:
            return f"{source}: {key_path(['compiler_flags', i])}: {why}"
    return None


def _manifest(artifacts: Path) -> tuple[Path, dict | None]:
    path = artifacts / MANIFEST
    if file_problem(path) == "does not exist":
        return path, None
    data = read_json_file(path)
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise ConfigError([f"{path}: expected the harness's object of URL -> file name "
                           "(pytest_iree/azure.py's manifest)"])
    return path, data


def url_file(artifacts: Path, url: str) -> tuple[Path | None, str | None]:
    """(the local copy of `url` in the harness's artifact layout, why it cannot be used
    or None). ConfigError for a manifest entry that is no plain file name: it would
    read a file outside the artifact directory."""
    manifest, data = _manifest(artifacts)
    if data is None:
        return None, (f"{url} has no local copy: {manifest} (the harness's URL -> file "
                      f"map) does not exist; {NEVER_DOWNLOADS}")
    name = data.get(url)
    if name is None:
        return None, f"{url} has no local copy: {manifest} has no entry for it; " \
                     f"{NEVER_DOWNLOADS}"
    if Path(name).name != name or name in ("", ".", ".."):
        raise ConfigError([f"{manifest}: {url}: expected a file name in "
                           f"{manifest.parent}, got {name!r}"])
    path = manifest.parent / name
    problem = file_problem(path)
    if problem:
        return path, (f"{url}: expected its local copy at {path} (named in {manifest}), "
                      f"which {problem}; {NEVER_DOWNLOADS}")
    return path, None


def mlir_file(dirs: Dirs, module: dict, source: str) -> tuple[Path | None, str | None]:
    """(the MLIR of a module, why it cannot be used or None): a URL's local copy, or a
    path relative to the external file directory, which it must not leave."""
    mlir = module["mlir"]
    if "://" in mlir:
        return url_file(dirs.artifacts, mlir)
    path = dirs.external / mlir
    if not path.resolve().is_relative_to(dirs.external.resolve()):
        raise ConfigError([f"{source}: mlir: {mlir!r} resolves to {path.resolve()}; "
                           f"expected a path inside the external file directory "
                           f"{dirs.external}"])
    problem = file_problem(path)
    if problem:
        return path, f"its MLIR {path} (mlir {mlir!r} of {source}) {problem}"
    return path, None


def target_device(module: dict) -> str | None:
    """The HAL device its compiler flags target (--iree-hal-target-device, the last
    one; local, hip, cuda, vulkan), or None."""
    found = [f.partition("=")[2] for f in module["compiler_flags"]
             if f.startswith("--iree-hal-target-device=")]
    return found[-1] if found else None
