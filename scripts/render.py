# Adapter: the Snakemake rules `measure_peak` and `render_*` (rules/render.smk) ->
# workflow.commands.render.<the rule's name>, with the rule's `report` and `peak` inputs
# and its one output; everything the function prints goes to the rule's log.
import contextlib

from workflow.commands import render
from workflow.jobs.job import end_quietly_on_ctrl_c

end_quietly_on_ctrl_c()

stage = getattr(render, snakemake.rule)
inputs = dict(snakemake.input.items())
kwargs = {"report": inputs["report"]} if "report" in inputs else {}
if inputs.get("peak"):  # none when the suite times nothing on the CPU (plan.peak_input)
    kwargs["peak_path"] = inputs["peak"]
if inputs.get("ab"):  # a named input that may be empty: no A/B pairs
    kwargs["ab_path"] = inputs["ab"]
kwargs.update(snakemake.params.items())  # render_html's history_link

with open(snakemake.log[0], "w") as log, contextlib.redirect_stdout(log), \
        contextlib.redirect_stderr(log):
    result = stage(out=snakemake.output[0], **kwargs)
    # measure_peak returns the peak it measured: the log keeps it.
    if result is not None:
        print(result)
