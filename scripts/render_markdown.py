# Adapter: Snakemake rule `render_markdown` -> workflow.render.files.render_markdown.
import contextlib

from workflow.stages.render import render_markdown

with open(snakemake.log[0], "w") as log, contextlib.redirect_stdout(log), \
        contextlib.redirect_stderr(log):
    render_markdown(snakemake.input.report, snakemake.output.md)
