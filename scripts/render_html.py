# Adapter: Snakemake rule `render_html` -> workflow.render.files.render_html.
import contextlib

from workflow.stages.render import render_html

with open(snakemake.log[0], "w") as log, contextlib.redirect_stdout(log), \
        contextlib.redirect_stderr(log):
    render_html(snakemake.input.report, snakemake.output.html, snakemake.input.peak)
