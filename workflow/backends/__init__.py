"""Tool drivers and worker processes: everything that runs iree-compile,
iree-benchmark-module, the IREE runtime or torch.

`proc` runs tools (argument lists only, a timeout always; a tool's failure is a
StageError, benchflow's own bug in a worker an OwnBug); `iree/` builds IREE command
lines, parses their output and holds the export and verify workers; `torch/` holds the
torch measurement worker and the quantization recipes; `peak` measures the machine's
matmul peak. Imports only records, models, stats, errors and paths.
"""
