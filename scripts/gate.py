# Adapter: Snakemake rule `gate` -> workflow.stages.remeasure.run_gate_rule (fails when a
# case regressed or could not be judged, or the goldens directory does not exist).
from workflow.stages.job import end_quietly_on_ctrl_c
from workflow.stages.remeasure import run_gate_rule

end_quietly_on_ctrl_c()

run_gate_rule(report=snakemake.input.report, out=snakemake.output.gate, log=snakemake.log[0],
              goldens=snakemake.params.goldens, skus=snakemake.config["skus"],
              timeouts=snakemake.config["timeouts"])
