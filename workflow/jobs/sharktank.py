"""The run stage of sharktank-format benchmark files (compile is jobs.iree's
compile_module with the file's flags; the case step is jobs.cases). Failures follow
jobs/model.py. A file whose device is absent on the measuring machine (a hip or cuda
file compiled for a GPU SKU on a machine without that GPU) is not run: its run stage
says no-device with the reason, and the case is compile-only.

The compile flags, run spec and data files the rules give these stages come from
workflow.benchfile.flags, re-exported here: rules import only the stage rooms and paths.

`benchflow benchmarks` (cli/benchmarks.py) lists the files a suite selects with
`select_files` and runs them with the snakemake command of `run_files_argv`."""

from __future__ import annotations

from pathlib import Path

from workflow.backends.iree import tools as iree
from workflow.benchfile.flags import compile_flags, data_files, run_spec
from workflow.errors import StageError
from workflow.jobs import iree as stages
from workflow.jobs.kernels import profiled_kernels
from workflow.jobs.model import not_run, run_stage
from workflow.records.stage import StageResult

__all__ = ["compile_flags", "data_files", "run_benchmark_file", "run_files_argv", "run_spec",
           "select_files"]


def run_benchmark_file(*, vmfb: str, compile_meta: str, spec: dict, sku: dict, timeout: float,
                       timing: str, log: str, modules: list[str] = (),
                       module_metas: list[str] = ()) -> StageResult:
    """Times a benchmark file's module with its function, inputs, weights and flags,
    under the measurement protocol of the SKU (stages.measure)."""
    # The file says which device it runs on; the SKU how many workers local-task has.
    run_sku = {**sku, "iree": {**sku["iree"], "device": spec["device"]}}
    test = spec.get("torch_models") or {}

    def body():
        tool = iree.benchmark_tool()
        extra = [*spec["parameters"], *random_parameters(test), *spec["benchmark_flags"]]
        if test.get("type") == "quality":
            return check_quality(vmfb, list(modules), spec, extra, timeout, log)
        out = stages.measure(
            lambda **kw: iree.benchmark_argv(tool, vmfb, spec["function"], spec["inputs"],
                                             run_sku, modules=list(modules), extra_flags=extra,
                                             **kw),
            spec["measurement"], timeout, log, seed=vmfb)
        # After the timing, apart from it, as an IREE case's (jobs/kernels.py).
        return {**out, "device": spec["device"],
                "kernels": profiled_kernels(out["command"], spec["measurement"], timeout, log)}

    upstream = [compile_meta, *module_metas]
    if test.get("type") == "compstat":
        # What the harness's compstat test measures is the compile: nothing runs.
        skipped = not_run("run", timing, upstream, COMPSTAT_REASON)
        return skipped if skipped is not None else run_stage("run", timing, [], upstream,
                                                             dict)
    # Decided here, on the machine that would measure: no device, no run (compile-only).
    absent = iree.device_absent_reason(spec["device"])
    skipped = not_run("run", timing, upstream, absent) if absent else None
    if skipped is not None:
        return skipped
    # A module this one loads failing to compile fails this case too, with its error.
    return run_stage("run", timing, [], upstream, body)


COMPSTAT_REASON = ("a torch_models compstat test: compiled only, its dispatch count and "
                   "binary size judged against golden_dispatch_count / golden_binary_size")


def random_parameters(test: dict) -> list[str]:
    """--parameters flags of a torch_models test's `type: random` weights, their archives
    generated (or found by content) in its random_weights_dir."""
    from workflow.benchfile.random_weights import archive

    out = []
    for w in test.get("random_weights", []):
        try:
            path = archive(w["mlir"], w["seed"], test["random_weights_dir"])
        except (ValueError, OSError) as exc:  # IREE's MLIR parser: an MLIRError is one
            raise StageError("run", f"random weights of {w['mlir']}: {exc}") from None
        out.append(f"--parameters={w['scope']}={path}")
    return out


def check_quality(vmfb: str, modules: list[str], spec: dict, extra: list[str],
                  timeout: float, log: str) -> dict:
    """A torch_models quality test as the harness checks it: iree-run-module with its
    --expected_output values and --expected_*_threshold tolerances (IREE's own
    comparison, absolute per element type); a mismatch fails the case with its output."""
    from workflow.backends.proc import log_tail, run_tool, tool_path

    test = spec["torch_models"]
    argv = [tool_path("iree-run-module"), *(f"--module={m}" for m in modules),
            f"--module={vmfb}", f"--function={spec['function']}", f"--device={spec['device']}",
            *(f"--input={i}" for i in spec["inputs"]), *extra,
            *(f"--expected_output={e}" for e in test["expected_outputs"]),
            *test["thresholds"]]
    try:
        run_tool(argv, stage="run", timeout=timeout, log=log)
    except StageError:
        # The tool prints each mismatch as `[FAILED] result[i]: ...` on stdout, after
        # the outputs themselves: those lines are the reason, not the first ones.
        failed = [line[:300] for line in log_tail(log, 1 << 20).splitlines()
                  if line.startswith("[FAILED]")]
        if not failed:
            raise
        raise StageError("run", "iree-run-module: outputs differ from the test's "
                         f"expected_outputs beyond its tolerances: {failed[0]}"
                         + "".join(f"\n{line}" for line in failed[1:])) from None
    return {"device": spec["device"]}


def select_files(configfile: list[str] | None, override: dict, config: dict | None = None):
    """(the suite, the benchmark files it selects: benchfile.select's Selection), with
    `config` (--config KEY=VALUE, as a run takes it) over the suite's files and
    `override` (`benchflow benchmarks`' options, run_benchmarks.py's) over the suite's
    benchmark_files settings. Bad settings: a ConfigError, an override's problem naming
    the override (planning/plan.load_suite)."""
    from workflow.benchfile.attach import attach
    from workflow.planning.plan import command_suite
    from workflow.suite.load import load
    from workflow.suite.schema import deep_merge

    suite = command_suite(configfile, config or {})
    if override:
        # The options on top, loaded apart: a problem they bring is not the --config's
        # (command_suite names an override's problem by its --config).
        suite = load(configfile, deep_merge(config or {}, {"benchmark_files": override}))
    return suite, attach(suite)


def run_files_argv(configfile: list[str] | None, config: dict, *, cores: str, target: str,
                   dry_run: bool, directory: Path | None = None) -> list[str]:
    """The snakemake command that builds `target` with the files `select_files` selects:
    `config` ({section: settings}) over the suite's, in `directory` (default: where it
    is started)."""
    import json

    from workflow.planning.snakemake_command import snakemake_command

    options = ["--cores", str(cores), target]
    if directory is not None:
        options = ["--directory", str(directory), *options]
    for f in configfile or []:
        options += ["--configfile", str(f)]
    if config:
        # Snakemake parses --config values as YAML with strings only; JSON is such YAML.
        # One --config for all: a second would replace the first.
        options += ["--config", *(f"{k}={json.dumps(v)}" for k, v in config.items())]
    if dry_run:
        options.append("-n")
    return snakemake_command(*options)
