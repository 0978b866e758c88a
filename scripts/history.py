# Adapter: Snakemake rule `history` -> workflow.commands.history.history_job; what it prints
# goes to the rule's log.
import contextlib

from workflow.commands.history import history_job
from workflow.jobs.job import end_quietly_on_ctrl_c

end_quietly_on_ctrl_c()

with open(snakemake.log[0], "w") as log, contextlib.redirect_stdout(log), \
        contextlib.redirect_stderr(log):
    history_job(report=snakemake.input.report, html=snakemake.output.html,
                summary=snakemake.output.summary, settings=snakemake.params.history)
