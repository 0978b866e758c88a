# bench-files: IREE sharktank-format benchmark files (benchmarks/<model>/<name>_<backend>.json).
# Each selected file x SKU that can run here: compile its MLIR with the SKU's target flags
# plus the file's flags, time it with its function, inputs and weights, then a case record
# judged against the goldens. Selection: the suite's `benchmark_files`, selected as BENCH by
# the Snakefile (workflow.planning.plan.attach_benchmark_files); its MLIR, weights, inputs and
# modules were found there (workflow.benchfile), so none of these inputs is missing.
# The pairs that cannot run are skipped cases, recorded by the report rule. A GPU file (device
# hip or cuda) on a GPU SKU of its backend (rocm, cuda) is compiled on any machine; where its
# device is absent, run_bench_file records its run as no-device (decided on the measuring
# machine) and the case is compile-only: dispatch count and size judged, no time. The
# machine's automatic values (the GPUs it lists, `target_cpu: host`'s CPU, its CPU count)
# are params of both rules: on a machine that has the device, or another CPU, they run
# again.
from workflow.paths import (
    BF_CASE,
    BF_CASE_LOG,
    BF_COMPILE_LOG,
    BF_COMPILE_META,
    BF_COMPILE_VMFB,
    BF_RUN_LOG,
    BF_RUN_TIMING,
)
from workflow.planning.plan import (
    bench_identity,
    bench_module_files,
    bench_provenance,
    case_golden_input,
    iree_automatic,
)
from workflow.planning.placement import slurm_constraint, slurm_gres, slurm_partition
from workflow.planning.resources import (
    LOCAL_MEM_MB,
    LOCAL_RUNTIME_MIN,
    compile_runtime_min,
    file_bytes,
    mem_request_mb,
    run_runtime_min,
)
from workflow.jobs.sharktank import compile_flags as bench_compile_flags
from workflow.jobs.sharktank import data_files as bench_data_files
from workflow.jobs.sharktank import run_spec as bench_run_spec


rule compile_bench_file:
    input:
        mlir=lambda wc: str(BENCH.file(wc.benchmark).mlir),
    output:
        vmfb=BF_COMPILE_VMFB,
        meta=BF_COMPILE_META,
    params:
        # Not the file itself: blessing its goldens must not recompile it.
        flags=lambda wc: bench_compile_flags(BENCH.file(wc.benchmark), SUITE.sku(wc.sku)),
        compiler_version=IREE_COMPILER_VERSION,
        automatic=lambda wc: iree_automatic(SUITE, wc.sku),
    log:
        BF_COMPILE_LOG,
    conda:
        "../envs/benchflow.yaml"
    wildcard_constraints:
        benchmark=r"[A-Za-z0-9_-]+\.[A-Za-z0-9_.-]+",
    threads: 1
    resources:
        mem_mb=lambda wc, input, attempt: mem_request_mb("compile", file_bytes(input.mlir),
                                                         attempt),
        runtime=compile_runtime_min(SUITE.config["timeouts"]),
        # The SKU's partition and node features; a compile needs no GPU.
        slurm_partition=lambda wc: slurm_partition(SUITE.sku(wc.sku), SLURM_PARTITION),
        constraint=lambda wc: slurm_constraint(SUITE.sku(wc.sku)),
    script:
        "../scripts/bench_compile.py"


rule run_bench_file:
    input:
        vmfb=BF_COMPILE_VMFB,
        compile_meta=BF_COMPILE_META,
        # A pipeline benchmark loads other files' compiled modules first.
        modules=lambda wc: bench_module_files(BENCH, wc.sku, wc.benchmark, BF_COMPILE_VMFB),
        module_metas=lambda wc: bench_module_files(BENCH, wc.sku, wc.benchmark,
                                                   BF_COMPILE_META),
        data=lambda wc: bench_data_files(BENCH.file(wc.benchmark), BENCH.weights(wc.benchmark)),
    output:
        timing=BF_RUN_TIMING,
    params:
        spec=lambda wc: bench_run_spec(BENCH.file(wc.benchmark), SUITE.sku(wc.sku),
                                       BENCH.weights(wc.benchmark)),
        topology=lambda wc: SUITE.sku(wc.sku)["iree"]["task_topology_max_group_count"],
        runtime_version=IREE_RUNTIME_VERSION,
        automatic=lambda wc: iree_automatic(SUITE, wc.sku),
    log:
        BF_RUN_LOG,
    conda:
        "../envs/benchflow.yaml"
    wildcard_constraints:
        benchmark=r"[A-Za-z0-9_-]+\.[A-Za-z0-9_.-]+",
    # Timing jobs never overlap each other nor any other job (see Snakefile).
    resources:
        bench_slot=BENCH_SLOTS,
        mem_mb=lambda wc, input, attempt: mem_request_mb("run", file_bytes(input.vmfb), attempt),
        runtime=lambda wc, attempt: run_runtime_min(SUITE.sku(wc.sku)["measurement"],
                                                    SUITE.config["timeouts"], attempt),
        # The SKU's partition, node features and GPU (its `slurm` settings).
        slurm_partition=lambda wc: slurm_partition(SUITE.sku(wc.sku), SLURM_PARTITION),
        constraint=lambda wc: slurm_constraint(SUITE.sku(wc.sku)),
        gres=lambda wc: slurm_gres(SUITE.sku(wc.sku)),
    threads: BENCH_THREADS
    script:
        "../scripts/bench_run.py"


rule case_bench_file:
    input:
        compiled=BF_COMPILE_META,
        run=BF_RUN_TIMING,
        goldens=lambda wc: case_golden_input(SUITE, wc.sku),
    output:
        case=BF_CASE,
    params:
        identity=lambda wc: bench_identity(BENCH, wc.sku, wc.benchmark),
        provenance=lambda wc: bench_provenance(BENCH, wc.sku, wc.benchmark),
        # The file's goldens as params: blessing them reruns only this step.
        file_goldens=lambda wc: BENCH.file(wc.benchmark).goldens(BENCH.golden_key(wc.sku)),
        gate=SUITE.config["goldens"],
    log:
        BF_CASE_LOG,
    conda:
        "../envs/benchflow.yaml"
    wildcard_constraints:
        benchmark=r"[A-Za-z0-9_-]+\.[A-Za-z0-9_.-]+",
    localrule: True
    threads: 1
    resources:
        mem_mb=LOCAL_MEM_MB,
        runtime=LOCAL_RUNTIME_MIN,
    script:
        "../scripts/bench_case.py"
