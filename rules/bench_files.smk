# bench-files: IREE sharktank-format benchmark files (benchmarks/<model>/<name>_<backend>.json).
# Each selected file x SKU: compile its MLIR with the SKU's target flags plus the file's
# flags, time it with its function, inputs and weights, then a case record judged
# against the goldens. Selection: the suite's `benchmark_files` (workflow/benchfiles.py).
from workflow.suite.sharktank import (
    BF_CASE,
    BF_COMPILE,
    BF_RUN,
    attach_or_exit,
    data_files as bench_data_files,
    identity as bench_identity,
    run_spec as bench_run_spec,
)
from workflow.suite.sharktank import compile_flags as bench_compile_flags
from workflow.regression.gate import golden_input
from workflow.paths import LOGS
from workflow.stages.resources import (
    LOCAL_MEM_MB,
    LOCAL_RUNTIME_MIN,
    compile_runtime_min,
    file_bytes,
    mem_request_mb,
    run_runtime_min,
)

BENCH = attach_or_exit(SUITE)


def _bench_modules(wc, what):
    """The compiled modules (or their stage JSONs) a pipeline benchmark loads first."""
    return [BF_COMPILE.format(sku=wc.sku, benchmark=m) + "/" + what
            for m in BENCH.module_ids(wc.benchmark)]


def _bench_provenance(wc):
    f = BENCH.file(wc.benchmark)
    return {"benchmark_file": str(f.path), "golden_key": BENCH.golden_key(wc.sku),
            "iree_device": f.data["device"],
            "compiled_file_name": f.data.get("compiled_file_name")}


rule compile_bench_file:
    input:
        mlir=lambda wc: str(BENCH.file(wc.benchmark).mlir),
    output:
        vmfb=BF_COMPILE + "/module.vmfb",
        meta=BF_COMPILE + "/compile.json",
    params:
        # Not the file itself: blessing its goldens must not recompile it.
        flags=lambda wc: bench_compile_flags(BENCH.file(wc.benchmark), SUITE.sku(wc.sku)),
        compiler_version=IREE_COMPILER_VERSION,
    log:
        LOGS + "/bench_files/compile/{sku}/{benchmark}.log",
    wildcard_constraints:
        benchmark=r"[A-Za-z0-9_-]+\.[A-Za-z0-9_.-]+",
    threads: 1
    resources:
        mem_mb=lambda wc, input, attempt: mem_request_mb("compile", file_bytes(input.mlir),
                                                         attempt),
        runtime=compile_runtime_min(SUITE.config["timeouts"]),
    script:
        "../scripts/bench_compile.py"


rule run_bench_file:
    input:
        vmfb=BF_COMPILE + "/module.vmfb",
        compile_meta=BF_COMPILE + "/compile.json",
        modules=lambda wc: _bench_modules(wc, "module.vmfb"),
        module_metas=lambda wc: _bench_modules(wc, "compile.json"),
        data=lambda wc: bench_data_files(BENCH.file(wc.benchmark)),
    output:
        timing=BF_RUN + "/timing.json",
    params:
        spec=lambda wc: bench_run_spec(BENCH.file(wc.benchmark), SUITE.sku(wc.sku)),
        topology=lambda wc: SUITE.sku(wc.sku)["iree"]["task_topology_max_group_count"],
        runtime_version=IREE_RUNTIME_VERSION,
    log:
        LOGS + "/bench_files/run/{sku}/{benchmark}.log",
    wildcard_constraints:
        benchmark=r"[A-Za-z0-9_-]+\.[A-Za-z0-9_.-]+",
    # Timing jobs never overlap each other nor any other job (see Snakefile).
    resources:
        bench_slot=1,
        mem_mb=lambda wc, input, attempt: mem_request_mb("run", file_bytes(input.vmfb), attempt),
        runtime=lambda wc: run_runtime_min(SUITE.sku(wc.sku)["measurement"],
                                           SUITE.config["timeouts"]),
    threads: BENCH_THREADS
    script:
        "../scripts/bench_run.py"


rule case_bench_file:
    input:
        compiled=BF_COMPILE + "/compile.json",
        run=BF_RUN + "/timing.json",
        goldens=lambda wc: golden_input(SUITE.config["goldens"]["dir"], wc.sku),
    output:
        case=BF_CASE,
    params:
        identity=lambda wc: bench_identity(next(c for c in BENCH.cases
                                                if c.sku == wc.sku
                                                and c.benchmark == wc.benchmark)),
        provenance=_bench_provenance,
        # The file's goldens as params: blessing them reruns only this step.
        file_goldens=lambda wc: BENCH.file(wc.benchmark).goldens(BENCH.golden_key(wc.sku)),
        gate=SUITE.config["goldens"],
    log:
        LOGS + "/bench_files/cases/{sku}/{benchmark}.log",
    wildcard_constraints:
        benchmark=r"[A-Za-z0-9_-]+\.[A-Za-z0-9_.-]+",
    localrule: True
    threads: 1
    resources:
        mem_mb=LOCAL_MEM_MB,
        runtime=LOCAL_RUNTIME_MIN,
    script:
        "../scripts/bench_case.py"
