"""Benchmark (not a test): what `benchflow check` makes of known slowdowns, idle and
under load, on this machine.

The GEMM of tests/perf/ab_evidence.py (`ab_extra_gemm`: a [M, K] x [K, N] GEMM, plus in
config extraR an independent GEMM of its first R rows, a module that does more work),
in configs extra0, extra{R12} and extra{R15} (--rows: about x1.2 and x1.5 at M = 256)
over --shapes shapes [256, K, N], on one SKU (--device, local-sync by default, the gating
SKU the README recommends), 12 fixed invocations per case as in issue 20 (no noisy rerun:
12 against 12). Per condition, idle and then under a 2-core CPU hog (two
`python -c 'while True: pass'` processes this script starts and kills):

  1. a golden run, blessed at once (goldens of the same period): the extra0 cases'
     invocation medians become the golden time of every config's case of that shape
     (times only: the extra GEMM's dispatch and bytes would regress at once);
  2. a measured run (--forcerun iree_batch: fresh invocations), then `benchflow check
     --goldens` on each config's cases apart (what CI sees of that change alone): once
     with --remeasure-budget 0, once with --remeasure-budget (default 60 s, check's).

Prints per condition and config the slowdown measured within the measured run (median
over shapes of extraR / extra0 of that run) and against the goldens (which adds the
drift between the two runs), how many cases check called REGRESSED, COULD NOT JUDGE
(cnj) and passed, before and after re-measuring, and the exit codes (also with
--allow-inconclusive, the old meaning of 0). extra0 is A/A: its REGRESSED are false
alarms. Under the hog, A/A is also judged against the idle goldens (another period).

    python tests/perf/gate_load.py [--quick] [--shapes 10] [--workdir DIR] [--keep]

--quick: 2 shapes, min_time 0.01 s, a 20 s re-measure budget (about 5 minutes on 2
shared cores); its rates mean little. The full run takes about 20 to 30 minutes.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.perf.ab_evidence import MODEL_FILE, configs_of, pct, suite_config, table  # noqa: E402
from tests.perf.regression_gate import medians_of, snakemake  # noqa: E402
from workflow.records.storage import read_json, write_json  # noqa: E402
from workflow.regression import goldens  # noqa: E402

SKU = "sync"  # ab_evidence's local-sync SKU
SHAPES = [[256, k, n] for k, n in [
    (256, 256), (256, 128), (128, 256), (128, 128), (256, 192), (192, 256), (192, 192),
    (128, 192), (192, 128), (160, 160)]]
BENCHFLOW = Path(sys.executable).with_name("benchflow")


def suite(shapes: list[list[int]], rows: dict[str, int], m: dict, device: str) -> dict:
    """ab_evidence's suite, on its host SKU only, over every shape."""
    config = suite_config(shapes[0], rows, m)
    config["skus"] = {SKU: config["skus"][SKU]}
    config["skus"][SKU]["iree"]["device"] = device
    config["workloads"][0]["shapes"] = shapes
    return config


def config_of(case_id: str) -> str:
    """extraR of a case id `sku/iree/ab_extra_gemm-extraR-MxKxN-f32/baseline`."""
    return case_id.split("/")[2].split("-")[1]


def bless_relabelled(report: dict, gdir: Path, configs: list[str]) -> None:
    """Goldens of the extra0 cases, under the id of every config's case of their shape:
    the time of the code before the change, for each change."""
    plan = goldens.plan_bless(report, "golden run", gdir, cases="*-extra0-*")
    for path, data in plan.files.items():
        base = {cid: {**e, "dispatch_count": None, "binary_bytes": None,
                      "binary_bytes_measured": None} for cid, e in data["cases"].items()}
        data["cases"] = {cid.replace("-extra0-", f"-{c}-"): e
                         for cid, e in base.items() for c in configs}
        write_json(path, data)


def check(workdir: Path, report: dict, config: str, gdir: Path, budget: float,
          *extra: str) -> dict:
    """`benchflow check` on one config's cases: its exit code and per case what it said."""
    path = workdir / f"report-{config}.json"
    write_json(path, {**report, "cases": [c for c in report["cases"]
                                          if config_of(c["id"]) == config]})
    t0 = time.monotonic()
    proc = subprocess.run([str(BENCHFLOW), "check", "--report", str(path), "--goldens",
                           str(gdir), "--remeasure-budget", f"{budget:g}", *extra],
                          cwd=workdir, capture_output=True, text=True)
    said: dict[str, str] = {}        # case id -> REGRESSED | COULD NOT JUDGE
    remeasured: dict[str, str] = {}  # case id -> REMEASURED | NOT REMEASURED
    for line in proc.stdout.splitlines():
        for word, into in (("REGRESSED", said), ("COULD NOT JUDGE", said),
                           ("REMEASURED", remeasured), ("NOT REMEASURED", remeasured)):
            if line.startswith(word + " "):
                into[line.removeprefix(word + " ").split(":")[0]] = word
    return {"code": proc.returncode, "said": said, "remeasured": remeasured,
            "seconds": time.monotonic() - t0, "stderr": proc.stderr[-2000:]}


def counts(result: dict, ids: list[str]) -> str:
    said = result["said"]
    reg = sum(said.get(c) == "REGRESSED" for c in ids)
    cnj = sum(said.get(c) == "COULD NOT JUDGE" for c in ids)
    return f"{reg} / {cnj} / {len(ids) - reg - cnj}"


class Hog:
    """n busy processes (two: one per core of a 2-core machine), killed on the way out,
    also on an exception or SIGTERM (see main)."""

    def __init__(self, n: int):
        self.n, self.procs = n, []

    def __enter__(self):
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                      for _ in range(self.n)]
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="2 shapes, min_time 0.01 s, re-measure budget 20 s")
    ap.add_argument("--shapes", type=int, default=len(SHAPES),
                    help=f"how many of the shapes (default {len(SHAPES)})")
    ap.add_argument("--rows", type=int, nargs=2, default=[48, 128], metavar=("R12", "R15"),
                    help="extra rows for about x1.2 and x1.5 (default 48 128 of M = 256)")
    ap.add_argument("--device", default="local-sync", help="the SKU's IREE device")
    ap.add_argument("--hog", type=int, default=2, help="busy processes under load (default 2)")
    ap.add_argument("--remeasure-budget", type=float, default=None,
                    help="check's --remeasure-budget (default its own, 60 s)")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    from workflow.cli.check import REMEASURE_BUDGET_S

    # A kill (timeout, the lead's Ctrl-C) unwinds through Hog.__exit__: no busy process
    # outlives the script.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))

    budget = args.remeasure_budget
    if budget is None:
        budget = 20.0 if args.quick else REMEASURE_BUDGET_S
    if args.workdir or args.keep:
        workdir = args.workdir or Path(tempfile.mkdtemp(prefix="gate-load-"))
        workdir.mkdir(parents=True, exist_ok=True)
        print(f"work directory (kept): {workdir}")
        measure(args, workdir, budget)
    else:
        with tempfile.TemporaryDirectory(prefix="gate-load-") as tmp:
            measure(args, Path(tmp), budget)


def measure(args: argparse.Namespace, workdir: Path, budget: float) -> None:
    shapes = SHAPES[: 2 if args.quick else args.shapes]
    m = {"invocations": 12, "max_invocations": 12, "rerun_noisy": False, "repetitions": 5,
         "min_warmup_time_s": 0.05, "min_time_s": 0.01 if args.quick else 0.02}
    rows = {"x1.2": args.rows[0], "x1.5": args.rows[1]}
    configs = configs_of(rows)
    label = {"extra0": "A/A", **{f"extra{r}": f"{name} ({r} extra rows)"
                                 for name, r in rows.items()}}
    (workdir / "ab_model.py").write_text(MODEL_FILE.replace("CONFIGS", repr(configs)))
    config = suite(shapes, rows, m, args.device)
    t_start = time.monotonic()

    def emit(*lines: str) -> None:
        print("\n".join(lines), flush=True)

    emit(f"{len(shapes)} shapes x {len(configs)} configs on {args.device}, 12 invocations x "
         f"{m['repetitions']} repetitions x {m['min_time_s']:g} s; re-measure budget "
         f"{budget:g} s per check; load average {os.getloadavg()[0]:.2f}", "")
    idle_goldens = None
    for condition in ("idle", f"hog x{args.hog}"):
        with Hog(args.hog if condition != "idle" else 0):
            gdir = workdir / f"goldens-{condition.split()[0]}"
            t_golden = snakemake(workdir, config, "--forcerun", "iree_batch")
            golden_report = read_json(workdir / "results/report.json")
            bless_relabelled(golden_report, gdir, configs)
            t_new = snakemake(workdir, config, "--forcerun", "iree_batch")
            report = read_json(workdir / "results/report.json")
            load = os.getloadavg()[0]
            body = []
            golden_medians = medians_of(golden_report)
            new_medians = medians_of(report)
            for c in configs:
                ids = sorted(i for i in new_medians if config_of(i) == c)
                ratios = [statistics.median(new_medians[i]) / statistics.median(
                    golden_medians[i.replace(f"-{c}-", "-extra0-")]) for i in ids]
                # The slowdown itself: against extra0 of the same run, without the
                # drift between the golden run and this one.
                in_run = [statistics.median(new_medians[i]) / statistics.median(
                    new_medians[i.replace(f"-{c}-", "-extra0-")]) for i in ids]
                plain = check(workdir, report, c, gdir, 0)
                again = check(workdir, report, c, gdir, budget)
                allowed = check(workdir, report, c, gdir, 0, "--allow-inconclusive")
                remeasured = sum(v == "REMEASURED" for v in again["remeasured"].values())
                body.append([
                    label[c], f"x{statistics.median(in_run):.3f}",
                    f"x{statistics.median(ratios):.3f}",
                    counts(plain, ids), str(plain["code"]), counts(again, ids),
                    str(again["code"]), f"{remeasured} in {again['seconds']:.0f} s",
                    str(allowed["code"])])
                for r in (plain, again):
                    if r["code"] not in (0, 1, 3):
                        emit(f"  check exited {r['code']}: {r['stderr']}")
            emit(f"{condition}: golden run {t_golden:.0f} s, measured run {t_new:.0f} s, "
                 f"load average {load:.2f}",
                 table(["config", "in-run ratio", "vs golden", "no re-measure: "
                        "reg / cnj / pass", "exit",
                        "re-measured: reg / cnj / pass", "exit", "re-measured",
                        "exit --allow-inconclusive"], body))
            aa = sorted(i for i in new_medians if config_of(i) == "extra0")
            if idle_goldens is None:
                idle_goldens = gdir
            else:
                cross = check(workdir, report, "extra0", idle_goldens, 0)
                reg = sum(cross["said"].get(i) == "REGRESSED" for i in aa)
                emit(f"  A/A under load against the idle goldens (another period): "
                     f"false regressions {pct(reg, len(aa))}, reg / cnj / pass "
                     f"{counts(cross, aa)}, exit {cross['code']}")
            emit("")
    emit(f"wall time {time.monotonic() - t_start:.0f} s; load average at the end "
         f"{os.getloadavg()[0]:.2f}")
    if args.quick:
        emit("(--quick: too few cases for the rates to mean anything)")


if __name__ == "__main__":
    main()
