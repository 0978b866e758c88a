"""A benchmark file's flags: which files a flag makes IREE's tools read (`flag_paths`,
for confinement), which flags benchflow owns or refuses, and what the compile and run
stages are given (`compile_flags`, `run_spec`, `data_files`)."""

from __future__ import annotations

import re

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
# Compiled from MLIR of any dialect: the hand-written benchmarks are linalg, IREE's torch.
INPUT_TYPE = "auto"


def _no_value(name: str, what: str) -> ValueError:
    return ValueError(f"{name} {what}: give it as {name}=FILE (without `=`, iree-compile "
                      "would take the next argument as its value)")


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
            raise _no_value(name, "may name a file")
        looks = value.startswith(("@", "/", "~", ".")) or "/" in value
        if not eq or (not looks and (last not in PATH_WORDS or LITERAL_RE.match(value))):
            return []
        kind = "input" if "@" in value else "path"
    if not eq:
        raise _no_value(name, "names a file")
    if kind == "input":
        _, at, path = value.partition("@")
        return [path] if at else []
    if kind == "scoped":
        scope, sep, path = value.partition("=")
        return [path if sep else scope]
    return [value]


def compile_flags(f, sku: dict) -> list[str]:
    """The SKU's target flags (and its own extra flags), then the file's compile_flags
    but those benchflow owns (its statistics file). `f`: a parse.BenchmarkFile."""
    from workflow.backends.iree.tools import compile_flags as sku_flags

    own = [x for x in f.data.get("compile_flags", []) if not x.startswith(OWNED_COMPILE_FLAGS)]
    return [*sku_flags(sku, input_type=INPUT_TYPE), *own]


def run_spec(f, sku: dict, weights: list | None = None) -> dict:
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


def data_files(f, weights: list | None = None) -> list[str]:
    """Files a run reads besides the modules: @inputs and the weights (rule inputs)."""
    if weights is None:
        weights = [f.weights] if f.weights else []
    return [*f.input_files(), *(str(w) for w in weights)]
