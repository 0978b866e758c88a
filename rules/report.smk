# report: every case record -> results/report.json (schema-validated before writing); the
# renders of the previous report are removed (paths.REPORT_DERIVED), so none shows an
# older report, and a case whose record cannot be used is a failed case, measured again
# by the next run (workflow/commands/report.py).
from workflow.paths import REPORT, REPORT_DAMAGED, REPORT_LOG, iree_batch_path, torch_batch_dir
from workflow.planning.plan import (
    bench_case_paths,
    bench_skipped_plan,
    report_golden_inputs,
    report_notes,
    report_records,
    speedup_ab_rows,
    unsupported_plan,
)
from workflow.commands.report import damage_note
from workflow.planning.resources import LOCAL_MEM_MB, LOCAL_RUNTIME_MIN


rule report:
    input:
        # IREE and torch cases are judged here against the goldens, not in their
        # measuring jobs (see report_golden_inputs); the benchmark files' cases (BENCH,
        # selected by the Snakefile) in their own case step.
        iree=[iree_batch_path(key) for key in SUITE.iree_batches],
        batches=[torch_batch_dir(key) for key in SUITE.torch_batches],
        cases=bench_case_paths(BENCH),
        goldens=report_golden_inputs(SUITE),
        # Torch A/B rows that measure a speedup the report shows (paired, not cross-run).
        ab_rows=speedup_ab_rows(SUITE),
    output:
        # update(): Snakemake does not remove the previous report before the job, and
        # restores its backup of it when the job fails; the step writes atomically. So a
        # report step that fails leaves the last complete report.json in place.
        report=update(REPORT),
    params:
        # Every measured case: where its record is, and its identity (a missing or
        # damaged record is a failed case of it; the inputs above order the jobs and
        # trigger the reruns).
        records=report_records(SUITE, BENCH),
        # A new note (records the last report could not use) reruns the report, which
        # then makes those records again.
        damaged=damage_note(REPORT_DAMAGED),
        # A suite that names none is called after its file (SuiteIdentity.report_name).
        suite_name=SUITE_DIR.identity.report_name(SUITE.config["suite_name"]),
        config_hash=SUITE.config_hash(),
        config_source=SUITE.source,
        # What the suite changed of its files' settings (a torchao_device override).
        notes=report_notes(SUITE),
        unsupported=unsupported_plan(SUITE),
        # Benchmark files that cannot run here: skipped cases, with their reasons.
        skipped=bench_skipped_plan(BENCH),
        gate=SUITE.config["goldens"],
    log:
        REPORT_LOG,
    conda:
        "../envs/benchflow.yaml"
    localrule: True
    threads: 1
    resources:
        mem_mb=LOCAL_MEM_MB,
        runtime=LOCAL_RUNTIME_MIN,
    script:
        "../scripts/report.py"
