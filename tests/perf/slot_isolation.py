"""Benchmark (not a test): do two timing slots of one machine disturb each other? An A/A
of one case measured alone on slot 0 and measured beside a busy neighbour on slot 1.

Exports and compiles one GEMM for the host CPU (IREE local-sync: one thread), pins this
process (and so every invocation) to slot 0's CPUs and a neighbour to slot 1's: by
default the neighbour is another timing job, fresh iree-benchmark-module invocations of
a larger GEMM in a loop (--neighbour hog: busy-loop Python, which leaves the memory
system alone). Each round measures one invocation alone (the neighbour stopped with
SIGSTOP) and one beside it (SIGCONT), in a random order, so that the machine's drift
cancels in the round's ratio; the shift and its interval are the paired statistics
`benchflow ab` uses (workflow/stats/paired.py: median of log ratios, sign-test
interval). A shift whose interval excludes 1 means the slots disturb each other, and
the slots are refused for this device class (config/schema.yaml: cpu_slots defaults to 1;
docs/measurement.md quotes the figure).

    python tests/perf/slot_isolation.py [--rounds 24] [--shape 256 256 256]
        [--neighbour-shape 1024 1024 1024] [--neighbour gemm|hog] [--slots 0 1]
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from workflow.backends.iree import tools as iree
from workflow.jobs.iree import benchmark_run, compile_module, export, sku_tool
from workflow.planning.plan import load_suite
from workflow.records.storage import read_json
from workflow.stats.paired import compare

TIMEOUT_S = 300
HOG = "while True:\n    pass\n"


def build(tmp: Path, shapes: dict, measurement: dict) -> dict[str, list[str]]:
    """iree-benchmark-module argv of each named GEMM shape, compiled for local-sync."""
    suite = {"skus": {"sync": {"iree": {"target_cpu": "host", "device": "local-sync"},
                               "measurement": measurement}},
             "workloads": [{"model": "linear", "shapes": list(shapes.values())}]}
    (tmp / "suite.yaml").write_text(yaml.safe_dump(suite))
    s = load_suite([str(tmp / "suite.yaml")], {})
    sku, log, argv = s.sku("sync"), str(tmp / "log"), {}
    for name, shape in shapes.items():
        workload = next(w for w in s.workloads.values() if list(w.shape) == list(shape))
        d = tmp / name
        d.mkdir()
        paths = {k: str(d / f) for k, f in (("mlir", "module.mlirbc"), ("inputs", "inputs.npz"),
                                            ("reference", "reference.npz"),
                                            ("meta", "export.json"))}
        done = export(spec=workload.export_spec(), timeout=TIMEOUT_S, log=log, **paths)
        assert done.ok, done.error
        dtypes = [i["dtype"] for i in read_json(paths["meta"])["inputs"]]
        files = iree.write_input_files(paths["inputs"], dtypes, d)
        vmfb = str(d / "module.vmfb")
        done = compile_module(mlir=paths["mlir"], export_meta=paths["meta"], sku=sku,
                              timeout=TIMEOUT_S, vmfb=vmfb, meta=str(d / "compile.json"),
                              log=log)
        assert done.ok, done.error
        argv[name] = iree.benchmark_argv(
            sku_tool(sku, "benchmark_tool"), vmfb, "main", files, sku,
            repetitions=measurement["repetitions"], warmup_s=measurement["min_warmup_time_s"],
            min_time=f"{measurement['min_time_s']:g}s")
    return argv


def neighbour(kind: str, argv: list[str], cpu: int) -> subprocess.Popen:
    """The busy neighbour on `cpu`, in a session of its own (stopped and resumed whole)."""
    if kind == "hog":
        cmd = [sys.executable, "-c", HOG]
    else:
        cmd = ["sh", "-c", f"while :; do {shlex.join(argv)} >/dev/null 2>&1; done"]
    return subprocess.Popen(cmd, start_new_session=True,
                            preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))


def rounds(argv: list[str], busy: subprocess.Popen, n: int, log: str, rng: random.Random):
    alone, beside = [], []
    for _ in range(n):
        order = ["alone", "beside"]
        rng.shuffle(order)
        for side in order:
            os.killpg(busy.pid, signal.SIGCONT if side == "beside" else signal.SIGSTOP)
            time.sleep(0.1)  # the neighbour is running (or stopped) before we time
            (alone if side == "alone" else beside).append(
                benchmark_run(argv, TIMEOUT_S, log).median_ms)
    return alone, beside


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=24)
    ap.add_argument("--shape", type=int, nargs=3, default=[256, 256, 256])
    ap.add_argument("--neighbour-shape", type=int, nargs=3, default=[1024, 1024, 1024])
    ap.add_argument("--neighbour", choices=("gemm", "hog"), default="gemm")
    ap.add_argument("--slots", type=int, nargs=2, default=[0, 1],
                    help="the CPU of the measured slot and of the neighbour's")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    measurement = {"repetitions": 10, "min_time_s": 0.05, "min_warmup_time_s": 0.2}
    mine, theirs = args.slots
    os.sched_setaffinity(0, {mine})
    with tempfile.TemporaryDirectory() as tmp:
        argv = build(Path(tmp), {"case": args.shape, "neighbour": args.neighbour_shape},
                     measurement)
        busy = neighbour(args.neighbour, argv["neighbour"], theirs)
        try:
            load = os.getloadavg()[0]
            alone, beside = rounds(argv["case"], busy, args.rounds, str(Path(tmp) / "log"),
                                   random.Random(args.seed))
            load_after = os.getloadavg()[0]
        finally:
            os.killpg(busy.pid, signal.SIGKILL)
            busy.wait()
    result = compare(alone, beside)
    lo, hi = result.ci if result.ci else (float("nan"), float("nan"))
    print(f"GEMM {'x'.join(map(str, args.shape))} f32 on CPU {mine} (local-sync), beside "
          f"{args.neighbour} ({'x'.join(map(str, args.neighbour_shape))}) on CPU {theirs}; "
          f"{result.rounds} rounds; load average {load:.2f} -> {load_after:.2f}")
    print(f"alone  median {sorted(alone)[len(alone) // 2]:.4f} ms")
    print(f"beside median {sorted(beside)[len(beside) // 2]:.4f} ms")
    print(f"shift beside/alone x{result.ratio:.4f}, {result.level:.1%} interval "
          f"[{lo:.4f}, {hi:.4f}], p {result.p_value:.3g}, verdict {result.verdict}")
    disturbed = result.ci is not None and not lo <= 1 <= hi
    print("slots disturb each other: refused for this device class" if disturbed
          else "no shift beyond its interval")


if __name__ == "__main__":
    main()
