"""Tool drivers and worker processes: everything that runs iree-compile,
iree-benchmark-module, the IREE runtime or torch.

`proc` runs tools, and is the only module that starts a process (argument lists only, a
timeout always; a tool's failure is a StageError, benchflow's own bug in a worker an
OwnBug; `capture` for probes, `Streaming` for a worker read as it runs); `git` asks for
the code's commit; `builds` names builds (and probes another interpreter); `iree/`
builds IREE command lines, parses their output and holds the export and verify
workers; `torch/` holds the torch measurement worker and the quantization recipes;
`peak` measures the machine's matmul peak. Imports only records, models, stats, errors and paths.
"""
