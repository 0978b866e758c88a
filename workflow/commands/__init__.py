"""Commands: the other commands' work and the run's outputs; cli/ only parses, calls
one of these and prints.

- `single_run`: `benchflow run` (one case planned as a suite of its own, run by
  snakemake under the work directory's lock, its record read back);
- `bless`, `validate`: those commands' work; `history`: the history commands' and the
  `history` rule's (which store, read then ingest, detect, the page);
- `report`: the `report` rule (the case records aggregated); `render`: the render
  rules' entry points;
- `progress`, `progress_text`: the run's live progress, ETA and summary (the logger
  plugin's).

Imports baselines, comparisons, jobs, planning and every layer below them; never
gating (its peer), bisect or cli.
"""
