# benchflow: model x config x dtype x SKU x backend x recipe benchmarks.
# The rules say what is built from what; workflow/ says how. In this file the global
# name `workflow` is Snakemake's object, so the package is only ever from-imported.
import os
import sys
import uuid

from workflow.paths import AB, DASHBOARD, HISTORY_HTML, REPORT, REPORT_CSV, REPORT_HTML, REPORT_MD
from workflow.planning.plan import (
    GATE_BAD_INPUT_EXIT,
    Refused,
    attach_benchmark_files,
    check_goldens,
    gate_goldens_problems,
    gate_in_targets,
    iree_builds,
    load_suite,
    verify_batches,
)
from workflow.jobs.iree import RUN_ID_ENV
from workflow.planning.other_run import other_run_refusal
from workflow.planning.plan_time import plan_check
from workflow.planning.profile_check import profile_refusal
from workflow.planning.placement import default_resource, slurm_in_use, slurm_warnings
from workflow.planning.slot_plan import (
    batch_lines,
    on_gpu,
    plan_lines,
    slot_count,
    slots_needed,
    spread_over_slots,
    timing_threads,
    torch_batch_on_gpu,
)
from workflow.planning.suite_dir import suite_dir

# A profile value that makes no sense (jobs: 0, retries: -1, mem_mb: 0, runtime:
# forever), which Snakemake would take or blame on a rule, refuses the run here: a line
# each naming the profile file and the key, before any job is scheduled. Snakemake has
# already changed to --directory, so a relative profile is also looked for next to this
# file (workflow/planning/profile_check.py).
if workflow.is_main_process:
    PROFILE_REFUSAL = profile_refusal(sys.argv, os.environ, [os.getcwd(), workflow.basedir])
    if PROFILE_REFUSAL:
        print("\n".join(PROFILE_REFUSAL), file=sys.stderr)
        sys.exit(2)

# The suite: --configfile FILE (default config/config.yaml) plus --config overrides,
# validated against config/schema.yaml before any job is scheduled, with the benchmark
# files it selects (BENCH, rules/bench_files.smk) and the golden files it is judged by.
# A problem in any of them refuses the run here: every problem on its own line, no
# traceback, no job.
try:
    SUITE = load_suite(workflow.overwrite_configfiles, workflow.config_settings.config)
    # A SKU's torch batches spread over the timing slots that measure them at once (one
    # per GPU here; under SLURM the size rule alone), each of at least 16 cases; decided
    # here and inherited by the run's jobs (planning/slot_plan.py, docs/torch.md).
    spread_over_slots(SUITE, main=workflow.is_main_process,
                      slurm=slurm_in_use(workflow.resource_settings.default_resources,
                                         sys.argv))
    # Where this suite works: a directory belongs to one suite, so that two suites never
    # overwrite each other's results and reports (workflow/planning/suite_dir.py). Decided
    # before any path of the suite is read, as the suite may move to a directory of its
    # own; a --directory of another suite is refused here.
    SUITE_DIR = suite_dir(SUITE, workflow.overwrite_configfiles,
                          directory_given=workflow.overwrite_workdir is not None)
    BENCH = attach_benchmark_files(SUITE)
    check_goldens(SUITE)
except Refused as refusal:
    print(refusal, file=sys.stderr)
    sys.exit(1)
# Started (without --directory) where another suite's results are: this suite works in
# runs/<its name>/ there, and the targets given on the command line are relative to it.
# Everything below that reads results/ reads this suite's.
if SUITE_DIR.moved:
    if workflow.is_main_process:
        print(SUITE_DIR.notice, file=sys.stderr)
    workdir: SUITE_DIR.path

# Another snakemake already working in this directory (started before this one): one line
# naming it (PID, since when, its command), instead of Snakemake's LockException or its
# IncompleteFilesException about the other run's jobs in progress, whose advice
# (--rerun-incomplete) would delete what that run is making (workflow/planning/other_run.py).
# A dry run is let plan beside it.
if workflow.is_main_process:
    OTHER_RUN = other_run_refusal(os.getcwd(), sys.argv)
    if OTHER_RUN:
        print(OTHER_RUN, file=sys.stderr)
        sys.exit(1)

# Asked for the gate (`snakemake results/gate.json`), a goldens.dir that does not exist is
# refused here, before anything is measured: the gate job would measure every case and
# then fail on it. Relative to the directory the suite works in, as the gate reads it. A
# run without the gate needs no goldens (its cases are `no-golden`); a SLURM job's nested
# snakemake was planned by a run that passed this check.
if workflow.is_main_process and gate_in_targets(sys.argv):
    GATE_PROBLEMS = gate_goldens_problems(SUITE, BENCH)
    if GATE_PROBLEMS:
        print(Refused("the gate has no goldens directory", GATE_PROBLEMS), file=sys.stderr)
        sys.exit(GATE_BAD_INPUT_EXIT)

# The directory becomes this suite's when it first runs a job there (not on a dry run).
onstart:
    SUITE_DIR.claim()


# Finished IREE batches whose cases' files no longer verify (a record deleted, cut short,
# edited or swapped, an MLIR or module truncated) get a repair note, a param of their job,
# and so rerun, measuring those cases again. Only here, in the process that plans (never
# in a SLURM job's nested snakemake, which would race the batches being measured). The
# run id lets the batches of one run share a failed export without retrying it, while a
# later forced run retries it.
if workflow.is_main_process:
    os.environ.setdefault(RUN_ID_ENV, uuid.uuid4().hex)
    for line in verify_batches(SUITE):
        print(line, file=sys.stderr)
    # What the whole suite should take, said before it runs (`snakemake -n` too); a run
    # above an hour asks first in a terminal, elsewhere it needs BENCHFLOW_CONFIRMED=1
    # (workflow/planning/plan_time.py).
    try:
        PLAN_LINES, PLAN_REFUSAL = plan_check(SUITE, argv=sys.argv)
    except Refused as refusal:
        print(refusal, file=sys.stderr)
        sys.exit(2)
    for line in PLAN_LINES:
        print(line, file=sys.stderr)
    if PLAN_REFUSAL:
        print(PLAN_REFUSAL, file=sys.stderr)
        sys.exit(1)
# On SLURM (profiles/slurm) a SKU's jobs go to its own `slurm` partition, else to the
# profile's (rules/*.smk read SLURM_PARTITION; a rule's resource replaces the default).
# What the run is missing is said once, here, before anything is submitted: an unset
# BENCHFLOW_SLURM_ACCOUNT / _PARTITION, a GPU SKU without a gres
# (workflow/planning/resources.py).
SLURM_PARTITION = default_resource(workflow.resource_settings.default_resources,
                                   "slurm_partition")
if workflow.is_main_process and slurm_in_use(workflow.resource_settings.default_resources,
                                             sys.argv):
    for line in slurm_warnings(SUITE.config["skus"],
                               workflow.resource_settings.default_resources):
        print(line, file=sys.stderr)
# Scripts read settings that must not invalidate results (timeouts) from here.
config.clear()
config.update(SUITE.config)

# The builds of the IREE packages (version and a digest of the files they installed:
# workflow/backends/builds.py) are params of the benchmark-file and A/B rules: another
# build reruns what it compiled or timed. The IREE and torch batches carry theirs in
# their `content` params, with the model sources.
IREE_COMPILER_VERSION, IREE_RUNTIME_VERSION = iree_builds()

# Timing jobs take bench_slot units (workflow/slots): as many as this machine has
# timing slots, one per GPU that nvidia-smi or rocm-smi lists, else the suite's
# cpu_slots (1 by default), unless --resources or a profile sets the limit (a SLURM
# profile raises it: there each job gets its own GPU or node). A GPU SKU's batch holds
# one slot and its cores (planning/slot_plan.py); a CPU SKU's holds every slot unless the
# suite asks for several CPU slots; a job claims and pins to concrete slots itself.
BENCH_SLOTS = slot_count(SUITE.config)
if "bench_slot" not in workflow.global_resources:
    workflow.register_resource("bench_slot", BENCH_SLOTS)
# A job never asks for more than the limit (--resources bench_slot=1 serialises all).
BENCH_SLOTS = min(BENCH_SLOTS, int(getattr(workflow.global_resources["bench_slot"], "value",
                                           workflow.global_resources["bench_slot"])))
if workflow.is_main_process:
    for line in plan_lines(SUITE.config) + batch_lines(SUITE):
        print(line, file=sys.stderr)
# The timing jobs without a slot of their own (benchmark files, A/B pairs, peaks, the
# gate's re-measurement) hold every slot and every core (Snakemake caps threads at
# --cores), so no export, compile or verify job shares the machine with a measurement;
# those still run in parallel with each other. On SLURM the profile sets threads to 1.
BENCH_THREADS = 1 << 16
# Whether a batch job measures on a GPU (its SKU's target or its cases' device).
IREE_ON_GPU = lambda wc: on_gpu(SUITE.sku(wc.sku))  # noqa: E731
TORCH_ON_GPU = lambda wc: torch_batch_on_gpu(SUITE, wc.sku, wc.batch)  # noqa: E731

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
        [AB] if SUITE.has_ab else [],
        # Every run remembered, when the suite asks for it (history.ingest).
        [HISTORY_HTML] if SUITE.config["history"]["ingest"] else [],


include: "rules/iree_batch.smk"
include: "rules/run_torch.smk"
include: "rules/bench_files.smk"
include: "rules/report.smk"
include: "rules/ab.smk"
include: "rules/gate.smk"
include: "rules/render.smk"
include: "rules/history.smk"
