# Adapter: Snakemake rule `measure_peak` -> workflow.render.files.measure_peak.
import contextlib

from workflow.stages.render import measure_peak

with open(snakemake.log[0], "w") as log, contextlib.redirect_stdout(log), \
        contextlib.redirect_stderr(log):
    print(measure_peak(snakemake.output.peak))
