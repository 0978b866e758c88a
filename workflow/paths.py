"""Target paths of every stage; the rules and the suite expansion share them.

The rules name their inputs, outputs and logs only through these constants (Snakemake
wildcard patterns such as `{sku}`), so that no .smk file composes a path itself."""

from __future__ import annotations

from pathlib import Path

# The checkout that holds the Snakefile, config/ and benchmarks/ (workflow/ is in it).
REPO_ROOT = Path(__file__).resolve().parent.parent

RESULTS = "results"
LOGS = "logs"
# Which suite a working directory belongs to (workflow/planning/suite_dir.py), and where
# another suite's working directories go, under the directory snakemake was started in.
SUITE_MARKER = RESULTS + "/.suite.json"
RUNS = "runs"
# Longest id that names a file or folder below (a workload id, a benchmark file's
# <model>.<name>, a torch A/B side or pair): a path component is at most 255 bytes, less
# the 19 of `.json` and an atomic write's temporary `.<name>.XXXXXXXX.tmp`
# (records/storage.py) leaves 236; 200 keeps a margin. Ids are ASCII ([A-Za-z0-9_.-]).
MAX_ID = 200


def _fixed(pattern: str, **values: str) -> str:
    """`pattern` with some wildcards replaced by fixed values, the others left to Snakemake."""
    for name, value in values.items():
        pattern = pattern.replace("{" + name + "}", value)
    return pattern


EXPORT_DIR = RESULTS + "/export/{workload}"
COMPILE_DIR = RESULTS + "/compile/{sku}/{workload}"
RUN_DIR = RESULTS + "/run/{sku}/{backend}/{workload}/{recipe}"
VERIFY_DIR = RESULTS + "/verify/{sku}/{backend}/{workload}/{recipe}"
CASE = RESULTS + "/cases/{sku}/{backend}/{workload}/{recipe}.json"
# A torch batch job: every backend and recipe of one SKU (suite/load.py); its cases'
# records are at torch_case_record.
TORCH_BATCH_DIR = RESULTS + "/torch/{sku}/{batch}"
# An IREE batch job's list of its cases (their records are at CASE, beside the others).
IREE_BATCH = RESULTS + "/iree/{sku}/{batch}.json"
REPORT = RESULTS + "/report.json"
# Interleaved A/B comparisons: one row per pair and workload, then all of them.
AB_ROW = RESULTS + "/ab/{base}/{new}/{workload}.json"
# The modules an IREE A/B job compiles for its rounds, per pair, workload and side (base
# or new): its own, so that it needs no batch job, and no batch job reads or overwrites
# them (a batch compiles into COMPILE_DIR); two pairs sharing a SKU never race on one file.
AB_COMPILE_DIR = RESULTS + "/ab_compile/{base}/{new}/{workload}/{side}"
AB_COMPILE_VMFB = AB_COMPILE_DIR + "/module.vmfb"
AB_COMPILE_META = AB_COMPILE_DIR + "/compile.json"
# Torch A/B rows: base and new are side labels (sku+backend+recipe), the workload is
# `base+new` when the sides time two workloads (suite/pairs.py).
AB_TORCH_ROW = RESULTS + "/ab_torch/{base}/{new}/{workload}.json"
AB = RESULTS + "/ab.json"
GATE = RESULTS + "/gate.json"
# Rendered from REPORT (workflow.render); PEAK is the machine's measured matmul peak.
REPORT_MD = RESULTS + "/report.md"
REPORT_CSV = RESULTS + "/report.csv"
DASHBOARD = RESULTS + "/dashboard.json"
REPORT_HTML = RESULTS + "/report.html"
PEAK = RESULTS + "/peak.json"
# The history (issue 26): the page of every series in the store, and what the job that
# ingested this report into it found (results/history.json: ingested runs, change points).
HISTORY_HTML = RESULTS + "/history.html"
HISTORY_JSON = RESULTS + "/history.json"
# What is made from REPORT alone: the report step removes them when it writes a new
# report, so that none of them ever shows an older one (docs/reports.md, "How reports are made").
REPORT_DERIVED = (REPORT_MD, REPORT_CSV, DASHBOARD, REPORT_HTML, GATE)
# The case records the last report that found any could not use: a param of the report
# rule, so that the next run makes them again (workflow/commands/report.py, damage_note).
REPORT_DAMAGED = RESULTS + "/report.damaged.json"

# The files of each stage. export: one per workload, shared by every SKU.
EXPORT_MLIR = EXPORT_DIR + "/module.mlirbc"
EXPORT_INPUTS = EXPORT_DIR + "/inputs.npz"
EXPORT_REFERENCE = EXPORT_DIR + "/reference.npz"
EXPORT_META = EXPORT_DIR + "/export.json"
# compile: one per SKU and workload.
COMPILE_VMFB = COMPILE_DIR + "/module.vmfb"
COMPILE_META = COMPILE_DIR + "/compile.json"
# The IREE backend's runs and verifications: a compiled module runs unquantized only,
# so the run and verify stages make the baseline recipe's files.
IREE_RUN_TIMING = _fixed(RUN_DIR, backend="iree") + "/timing.json"
IREE_VERIFY_ACCURACY = _fixed(VERIFY_DIR, backend="iree") + "/accuracy.json"
IREE_BASELINE_RUN_TIMING = _fixed(IREE_RUN_TIMING, recipe="baseline")
IREE_BASELINE_VERIFY_ACCURACY = _fixed(IREE_VERIFY_ACCURACY, recipe="baseline")

# Targets of the benchmark-file rules (workflow.benchfile): a tree of their own, so
# that no rule of the export-based pipeline can also produce them.
BF_DIR = RESULTS + "/bench_files"
BF_COMPILE = BF_DIR + "/compile/{sku}/{benchmark}"
BF_RUN = BF_DIR + "/run/{sku}/{benchmark}"
BF_CASE = BF_DIR + "/cases/{sku}/{benchmark}.json"
BF_COMPILE_VMFB = BF_COMPILE + "/module.vmfb"
BF_COMPILE_META = BF_COMPILE + "/compile.json"
BF_RUN_TIMING = BF_RUN + "/timing.json"

# Logs, one per job, under LOGS; an IREE batch job also keeps one per case, into which
# the case's stages write one after the other.
IREE_BATCH_LOG = LOGS + "/iree/{sku}/{batch}.log"
IREE_CASE_LOG = LOGS + "/iree/{sku}/cases/{workload}.log"
TORCH_BATCH_LOG = LOGS + "/torch/{sku}/{batch}.log"
BF_COMPILE_LOG = LOGS + "/bench_files/compile/{sku}/{benchmark}.log"
BF_RUN_LOG = LOGS + "/bench_files/run/{sku}/{benchmark}.log"
BF_CASE_LOG = LOGS + "/bench_files/cases/{sku}/{benchmark}.log"
REPORT_LOG = LOGS + "/report.log"
AB_ROW_LOG = LOGS + "/ab/{base}/{new}/{workload}.log"
AB_TORCH_ROW_LOG = LOGS + "/ab_torch/{base}/{new}/{workload}.log"
AB_LOG = LOGS + "/ab.log"
GATE_LOG = LOGS + "/gate.log"
HISTORY_LOG = LOGS + "/history.log"


def render_log(name: str) -> str:
    """The log of one render rule (measure_peak's is render_log("peak"))."""
    return f"{LOGS}/render/{name}.log"


def case_path(case) -> str:
    return CASE.format(sku=case.sku, backend=case.backend, workload=case.workload.id,
                       recipe=case.recipe)


def ab_row_paths(pairs: dict) -> list[str]:
    """The A/B rows of suite.ab_pairs ({(base, new): [workload, ...]})."""
    return [AB_ROW.format(base=b, new=n, workload=w) for (b, n), ws in pairs.items() for w in ws]


def torch_ab_row_paths(pairs: dict) -> list[str]:
    """The torch A/B rows of suite.torch_ab_pairs ({(base, new, workload): pair})."""
    return [AB_TORCH_ROW.format(base=b, new=n, workload=w) for b, n, w in pairs]


def iree_batch_path(key: tuple[str, str]) -> str:
    sku, batch = key
    return IREE_BATCH.format(sku=sku, batch=batch)


def torch_batch_dir(key: tuple[str, str]) -> str:
    sku, batch = key
    return TORCH_BATCH_DIR.format(sku=sku, batch=batch)


def torch_case_record(batch_dir: str, identity: dict) -> str:
    """Where a torch batch writes a case's record: its backend, workload and recipe make
    it unique in the batch, which holds one SKU."""
    return (f"{batch_dir}/cases/{identity['backend']}/{identity['workload']}/"
            f"{identity['recipe']}.json")
