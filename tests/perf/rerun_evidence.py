"""Benchmark (not a test): verdicts that hold from one run to the next (issue 43).

What it measures: whether benchflow's verdicts on unchanged code stay quiet across fresh
runs of a suite, half of them started beside a CPU hog, and whether they still catch a
small real slowdown. For each chosen suite (--suites, default `default,torchao`):

- K fresh runs (--runs, default 8), each in a fresh work directory under --workdir, with
  a fresh, empty Inductor cache, through this virtual environment's Snakemake:
  - default: config/config.yaml, as a derived suite file that adds one workload,
    `rerun_gemm` on cpu-generic-sync, from the model module tests/perf/rerun_evidence/
    rerun_model.py (key `model_modules`): `snakemake -s Snakefile --directory <run dir>
    --cores 2 all --configfile <derived suite>`;
  - torchao: tests/perf/case_cost.yml, torchao's CPU microbenchmark file, as case_cost.py
    runs it: the same command with the target results/report.json and the file unchanged.
  Runs 2, 4, 6, ... start while a CPU hog runs (tests/perf/hog.cpu_hog, one busy process:
  about half of a 2-core machine), stopped after the run's first --hog-s seconds (60)
  by a timer thread, and always stopped when the run ends (Ctrl-C included); with
  --hog-first runs 1, 3, 5, ..., the goldens' run among them.
- Goldens from the first run of each suite (`benchflow bless --yes`: they keep their
  baselines, the modules and model files that measure them again); every later run
  checked against them (`benchflow check --goldens DIR`, its default budget): its exit
  code (goal: 0 in >= 90 % of checks of unchanged code), how each case was decided
  (unchanged since blessed, paired with its baseline, unpaired), the machine drift it
  said, its seconds, and its REGRESSED and COULD NOT JUDGE lines; the cases whose time,
  dispatch or size verdict is an improvement are named by judging the report again in-
  process (check prints only their count). A false verdict is a regression or an
  improvement: nothing changed. Each is judged again in-process at --tight-tolerance
  (1.05): a 1.06x change cannot pass check's default x1.10 at all, so this says what a
  tolerance that could catch it costs.
- Every run also checked against the history of the runs before it
  (`benchflow check --against-history N --store STORE --remeasure-budget 0`, --history-n
  N = 4; recorded "not available" where this benchflow's check has no such option), then
  ingested into STORE (`benchflow history ingest --store STORE`, one store per suite).
  After all runs, `benchflow history detect --store STORE`: every change point is false.
- Cross-run coverage: over every case with a timing.median_ms and a timing.ci95_ms in two
  runs, the share of ordered pairs (i, j), i != j, whose run j's median lies inside run i's
  interval; the median relative width (hi - lo) / median over all cases and runs; the 5
  cases with the lowest coverage.
- One more run of the default suite (no hog) in which rerun_gemm does 1.0625x the work
  (its second GEMM over 160 rows instead of 128: the same case id, dispatches and input
  shapes), on IREE (cpu-generic-sync) and on torch-eager (cpu-host), checked against the
  goldens --catch-checks times (10): each check pairs the two changed cases with their
  blessed baselines afresh, so the count says how often a pair catches the change (goal:
  >= 8 of 10 for each); false verdicts on the others? Its true ratio is measured apart:
  --calib-rounds interleaved fresh invocations of the two modules (an idle run's and this
  run's), with the run stage's own recorded command (workflow/gating/remeasure.command_again).

Goals: 0 false verdicts from check and from detect over >= 8 reruns, half under a hog;
check exits 0 in >= 90 % of them; cross-run coverage >= 90 % with a median interval
width <= 3 %; the 1.06x slowdowns caught in >= 80 % of paired checks; the default suite
<= 3 min per run. The summary block at the end says PASS or MISS
for each, per suite; --out FILE.json keeps every figure, run by run.

    .venv/bin/python tests/perf/rerun_evidence.py [--runs 8] [--suites default,torchao]
        [--hog-s 60] [--hog-first] [--history-n 4] [--workdir DIR] [--tolerance T]
        [--tight-tolerance 1.05] [--out FILE.json] [--quick]

How long: a default-suite run takes about 2 to 2.5 minutes on the 2-core machine and a
torchao run about 50 s (case_cost.py's figures), so the defaults (8 runs of each, the
injected run, checks and calibration) should take about 30 to 35 minutes (an estimate: a
full run has not been timed yet). --quick (2 runs, the default suite cut to its first two
workloads plus rerun_gemm, torchao's file cut to one shape and the baseline recipe, a 20 s
hog, 3 calibration rounds) took 343 s on the 2-core machine while others loaded it (load
about 4): a smoke run whose figures mean nothing (detect needs 4 runs of a series, and
check --against-history 2 undisturbed stored runs, to judge a case).
Run it on an otherwise quiet machine: the idle runs are meant to be idle.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.perf.hog import cpu_hog, hogged_share  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_SUITE = REPO / "config" / "config.yaml"
TORCHAO_FILE = HERE / "case_cost.yml"
MODEL_FILE = HERE / "rerun_evidence" / "rerun_model.py"
MODEL, MODEL_SHAPE, SLOW_SKU = "rerun_gemm", [384, 256, 256], "cpu-generic-sync"
TORCH_SKU = "cpu-host"                   # where its torch-eager case runs
BASE_ROWS, SLOW_ROWS = 128, 160          # EXTRA_ROWS of rerun_model.py, as-is and injected
INJECTED = (MODEL_SHAPE[0] + SLOW_ROWS) / (MODEL_SHAPE[0] + BASE_ROWS)   # 1.0625x the work
SUITES = ("default", "torchao")
HOG_PROCESSES = 1                        # about half of a 2-core machine
RUN_TIMEOUT_S = 1800
CLI_TIMEOUT_S = 600
CALIB_TIMEOUT_S = 120
GOALS = {"false_verdicts": 0, "min_runs": 8, "coverage": 0.90, "median_width": 0.03,
         "default_wall_s": 180.0}
IMPROVEMENT = "improvement"
ASPECTS = ("verdict", "dispatch_verdict", "size_verdict")


# processes ---------------------------------------------------------------------------------


def tool(name: str) -> list[str]:
    """This virtual environment's console script `name` (snakemake, benchflow)."""
    exe = Path(sys.executable).with_name(name)
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-m", "workflow.cli" if name == "benchflow" else name]


def say_load(what: str) -> None:
    one, five, fifteen = os.getloadavg()
    print(f"  load before {what}: {one:.2f} {five:.2f} {fifteen:.2f}", flush=True)


def fresh_env(cache: Path) -> dict[str, str]:
    """This environment with an empty Inductor cache of its own and this checkout first
    on PYTHONPATH (what the run imports)."""
    cache.mkdir(parents=True)
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache), PYTHONPATH=path)


@dataclass
class Done:
    """A finished command: its exit code (None: it did not run to the end), its output."""

    rc: int | None
    text: str
    error: str | None = None


def call(args: list[str], *, cwd: Path, log: Path, timeout: float = CLI_TIMEOUT_S) -> Done:
    """`benchflow ARGS` in `cwd`, its output kept in `log` too; never raises for a
    failure of the command (an argument list: nothing goes through a shell)."""
    cmd = [*tool("benchflow"), *args]
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.write_text(f"$ {cmd}\n{exc}\n")
        return Done(None, "", f"{type(exc).__name__}: {exc}")
    text = proc.stdout + proc.stderr
    log.write_text(f"$ {cmd}\n(exit {proc.returncode})\n{text}")
    return Done(proc.returncode, text)


def check_options() -> str:
    """`benchflow check --help`, to see whether --against-history exists yet."""
    try:
        return subprocess.run([*tool("benchflow"), "check", "--help"], capture_output=True,
                              text=True, timeout=CLI_TIMEOUT_S).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


# the hog -----------------------------------------------------------------------------------


class TimedHog:
    """tests/perf/hog.cpu_hog for at most `seconds`: a timer thread stops it then, and
    leaving the block stops it in any case (stop() is idempotent and thread-safe)."""

    def __init__(self, seconds: float, processes: int = HOG_PROCESSES):
        self.seconds, self.processes = seconds, processes
        self.cpu_per_s: float | None = None   # the hog's CPU seconds per second, summed
        self.ran_s: float | None = None
        self._lock = threading.Lock()
        self._stack: contextlib.ExitStack | None = None
        self._timer: threading.Timer | None = None

    def __enter__(self) -> TimedHog:
        self._stack = contextlib.ExitStack()
        self.pids = self._stack.enter_context(cpu_hog(self.processes))
        self._t0 = time.monotonic()
        self._timer = threading.Timer(self.seconds, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        with self._lock:
            if self._stack is None:
                return
            stack, self._stack = self._stack, None
            try:
                self.cpu_per_s = hogged_share(self.pids)
            except (OSError, ValueError, IndexError):
                pass
            self.ran_s = time.monotonic() - self._t0
            stack.close()

    def __exit__(self, *exc) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.stop()


# suites ------------------------------------------------------------------------------------


def model_source(rows: int) -> str:
    """rerun_model.py with EXTRA_ROWS = rows."""
    text = MODEL_FILE.read_text()
    line = f"EXTRA_ROWS = {BASE_ROWS}"
    if len(re.findall(rf"^{re.escape(line)}\b", text, flags=re.M)) != 1:
        raise SystemExit(f"{MODEL_FILE}: expected one line starting `{line}`")
    return re.sub(rf"^{re.escape(line)}\b", f"EXTRA_ROWS = {rows}", text, flags=re.M)


def default_suite_file(where: Path, rows: int, quick: bool) -> Path:
    """config/config.yaml plus the rerun_gemm workload (and its model module, EXTRA_ROWS =
    rows, beside it); --quick keeps only the first two workloads of the default suite."""
    data = yaml.safe_load(DEFAULT_SUITE.read_text())
    if quick:
        data["workloads"] = data["workloads"][:2]
    data["workloads"].append({"model": MODEL, "shapes": [MODEL_SHAPE], "skus": [SLOW_SKU]})
    # Its torch-eager case too: the injected change slows one IREE and one torch case.
    data["workloads"].append({"model": MODEL, "shapes": [MODEL_SHAPE], "skus": [TORCH_SKU],
                              "backends": ["torch-eager"]})
    data["model_modules"] = [*data.get("model_modules", []), MODEL_FILE.name]
    where.mkdir(parents=True)
    (where / MODEL_FILE.name).write_text(model_source(rows))
    path = where / "default.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def torchao_suite_file(where: Path, quick: bool) -> Path:
    """tests/perf/case_cost.yml as it is; --quick: a copy with one shape, baseline only."""
    if not quick:
        return TORCHAO_FILE
    data = yaml.safe_load(TORCHAO_FILE.read_text())
    data["quantization_config_recipe_names"] = ["baseline"]
    for params in data["model_params"]:
        for shapes in params["matrix_shapes"]:
            shapes["shapes"] = shapes["shapes"][:1]
    where.mkdir(parents=True, exist_ok=True)
    path = where / "torchao-quick.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@dataclass
class Suite:
    name: str
    configfile: Path
    target: str      # all (the default suite) | results/report.json (a torchao file)


# one run -----------------------------------------------------------------------------------


@dataclass
class Run:
    suite: str
    label: str
    hog: bool
    workdir: str
    wall_s: float | None = None
    rc: int | None = None
    error: str | None = None
    cases: int = 0
    statuses: dict = field(default_factory=dict)
    disturbed: int = 0                  # cases whose timing.disturbed is set
    hog_ran_s: float | None = None
    hog_cpu_per_s: float | None = None
    check: dict | None = None           # against the goldens
    history_check: dict | None = None   # --against-history
    ingest: dict | None = None

    @property
    def report(self) -> Path:
        return Path(self.workdir) / "results" / "report.json"

    @property
    def ok(self) -> bool:
        return self.error is None


def run_suite(suite: Suite, wd: Path, *, label: str, hog_s: float | None, logs: Path) -> Run:
    """One fresh run of the suite in `wd` (beside a hog for its first hog_s seconds when
    hog_s is given); a failure is recorded in the Run, never raised (but Ctrl-C is)."""
    run = Run(suite.name, label, hog_s is not None, str(wd))
    cmd = [*tool("snakemake"), "-s", str(REPO / "Snakefile"), "--directory", str(wd),
           "--cores", "2", suite.target,
           "--configfile", str(suite.configfile)]   # last: it takes every argument after it
    log = logs / f"{label}.snakemake.log"
    say_load(label)
    hog = TimedHog(hog_s) if hog_s is not None else None
    t0 = time.perf_counter()
    try:
        wd.mkdir(parents=True)
        env = fresh_env(wd.with_name(wd.name + ".inductor-cache"))
        with hog or contextlib.nullcontext(), log.open("w") as out:
            proc = subprocess.run(cmd, cwd=wd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=RUN_TIMEOUT_S)
        run.rc = proc.returncode
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
        run.error = f"{type(exc).__name__}: {exc}"
    run.wall_s = time.perf_counter() - t0
    if hog is not None:
        run.hog_ran_s, run.hog_cpu_per_s = hog.ran_s, hog.cpu_per_s
    read_outcome(run, log)
    return run


def read_outcome(run: Run, log: Path) -> None:
    """The run's case statuses from its report; an error when there is none."""
    if run.error is None and run.rc != 0:
        run.error = f"snakemake exited {run.rc} (log: {log})"
    try:
        cases = json.loads(run.report.read_text())["cases"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        run.error = run.error or f"no readable report: {exc}"
        return
    run.cases = len(cases)
    for c in cases:
        run.statuses[c.get("status")] = run.statuses.get(c.get("status"), 0) + 1
        run.disturbed += bool((c.get("timing") or {}).get("disturbed"))


def say_run(run: Run) -> None:
    hog = (f", hog {run.hog_ran_s or 0:.0f} s at {run.hog_cpu_per_s or 0:.2f} CPU-s/s"
           if run.hog else ", idle")
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(run.statuses.items()))
    what = (f"{run.cases} cases ({statuses}; {run.disturbed} timing.disturbed)"
            if run.cases else "no cases")
    print(f"  {run.label}: {run.wall_s or 0:.1f} s{hog}: {what}"
          + (f"  FAILED: {run.error}" if run.error else ""), flush=True)


# the gates ---------------------------------------------------------------------------------


def gate_lines(done: Done) -> dict:
    """What a `benchflow check` printed: exit code, regressed and could-not-judge cases
    (with the first words of each reason), improvements it counted, its last line."""
    lines = done.text.splitlines()
    regressed = [line.removeprefix("REGRESSED ").partition(": ")[0]
                 for line in lines if line.startswith("REGRESSED ")]
    unjudged = [line.removeprefix("COULD NOT JUDGE ") for line in lines
                if line.startswith("COULD NOT JUDGE ")]
    improved = [line.split(" ", 1)[-1].partition(": ")[0] for line in lines
                if line.startswith(("IMPROVED ", "IMPROVEMENT "))]
    last = lines[-1] if lines else (done.error or "")
    counted = re.search(rf"(\d+) {IMPROVEMENT}", last)
    bases = re.search(r"(\d+) unchanged since blessed, (\d+) paired with their baseline, "
                      r"(\d+) unpaired", last)
    return {"rc": done.rc, "error": done.error, "regressed": regressed,
            "basis": dict(zip(("unchanged", "paired", "unpaired"),
                              map(int, bases.groups()), strict=True)) if bases else None,
            "machine_drift": sum(line.startswith("MACHINE DRIFT ") for line in lines),
            "paired_lines": [line for line in lines if line.startswith("PAIRED ")],
            "improved": improved, "improvements_counted": int(counted[1]) if counted else 0,
            "could_not_judge": [{"case": u.partition(": ")[0],
                                 "why": " ".join(u.partition(": ")[2].split()[:4])}
                                for u in unjudged],
            "last_line": last}


def rejudged(report: Path, goldens: Path, tolerance: float | None) -> dict | None:
    """The report judged against the goldens in-process (check's own rejudge), or None."""
    try:
        from workflow.records.report import read_report
        from workflow.regression import gate
        from workflow.suite.defaults import gate_settings

        settings = asdict(gate_settings())
        if tolerance is not None:
            settings["tolerance"] = tolerance
        return gate.rejudge(read_report(report), goldens, {**settings, "accept_config": []})
    except Exception as exc:  # noqa: BLE001 - a detail of the evidence, never a crash
        print(f"    (could not judge {report} in-process: {exc})")
        return None


def tight_verdicts(report: Path, goldens: Path, tolerance: float) -> list[str] | None:
    """The cases judged regressed or improved in time at `tolerance` (in-process)."""
    again = rejudged(report, goldens, tolerance)
    if again is None:
        return None
    return sorted(c["id"] for c in again["cases"]
                  if (c.get("golden") or {}).get("verdict") in ("regression", IMPROVEMENT))


def improved_cases(report: dict | None) -> list[str] | None:
    if report is None:
        return None
    return [c["id"] for c in report["cases"]
            if IMPROVEMENT in {(c.get("golden") or {}).get(a) for a in ASPECTS}]


def false_verdicts(result: dict) -> list[str]:
    """The cases a check called regressed or improved (each once)."""
    improved = result.get("improved_cases")
    if improved is None:   # not named: check's own count of time improvements
        improved = result["improved"] or [f"({result['improvements_counted']} improvement(s))"
                                          ] * bool(result["improvements_counted"])
    return sorted(set(result["regressed"]) | set(improved))


def check_goldens(run: Run, goldens: Path, logs: Path, tolerance: float | None,
                  keep: str | None = None) -> dict:
    """check against the goldens; `keep`: a case id whose golden section to keep."""
    # check's own default budget: a case changed since its golden is paired with the
    # golden's kept baseline; unchanged code has none to pair.
    args = ["check", "--report", str(run.report), "--goldens", str(goldens)]
    if tolerance is not None:
        args += ["--tolerance", str(tolerance)]
    start = time.monotonic()
    result = gate_lines(call(args, cwd=Path(run.workdir), log=logs / f"{run.label}.check.log"))
    result["seconds"] = time.monotonic() - start
    again = rejudged(run.report, goldens, tolerance)
    result["improved_cases"] = improved_cases(again)
    result["false"] = false_verdicts(result)
    if again is not None and keep is not None:
        result["golden"] = next((c.get("golden") for c in again["cases"] if c["id"] == keep),
                                None)
    return result


def check_history(run: Run, store: Path, n: int, logs: Path, tolerance: float | None) -> dict:
    args = ["check", "--report", str(run.report), "--against-history", str(n),
            "--store", str(store), "--remeasure-budget", "0"]
    if tolerance is not None:
        args += ["--tolerance", str(tolerance)]
    result = gate_lines(call(args, cwd=Path(run.workdir),
                             log=logs / f"{run.label}.check-history.log"))
    result["false"] = false_verdicts(result)
    return result


def say_check(what: str, result: dict | None, unchanged: bool = True) -> None:
    """A check's line; `unchanged`: the code is unchanged, every verdict is false."""
    if result is None:
        return
    if "skipped" in result:
        print(f"    {what}: {result['skipped']}")
        return
    kind = "false verdicts" if unchanged else "regressed or improved"
    print(f"    {what}: exit {result['rc']}, {kind} {len(result['false'])}"
          + (f" {result['false']}" if result["false"] else "")
          + f", could not judge {len(result['could_not_judge'])}; {result['last_line']}")


def bless(run: Run, goldens: Path, logs: Path) -> Done:
    # --allow-noisy: the goldens of whatever the first run measured, noisy or not (what
    # is measured is how the gate judges later runs against them).
    return call(["bless", "--report", str(run.report), "--goldens", str(goldens), "--yes",
                 "--allow-noisy"], cwd=Path(run.workdir), log=logs / f"{run.label}.bless.log")


def ingest(run: Run, store: Path, logs: Path) -> dict:
    done = call(["history", "ingest", "--store", str(store), str(run.report)],
                cwd=Path(run.workdir), log=logs / f"{run.label}.ingest.log")
    lines = done.text.splitlines()
    return {"rc": done.rc, "error": done.error, "last_line": lines[-1] if lines else ""}


def detect(store: Path, logs: Path, name: str) -> dict:
    """`history detect` over the whole store: its change points (every one is false)."""
    if not store.exists():
        return {"error": "no store (no run was ingested)", "change_points": [], "rc": None,
                "last_line": ""}
    text = call(["history", "detect", "--store", str(store)], cwd=store.parent,
                log=logs / f"{name}.detect.log")
    js = call(["history", "detect", "--store", str(store), "--format", "json"],
              cwd=store.parent, log=logs / f"{name}.detect-json.log")
    try:
        points = [{"case": cp.get("case_id"), "kind": cp.get("kind")}
                  for cp in json.loads(js.text[js.text.index("{"):])["change_points"]]
        error = None
    except (ValueError, KeyError, TypeError) as exc:
        points, error = [], f"unreadable JSON: {exc}"
    lines = text.text.splitlines()
    return {"rc": text.rc, "error": error or text.error, "change_points": points,
            "last_line": lines[-1] if lines else ""}


# coverage ----------------------------------------------------------------------------------


def timings(report: Path) -> dict[str, tuple[float, float, float]]:
    """case id -> (median, lo, hi) of every case with a median and a 95 % interval."""
    out = {}
    for c in json.loads(report.read_text())["cases"]:
        t = c.get("timing") or {}
        median, ci = t.get("median_ms"), t.get("ci95_ms")
        if median and ci and len(ci) == 2 and None not in ci:
            out[c["id"]] = (float(median), float(ci[0]), float(ci[1]))
    return out


def family(cid: str) -> str:
    """The drift group of a case id (sku/backend/workload/recipe) on one CPU machine."""
    return "torch" if cid.split("/")[1].startswith("torch") else cid.split("/")[1]


def levels(series: dict[str, list]) -> dict[tuple[str, int], float]:
    """(family, run index) -> the run's level: the median over the family's cases of
    log(median / that case's median over all runs), as regression/drift.py estimates it
    against goldens. Cases measured in every run only."""
    full = {cid: pts for cid, pts in series.items() if len(pts) == max(map(len, series.values()))}
    out: dict[tuple[str, int], float] = {}
    for fam in {family(cid) for cid in full}:
        logs = {cid: [math.log(m) for _, (m, _, _) in pts] for cid, pts in full.items()
                if family(cid) == fam}
        for i in range(len(next(iter(logs.values())))):
            out[fam, i] = statistics.median(v[i] - statistics.median(v) for v in logs.values())
    return out


def coverage(runs: list[Run]) -> dict:
    """Over ordered pairs of runs (i, j) of a case: is run j's median inside run i's
    interval? The share overall, over pairs of idle runs, per case; the widths. And the
    share once each run's level is taken out (run j's median moved by the two runs'
    levels): what the level-relative verdicts rely on."""
    series: dict[str, list[tuple[bool, tuple[float, float, float]]]] = {}
    for run in runs:
        for cid, t in timings(run.report).items():
            series.setdefault(cid, []).append((run.hog, t))
    level = levels(series) if series else {}
    per_case, widths = {}, []
    covered = pairs = idle_covered = idle_pairs = level_covered = level_pairs = 0
    for cid, points in series.items():
        k = n = 0
        widths += [(hi - lo) / median for _, (median, lo, hi) in points]
        for i, (hog_i, (_, lo, hi)) in enumerate(points):
            for j, (hog_j, (median, _, _)) in enumerate(points):
                if i == j:
                    continue
                inside = lo <= median <= hi
                k, n = k + inside, n + 1
                # Levels are per run, from the cases measured in every run: only
                # those cases' points line up with the runs' numbers.
                if len(points) == len(runs) and (family(cid), i) in level:
                    moved = median * math.exp(level[family(cid), i] - level[family(cid), j])
                    level_covered += lo <= moved <= hi
                    level_pairs += 1
                if not (hog_i or hog_j):
                    idle_covered, idle_pairs = idle_covered + inside, idle_pairs + 1
        if n:
            medians = [m for _, (m, _, _) in points]
            per_case[cid] = {"covered": k, "pairs": n, "spread": max(medians) / min(medians),
                             "width": statistics.median((hi - lo) / m
                                                        for _, (m, lo, hi) in points)}
        covered, pairs = covered + k, pairs + n
    return {"covered": covered, "pairs": pairs, "share": covered / pairs if pairs else None,
            "idle_covered": idle_covered, "idle_pairs": idle_pairs,
            "idle_share": idle_covered / idle_pairs if idle_pairs else None,
            "level_covered": level_covered, "level_pairs": level_pairs,
            "level_share": level_covered / level_pairs if level_pairs else None,
            "median_width": statistics.median(widths) if widths else None,
            "widths": len(widths), "per_case": per_case}


def say_coverage(name: str, cov: dict) -> None:
    if not cov["pairs"]:
        print(f"  {name}: no case with an interval in two runs")
        return
    idle = (f"; idle pairs only {cov['idle_share']:.1%} of {cov['idle_pairs']}"
            if cov["idle_pairs"] else "")
    print(f"  {name}: coverage {cov['share']:.1%} ({cov['covered']} of {cov['pairs']} "
          f"ordered pairs){idle}; median interval width {cov['median_width']:.2%} "
          f"over {cov['widths']} case-runs")
    if cov.get("level_pairs"):
        print(f"    with each run's level taken out: {cov['level_share']:.1%} "
              f"({cov['level_covered']} of {cov['level_pairs']})")
    worst = sorted(cov["per_case"].items(), key=lambda kv: kv[1]["covered"] / kv[1]["pairs"])
    for cid, c in worst[:5]:
        print(f"    {c['covered']:3} of {c['pairs']:3} ({c['covered'] / c['pairs']:6.1%})  "
              f"width {c['width']:6.2%}  max/min median {c['spread']:.3f}  {cid}")


# the injected slowdown ---------------------------------------------------------------------


def model_case(run: Run, sku: str = SLOW_SKU) -> dict | None:
    """rerun_gemm's case on `sku` (its IREE case; TORCH_SKU: its torch-eager case)."""
    try:
        cases = json.loads(run.report.read_text())["cases"]
    except (OSError, ValueError, KeyError):
        return None
    return next((c for c in cases if c.get("model") == MODEL and c.get("sku") == sku), None)


def invocation_ms(argv: list[str], cwd: Path) -> float:
    from workflow.backends.iree import tools as iree

    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=True,
                          timeout=CALIB_TIMEOUT_S)
    return iree.parse_benchmark_json(proc.stdout).median_ms


def calibrate(base: Run, slow: Run, rounds: int) -> dict:
    """The true ratio of the injected slowdown: `rounds` rounds of one fresh invocation
    of each module (the order alternating), with each run stage's recorded command."""
    from workflow.gating.remeasure import command_again

    sides = {"base": base, "slow": slow}
    ms: dict[str, list[float]] = {"base": [], "slow": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            argv = {}
            for name, run in sides.items():
                case = model_case(run)
                if case is None or case.get("status") != "ok":
                    return {"error": f"{run.label}: {MODEL} not ok"}
                (Path(tmp) / name).mkdir()
                with contextlib.chdir(run.workdir):
                    argv[name] = command_again(case, Path(tmp) / name)
            for r in range(rounds):
                for name in ("base", "slow") if r % 2 == 0 else ("slow", "base"):
                    ms[name].append(invocation_ms(argv[name], Path(sides[name].workdir)))
    except Exception as exc:  # noqa: BLE001 - a detail of the evidence, never a crash
        return {"error": f"{type(exc).__name__}: {exc}"}
    ratios = [s / b for s, b in zip(ms["slow"], ms["base"], strict=True)]
    return {"rounds": rounds, "base_ms": ms["base"], "slow_ms": ms["slow"],
            "ratio": statistics.median(ms["slow"]) / statistics.median(ms["base"]),
            "round_ratios": ratios, "min_ratio": min(ratios), "max_ratio": max(ratios)}


def injected_run(suite: Suite, root: Path, runs: list[Run], goldens: Path, logs: Path,
                 args) -> dict:
    """The default suite once more, rerun_gemm doing INJECTED x the work, no hog; checked
    against the goldens (and the history, when check has it); its true ratio measured."""
    print(f"\n== default suite with {MODEL} slowed down {INJECTED:.4f}x (no hog)", flush=True)
    slow_suite = Suite(suite.name, default_suite_file(root / "suites" / "injected", SLOW_ROWS,
                                                      args.quick), suite.target)
    run = run_suite(slow_suite, root / "default-injected", label="default-injected",
                    hog_s=None, logs=logs)
    say_run(run)
    out: dict = {"run": run, "injected_work": INJECTED}
    case = model_case(run)
    out["case"] = case["id"] if case else None
    if not run.ok or case is None:
        out["error"] = run.error or f"no {MODEL} case in the report"
        return out
    if not (goldens / f"{SLOW_SKU}.json").exists():
        out["error"] = f"no goldens of {SLOW_SKU} (the first run failed?)"
        return out
    torch_case = model_case(run, TORCH_SKU)
    slowed = [case["id"]] + ([torch_case["id"]] if torch_case else [])
    out["cases"] = slowed
    # check pairs each changed case with its golden's kept baseline: each check measures
    # the pairs afresh, so --catch-checks checks of this run say how often a pair catches
    # the change (the run's own numbers are judged once).
    checks = []
    for k in range(args.catch_checks):
        result = check_goldens(run, goldens, logs, args.tolerance, keep=case["id"])
        say_check(f"check --goldens ({k + 1} of {args.catch_checks}, {result['seconds']:.0f}"
                  " s)", result, unchanged=False)
        for line in result["paired_lines"]:
            print(f"      {line[:200]}")
        checks.append(result)
    run.check = checks[0] if checks else None
    out["checks"] = checks
    out["caught_per_case"] = {cid: sum(cid in c["regressed"] for c in checks)
                              for cid in slowed}
    out["caught"] = bool(checks) and all(
        n >= 0.8 * len(checks) for n in out["caught_per_case"].values())
    golden = (run.check or {}).get("golden") or {}
    out["verdict"], out["golden_ratio"] = golden.get("verdict"), golden.get("ratio")
    out["reason"] = golden.get("reason")
    out["false_others"] = sorted({f for c in checks for f in c["false"] if f not in slowed})
    out["check_seconds"] = [round(c["seconds"], 1) for c in checks]
    tight = tight_verdicts(run.report, goldens, args.tight_tolerance) or []
    out["tight"] = {"tolerance": args.tight_tolerance, "caught": case["id"] in tight,
                    "false_others": [c for c in tight if c != case["id"]]}
    idle = [r for r in runs if r.ok and not r.hog and model_case(r)
            and model_case(r).get("status") == "ok"]
    if idle:
        base_ms = statistics.median(model_case(r)["timing"]["median_ms"] for r in idle)
        out["run_ratio"] = case["timing"]["median_ms"] / base_ms if case.get("timing") else None
        print(f"  calibrating: {args.calib_rounds} interleaved rounds against "
              f"{idle[-1].label}", flush=True)
        out["calibration"] = calibrate(idle[-1], run, args.calib_rounds)
    else:
        out["calibration"] = {"error": "no idle run with an ok " + MODEL + " case"}
    return out


# the loop ----------------------------------------------------------------------------------


@dataclass
class SuiteState:
    suite: Suite
    goldens: Path
    store: Path
    runs: list[Run] = field(default_factory=list)
    blessed_from: str | None = None
    bless_error: str | None = None


def one_run(state: SuiteState, i: int, root: Path, logs: Path, args,
            history_available: bool) -> None:
    """Run i (1-based) of a suite, its checks, its ingest."""
    name = state.suite.name
    label = f"{name}-{i}"
    # The hog on every other run: the even ones by default, so that the goldens come from
    # an idle run as docs/goldens.md advises; the odd ones, the first among them, with
    # --hog-first (goldens measured under load).
    hog_s = args.hog_s if i % 2 == (1 if args.hog_first else 0) else None
    how = f"hog for the first {hog_s:g} s" if hog_s else "idle"
    print(f"\n== {label} of {args.runs} ({how})", flush=True)
    run = run_suite(state.suite, root / label, label=label, hog_s=hog_s, logs=logs)
    state.runs.append(run)
    say_run(run)
    if not run.ok:
        return
    if state.blessed_from is None:
        done = bless(run, state.goldens, logs)
        if done.rc == 0:
            state.blessed_from = label
            print(f"    blessed goldens from {label} into {state.goldens}")
        else:
            state.bless_error = done.error or done.text.strip().splitlines()[-1:]
            print(f"    bless FAILED: {state.bless_error}")
    else:
        run.check = check_goldens(run, state.goldens, logs, args.tolerance)
        say_check("check --goldens", run.check)
        run.check["tight"] = tight_verdicts(run.report, state.goldens, args.tight_tolerance)
        print(f"    at tolerance {args.tight_tolerance:g}: false verdicts "
              f"{run.check['tight']}")
    if not history_available:
        run.history_check = {"skipped": "not available (this check has no --against-history)"}
    elif not state.store.exists():
        run.history_check = {"skipped": "no earlier run in the store"}
    else:
        run.history_check = check_history(run, state.store, args.history_n, logs,
                                          args.tolerance)
    say_check(f"check --against-history {args.history_n}", run.history_check)
    run.ingest = ingest(run, state.store, logs)
    if run.ingest["rc"] != 0:
        print(f"    ingest FAILED: {run.ingest['error'] or run.ingest['last_line']}")


def make_suites(names: list[str], root: Path, quick: bool) -> list[SuiteState]:
    out = []
    for name in names:
        if name == "default":
            suite = Suite(name, default_suite_file(root / "suites" / "default", BASE_ROWS,
                                                   quick), "all")
        else:
            suite = Suite(name, torchao_suite_file(root / "suites", quick), "results/report.json")
        out.append(SuiteState(suite, root / f"goldens-{name}", root / f"store-{name}"))
    return out


# the summary -------------------------------------------------------------------------------


def verdict_counts(runs: list[Run], key: str) -> dict:
    """False verdicts and could-not-judge of one kind of check over the runs."""
    checked = [getattr(r, key) for r in runs if getattr(r, key)]
    done = [c for c in checked if "skipped" not in c]
    reasons: dict[str, int] = {}
    for c in done:
        for u in c["could_not_judge"]:
            reasons[u["why"]] = reasons.get(u["why"], 0) + 1
    skipped = sorted({c["skipped"] for c in checked if "skipped" in c})
    return {"checks": len(done), "false": sum(len(c["false"]) for c in done),
            "false_cases": sorted({f for c in done for f in c["false"]}),
            "exit_codes": [c["rc"] for c in done],
            "could_not_judge": sum(len(c["could_not_judge"]) for c in done),
            "could_not_judge_reasons": reasons, "skipped": skipped}


def suite_summary(state: SuiteState, cov: dict, det: dict) -> dict:
    walls = [r.wall_s for r in state.runs if r.wall_s is not None]
    return {"configfile": str(state.suite.configfile), "runs": len(state.runs),
            "failed_runs": [f"{r.label}: {r.error}" for r in state.runs if not r.ok],
            "hogged_runs": sum(r.hog for r in state.runs), "blessed_from": state.blessed_from,
            "bless_error": state.bless_error,
            "check": verdict_counts(state.runs, "check"),
            "check_bases": [r.check.get("basis") for r in state.runs if r.check],
            "machine_drift": sum(r.check.get("machine_drift", 0) for r in state.runs
                                 if r.check),
            "check_seconds": [round(r.check["seconds"], 1) for r in state.runs
                              if r.check and "seconds" in r.check],
            "tight_false": [r.check.get("tight") or [] for r in state.runs if r.check],
            "history_check": verdict_counts(state.runs, "history_check"),
            "detect": det, "coverage": {k: v for k, v in cov.items() if k != "per_case"},
            "coverage_per_case": cov["per_case"],
            "disturbed_per_run": [r.disturbed for r in state.runs],
            "walls_s": [round(w, 1) for w in walls],
            "median_wall_s": statistics.median(walls) if walls else None}


def pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.1%}"


def goal(ok: bool | None) -> str:
    return "n/a" if ok is None else "PASS" if ok else "MISS"


def say_checks(what: str, c: dict) -> None:
    if not c["checks"]:
        print(f"  {what}: {'; '.join(c['skipped']) or 'no check ran'}")
        return
    reasons = ", ".join(f"{n}x '{w}'" for w, n in sorted(c["could_not_judge_reasons"].items(),
                                                          key=lambda kv: -kv[1]))
    print(f"  {what}: {c['false']} false verdict(s) in {c['checks']} check(s)"
          + (f" {c['false_cases']}" if c["false_cases"] else "")
          + f"; exit codes {c['exit_codes']}; could not judge {c['could_not_judge']}"
          + (f" ({reasons})" if reasons else ""))


def say_summary(summary: dict, injected: dict | None, runs_wanted: int) -> list[dict]:
    """The summary block; returns the goals, each with its figure and PASS/MISS."""
    goals = []
    print("\n" + "=" * 30 + " summary " + "=" * 30)
    for name, s in summary.items():
        print(f"{name}: {s['runs']} run(s), {s['hogged_runs']} under the hog, "
              f"{len(s['failed_runs'])} failed; goldens from {s['blessed_from']}; "
              f"timing.disturbed cases per run {s['disturbed_per_run']}")
        for f in s["failed_runs"]:
            print(f"  FAILED {f}")
        say_checks("check --goldens", s["check"])
        tight = s["tight_false"]
        print(f"  check --goldens at the tight tolerance: false verdicts "
              f"{sum(len(t) for t in tight)} {sorted({x for t in tight for x in t})}")
        say_checks("check --against-history", s["history_check"])
        d = s["detect"]
        print(f"  history detect: {len(d['change_points'])} change point(s) (all false)"
              + (f" {[(p['case'], p['kind']) for p in d['change_points']]}"
                 if d["change_points"] else "")
              + f"; exit {d['rc']}: {d['last_line'] or d.get('error')}")
        cov = s["coverage"]
        print(f"  cross-run coverage: {pct(cov['share'])} ({cov['covered']} of {cov['pairs']} "
              f"pairs), idle pairs {pct(cov['idle_share'])}; median width "
              f"{pct(cov['median_width'])}; with each run's level taken out "
              f"{pct(cov.get('level_share'))}")
        print(f"  wall per run: {', '.join(f'{w:.0f}' for w in s['walls_s'])} s; median "
              f"{s['median_wall_s'] or 0:.0f} s")
        codes = s["check"]["exit_codes"]
        zero = sum(c == 0 for c in codes)
        print(f"  check --goldens exited 0 in {zero} of {len(codes)} check(s); how each "
              f"case was decided, per check: {s['check_bases']}; machine drift said "
              f"{s['machine_drift']} time(s); seconds per check {s['check_seconds']}")
        goals.append({"suite": name, "goal": "check exits 0 in >= 90 % of checks of "
                      "unchanged code", "figure": f"{zero} of {len(codes)}",
                      "pass": (zero >= 0.9 * len(codes)) if codes else None})
        enough = s["runs"] >= GOALS["min_runs"]
        false = s["check"]["false"] + len(d["change_points"])
        goals.append({"suite": name, "goal": "0 false verdicts from check and detect over "
                      f">= {GOALS['min_runs']} runs", "figure": false,
                      "pass": (false == 0) if enough else None})
        goals.append({"suite": name, "goal": "coverage >= 90 %, median width <= 3 %",
                      "figure": f"{pct(cov['share'])}, {pct(cov['median_width'])}",
                      "pass": None if cov["share"] is None else
                      cov["share"] >= GOALS["coverage"]
                      and cov["median_width"] <= GOALS["median_width"]})
        if name == "default":
            goals.append({"suite": name, "goal": "<= 3 min per run (median)",
                          "figure": f"{s['median_wall_s'] or 0:.0f} s",
                          "pass": None if s["median_wall_s"] is None else
                          s["median_wall_s"] <= GOALS["default_wall_s"]})
    if injected is not None:
        cal = injected.get("calibration") or {}
        true = (f"true ratio {cal['ratio']:.4f} (rounds {cal['min_ratio']:.3f}.."
                f"{cal['max_ratio']:.3f})" if "ratio" in cal else
                f"true ratio not measured ({cal.get('error')})")
        ratio = injected.get("golden_ratio")
        print(f"injected {INJECTED:.4f}x work in {injected.get('case')}: "
              f"caught {injected.get('caught')}"
              + (f" (verdict {injected.get('verdict')}, x{ratio:.3f} vs golden)"
                 if ratio else "")
              + f"; {true}; false verdicts on other cases: "
              + f"{injected.get('false_others')}"
              + (f"; ERROR {injected['error']}" if injected.get("error") else ""))
        print(f"  caught by paired checks, per case: {injected.get('caught_per_case')} of "
              f"{len(injected.get('checks') or [])} check(s), each "
              f"{injected.get('check_seconds')} s")
        goals.append({"suite": "default", "goal": "the 1.06x slowdown caught in >= 80 % of "
                      "paired checks, IREE and torch", "figure": injected.get("caught_per_case"),
                      "pass": injected.get("caught")})
        tight = injected.get("tight") or {}
        if tight:
            print(f"  at tolerance {tight['tolerance']:g}: caught {tight['caught']}, false "
                  f"verdicts on other cases {tight['false_others']}")
    if runs_wanted < GOALS["min_runs"]:
        print(f"(--runs {runs_wanted} < {GOALS['min_runs']}: the false-verdict goal is n/a)")
    for g in goals:
        print(f"goal [{g['suite']}] {g['goal']}: {g['figure']} -> {goal(g['pass'])}")
    return goals


# main --------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, help="fresh runs of each suite (default 8; "
                    "--quick 2); at least 2")
    ap.add_argument("--suites", default=",".join(SUITES),
                    help="comma-separated, of: default, torchao (default: %(default)s)")
    ap.add_argument("--hog-s", type=float, help="seconds of the hog at the start of each "
                    "odd run (default 60; --quick 20)")
    ap.add_argument("--history-n", type=int, default=4,
                    help="check --against-history N (default %(default)s)")
    ap.add_argument("--workdir", type=Path, help="where the run directories go (default: a "
                    "new temporary directory; kept either way)")
    ap.add_argument("--tolerance", type=float, help="passed to every check (default: "
                    "check's own)")
    ap.add_argument("--rejudge", type=Path, metavar="FILE.json",
                    help="measure nothing: judge the runs of an earlier --out file again "
                         "with this checkout's benchflow")
    ap.add_argument("--hog-first", action="store_true", help="the hog on the odd runs, "
                    "the first (the goldens' run) among them; default: the even runs")
    ap.add_argument("--tight-tolerance", type=float, default=1.05,
                    help="also judge every check against the goldens at this tolerance, "
                         "in-process (false verdicts of unchanged runs, and whether the "
                         "injected slowdown is caught, at a tolerance below 1.06; default "
                         "%(default)s)")
    ap.add_argument("--calib-rounds", type=int, help="interleaved rounds measuring the "
                    "injected slowdown's true ratio (default 10; --quick 3)")
    ap.add_argument("--catch-checks", type=int,
                    help="checks of the injected run, each pairing its changed cases with "
                         "their goldens' baselines afresh (default 10; --quick 2)")
    ap.add_argument("--out", type=Path, help="write every figure to this JSON file")
    ap.add_argument("--quick", action="store_true", help="a smoke run of a few minutes "
                    "whose figures mean nothing")
    args = ap.parse_args()
    args.runs = args.runs or (2 if args.quick else 8)
    args.hog_s = args.hog_s if args.hog_s is not None else (20.0 if args.quick else 60.0)
    args.calib_rounds = args.calib_rounds or (3 if args.quick else 10)
    args.catch_checks = args.catch_checks or (2 if args.quick else 10)
    args.suite_names = [s.strip() for s in args.suites.split(",") if s.strip()]
    if args.runs < 2:
        ap.error("--runs: at least 2 (the first one gives the goldens)")
    if not args.suite_names or set(args.suite_names) - set(SUITES):
        ap.error(f"--suites: a comma-separated list of {', '.join(SUITES)}")
    return args


def rejudge(args) -> int:
    """--rejudge FILE.json: the checks, detect and coverage of an earlier evidence run
    (its --out file and the directories it names) judged again by this checkout's
    benchflow, measuring nothing: how a change to the verdict rules reads the same runs.
    The stores hold every run; --against-history leaves out the runs newer than each."""
    record = json.loads(args.rejudge.read_text())
    root = Path(record["workdir"])
    logs = root / "logs" / f"rejudge-{int(time.time())}"
    logs.mkdir(parents=True)
    fields = {f for f in Run.__dataclass_fields__}
    summary = {}
    for name in dict.fromkeys(r["suite"] for r in record["runs"]):
        state = SuiteState(Suite(name, Path(), ""), root / f"goldens-{name}",
                           root / f"store-{name}")
        state.runs = [Run(**{k: v for k, v in r.items() if k in fields})
                      for r in record["runs"] if r["suite"] == name]
        state.blessed_from = record["suites"][name]["blessed_from"]
        print(f"\n== {name}: {len(state.runs)} runs, goldens from {state.blessed_from}")
        for run in state.runs:
            run.check = run.history_check = None
            if not run.ok or run.label == state.blessed_from:
                continue
            run.check = check_goldens(run, state.goldens, logs, args.tolerance)
            run.check["tight"] = tight_verdicts(run.report, state.goldens,
                                                args.tight_tolerance)
            run.history_check = check_history(run, state.store, args.history_n, logs,
                                              args.tolerance)
            print(f"  {run.label} ({'hog' if run.hog else 'idle'})")
            say_check("check --goldens", run.check)
            say_check(f"check --against-history {args.history_n}", run.history_check)
        cov = coverage([r for r in state.runs if r.ok])
        summary[name] = suite_summary(state, cov, detect(state.store, logs, name))
    injected = record.get("injected")
    if injected and injected.get("case"):
        run = Run(**{k: v for k, v in injected["run"].items() if k in fields})
        run.check = check_goldens(run, root / "goldens-default", logs, args.tolerance,
                                  keep=injected["case"])
        tight = tight_verdicts(run.report, root / "goldens-default", args.tight_tolerance)
        golden = run.check.get("golden") or {}
        injected = {**injected, "run": run, "caught": injected["case"] in run.check["regressed"],
                    "verdict": golden.get("verdict"), "golden_ratio": golden.get("ratio"),
                    "false_others": [c for c in run.check["false"] if c != injected["case"]],
                    "tight": {"tolerance": args.tight_tolerance,
                              "caught": injected["case"] in (tight or []),
                              "false_others": [c for c in tight or []
                                               if c != injected["case"]]}}
        say_check("injected: check --goldens", run.check, unchanged=False)
    say_summary(summary, injected, len(record["runs"]) // max(1, len(summary)))
    return 0


def main() -> int:
    args = parse_args()
    if args.rejudge:
        return rejudge(args)
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="rerun_evidence.", dir=args.workdir)).resolve()
    logs = root / "logs"
    logs.mkdir()
    history_available = "--against-history" in check_options()
    print(f"nproc: {len(os.sched_getaffinity(0))}; python: {sys.executable}")
    print(f"work directory (kept): {root}")
    hogged = "1, 3" if args.hog_first else "2, 4"
    print(f"suites: {', '.join(args.suite_names)}; {args.runs} runs each, runs {hogged}, ... "
          f"beside {HOG_PROCESSES} busy process for their first {args.hog_s:g} s"
          + ("; --quick: figures mean nothing" if args.quick else ""))
    print("check --against-history: " + ("available" if history_available else
                                         "not available in this benchflow (recorded so)"))
    states = make_suites(args.suite_names, root, args.quick)
    injected = None
    interrupted = False
    t0 = time.perf_counter()
    try:
        for i in range(1, args.runs + 1):
            for state in states:
                one_run(state, i, root, logs, args, history_available)
        default = next((s for s in states if s.suite.name == "default"), None)
        if default is not None:
            injected = injected_run(default.suite, root, default.runs, default.goldens,
                                    logs, args)
    except KeyboardInterrupt:
        interrupted = True
        print("\ninterrupted: the summary of the runs so far", flush=True)
    summary = {}
    for state in states:
        cov = coverage([r for r in state.runs if r.ok])
        summary[state.suite.name] = suite_summary(state, cov,
                                                  detect(state.store, logs, state.suite.name))
        print(f"\ncoverage, {state.suite.name}:")
        say_coverage(state.suite.name, cov)
    goals = say_summary(summary, injected, args.runs)
    print(f"total wall time: {time.perf_counter() - t0:.0f} s; logs in {logs}")
    if args.out:
        record = {"args": {k: str(v) if isinstance(v, Path) else v
                           for k, v in vars(args).items()},
                  "workdir": str(root), "interrupted": interrupted,
                  "against_history_available": history_available,
                  "runs": [asdict(r) for s in states for r in s.runs],
                  "suites": summary, "goals": goals,
                  "injected": None if injected is None else
                  {**injected, "run": asdict(injected["run"])}}
        args.out.write_text(json.dumps(record, indent=1, default=str))
        print(f"written: {args.out}")
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
