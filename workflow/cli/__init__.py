"""The `benchflow` command line, and nothing else: argument parsing, printing, exit codes.

`main` builds the parser and dispatches; every subcommand has a module of its own here
(`list`, `validate`, `run`, `coverage`, `bless`, `compare`, `check`, `ab`, `benchmarks`), each
with `add_parser(sub)` and `run(args) -> int`; `options` holds options several share.
The work itself is done by the lower layers, which this package may import, all of them:
the stage rooms, suite, regression, render, records, backends, models, stats. None of them
imports this package.
"""
