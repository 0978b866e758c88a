# Adapter: Snakemake rule `render_csv` -> workflow.render.files.render_csv.
import contextlib

from workflow.stages.render import render_csv

with open(snakemake.log[0], "w") as log, contextlib.redirect_stdout(log), \
        contextlib.redirect_stderr(log):
    render_csv(snakemake.input.report, snakemake.output.csv, snakemake.input.peak)
