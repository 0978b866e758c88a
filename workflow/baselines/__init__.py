"""Paired baselines: a golden keeps what it takes to measure its baseline again, and
`check` decides each case by what changed since it was blessed (docs/goldens.md,
"What a golden keeps"; DESIGN.md, "Goldens and the gate").

- `identity`: what a case's measurement was made of (an IREE case's program without
  debug locations, inputs, flags, tools and measurement configuration; a torch case's
  workload, recipe, backend and SKU settings, model sources by digest and torch
  versions), and the files and settings that measure it again;
- `artifacts`: the content-addressed store of those files beside the goldens, verified
  on every read;
- `keep`: what `bless` adds to a golden (the identity, the side a pair measures, the
  artifacts by content);
- `pair`: `check`'s and the gate rule's decision per case: unchanged (ok by
  construction; a move of its time is this machine's drift), changed and measured
  again beside today's case in an interleaved A/B (comparisons/ab_modules.py,
  comparisons/ab_torch.py), or not measurable again (judged as before, saying why).

Imports comparisons, jobs, planning and every layer below them; never gating, commands,
bisect or cli (gating and commands/bless import it).
"""
