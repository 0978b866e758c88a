"""Benchmark (not a test): where a command's CPU time goes, by kind of process. For the
test suite's own cost (CI's minutes): which processes the tests start, how many, and
what each kind costs.

    python tests/perf/process_cpu.py -- .venv/bin/pytest -q -n 2 --dist loadfile \\
        -m "not quiet or slurm"
    python tests/perf/process_cpu.py --read cpu.jsonl     # a log kept by --log

Every Python process the command starts (with its environment: PYTHONPATH names a
directory holding a sitecustomize.py) writes a line at its exit: its command line, its
own CPU time, its waited-for children's, and the test it ran under
(PYTEST_CURRENT_TEST). Printed: CPU seconds by kind of Python process; the CPU of
programs that are no Python of ours (iree-compile's compiler, iree-benchmark-module,
chromium, g++ for inductor, and any Python process that ended by os._exit or a signal,
which writes no line: torch workers do) by the kind of process that waited for them;
and the test files whose processes cost most. A process given an environment that drops
PYTHONPATH writes nothing; its CPU shows under its parent as a program's.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HOOK = '''\
import atexit, json, os, resource, sys
def _benchflow_process_cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    line = {"pid": os.getpid(), "ppid": os.getppid(),
            "argv": [a[:160] for a in getattr(sys, "orig_argv", sys.argv)[:6]],
            "cpu": own.ru_utime + own.ru_stime, "children": kids.ru_utime + kids.ru_stime,
            "test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]}
    try:
        with open(os.environ["BENCHFLOW_PROCESS_CPU_LOG"], "a") as fh:
            fh.write(json.dumps(line) + "\\n")
    except (OSError, KeyError):
        pass
atexit.register(_benchflow_process_cpu)
'''

# (pattern on the command line, kind): the first that matches names the process.
KINDS = [
    (r"\.snakemake/scripts/tmp\w+\.(\w+)\.py", "job script {0}"),
    (r"-m snakemake|bin/snakemake", "snakemake"),
    (r"-m (workflow\.[\w.]+)", "{0}"),
    (r"bin/benchflow", "benchflow command"),
    (r"bin/(iree-[\w-]+)", "{0} (its Python wrapper)"),
    (r"exec\(eval\(sys\.stdin", "pytest worker (its tests)"),
    (r"bin/pytest|-m pytest", "pytest"),
    (r"import gc, importlib", "forked warm command (tests/shared_tools.py)"),
    (r"\bpip\b", "pip"),
]


def kind(argv: list[str]) -> str:
    line = " ".join(argv)
    for pattern, name in KINDS:
        m = re.search(pattern, line)
        if m:
            return name.format(*m.groups())
    return "other Python"


def summarize(lines: list[dict], top: int = 15) -> str:
    children = collections.defaultdict(list)
    for p in lines:
        children[p["ppid"]].append(p)
    own = collections.Counter()
    count = collections.Counter()
    programs = collections.Counter()
    by_file = collections.Counter()
    for p in lines:
        k = kind(p["argv"])
        own[k] += p["cpu"]
        count[k] += 1
        # Waited-for descendants that wrote no line: programs, or Python that ended hard.
        unseen = p["children"] - sum(c["cpu"] + c["children"] for c in children[p["pid"]])
        if unseen > 0.05:
            programs[k] += unseen
        by_file[p["test"].split("::")[0] or "(outside a test)"] += p["cpu"] + max(unseen, 0)
    python, other = sum(own.values()), sum(programs.values())
    out = [f"{len(lines)} Python processes: {python:.0f} s of their own CPU; programs "
           f"they waited for that wrote no line: {other:.0f} s", "",
           "CPU s  processes  each  kind of Python process"]
    out += [f"{s:6.0f} {count[k]:9d} {s / count[k]:6.2f}  {k}" for k, s in own.most_common(top)]
    out += ["", "CPU s  programs (no line of their own) waited for by"]
    out += [f"{s:6.0f}  {k}" for k, s in programs.most_common(top)]
    out += ["", "CPU s  test file (its processes, and the programs they waited for)"]
    out += [f"{s:6.0f}  {k}" for k, s in by_file.most_common(top)]
    return "\n".join(out)


def read(log: Path) -> list[dict]:
    with open(log, encoding="utf-8", errors="replace") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", type=Path, help="keep the per-process lines here")
    parser.add_argument("--read", type=Path, help="summarize a kept log; run nothing")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("command", nargs="*", help="the command to run, after --")
    args = parser.parse_args()
    if args.read:
        print(summarize(read(args.read), args.top))
        return 0
    if not args.command:
        parser.error("give a command after --, or --read LOG")
    with tempfile.TemporaryDirectory(prefix="process-cpu-") as hook_dir:
        Path(hook_dir, "sitecustomize.py").write_text(HOOK)
        log = args.log or Path(hook_dir) / "cpu.jsonl"
        env = {**os.environ, "BENCHFLOW_PROCESS_CPU_LOG": str(log.resolve()),
               "PYTHONPATH": os.pathsep.join(filter(None, [hook_dir,
                                                           os.environ.get("PYTHONPATH")]))}
        started = time.monotonic()
        before = os.times()
        rc = subprocess.call(args.command, env=env)
        after = os.times()
        wall = time.monotonic() - started
        cpu = (after.children_user - before.children_user
               + after.children_system - before.children_system)
        print(f"\n{' '.join(args.command)}: exit {rc}, {wall:.0f} s wall, {cpu:.0f} s CPU "
              f"(every process it waited for)\n")
        print(summarize(read(log), args.top) if log.exists() else "no process wrote a line")
    return rc


if __name__ == "__main__":
    sys.exit(main())
