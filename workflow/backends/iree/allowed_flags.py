"""The iree-compile and iree-benchmark-module flags benchflow passes from a benchmark
file (and from a suite's SKU, unless that SKU sets `iree.allow_any_compile_flags`): an
allow-list by exact flag name. A benchmark file may come from anywhere, and many of the
tools' flags write files (dumps, `--print-changed-diff-path=`, output paths), run a
program (linker paths, `--iree-hal-preprocess-executables-with=`), load code (plugins)
or read flags from a file (`--flagfile=`); a deny-list that guesses from flag names
misses some, so everything not listed here is refused when the file is validated.

How the lists were made (iree-base-compiler and iree-base-runtime 3.13.0):
`iree-compile --help-list-hidden`, its `--iree-*` flags of the families that shape
code generation, the input conversion or the runtime program (codegen, dispatch-creation,
global-opt, opt, flow, stream, hal, input, llvmcpu, llvmgpu, rocm, cuda, vulkan, spirv,
torch, scheduling, vm-target, vmvx), less every flag whose name or help text speaks of
dumping, printing, output, paths, files, directories, plugins, linkers, tracing,
instrumentation, debugging, tests, listing, exporting, substituting or preprocessing;
then reviewed by hand (names that matched only by accident, e.g. `indirect`, `pipeline`,
put back; those that read a file listed in READ_COMPILE_FLAGS). `iree-benchmark-module
--help`: its device, allocator and task-topology tuning, and the flags that read inputs.
tests/test_flag_allowlist.py asks the installed tools that every listed flag exists, so
an upgrade that renames or drops one fails there, loudly.
"""

from __future__ import annotations

from workflow.errors import key_path

# The version the lists were made for (messages name it; the tool test checks it).
MADE_FOR = "3.13"
DOCS = "docs/benchmark-files.md"


def _names(block: str) -> frozenset[str]:
    return frozenset(line.strip() for line in block.splitlines() if line.strip())


# iree-compile flags that read a file (the file must be inside the benchmark file's
# roots: workflow.benchfile.flags.READ_FLAGS says where in the value the path is).
READ_COMPILE_FLAGS = _names("""
--iree-codegen-transform-dialect-library
--iree-codegen-tuning-spec-path
--iree-hal-executable-object-search-path
--iree-rocm-bc-dir
""")

CODEGEN_FLAGS = _names("""
--iree-codegen-add-tuner-attributes
--iree-codegen-block-dynamic-dimensions-of-contractions
--iree-codegen-enable-default-tuning-specs
--iree-codegen-linalg-max-constant-fold-elements
--iree-codegen-llvmgpu-enable-outer-reduction-tile-and-fuse
--iree-codegen-llvmgpu-igemm-pad-convolution
--iree-codegen-llvmgpu-matmul-c-matrix-threshold
--iree-codegen-llvmgpu-use-direct-convolution
--iree-codegen-llvmgpu-use-igemm
--iree-codegen-llvmgpu-use-reduction-vector-distribution
--iree-codegen-llvmgpu-use-tile-and-fuse-convolution
--iree-codegen-llvmgpu-use-tile-and-fuse-matmul
--iree-codegen-llvmgpu-use-vector-distribution
--iree-codegen-llvmgpu-vectorize-pipeline
--iree-codegen-mmt4d-use-intrinsics
--iree-codegen-reorder-workgroups-strategy
--iree-consteval-jit-target-device
--iree-dispatch-creation-block-matmul-producer-fusion
--iree-dispatch-creation-data-tiling
--iree-dispatch-creation-element-wise-fuse-multi-reduction
--iree-dispatch-creation-enable-aggressive-fusion
--iree-dispatch-creation-enable-aggressive-reshape-movement
--iree-dispatch-creation-enable-early-trunc-fusion
--iree-dispatch-creation-enable-fuse-horizontal-contractions
--iree-dispatch-creation-enable-fuse-padding-into-linalg-consumer-ops
--iree-dispatch-creation-enable-fuse-padding-into-linalg-producer-ops
--iree-dispatch-creation-enable-split-reduction
--iree-dispatch-creation-experimental-multi-use-encoding-fusion
--iree-dispatch-creation-experimental-set-data-tiling-ops
--iree-dispatch-creation-fuse-multi-use
--iree-dispatch-creation-opt-level
--iree-dispatch-creation-propagate-collapse-across-expands
--iree-dispatch-creation-set-encoding-strategy
--iree-dispatch-creation-split-argmax-threshold
--iree-dispatch-creation-split-argmax-tile-size
--iree-dispatch-creation-split-matmul-reduction
--iree-dispatch-creation-split-reduction-low-parallelism
--iree-dispatch-creation-topk-split-reduction
--iree-execution-model
--iree-experimental-vscale-value
--iree-flow-enable-pad-handling
--iree-flow-experimental-replicate-globals-per-affinity
--iree-flow-inline-constants-max-byte-length
--iree-flow-zero-fill-empty-tensors
--iree-global-opt-data-tiling
--iree-global-opt-demote-contraction-inputs-operations
--iree-global-opt-demote-contraction-inputs-type
--iree-global-opt-enable-attention-v-transpose
--iree-global-opt-enable-early-materialization
--iree-global-opt-enable-qdq-to-integer-math
--iree-global-opt-enable-quantized-matmul-reassociation
--iree-global-opt-enable-sink-transpose-through-pad
--iree-global-opt-enable-warn-on-uninitialized-values
--iree-global-opt-experimental-enable-edge-reshape-propagation
--iree-global-opt-propagate-transposes
--iree-global-opt-propagate-transposes-through-conv
--iree-global-opt-set-encoding-strategy
--iree-global-opt-use-im2col-for-convs
--iree-global-optimization-opt-level
--iree-hal-default-device
--iree-hal-external-resources-mappable
--iree-hal-force-indirect-command-buffers
--iree-hal-indirect-command-buffers
--iree-hal-link-executables
--iree-hal-local-host-device-backends
--iree-hal-local-target-device-backends
--iree-hal-memoization
--iree-hal-target-backends
--iree-hal-target-device
--iree-input-demote-f32-to-f16
--iree-input-demote-f64-to-f32
--iree-input-demote-i64-to-i32
--iree-input-promote-bf16-to-f32
--iree-input-promote-f16-to-f32
--iree-input-type
--iree-linalgext-attention-softmax-max
--iree-llvmcpu-check-linalg-vectorization
--iree-llvmcpu-disable-arm-sme-tiling
--iree-llvmcpu-disable-distribution
--iree-llvmcpu-disable-vector-peeling
--iree-llvmcpu-distribution-size
--iree-llvmcpu-enable-inner-tiled
--iree-llvmcpu-enable-llvm-ukernels
--iree-llvmcpu-enable-scalable-vectorization
--iree-llvmcpu-enable-ukernels
--iree-llvmcpu-enable-vector-contract-custom-kernels
--iree-llvmcpu-experimental-vectorize-to-transfer-gather
--iree-llvmcpu-fail-on-large-vector
--iree-llvmcpu-fail-on-out-of-bounds-stack-allocation
--iree-llvmcpu-force-arm-streaming
--iree-llvmcpu-link-ukernel-bitcode
--iree-llvmcpu-loop-interleaving
--iree-llvmcpu-loop-unrolling
--iree-llvmcpu-loop-vectorization
--iree-llvmcpu-matmul-tile-bytes
--iree-llvmcpu-matmul-tile-undercount-whole-matrix
--iree-llvmcpu-max-allowed-number-of-native-vectors
--iree-llvmcpu-mlir-opt-level
--iree-llvmcpu-number-of-threads
--iree-llvmcpu-reassociate-fp-reductions
--iree-llvmcpu-riscv-aggressive-distribution
--iree-llvmcpu-skip-intermediate-roundings
--iree-llvmcpu-slp-vectorization
--iree-llvmcpu-stack-allocation-assumed-vscale
--iree-llvmcpu-stack-allocation-limit
--iree-llvmcpu-target-abi
--iree-llvmcpu-target-cpu
--iree-llvmcpu-target-cpu-features
--iree-llvmcpu-target-data-layout
--iree-llvmcpu-target-float-abi
--iree-llvmcpu-target-triple
--iree-llvmcpu-target-vector-width-in-bytes
--iree-llvmcpu-use-decompose-softmax-fuse
--iree-llvmcpu-use-fast-min-max-ops
--iree-llvmcpu-vector-pproc-strategy
--iree-llvmcpu-vscale-range
--iree-llvmgpu-enable-shared-memory-reuse
--iree-llvmgpu-enable-small-float-emulation
--iree-llvmgpu-prefetch-num-stages
--iree-llvmgpu-set-workgroup-distribution-along
--iree-llvmgpu-shared-memory-limit
--iree-llvmgpu-use-direct-load
--iree-native-bindings-support
--iree-opt-aggressively-propagate-transposes
--iree-opt-const-eval
--iree-opt-const-expr-hoisting
--iree-opt-const-expr-max-size-increase-threshold
--iree-opt-data-tiling
--iree-opt-generalize-matmul
--iree-opt-level
--iree-opt-numeric-precision-reduction
--iree-opt-outer-dim-concat
--iree-opt-strip-assertions
--iree-rocdl-enable-buffer-instructions
--iree-rocm-container-type
--iree-rocm-denormal-fp-math-f32
--iree-rocm-enable-register-spill-warning
--iree-rocm-enable-tensor-ukernels
--iree-rocm-enable-ukernels
--iree-rocm-encoding-layout-resolver
--iree-rocm-llvm-global-isel
--iree-rocm-llvm-slp-vec
--iree-rocm-specialize-dispatches
--iree-rocm-target
--iree-rocm-target-features
--iree-rocm-use-spirv
--iree-rocm-waves-per-eu
--iree-scheduling-initialization-mode
--iree-scheduling-optimize-bindings
--iree-spirv-index-bits
--iree-stream-affinity-solver-max-iterations
--iree-stream-emulate-memset
--iree-stream-experimental-transfer-to-replicate-globals
--iree-stream-experimental-unify-encoding-for-globals
--iree-stream-partitioning-favor
--iree-stream-resource-alias-mutable-bindings
--iree-stream-resource-index-bits
--iree-stream-resource-max-allocation-size
--iree-stream-resource-max-range
--iree-stream-resource-memory-model
--iree-stream-resource-min-offset-alignment
--iree-tflite-bindings-support
--iree-torch-decompose-complex-ops
--iree-torch-emit-async-entry-points
--iree-torch-enable-shape-refinement
--iree-torch-externalize-transients
--iree-torch-use-strict-symbolic-shapes
--iree-util-zero-fill-elided-attrs
--iree-vm-bytecode-module-strip-debug-ops
--iree-vm-bytecode-module-strip-source-map
--iree-vm-target-extension-f32
--iree-vm-target-extension-f64
--iree-vm-target-index-bits
--iree-vm-target-optimize-for-stack-size
--iree-vm-target-truncate-unsupported-floats
--iree-vmvx-enable-microkernels
--iree-vmvx-enable-ukernels-decompose-linalg-generic
--iree-vmvx-skip-intermediate-roundings
--iree-vulkan-dispatch-abi
--iree-vulkan-target
--iree-vulkan-target-features
""")

# Flags an earlier IREE 3.x had and the installed one no longer knows, kept because
# upstream benchmark files (tests/data/upstream/) or READ_FLAGS name them. None writes
# or runs anything; iree-compile 3.13 refuses them itself, a recorded compile failure.
RETIRED_COMPILE_FLAGS = _names("""
--iree-codegen-gpu-native-math-precision
--iree-hip-bc-dir
--iree-hip-enable-tensor-ukernels
--iree-hip-waves-per-eu
--iree-llvmgpu-enable-prefetch
--iree-opt-import-parameters
""")

# iree-benchmark-module flags that read a file (confined as above). Not --flagfile: the
# flags in the file it names would pass unchecked.
READ_BENCHMARK_FLAGS = _names("""
--expected_output
--input
--module
--parameters
""")

# Execution tuning only. Not the flags benchflow sets itself (--device, --function,
# --task_topology_max_group_count / group_count from the SKU; --benchmark_repetitions /
# _min_warmup_time from the file's fields; --benchmark_format / _out), nor any that
# prints (statistics, tracing), captures, profiles or replays (they write files), or
# loads a library (--executable_plugin, --hip_dylib_path, --vulkan_libvulkan_search_path).
RUN_FLAGS = _names("""
--benchmark_min_time
--cuda_allow_inline_execution
--cuda_async_allocations
--cuda_default_index
--cuda_use_streams
--device_allocator
--device_lead_allocator
--hip_allow_inline_execution
--hip_async_allocations
--hip_async_caching
--hip_default_index
--hip_use_streams
--module_mode
--task_topology_cpu_ids
--task_topology_distribution
--task_topology_favor
--task_topology_mode
--task_topology_nodes
--task_topology_performance_level
--task_worker_local_memory
--task_worker_spin_us
--task_worker_stack_size
--vulkan_buffer_device_addresses
--vulkan_dedicated_compute_queue
--vulkan_robust_buffer_access
--vulkan_sparse_binding
--vulkan_sparse_residency
""")

RETIRED_BENCHMARK_FLAGS = _names("""
--function_input
""")

ALLOWED = {
    "iree-compile": CODEGEN_FLAGS | READ_COMPILE_FLAGS | RETIRED_COMPILE_FLAGS,
    "iree-benchmark-module": RUN_FLAGS | READ_BENCHMARK_FLAGS | RETIRED_BENCHMARK_FLAGS,
}
WHAT = {"iree-compile": "a codegen or input flag", "iree-benchmark-module":
        "an execution-tuning or input flag"}


def flag_name(flag: str) -> str:
    return flag.partition("=")[0]


def refusal(flag: str, tool: str, origin: str = "a benchmark file",
            hint: str = "") -> str | None:
    """Why `flag` is not passed to `tool` from `origin` (one line, without the key), or
    None when its name is on the list."""
    name = flag_name(flag)
    if name in ALLOWED[tool]:
        return None
    return (f"{name} is not a flag benchflow passes from {origin} (it may write files or "
            f"run programs); expected {WHAT[tool]} of {tool} {MADE_FOR.split('.')[0]}.x"
            f"{hint} ({DOCS})")


def sku_flag_problems(iree: dict, source: str, sku: str) -> list[str]:
    """A suite SKU's compile_flags that are not on the list, each 'file: key: why', unless
    the SKU opts in (`iree.allow_any_compile_flags: true`: the suite is the user's own
    file). Values of the wrong type are the schema's to report."""
    flags = iree.get("compile_flags")
    if iree.get("allow_any_compile_flags") is True or not isinstance(flags, list):
        return []
    problems = []
    for i, flag in enumerate(flags):
        why = isinstance(flag, str) and refusal(
            flag, "iree-compile", "a suite's SKU",
            ", or allow_any_compile_flags: true in this SKU's iree section")
        if why:
            key = key_path(["skus", sku, "iree", "compile_flags", i])
            problems.append(f"{source}: {key}: {why}")
    return problems
