# Adapter: Snakemake rule `gate` -> workflow.gating.remeasure.run_gate_rule (fails when a
# case regressed or could not be judged, or the goldens directory does not exist).
from workflow.gating.remeasure import run_gate_rule
from workflow.jobs.job import end_quietly_on_ctrl_c

end_quietly_on_ctrl_c()

run_gate_rule(report=snakemake.input.report, out=snakemake.output.gate, log=snakemake.log[0],
              goldens=snakemake.params.goldens, skus=snakemake.config["skus"],
              timeouts=snakemake.config["timeouts"])
