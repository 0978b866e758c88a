# Adapter: Snakemake rule `gate` -> workflow.gate.run_gate (fails when a case regressed).
from workflow.regression.gate import run_gate

run_gate(snakemake.input.report, snakemake.output.gate, snakemake.log[0])
