"""Planning: what the Snakefile and the commands need before any job runs.

- `plan`: the suite loaded for the Snakefile, its cases, batches and job params, the
  benchmark files attached, the goldens checked (`Refused`: a plan's one-line problems);
- `keys`: the content keys of exports, batches and cases (what changing re-measures);
- `members`: which members of a batch are reused, damaged or measured again;
- `resources`, `placement`: a job's cluster request and where SLURM sends it;
- `targets`: the time a case is measured for, from its golden's detectable effect;
- `suite_dir`: whose results/ a directory holds; `other_run`: another snakemake here;
- `plan_time`: a plan's time before it runs, and the question before a long one;
- `profile_check`: a --profile's settings checked before any job;
- `snakemake_command`: the one argv that starts this repository's Snakefile.

Imports every layer below it (history, regression, suite, render, benchfile, backends,
measure, records, models, stats, files, errors, paths, schemas); never a stage room
above it (jobs, comparisons, baselines, gating, commands), bisect or cli.
"""
