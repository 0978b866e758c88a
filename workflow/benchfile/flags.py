"""A benchmark file's flags: which it may pass at all (the allow-list of
workflow.backends.iree.allowed_flags: anything else is refused), which files those make
IREE's tools read (`flag_paths`, for confinement), which flags benchflow owns, and what
the compile and run stages are given (`compile_flags`, `run_spec`, `data_files`)."""

from __future__ import annotations

from workflow.backends.iree.allowed_flags import refusal

# benchmark_flags that stand for the file's own fields, or that benchflow must own.
REPETITIONS_FLAG = "--benchmark_repetitions="
WARMUP_FLAG = "--benchmark_min_warmup_time="
OWNED_FLAGS = (REPETITIONS_FLAG, WARMUP_FLAG, "--benchmark_format=", "--benchmark_out")
# compile_flags benchflow owns (compile_argv sets them; upstream files carry the first).
OWNED_COMPILE_FLAGS = ("--iree-scheduling-dump-statistics-file=",
                       "--iree-scheduling-dump-statistics-format=")
# Flags of iree-compile / iree-benchmark-module whose value names a file the tool reads,
# and where in the value: "path" the value itself; "input" after its `@` (`[type=]@file`;
# no `@`: a literal value); "scoped" after its scope (`[scope=]file`). Every other flag
# on the allow-list (workflow.backends.iree.allowed_flags) reads no file.
READ_FLAGS = {
    "--module": "path", "--input": "input", "--function_input": "input",
    "--expected_output": "input", "--parameters": "scoped",
    "--iree-opt-import-parameters": "scoped",
    "--iree-codegen-transform-dialect-library": "path",
    "--iree-codegen-tuning-spec-path": "path",
    "--iree-hal-executable-object-search-path": "path",
    "--iree-rocm-bc-dir": "path", "--iree-hip-bc-dir": "path",
}
# Which tool a benchmark file's flag list goes to.
TOOLS = {"compile_flags": "iree-compile", "benchmark_flags": "iree-benchmark-module"}
# Compiled from MLIR of any dialect: the hand-written benchmarks are linalg, IREE's torch.
INPUT_TYPE = "auto"


def flag_paths(flag: str, tool: str) -> list[str]:
    """The files a flag makes `tool` (iree-compile or iree-benchmark-module) read
    (relative ones are relative to the working directory); ValueError for a flag that is
    not on the allow-list (it may write files, run a program or load code), or that reads
    a file but has no `=value`."""
    why = refusal(flag, tool)
    if why:
        raise ValueError(why)
    name, eq, value = flag.partition("=")
    kind = READ_FLAGS.get(name)
    if kind is None:
        return []
    if not eq:
        raise ValueError(f"{name} names a file: give it as {name}=FILE (without `=`, the "
                         "tool would take the next argument as its value)")
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
    if getattr(f, "own_target", False):
        # A torch_models module's flags name its target, as the harness compiles it;
        # the SKU's target flags too would add a second HAL device.
        return [f"--iree-input-type={INPUT_TYPE}", *own]
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
        # A torch_models test names neither (the harness takes the tool's defaults): the
        # SKU's protocol then decides.
        "measurement": {**m, **({"repetitions": f.repetitions} if f.repetitions else {}),
                        **({"min_warmup_time_s": f.warmup_s} if f.warmup_s is not None
                           else {})},
        # A torch_models test's kind, random weights and expected outputs (torch_plan.py).
        **(f.run_extra() if hasattr(f, "run_extra") else {}),
    }


def data_files(f, weights: list | None = None) -> list[str]:
    """Files a run reads besides the modules: @inputs and the weights (rule inputs)."""
    if weights is None:
        weights = [f.weights] if f.weights else []
    return [*f.input_files(), *(str(w) for w in weights)]
