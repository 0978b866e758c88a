"""Jobs: the job bodies the rules' scripts call, and the stage model they share.

- `model`: the stage model (one StageResult per stage; a tool's failure is recorded,
  our own bug fails the job); `job`: a job's ending on Ctrl-C;
- `iree`: an IREE case's export, compile, run and verify; `iree_batch`: a batch of one
  SKU's IREE cases and which of its members are reused; `export_cache`: exports
  shared by the suite directories of a machine (opt-in); `kernels`: a case's kernels;
- `torch`: a batch of torch cases in one worker; `sharktank`: the run of a
  sharktank-format benchmark file (and `benchflow benchmarks`' selection and argv);
- `cases`: a case's record assembled and judged.

Imports planning and every layer below it; never comparisons, baselines, gating,
commands, bisect or cli. What a rule needs of a lower package it gets here
(`sharktank`: a benchmark file's compile flags, run spec and data files).
"""
