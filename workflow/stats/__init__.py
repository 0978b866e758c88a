"""Pure statistics: summaries and intervals of invocation medians (`summary`), the
golden verdict tests (`verdict`), accuracy metrics (`accuracy`), speedups
(`speedup`), the paired A/B comparison and minimum detectable effects (`paired`),
optional stopping under a group-sequential plan (`sequential`) and which dispatches or ops
explain a change of a case's time (`attribution`); the case record's
statuses and verdicts, made from its schema's lists (`enums`). No I/O but `enums`
reading the package's own schema files at import. Imports nothing of benchflow but
errors and paths.
"""
