# Adapter: Snakemake rule `report` -> workflow.commands.report.aggregate; what it prints (a
# line per case whose record could not be used) goes to the rule's log.
import contextlib

from workflow.commands.report import aggregate
from workflow.jobs.job import end_quietly_on_ctrl_c
from workflow.paths import REPORT_DAMAGED, REPORT_DERIVED

end_quietly_on_ctrl_c()

with open(snakemake.log[0], "w") as log, contextlib.redirect_stdout(log):
    aggregate(
        snakemake.params.records,
        snakemake.output.report,
        golden_files=list(snakemake.input.goldens),
        gate=snakemake.params.gate,
        unsupported=snakemake.params.unsupported,
        skipped=snakemake.params.skipped,
        ab_rows=list(snakemake.input.ab_rows),
        derived=REPORT_DERIVED,
        note=REPORT_DAMAGED,
        suite_name=snakemake.params.suite_name,
        config_hash=snakemake.params.config_hash,
        config_source=snakemake.params.config_source,
        notes=snakemake.params.notes,
    )
