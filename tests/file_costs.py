"""What each test file costs, from a measured run, for the order the parallel tier starts
files in (tests/conftest.py: the costliest first).

With `-n 2 --dist loadfile` a worker takes the next whole file when it is free: a costly
file started last runs alone while the other worker idles, so the files are started
costliest first (longest-processing-time-first scheduling). A marker tells a file that
runs Snakemake from one that does not, but not a 20-second e2e file from a 5-minute one:
the order comes from the seconds a run measured, kept in tests/file_costs.json.

Made again from a run's `--durations=0` output (CI's or one like it):

    pytest -n 2 --dist loadfile --durations=0 -m "not quiet or slurm" > durations.txt
    python -m tests.file_costs durations.txt > tests/file_costs.json

A file the table lacks (new since) is given the median cost of the table's files of its
kind (tests/conftest.py), so that a new e2e file still starts among the e2e files. The
figures only order the files: no test reads them, so a stale table costs balance, never
a result."""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections import Counter
from pathlib import Path

TABLE = Path(__file__).resolve().parent / "file_costs.json"
# `--durations=0`'s lines: "12.34s call     tests/test_x.py::test_y[param]".
LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)s (?:setup|call|teardown)\s+(\S+?\.py)::")


def per_file(text: str) -> dict[str, float]:
    """Seconds per test file (setup, call and teardown of each test summed)."""
    seconds: Counter = Counter()
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            seconds[m[2]] += float(m[1])
    return dict(seconds)


def read_table(path: Path = TABLE) -> dict[str, float]:
    """The table's seconds per file; empty where there is none (a pytester copy of the
    conftest) or it cannot be read: the order then falls back to the markers alone."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, int | float)}


def estimate(name: str, kind: int, table: dict[str, float], kinds: dict[str, int]) -> float:
    """A file's cost: the table's figure, else the median of the table's files of the
    same kind (the heaviest marker rank among its tests), else 0."""
    if name in table:
        return table[name]
    alike = [s for f, s in table.items() if kinds.get(f) == kind]
    return statistics.median(alike) if alike else 0.0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.file_costs DURATIONS.txt > tests/file_costs.json",
              file=sys.stderr)
        return 2
    costs = per_file(Path(argv[0]).read_text())
    if not costs:
        print(f"{argv[0]}: no `--durations=0` lines (e.g. '1.20s call tests/test_x.py::t')",
              file=sys.stderr)
        return 2
    ordered = dict(sorted(((f, round(s, 1)) for f, s in costs.items()),
                          key=lambda kv: (-kv[1], kv[0])))
    print(json.dumps(ordered, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
