"""The measurement protocol, one for every runner (DESIGN.md, "Measurement protocol").

`plans` (the sequential plans of invocations and of A/B rounds), `disturbance` (what
disturbed one invocation), `protocol` (the one invocation loop: fixed or adaptive
counts, noisy reruns, retakes of disturbed invocations), `pairs` (the interleaved A/B
schedule) and `layout` (randomized memory layout). IREE cases, torch cases and A/B pairs
supply only a runner: how to make one invocation.

Imports: workflow.stats (intervals, sequential plans, paired tests) and workflow.errors
only; the stage rooms, suite and the torch worker import it. It starts no process itself: a
runner does (through workflow.backends.proc).
"""
