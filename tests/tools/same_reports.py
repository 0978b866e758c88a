"""Are the reports of two versions of benchflow the same? (issue 21: a refactor changes
no report but for timestamps and timings.)

    python tests/tools/same_reports.py BEFORE_CLONE AFTER_CLONE [RESULTS_DIR]

Each clone is a checkout with its own .venv (`make setup`). Two comparisons:

1. records: each clone's own results/report.json (made by `make report` there, at
   different moments) with what a measurement decides masked (timings, their verdicts
   and speedups, timestamps, durations, host load) and the clone's path replaced by
   <ROOT>: the same cases, statuses, stages, errors, identities, flags, dispatch counts,
   sizes, accuracy and provenance but for those.
2. renders: the report step and every render run again by each version on the same
   case records (a copy of RESULTS_DIR, default BEFORE_CLONE/results, in a git worktree
   of each clone; `--forcerun report`, mtime triggers only so nothing is measured), then
   report.json, report.md, report.csv, report.html and dashboard.json compared byte for
   byte after the worktree path and the report's own timestamps are replaced.

Prints one line per file and exits 1 when any differs (with the first differing lines).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

RENDERED = ("report.json", "report.md", "report.csv", "report.html", "dashboard.json")
# What a measurement decides: masked in comparison 1 (keys anywhere in a record).
MEASURED = {
    "timing", "speedup", "verdict", "golden", "seconds", "first_run_ms", "median_ms",
    "min_ms", "p90_ms", "cv", "ci95_ms", "invocations", "invocation_medians_ms", "noisy",
    "noisy_reruns", "stop_reason", "mde_ratio", "sequential", "calls_per_invocation",
    "phases_ms", "tflops", "achieved_tflops", "pct_of_peak", "bandwidth_gbps", "load",
    "loadavg", "duration_s", "wall_s", "started", "finished", "generated_at", "timestamp",
    "time", "date", "slurm_job_id", "pid", "run_id", "peak", "peak_tflops", "ratio",
    "p_value", "compile_seconds", "peak_rss_mb", "rss_mb", "memory_mb", "peak_bytes",
    "load_avg", "gflops", "items_per_s",
    # torch.export keeps source locations, among them torch's own files under the
    # checkout's .venv: an MLIR exported in a checkout at a path of another length
    # compiles to a module a few bytes longer or shorter (alignment), same code or not.
    "binary_bytes",
    # The content key of a job covers benchflow's own code (DESIGN.md, "Content keys"):
    # another version of it is another key by design.
    "job_key",
}
STAMP = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:?\d\d|Z)?")


# What the report step itself measures when it runs (the machine's load then).
REPORT_TIME = {"load_avg"}


def masked(value, keys=frozenset(MEASURED)):
    if isinstance(value, dict):
        return {k: "<measured>" if k in keys else masked(v, keys) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v, keys) for v in value]
    return value


def normal(text: str, root: Path) -> str:
    """`text` without what names the version rather than what it does: the checkout's
    path and commit, and timestamps."""
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    text = text.replace(str(root.resolve()), "<ROOT>").replace(commit, "<COMMIT>")
    return STAMP.sub("<time>", text)


def first_diff(a: str, b: str, n: int = 12) -> str:
    lines = list(difflib.unified_diff(a.splitlines(), b.splitlines(), "before", "after",
                                      lineterm="", n=1))
    return "\n".join(lines[:n])


def compare_records(before: Path, after: Path) -> bool:
    texts = []
    for clone in (before, after):
        report = json.loads((clone / "results/report.json").read_text())
        texts.append(normal(json.dumps(masked(report), indent=1, sort_keys=True), clone))
    same = texts[0] == texts[1]
    print(f"records  report.json (measurements masked): {'same' if same else 'DIFFERENT'}")
    if not same:
        print(first_diff(*texts, n=40))
    return same


def rerender(clone: Path, results: Path, into: Path) -> Path:
    tree = into / f"{len(list(into.iterdir()))}-{clone.name}"
    subprocess.run(["git", "-C", str(clone), "worktree", "add", "--detach", "-q",
                    str(tree), "HEAD"], check=True)
    shutil.copytree(results, tree / "results", symlinks=True)
    # The copy belongs to the default suite of this tree (the marker names its files).
    (tree / "results/.suite.json").write_text(json.dumps({
        "kind": "benchflow-suite-dir", "suite_name": "default",
        "configfiles": [str((tree / "config/config.yaml").resolve())]}))
    env = {**os.environ, "PYTHONPATH": str(tree)}  # before the clone's editable install
    proc = subprocess.run(
        [str(clone / ".venv/bin/python"), "-m", "snakemake", "--cores", "2",
         "--rerun-triggers", "mtime", "--forcerun", "report", "all"],
        cwd=tree, env=env, capture_output=True, text=True, errors="replace")
    if proc.returncode != 0:
        sys.exit(f"{clone}: snakemake failed:\n{proc.stderr[-3000:]}")
    ran = sorted(set(re.findall(r"^(?:local)?rule (\w+):", proc.stderr, re.M)))
    print(f"{clone}: reran {', '.join(ran)}", flush=True)
    if set(ran) - {"report", "all"} - {r for r in ran if r.startswith("render_")}:
        sys.exit(f"{clone}: more than the report and its renders ran: {ran}")
    return tree


def compare_renders(before: Path, after: Path, results: Path) -> bool:
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        trees = [rerender(c, results, Path(tmp)) for c in (before, after)]
        for name in RENDERED:
            texts = [(t / "results" / name).read_text(errors="replace") for t in trees]
            if name == "report.json":
                texts = [json.dumps(masked(json.loads(t), REPORT_TIME), indent=1)
                         for t in texts]
            texts = [normal(text, t) for text, t in zip(texts, trees, strict=True)]
            same = texts[0] == texts[1]
            ok &= same
            print(f"renders  {name}: {'same' if same else 'DIFFERENT'} "
                  f"({len(texts[1])} characters)")
            if not same:
                print(first_diff(*texts))
        for clone in (before, after):
            subprocess.run(["git", "-C", str(clone), "worktree", "prune"], check=True)
    return ok


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        sys.exit(__doc__)
    before, after = (Path(a).resolve() for a in argv[:2])
    results = Path(argv[2]).resolve() if len(argv) == 3 else before / "results"
    ok = compare_records(before, after)
    ok &= compare_renders(before, after, results)
    print("same" if ok else "DIFFERENT")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
