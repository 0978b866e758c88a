"""Benchmark (not a test): benchflow's cost per case against torchao's own runner (issue 34).

Both tools run one torchao microbenchmark file (default: tests/perf/case_cost.yml, the
issue-34 file: inference, baseline and int8wo, eager and torch.compile "default", three
custom shapes, f32, cpu: 12 cases), cold, alternately (torchao, benchflow, torchao, ...),
--runs times each:

- torchao: `python -m benchmarks.microbenchmarks.benchmark_runner --config <copy>` in a
  checkout of pytorch/ao at dbef6992 (--ao; the last commit with that runner), with this
  interpreter; the copy of the file differs only in its `output_dir`, a temporary
  directory, so nothing is written into the checkout. Its CSV gives per row (name,
  quantization, shape) an eager and a compiled time: `Timer(num_threads=1)`, the mean
  of 100 calls after 100 warm-up calls, one process for every row.
- benchflow: `snakemake -s <repo>/Snakefile --directory <fresh dir> --cores 2
  results/report.json --configfile <the file, unchanged>` with this interpreter's
  Snakemake; each case's `timing.median_ms` is the median of its invocation medians.

Each run of each tool starts with a fresh, empty TORCHINDUCTOR_CACHE_DIR (a user's first
run). Printed: per tool each run's wall time and seconds per case, min..max; per case
torchao's and benchflow's times (medians over runs), their ratio, benchflow's interval
relative width, stop reason, invocations and whether outside load disturbed it; the
headline (benchflow wall / torchao wall, the cases within 10 %); and the split of the
last benchflow run's wall time by the phases of its records' `cost` section, with what
lies outside the cases (Snakemake, the report job). With --default-suite, the default
suite too, cold in a fresh clone of the repository's HEAD (`snakemake all`, this virtual
environment reused): its wall time, cases, seconds per case and the same split.

    .venv/bin/python tests/perf/case_cost.py --ao PATH [--runs 2] [--file YML]
                                             [--default-suite] [--keep DIR] [--repo DIR]

A run of each tool takes minutes on a 2-core machine; the figures depend on its load,
printed before every run. Measured on the 2-core development machine, load about 1:
before issue 34 (each invocation a fresh worker), 334-339 s against torchao's 53-61 s;
at a231bc1 (a case's invocations forked from one worker, consecutive) 136.5 s against
47.5 s, 2.9x; at dc6930c (invocations interleaved across a group of warm cases, the
torchao SKU's 6 to 12 short invocations), --runs 2: 77.0 and 81.2 s against 51.5 and
52.6 s, 1.52x, 11 of 12 cases within 10 % (the twelfth: torchao's own second run off by
a third); the default suite 149.8 s for 14 cases (a299a73); at a3c3781 (one worker per
SKU, every backend and recipe; 3 warm-up calls, 0.1 s blocks, 10 to 14 invocations),
from a fresh clone, --runs 2: 47.5 and 44.6 s against 46.0 and 45.5 s, 1.01x, 12 of 12
cases within 10 %, widths 1.1-5.0 %; the default suite 131.7 s for 14 cases; again at
8e7cc52, a noisier hour: 49.2 and 49.2 s against 45.5 and 46.3 s, 1.07x, 10 of 12.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
CASES_FILE = Path(__file__).with_suffix(".yml")
RUNNER = "benchmarks.microbenchmarks.benchmark_runner"
WITHIN = 0.10  # a case agrees when |benchflow / torchao - 1| <= WITHIN
# torchao's CSV columns of a row's own model (its `quantization`, baseline included),
# as its results CSV spells them (BenchmarkResult.to_dict), else as its printed table.
EAGER_COLUMNS = ("quantized_model_eager_inference_time_in_ms", "Eager Model Inference Time (ms)")
COMPILED_COLUMNS = ("quantized_model_compiled_inference_time_in_ms",
                    "Compile Model Inference Time (ms)")
# Phases of a record's `cost` that lie inside another one; total_s holds them all.
NESTED = {"warmup_s": "invocations_s", "timed_s": "invocations_s"}
TOTAL = "total_s"

Key = tuple[str, tuple[int, ...], str]  # (recipe, shape, "eager" | "compiled")


def say_load(what: str) -> None:
    one, five, fifteen = os.getloadavg()
    print(f"  load before {what}: {one:.2f} {five:.2f} {fifteen:.2f}", flush=True)


def fresh_env(workdir: Path, pythonpath: Path | None = None) -> dict[str, str]:
    """This environment with an empty Inductor cache of its own under `workdir` (and
    `pythonpath` first on PYTHONPATH: the benchflow checkout the run imports)."""
    cache = workdir / "inductor-cache"
    cache.mkdir(parents=True)
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache))
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath),
                                                          os.environ.get("PYTHONPATH")]))
    return env


def timed(cmd: list[str], *, cwd: Path, env: dict[str, str], log: Path) -> float:
    """Runs `cmd`, its output into `log`; returns its wall seconds, or exits on failure."""
    t0 = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-4000:]
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n  in {cwd}\n{tail}")
    return wall


def snakemake_argv() -> list[str]:
    """This virtual environment's Snakemake."""
    exe = Path(sys.executable).with_name("snakemake")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "snakemake"]


# torchao ---------------------------------------------------------------------------------


def check_ao(ao: Path) -> str:
    runner = ao / Path(*RUNNER.split(".")).with_suffix(".py")
    if not runner.is_file():
        sys.exit(f"--ao {ao}: no {runner.relative_to(ao)} (a pytorch/ao checkout at dbef6992 "
                 "has it)")
    proc = subprocess.run(["git", "-C", str(ao), "rev-parse", "--short=8", "HEAD"],
                          capture_output=True, text=True)
    return proc.stdout.strip() or "unknown commit"


def run_torchao(ao: Path, suite: Path, workdir: Path) -> tuple[float, dict[Key, float]]:
    """One cold run of torchao's runner on a copy of `suite` whose output_dir is under
    `workdir`; returns its wall seconds and its times (ms) per case."""
    workdir.mkdir(parents=True)
    data = yaml.safe_load(suite.read_text())
    data["output_dir"] = str(workdir / "results")
    copy = workdir / "torchao.yml"
    copy.write_text(yaml.safe_dump(data, sort_keys=False))
    cmd = [sys.executable, "-m", RUNNER, "--config", str(copy)]
    wall = timed(cmd, cwd=ao, env=fresh_env(workdir), log=workdir / "torchao.log")
    found = sorted((workdir / "results").glob("**/results_*.csv"))
    if not found:
        sys.exit(f"torchao wrote no results CSV under {workdir / 'results'}; its output: "
                 f"{workdir / 'torchao.log'}")
    return wall, torchao_times(found[-1])


def column(header: list[str], names: tuple[str, ...], path: Path) -> str:
    for name in names:
        if name in header:
            return name
    sys.exit(f"{path}: none of the columns {names} (its header: {header})")


def torchao_times(path: Path) -> dict[Key, float]:
    """(recipe, shape, eager|compiled) -> ms of every row of torchao's results CSV: its
    row's own model, the quantized one (the unquantized one in a baseline row)."""
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        header = list(reader.fieldnames or [])
        eager = column(header, EAGER_COLUMNS, path)
        compiled = column(header, COMPILED_COLUMNS, path)
        times = {}
        for row in reader:
            recipe = row.get("quantization") or "baseline"
            if row.get("sparsity"):
                recipe = f"{recipe}.sparsity-{row['sparsity'].replace(':', '-')}"
            shape = tuple(int(row[d]) for d in ("m", "k", "n"))
            times[(recipe, shape, "eager")] = float(row[eager])
            times[(recipe, shape, "compiled")] = float(row[compiled])
    return times


# benchflow -------------------------------------------------------------------------------


def run_benchflow(repo: Path, suite: Path, workdir: Path) -> tuple[float, dict]:
    """One cold run of the suite file as it is, in the fresh directory `workdir`;
    returns its wall seconds and its report."""
    workdir.mkdir(parents=True)
    cmd = [*snakemake_argv(), "-s", str(repo / "Snakefile"), "--directory", str(workdir),
           "--cores", "2", "results/report.json",
           # Last: --configfile takes every argument after it.
           "--configfile", str(suite)]
    wall = timed(cmd, cwd=workdir, env=fresh_env(workdir, repo),
                 log=workdir / "snakemake.log")
    return wall, json.loads((workdir / "results" / "report.json").read_text())


def case_key(case: dict) -> Key:
    """A benchflow case as torchao names its figure: recipe, [M, K, N], and eager
    (backend torch-eager) or compiled (torch-inductor-<mode>)."""
    mode = "eager" if case["backend"] == "torch-eager" else "compiled"
    return case["recipe"], tuple(case["shape"]), mode


def benchflow_cases(report: dict) -> dict[Key, dict]:
    return {case_key(c): c for c in report["cases"]}


# printing --------------------------------------------------------------------------------


def say_walls(tool: str, walls: list[float], cases: int) -> None:
    print(f"{tool}: {cases} cases")
    for i, wall in enumerate(walls, 1):
        print(f"  run {i}: {wall:8.1f} s wall, {wall / cases:6.2f} s per case")
    print(f"  min..max: {min(walls):.1f}..{max(walls):.1f} s wall, "
          f"{min(walls) / cases:.2f}..{max(walls) / cases:.2f} s per case")


def rel_width(timing: dict) -> float | None:
    ci, median = timing.get("ci95_ms"), timing.get("median_ms")
    if not ci or None in ci or not median:
        return None
    return (ci[1] - ci[0]) / median


def fmt(value: float | None, spec: str, missing: str = "—") -> str:
    return missing if value is None else format(value, spec)


def say_cases(ao_runs: list[dict[Key, float]], bf_runs: list[dict[Key, dict]]) -> list[float]:
    """The per-case table; returns the ratios of the cases both tools measured."""
    keys = sorted({k for run in ao_runs + bf_runs for k in run},
                  key=lambda k: (k[1][0] * k[1][1] * k[1][2], k[1], k[0], k[2]))
    print("torchao: the mean of 100 calls (Timer, num_threads=1, after 100 warm-up calls), "
          "median over runs;\nbenchflow: timing.median_ms, the median of invocation "
          "medians, median over runs; width: (hi - lo) / median of its ci95_ms;\ndisturbed: "
          "timing.disturbed (outside load during its invocations; torchao does not look).")
    print(f"{'recipe':9} {'shape':15} {'mode':8} {'torchao ms':>10} {'benchflow ms':>12} "
          f"{'ratio':>6} {'width':>8}  {'stop reason (per run)':26} {'invocations':11} disturbed")
    ratios = []
    for key in keys:
        recipe, shape, mode = key
        ao = [run[key] for run in ao_runs if key in run]
        cases = [run[key] for run in bf_runs if key in run]
        ok = [c["timing"] for c in cases if c["status"] == "ok" and c.get("timing")
              and c["timing"].get("median_ms") is not None]
        ao_ms = statistics.median(ao) if ao else None
        bf_ms = statistics.median(t["median_ms"] for t in ok) if ok else None
        ratio = bf_ms / ao_ms if ao_ms and bf_ms else None
        if ratio is not None:
            ratios.append(ratio)
        widths = [w for w in map(rel_width, ok) if w is not None]
        width = statistics.median(widths) if widths else None
        stops = ",".join(str((c.get("timing") or {}).get("stop_reason") or c["status"])
                         for c in cases) or "—"
        invocations = ",".join(str((c.get("timing") or {}).get("invocations")) for c in cases)
        disturbed = ",".join("yes" if (c.get("timing") or {}).get("disturbed") else "no"
                             for c in cases)
        print(f"{recipe:9} {'x'.join(map(str, shape)):15} {mode:8} {fmt(ao_ms, '10.4f'):>10} "
              f"{fmt(bf_ms, '12.4f'):>12} {fmt(ratio, '6.2f'):>6} {fmt(width, '8.1%'):>8}  "
              f"{stops:26} {invocations or '—':11} {disturbed or '—'}")
    not_ok = sorted({c["id"] + ": " + c["status"] for run in bf_runs for c in run.values()
                     if c["status"] != "ok"})
    for line in not_ok:
        print(f"  benchflow case not ok: {line}")
    return ratios


def phase_split(report: dict, wall: float, what: str) -> None:
    """The sum of each `cost` phase over the report's cases (and how many cases have it),
    and what lies outside the cases of the Snakemake wall time `wall`."""
    cases = report["cases"]
    costs = [c["cost"] for c in cases if c.get("cost")]
    print(f"{what}: split by phase ({len(costs)} of {len(cases)} cases have a cost section; "
          f"Snakemake wall {wall:.1f} s)")
    if not costs:
        print("  no cost section in the records")
        return
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    total = 0.0
    for cost in costs:
        given = {p: s for p, s in cost.items() if s is not None}
        for phase, seconds in given.items():
            sums[phase] = sums.get(phase, 0.0) + seconds
            counts[phase] = counts.get(phase, 0) + 1
        # A case without total_s: its top-level phases.
        total += given.get(TOTAL, sum(s for p, s in given.items()
                                      if p != TOTAL and NESTED.get(p) not in given))

    def row(label: str, seconds: float, cases: int | None = None, note: str = "") -> None:
        count = f"{cases:3} cases" if cases is not None else " " * 9
        print(f"  {label:32} {seconds:8.1f} s {seconds / wall:6.1%} {count}{note}".rstrip())

    # Top level: every phase but the total and those inside another one the case has.
    top = [p for p in sums if p != TOTAL and not (p in NESTED and NESTED[p] in sums)]
    for phase in sorted(top, key=lambda p: -sums[p]):
        row(phase, sums[phase], counts[phase])
        for inner in sorted((p for p, outer in NESTED.items() if outer == phase and p in sums),
                            key=lambda p: -sums[p]):
            part = (f"  (only {counts[inner]} of the {counts[phase]} cases split {phase})"
                    if counts[inner] < counts[phase] else "")
            row(f"  of which {inner}", sums[inner], counts[inner], part)
    if TOTAL in sums:
        row("in the cases, between phases", total - sum(sums[p] for p in top))
    row(f"the cases ({TOTAL})", total, len(costs))
    outside = wall - total
    note = "  (negative: jobs overlapped)" if outside < 0 else ""
    row("outside the cases", outside,
        note="(Snakemake, the report and render jobs, other jobs' own work)" + note)


# the default suite -----------------------------------------------------------------------


def default_suite(workdir: Path) -> None:
    """The default suite, cold, in a fresh clone of the repository's HEAD that reuses
    this virtual environment (imports from the clone: it is first on PYTHONPATH)."""
    clone = workdir / "default-suite"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    venv = Path(sys.prefix)
    if venv != Path(sys.base_prefix) and not (clone / ".venv").exists():
        (clone / ".venv").symlink_to(venv)
    sha = subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    print(f"\n== default suite, cold: a clone of HEAD ({sha}) in {clone}, `snakemake all`, "
          "an empty Inductor cache")
    say_load("the default suite")
    cmd = [*snakemake_argv(), "-s", str(clone / "Snakefile"), "--directory", str(clone),
           "--cores", "2", "all"]
    wall = timed(cmd, cwd=clone, env=fresh_env(workdir / "default-suite-env", clone),
                 log=workdir / "default-suite.log")
    report = json.loads((clone / "results" / "report.json").read_text())
    cases = report["cases"]
    statuses: dict[str, int] = {}
    for c in cases:
        statuses[c["status"]] = statuses.get(c["status"], 0) + 1
    print(f"default suite: {wall:.1f} s wall, {len(cases)} cases "
          f"({', '.join(f'{n} {s}' for s, n in sorted(statuses.items()))}), "
          f"{wall / len(cases):.2f} s per case")
    phase_split(report, wall, "default suite")


# main ------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--ao", type=Path, required=True,
                    help="a checkout of pytorch/ao at dbef6992 (has " + RUNNER + ")")
    ap.add_argument("--runs", type=int, default=2,
                    help="runs of each tool, alternating (default 2; 1 gives no spread)")
    ap.add_argument("--file", type=Path, default=CASES_FILE,
                    help="the torchao microbenchmark file (default: %(default)s)")
    ap.add_argument("--default-suite", action="store_true",
                    help="also time the default suite, cold, in a clone of HEAD")
    ap.add_argument("--keep", type=Path, help="keep the working directories here")
    ap.add_argument("--repo", type=Path, default=REPO,
                    help="the benchflow checkout whose Snakefile runs (default: this one)")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs: at least 1")
    ao, suite, repo = args.ao.resolve(), args.file.resolve(), args.repo.resolve()
    ao_sha = check_ao(ao)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        root = Path(tempfile.mkdtemp(prefix="case_cost.", dir=args.keep.resolve()))
    else:
        root = Path(tempfile.mkdtemp(prefix="case_cost."))
    print(f"nproc: {len(os.sched_getaffinity(0))} (os.cpu_count: {os.cpu_count()}); "
          f"python: {sys.executable}")
    print(f"file: {suite}\ntorchao: {ao} at {ao_sha}: python -m {RUNNER} --config <a copy, "
          "output_dir in a temporary directory>")
    print(f"benchflow: {repo}: snakemake --directory <fresh dir> --cores 2 "
          "results/report.json --configfile <the file>")
    print("Inductor cache: a fresh, empty TORCHINDUCTOR_CACHE_DIR for every run of each tool "
          "(a user's first run)")
    print(f"working directories: {root}" + ("" if args.keep else " (deleted at the end)"))
    if args.runs == 1:
        print("one run of each tool: no spread over runs (use --runs 2 or more)")
    try:
        ao_walls, ao_runs, bf_walls, bf_runs, reports = [], [], [], [], []
        for i in range(1, args.runs + 1):
            print(f"\n== run {i} of {args.runs}", flush=True)
            say_load(f"torchao run {i}")
            wall, times = run_torchao(ao, suite, root / f"torchao-{i}")
            print(f"  torchao run {i}: {wall:.1f} s, {len(times) // 2} rows", flush=True)
            ao_walls.append(wall)
            ao_runs.append(times)
            say_load(f"benchflow run {i}")
            wall, report = run_benchflow(repo, suite, root / f"benchflow-{i}")
            print(f"  benchflow run {i}: {wall:.1f} s, {len(report['cases'])} cases",
                  flush=True)
            bf_walls.append(wall)
            bf_runs.append(benchflow_cases(report))
            reports.append(report)

        ao_cases = max(len(t) for t in ao_runs)
        bf_cases = max(len(r["cases"]) for r in reports)
        print()
        say_walls("torchao", ao_walls, ao_cases)
        say_walls("benchflow", bf_walls, bf_cases)
        if ao_cases != bf_cases:
            print(f"  (not the same cases: torchao {ao_cases}, benchflow {bf_cases})")
        print()
        ratios = say_cases(ao_runs, bf_runs)
        ao_wall, bf_wall = statistics.median(ao_walls), statistics.median(bf_walls)
        close = sum(abs(r - 1) <= WITHIN for r in ratios)
        print(f"\nheadline: benchflow wall / torchao wall = {bf_wall:.1f} / {ao_wall:.1f} s = "
              f"{bf_wall / ao_wall:.2f}x (medians over {args.runs} run(s)); "
              f"{close} of {len(ratios)} cases within {WITHIN:.0%} of torchao's time "
              "(torchao: mean of 100 calls; benchflow: median of invocation medians)")
        print()
        phase_split(reports[-1], bf_walls[-1], f"benchflow run {args.runs}")
        if args.default_suite:
            default_suite(root)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
