# benchflow: model x config x dtype x SKU x backend x recipe benchmarks.
# The rules say what is built from what; workflow/ says how. In this file the global
# name `workflow` is Snakemake's object, so the package is only ever from-imported.
import sys

from workflow.paths import AB, DASHBOARD, REPORT, REPORT_CSV, REPORT_HTML, REPORT_MD
from workflow.stages.plan import (
    Refused,
    attach_benchmark_files,
    check_goldens,
    load_suite,
    package_version,
)

# The suite: --configfile FILE (default config/config.yaml) plus --config overrides,
# validated against config/schema.yaml before any job is scheduled, with the benchmark
# files it selects (BENCH, rules/bench_files.smk) and the golden files it is judged by.
# A problem in any of them refuses the run here: every problem on its own line, no
# traceback, no job.
try:
    SUITE = load_suite(workflow.overwrite_configfiles, workflow.config_settings.config)
    BENCH = attach_benchmark_files(SUITE)
    check_goldens(SUITE)
except Refused as refusal:
    print(refusal, file=sys.stderr)
    sys.exit(1)
# Scripts read settings that must not invalidate results (timeouts) from here.
config.clear()
config.update(SUITE.config)

# Tool versions are params: upgrading torch reruns every export, upgrading
# iree-base-compiler every compile, the runtime every timing and verification.
TORCH_VERSION = package_version("torch")
IREE_COMPILER_VERSION = package_version("iree-base-compiler")
IREE_RUNTIME_VERSION = package_version("iree-base-runtime")
TORCHAO_VERSION = package_version("torchao")

# Timing jobs take the one bench_slot (DESIGN.md) so that they never overlap each
# other, even without a profile: the limit defaults to 1 unless --resources or a
# profile sets it (a SLURM profile raises it: there each timing job has its own node).
if "bench_slot" not in workflow.global_resources:
    workflow.register_resource("bench_slot", 1)
# A timing job also asks for every core (Snakemake caps threads at --cores), so no
# export, compile or verify job shares the machine with a measurement; those still
# run in parallel with each other. On SLURM the profile sets these threads to 1.
BENCH_THREADS = 1 << 16

wildcard_constraints:
    sku=r"[A-Za-z0-9_.-]+",
    backend=r"[A-Za-z0-9_.-]+",
    workload=r"[A-Za-z0-9_.-]+",
    recipe=r"[A-Za-z0-9_.-]+",
    batch=r"b[0-9]+",
    base=r"[A-Za-z0-9_.-]+",
    new=r"[A-Za-z0-9_.-]+",


localrules: all


# The other rules are in rules/*.smk. Each of those files imports what it uses and reads
# only the shared objects defined above (SUITE, BENCH, the tool versions, BENCH_THREADS),
# so they may be included in any order.
rule all:
    input:
        REPORT,
        REPORT_MD,
        REPORT_CSV,
        DASHBOARD,
        REPORT_HTML,
        # The A/B comparisons, when the suite declares pairs.
        [AB] if SUITE.ab_pairs else [],


include: "rules/iree_batch.smk"
include: "rules/run_torch.smk"
include: "rules/bench_files.smk"
include: "rules/report.smk"
include: "rules/ab.smk"
include: "rules/gate.smk"
include: "rules/render.smk"
