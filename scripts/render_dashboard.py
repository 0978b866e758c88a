# Adapter: Snakemake rule `render_dashboard` -> workflow.render.files.render_dashboard.
import contextlib

from workflow.stages.render import render_dashboard

with open(snakemake.log[0], "w") as log, contextlib.redirect_stdout(log), \
        contextlib.redirect_stderr(log):
    render_dashboard(snakemake.input.report, snakemake.output.dashboard, snakemake.input.peak)
