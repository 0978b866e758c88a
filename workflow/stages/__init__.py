"""The stage functions the Snakemake rules call, and what the Snakefile needs to plan.

`model` is the stage model (one StageResult per stage; a tool's failure is recorded,
our own bug fails the job); `iree`, `sharktank` and `torch` are the measuring stages;
`cases` assembles and judges case records; `report` aggregates them; `render` writes
the rendered reports; `plan` and `resources` serve the Snakefile (suite loading, job
params, cluster resource requests); `single_run` is `benchflow run`'s work (one case
planned as a suite of its own, run by snakemake under a lock, its record read back);
`gates`, `bless` and `validate` are the work of those commands (`benchmarks`' is in
`sharktank`): cli/ only parses, calls one of them and prints.
May import every layer below it: regression,
suite, render, benchfile, backends, records, models, stats; never cli. The rules and
scripts import only stages (and paths): what they need of a lower package, stages
re-exports (`sharktank`: benchmark files' compile flags, run spec, data files).
"""
