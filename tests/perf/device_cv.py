"""Benchmark (not a test): how noisy IREE's two CPU devices are on this machine, the
figures behind the README's gating advice.

Exports and compiles one GEMM for the host CPU, then runs --invocations fresh
iree-benchmark-module invocations on each device, alternating local-task (--threads
workers) and local-sync (one thread) so that both see the same load, and prints per
device the median, the CV of the invocation medians, and the spread (max / min), with
the load average before and after.

    python tests/perf/device_cv.py [--invocations 30] [--shape 256 256 256] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

import yaml

from workflow.backends.iree import tools as iree
from workflow.jobs.iree import benchmark_run, compile_module, export, sku_tool
from workflow.planning.plan import load_suite
from workflow.records.storage import read_json
from workflow.stats.summary import cv

TIMEOUT_S = 300


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--invocations", type=int, default=30)
    ap.add_argument("--shape", type=int, nargs=3, default=[256, 256, 256])
    ap.add_argument("--threads", type=int, default=2, help="local-task workers")
    ap.add_argument("--repetitions", type=int, default=10)
    ap.add_argument("--min-time", type=float, default=0.05, help="s per repetition")
    ap.add_argument("--warmup", type=float, default=0.2, help="s of warm-up per invocation")
    args = ap.parse_args()

    measurement = {"repetitions": args.repetitions, "min_time_s": args.min_time,
                   "min_warmup_time_s": args.warmup}
    suite = {"skus": {
        "task": {"iree": {"target_cpu": "host", "device": "local-task",
                          "task_topology_max_group_count": args.threads},
                 "measurement": measurement},
        "sync": {"iree": {"target_cpu": "host", "device": "local-sync"},
                 "measurement": measurement}},
        "workloads": [{"model": "linear", "shapes": [args.shape]}]}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "suite.yaml").write_text(yaml.safe_dump(suite))
        s = load_suite([str(tmp / "suite.yaml")], {})
        (wid, workload), = s.workloads.items()
        log = str(tmp / "log")
        paths = {k: str(tmp / name) for k, name in (
            ("mlir", "module.mlirbc"), ("inputs", "inputs.npz"),
            ("reference", "reference.npz"), ("meta", "export.json"))}
        done = export(spec=workload.export_spec(), timeout=TIMEOUT_S, log=log, **paths)
        assert done.ok, done.error
        dtypes = [i["dtype"] for i in read_json(paths["meta"])["inputs"]]
        args_files = iree.write_input_files(paths["inputs"], dtypes, tmp)
        argv = {}
        for name in ("task", "sync"):
            sku = s.sku(name)
            vmfb = str(tmp / f"{name}.vmfb")
            done = compile_module(mlir=paths["mlir"], export_meta=paths["meta"], sku=sku,
                                  timeout=TIMEOUT_S, vmfb=vmfb, meta=str(tmp / f"{name}.json"),
                                  log=log)
            assert done.ok, done.error
            argv[name] = iree.benchmark_argv(
                sku_tool(sku, "benchmark_tool"), vmfb, "main", args_files, sku,
                repetitions=args.repetitions, warmup_s=args.warmup,
                min_time=f"{args.min_time:g}s")
        load_before = os.getloadavg()[0]
        medians: dict[str, list[float]] = {"task": [], "sync": []}
        for _ in range(args.invocations):
            for name in ("task", "sync"):
                medians[name].append(benchmark_run(argv[name], TIMEOUT_S, log).median_ms)
        load_after = os.getloadavg()[0]

    print(f"GEMM {'x'.join(map(str, args.shape))} f32 ({wid}), host codegen, "
          f"{args.invocations} invocations each, alternating; load average "
          f"{load_before:.2f} -> {load_after:.2f}")
    print(f"{'device':<28}  {'median ms':>9}  {'CV':>6}  {'max/min':>7}")
    for name, label in (("task", f"local-task ({args.threads} workers)"),
                        ("sync", "local-sync (1 thread)")):
        xs = medians[name]
        print(f"{label:<28}  {statistics.median(xs):9.4f}  {cv(xs):6.1%}  "
              f"{max(xs) / min(xs):7.3f}")


if __name__ == "__main__":
    main()
