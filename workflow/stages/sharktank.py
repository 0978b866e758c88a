"""The run stage of sharktank-format benchmark files (compile is stages.iree's
compile_module with the file's flags; the case step is stages.cases). Failures follow
stages/model.py. A file whose device is absent on the measuring machine (a hip or cuda
file compiled for a GPU SKU on a machine without that GPU) is not run: its run stage
says no-device with the reason, and the case is compile-only.

The compile flags, run spec and data files the rules give these stages come from
workflow.benchfile.flags, re-exported here: rules import only stages and paths.

`benchflow benchmarks` (cli/benchmarks.py) lists the files a suite selects with
`select_files` and runs them with the snakemake command of `run_files_argv`."""

from __future__ import annotations

from pathlib import Path

from workflow.backends.iree import tools as iree
from workflow.benchfile.flags import compile_flags, data_files, run_spec
from workflow.records.stage import StageResult
from workflow.stages import iree as stages
from workflow.stages.kernels import profiled_kernels
from workflow.stages.model import not_run, run_stage

__all__ = ["compile_flags", "data_files", "run_benchmark_file", "run_files_argv", "run_spec",
           "select_files"]


def run_benchmark_file(*, vmfb: str, compile_meta: str, spec: dict, sku: dict, timeout: float,
                       timing: str, log: str, modules: list[str] = (),
                       module_metas: list[str] = ()) -> StageResult:
    """Times a benchmark file's module with its function, inputs, weights and flags,
    under the measurement protocol of the SKU (stages.measure)."""
    # The file says which device it runs on; the SKU how many workers local-task has.
    run_sku = {**sku, "iree": {**sku["iree"], "device": spec["device"]}}

    def body():
        tool = iree.benchmark_tool()
        extra = [*spec["parameters"], *spec["benchmark_flags"]]
        out = stages.measure(
            lambda **kw: iree.benchmark_argv(tool, vmfb, spec["function"], spec["inputs"],
                                             run_sku, modules=list(modules), extra_flags=extra,
                                             **kw),
            spec["measurement"], timeout, log, seed=vmfb)
        # After the timing, apart from it, as an IREE case's (stages/kernels.py).
        return {**out, "device": spec["device"],
                "kernels": profiled_kernels(out["command"], spec["measurement"], timeout, log)}

    upstream = [compile_meta, *module_metas]
    # Decided here, on the machine that would measure: no device, no run (compile-only).
    absent = iree.device_absent_reason(spec["device"])
    skipped = not_run("run", timing, upstream, absent) if absent else None
    if skipped is not None:
        return skipped
    # A module this one loads failing to compile fails this case too, with its error.
    return run_stage("run", timing, [], upstream, body)


def select_files(configfile: list[str] | None, override: dict):
    """(the suite, the benchmark files it selects: benchfile.select's Selection), with
    `override` (`benchflow benchmarks`' options, run_benchmarks.py's) over the suite's
    benchmark_files settings."""
    from workflow.benchfile.select import attach
    from workflow.suite.load import load

    suite = load(configfile, {"benchmark_files": override} if override else None)
    return suite, attach(suite)


def run_files_argv(configfile: list[str] | None, config: dict, *, cores: str, target: str,
                   dry_run: bool, directory: Path | None = None) -> list[str]:
    """The snakemake command that builds `target` with the files `select_files` selects:
    `config` ({section: settings}) over the suite's, in `directory` (default: where it
    is started)."""
    import json

    from workflow.stages.single_run import snakemake_command

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
