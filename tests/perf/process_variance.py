"""Benchmark (not a test): how much of a torch case's timing variance lives between
fresh processes, and how much within one, on this machine (threads=1, CPU).

Question: benchflow's unit is the invocation, a fresh process (docs/DESIGN.md
"Measurement protocol"; the figures: docs/evidence.md). A candidate worker builds,
compiles and warms a case once in a parent process and makes each invocation a forked
child (os.fork: warm-up, one timed block, exit); the alternative where fork cannot be
used (threads>1, CUDA) is timed blocks inside one process. Do such invocations still
see the variance that fresh processes see, and how many fresh parents does a case need?

Design (nested sampling). Cases are built by benchflow's own code: a small suite of
nn.Linear f32 shapes [M,K,N] loaded by workflow.suite.load, case dicts from
planning.plan.torch_batch_plan, modules from Prepared, timing by timed_block
(blocked_autorange; both from backends/torch/prepared.py). --fresh-buffers: each fork
and block first draws its inputs and plain weights at new addresses, as benchflow's
invocations do (prepared.fresh_buffers). Backends: eager, and torch.compile
(mode="default", fullgraph=True); int8 weight-only (torchao) eager on the middle shape.
For each case, --parents fresh parent processes (seed fixed, torch threads 1), run one
after another, round-robin over the cases. Each parent imports torch, builds, compiles,
warms up (>= 10 calls and >= 0.2 s) and times one block of --block-s: that block is the
parent's FRESH invocation, what benchflow's `time` workers did before issue 34. Then,
alternately, --forks FORK invocations (a child forked from the warm parent: the same
warm-up, one timed block, its median sent back through a pipe, os._exit) and --blocks
BLOCK invocations (one more timed block in the parent, no warm-up, as the A/B `serve`
worker does). An invocation's value is its block's median; statistics are on its log.

Statistics, per case: one-way random-effects ANOVA on the forks grouped by parent
(and the same on the blocks): between-parent variance sigma_b^2, within-parent
sigma_w^2, ICC = sigma_b^2 / (sigma_b^2 + sigma_w^2) with its 90 % F-interval, and the
F-test p-value for sigma_b^2 > 0. Spreads as % of the level (100 * SD of log; about the
CV): of the fresh invocations, of forks of one parent (sigma_w), of blocks of one
process; the level of forks and blocks against fresh (median of medians, %), and the
correlation of a parent's fresh median with its forks' mean (does a fork inherit its
parent's level?). Cost of one invocation, in wall seconds: a fresh process (spawn to
the end of its block), a fork (fork to the child's exit), a block.

Criterion for the number of parents P. N invocations made as P parents x F = N/P forks
each are read by benchflow as N independent invocations (the order-statistic interval
of the median). Their mean log has variance sigma_b^2/P + sigma_w^2/N, against the
(sigma_b^2 + sigma_w^2)/N the interval assumes: the ratio is Kish's design effect
1 + (F - 1) * ICC. Require it <= 1.21, i.e. the interval is at most 10 % too narrow:
F <= 1 + 0.21 / ICC, so P = ceil(N / floor(1 + 0.21 / ICC)). Printed for N = 6, 8, 12
at the ICC's point estimate and at its upper 90 % bound (the one to plan with). The
criterion assumes forks vary as fresh processes do overall; the level and spread rows
say whether they do. Also printed: the cost-optimal forks per parent for a given wall
time, F* = sqrt(c_parent / c_fork * sigma_w^2 / sigma_b^2) (the classic two-stage
sampling optimum; c_parent = a fresh process's cost less one fork's).

The machine may be shared: the load average is printed at the start and the end, and
the CPU/wall ratio of the timed blocks (below 1 with threads=1 means the block waited
for a CPU). An invocation whose CPU/wall is below --min-cpu-wall (0.9) is retaken, up to
--retakes (3) times (a fresh invocation as its process's next block); the statistics
are printed for all invocations, then for the undisturbed ones only.

    python tests/perf/process_variance.py [--parents 6] [--forks 6] [--blocks 6]
        [--shapes 128x256x256 512x512x512 1024x1024x1024] [--quick] [--json RAW]
    python tests/perf/process_variance.py --reanalyze RAW [--min-cpu-wall 0.95]
    python tests/perf/process_variance.py --interleaved --fresh-buffers [--no-int8]

--interleaved: the parents of a case alive at once, one fork of each per round in a
random order (--forks rounds), the ANOVA of the forks by parent. A process effect
survives the interleaving; a time window's, which a parent's consecutive forks share in
the nested design, does not. Measured on the 2-core machine, quiet, --fresh-buffers:
nested fork ICCs 0.00 / 0.52 / 0.50 / 0.01 / 0.27 / 0.25 / 0.48 (128, 512, 1024 eager;
128, 512, 1024 inductor; 512 int8wo); interleaved 0.00 / 0.00 / 0.23 / 0.14 / 0.00 /
0.00 / 0.00: the correlation was mostly the time window's (1024 eager kept 0.23, p 0.035).

--quick: 3 parents x 3 forks x 3 blocks on the first shape; a smoke run (under a
minute). The defaults took 7 minutes on the shared 2-core machine (retakes included).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import select
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
       # One compile thread: no compile worker pool or threads in a parent that forks.
       "TORCHINDUCTOR_COMPILE_THREADS": "1"}
SEED = 0


# ---------------------------------------------------------------- subprocess roles

def cases_role(shapes: list[list[int]], int8: bool) -> list[dict]:
    """The case dicts and their backends, through benchflow's suite machinery."""
    import yaml

    from workflow.planning.plan import torch_batch_plan
    from workflow.suite.load import load

    recipes = ["baseline", "int8wo"] if int8 else ["baseline"]
    cfg = {"suite_name": "process-variance", "skus": {"host": {"torch": {"threads": 1}}},
           "recipes": recipes,
           "workloads": [{"model": "linear", "shapes": shapes,
                          "backends": ["torch-eager", "torch-inductor"]}]}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "suite.yaml"
        path.write_text(yaml.safe_dump(cfg))
        suite = load([path])
    out = []
    for backend, recipe in [("torch-eager", "baseline"), ("torch-inductor", "baseline"),
                            ("torch-eager", "int8wo")][:3 if int8 else 2]:
        spec = dict(suite.config["torch_backends"][backend])
        if spec["kind"] == "inductor":
            spec["fullgraph"] = True
        for batch in sorted(b for s, b in suite.torch_batches if s == "host"):
            for case in torch_batch_plan(suite, "host", batch):
                if (case["backend"], case["recipe"]) != (backend, recipe):
                    continue
                shape = case["workload"]["shape"]
                if recipe == "int8wo" and shape != shapes[len(shapes) // 2]:
                    continue
                label = f"{'x'.join(map(str, shape))} {backend[6:]} {recipe}"
                out.append({"label": label, "case": case, "backend": spec})
    return out


def torch_api():
    """(Prepared, probe_device, timed_block), benchflow's own."""
    from workflow.backends.torch.prepared import Prepared, probe_device, timed_block

    return Prepared, probe_device, timed_block


def _fresh(prepared, a: argparse.Namespace) -> None:
    """With --fresh-buffers: the invocation's inputs and plain weights at new addresses,
    as benchflow's invocations draw them (prepared.fresh_buffers)."""
    if a.fresh_buffers:
        from workflow.backends.torch.prepared import fresh_buffers

        fresh_buffers(prepared)


def _warm(prepared, calls: int, seconds: float) -> None:
    n, t0 = 0, time.perf_counter()
    while n < calls or time.perf_counter() - t0 < seconds:
        prepared.call()
        n += 1


def _block(prepared, seconds: float) -> dict:
    w0, c0 = time.perf_counter(), time.process_time()
    got = torch_api()[2](prepared, 1, seconds)
    wall = time.perf_counter() - w0
    return {"ms": got["median_ms"], "wall_s": wall, "cpu_wall": (time.process_time() - c0) / wall}


def _fork(prepared, a: argparse.Namespace) -> dict:
    """One fork invocation: warm-up and one timed block in a child; its result or error."""
    t0 = time.perf_counter()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            os.close(r)
            _fresh(prepared, a)
            _warm(prepared, a.warmup_calls, a.warmup_s)
            os.write(w, json.dumps(_block(prepared, a.block_s)).encode())
        except BaseException:  # noqa: B036 - the child must never return into the parent's code
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    ready, _, _ = select.select([r], [], [], 120)
    data = b""
    if ready:
        while chunk := os.read(r, 65536):
            data += chunk
    else:
        os.kill(pid, 9)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if not data:
        return {"error": f"fork child ended with status {status} (hung or failed)"}
    return {**json.loads(data), "cost_s": time.perf_counter() - t0}


def parent_role(item: dict, a: argparse.Namespace) -> dict:
    """A fresh process: build, compile, warm up, time its fresh block, then forks and
    blocks, alternately."""
    t_start = time.monotonic()
    import torch

    Prepared, probe_device, _ = torch_api()
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    t_import = time.monotonic()
    device, why = probe_device("cpu", item["case"]["recipe"])
    if why:
        raise SystemExit(why)
    prepared = Prepared(item["case"], item["backend"], device)
    prepared.call()  # the compiling call, on inductor
    t_built = time.monotonic()
    _warm(prepared, a.warmup_calls, a.warmup_s)

    def retaken(take, first=None) -> dict:
        """An invocation, retaken up to --retakes times while its block waited for a CPU
        (CPU/wall below --min-cpu-wall), as the protocol retakes a disturbed one."""
        got, n = first or take(), 0
        while n < a.retakes and "ms" in got and got["cpu_wall"] < a.min_cpu_wall:
            got, n = take(), n + 1
        return {**got, "retakes": n}

    fresh = _block(prepared, a.block_s)
    t_fresh = time.monotonic()
    fresh = retaken(lambda: _block(prepared, a.block_s), fresh)
    forks, blocks = [], []
    for i in range(max(a.forks, a.blocks)):
        if i < a.forks:
            forks.append(retaken(lambda: _fork(prepared, a)))
        if i < a.blocks:
            blocks.append(retaken(lambda: (_fresh(prepared, a), _block(prepared, a.block_s))[1]))
    return {"fresh": fresh, "forks": forks, "blocks": blocks, "t_start": t_start,
            "import_s": t_import - t_start, "build_s": t_built - t_import, "t_fresh": t_fresh}


def run_role(role: str, payload, a: argparse.Namespace):
    """Runs this script in a subprocess in `role`; returns its JSON result."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(payload, f)
    args = [sys.executable, __file__, "--role", role, "--payload", f.name,
            "--forks", str(a.forks), "--blocks", str(a.blocks), "--block-s", str(a.block_s),
            "--warmup-s", str(a.warmup_s), "--warmup-calls", str(a.warmup_calls),
            "--retakes", str(a.retakes), "--min-cpu-wall", str(a.min_cpu_wall),
            *(["--fresh-buffers"] if a.fresh_buffers else [])]
    for attempt in range(3):
        proc = subprocess.run(args, capture_output=True, text=True, timeout=900,
                              env={**os.environ, **ENV}, cwd=REPO)
        if proc.returncode == 0:
            os.unlink(f.name)
            return json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"  {role} failed (attempt {attempt + 1}): {proc.stderr.strip()[-600:]}",
              file=sys.stderr)
        time.sleep(60)
    raise SystemExit(f"{role} failed three times")


# ---------------------------------------------------------------- statistics

def anova(groups: list[list[float]]) -> dict:
    """One-way random-effects ANOVA (unbalanced allowed) of log values: variance
    components, ICC with a 90 % F-interval (balanced formula with n0), F-test p."""
    import numpy as np
    from scipy import stats

    groups = [np.log(g) for g in groups if len(g) >= 2]
    a, big_n = len(groups), sum(len(g) for g in groups)
    if a < 2:
        return dict.fromkeys(("sb", "sw", "icc", "icc_lo", "icc_hi", "p", "n0"), math.nan)
    grand = np.concatenate(groups).mean()
    ssb = sum(len(g) * (g.mean() - grand) ** 2 for g in groups)
    ssw = sum(((g - g.mean()) ** 2).sum() for g in groups)
    dfb, dfw = a - 1, big_n - a
    msb, msw = ssb / dfb, ssw / dfw
    n0 = (big_n - sum(len(g) ** 2 for g in groups) / big_n) / dfb
    sb, sw = max(0.0, (msb - msw) / n0), msw
    f = msb / msw if msw > 0 else math.inf
    lo_f, hi_f = f / stats.f.ppf(0.95, dfb, dfw), f * stats.f.ppf(0.95, dfw, dfb)
    return {"sb": sb, "sw": sw, "icc": sb / (sb + sw) if sb + sw > 0 else 0.0,
            "icc_lo": max(0.0, (lo_f - 1) / (lo_f + n0 - 1)),
            "icc_hi": min(1.0, (hi_f - 1) / (hi_f + n0 - 1)),
            "p": float(stats.f.sf(f, dfb, dfw)), "n0": n0}


def parents_needed(n: int, icc: float) -> int | None:
    """Smallest P with design effect 1 + (N/P - 1) * ICC <= 1.21 (see the docstring)."""
    if math.isnan(icc):
        return None
    per = n if icc <= 0 else max(1, min(n, math.floor(1 + 0.21 / icc)))
    return math.ceil(n / per)


def pct(var: float) -> float:
    return 100 * math.sqrt(var)


def add_costs(label: str, runs: list[dict], costs: dict) -> None:
    kind = label.split()[1]
    costs.setdefault(f"fresh {kind}", []).extend(run["t_fresh"] - run["t_spawn"] for run in runs)
    costs.setdefault(f"build {kind}", []).extend(run["build_s"] for run in runs)
    costs["fork"] += [f["cost_s"] for run in runs for f in run["forks"] if "ms" in f]
    costs["block"] += [x["wall_s"] for run in runs for x in run["blocks"]]
    costs["import torch"] += [run["import_s"] for run in runs]


def summarize(label: str, runs: list[dict], min_cpu: float = 0.0) -> dict:
    """A case's statistics over the invocations whose CPU/wall is at least min_cpu (0:
    all; 0.75: those the protocol's 25 % outside-share rule would keep, roughly)."""
    import numpy as np

    def ok(x):
        return "ms" in x and x["cpu_wall"] >= min_cpu

    fresh = [r["fresh"]["ms"] if ok(r["fresh"]) else None for r in runs]
    fork_groups = [[f["ms"] for f in r["forks"] if ok(f)] for r in runs]
    block_groups = [[b["ms"] for b in r["blocks"] if ok(b)] for r in runs]
    every = [x for r in runs for x in [r["fresh"], *r["forks"], *r["blocks"]] if "ms" in x]
    f_ok = np.array([x for x in fresh if x])
    forks = np.concatenate(fork_groups)
    blocks = np.concatenate(block_groups)
    pairs = [(math.log(x), np.mean(np.log(g))) for x, g in zip(fresh, fork_groups, strict=True)
             if x and g]
    r = (float(np.corrcoef(*zip(*pairs, strict=True))[0, 1])
         if len(pairs) > 2 and np.std([q for _, q in pairs]) > 0 else math.nan)
    cpu = [x["cpu_wall"] for x in every]
    return {"label": label, "fresh_ms": float(np.median(f_ok)),
            "cv_fresh": pct(np.var(np.log(f_ok), ddof=1)) if len(f_ok) > 1 else math.nan,
            "cv_fork_total": pct(np.var(np.log(forks), ddof=1)),
            "fork": anova(fork_groups), "block": anova(block_groups), "r": r,
            "errors": [f["error"] for r in runs for f in r["forks"] if "error" in f],
            "lvl_fork": 100 * (np.median(forks) / np.median(f_ok) - 1),
            "lvl_block": 100 * (np.median(blocks) / np.median(f_ok) - 1),
            "cpu_min": min(cpu), "cpu_med": float(np.median(cpu)),
            "kept": f"{len(f_ok) + len(forks) + len(blocks)}/{len(every)}"}


def report(rows: list[dict], costs: dict, a: argparse.Namespace) -> None:
    import numpy as np

    print(f"Spread = 100 * SD(log median) (~CV %). sb/sw = between-parent / within-parent "
          f"SD, %. p = F-test of sigma_b^2 > 0. {a.parents} parents x {a.forks} forks, "
          f"{a.blocks} blocks each.")
    print(f"{'case':<33}{'fresh ms':>9}{'fresh':>7}{'forks':>7}{'sb':>6}{'sw':>6}"
          f"{'ICC [90% CI]':>18}{'p':>7} |{'sb':>6}{'sw':>6}{'ICC [90% CI]':>18}{'p':>7}"
          f"{'fork-fresh':>11}{'blk-fresh':>10}{'r':>6}{'cpu/wall':>10}{'kept':>8}")
    print(f"{'':<33}{'median':>9}{'spread':>7}{'spread':>7}{' forks by parent ':-^37}"
          f"{'':>2}{' blocks by process ':-^37}{'level %':>11}{'level %':>10}")
    for s in rows:
        k, b = s["fork"], s["block"]
        print(f"{s['label']:<33}{s['fresh_ms']:>9.4f}{s['cv_fresh']:>7.2f}"
              f"{s['cv_fork_total']:>7.2f}{pct(k['sb']):>6.2f}{pct(k['sw']):>6.2f}"
              f"{k['icc']:>7.2f} [{k['icc_lo']:.2f},{k['icc_hi']:.2f}]{k['p']:>7.3f} |"
              f"{pct(b['sb']):>6.2f}{pct(b['sw']):>6.2f}"
              f"{b['icc']:>7.2f} [{b['icc_lo']:.2f},{b['icc_hi']:.2f}]{b['p']:>7.3f}"
              f"{s['lvl_fork']:>+11.2f}{s['lvl_block']:>+10.2f}{s['r']:>6.2f}"
              f"{s['cpu_med']:>5.2f}/{s['cpu_min']:.2f}{s['kept']:>8}")
        for e in s["errors"]:
            print(f"    fork error: {e}")
    print("(r: correlation over parents of a parent's fresh median with its forks' mean log;"
          " cpu/wall: median/min over all the case's timed blocks; kept: invocations used)")

    ns = (6, 8, 12)
    print("\nParents P needed for N invocations (design effect 1 + (N/P - 1) * ICC <= 1.21:"
          " the interval of N read as independent at most 10 % too narrow), at the point"
          " ICC / the upper 90 % ICC; F*: cost-optimal forks (blocks) per parent,"
          " sqrt((fresh cost - fork cost) / fork cost * sigma_w^2 / sigma_b^2):")
    print(f"{'case':<33}" + "".join(f"{'forks N=' + str(n):>13}" for n in ns) + f"{'F*':>6}"
          + "".join(f"{'blocks N=' + str(n):>13}" for n in ns) + f"{'B*':>6}")
    worst = {w: dict.fromkeys(ns, 0) for w in ("fork", "block")}
    for s in rows:
        cells = []
        for w in ("fork", "block"):
            for n in ns:
                p, hi = parents_needed(n, s[w]["icc"]), parents_needed(n, s[w]["icc_hi"])
                worst[w][n] = max(worst[w][n], hi or n)
                cells.append(f"{p or '-':>8} / {hi or '-':<2}")
            c_in = np.median(costs[w])
            c_p = np.median(costs[f"fresh {s['label'].split()[1]}"]) - c_in
            sb, sw = s[w]["sb"], s[w]["sw"]
            cells.append(f"{math.sqrt(c_p * sw / (c_in * sb)):>6.1f}" if sb > 0 else
                         f"{'inf' if sb == 0 else '-':>6}")
        print(f"{s['label']:<33}" + "".join(cells))
    for w in ("fork", "block"):
        print(f"Recommendation ({w}s, planning with the upper ICC bound, worst case over "
              "the cases): " + ", ".join(f"N={n}: P={worst[w][n]}" for n in ns))


def print_costs(costs: dict) -> None:
    import numpy as np

    print("\nCost of one invocation, wall seconds (median [min, max] over all cases):")
    for name, v in costs.items():
        print(f"  {name:<15}{np.median(v):>8.3f}  [{min(v):.3f}, {max(v):.3f}]")
    print("  (fresh = spawn to the end of its first block: interpreter, import, build, "
          "compile, warm-up, block;\n   build = Prepared + first (compiling) call; fork = "
          "fork to the child's exit: warm-up + block; block = the timed block alone)")


# ---------------------------------------------------------------- driver

def measure(a: argparse.Namespace, t0: float) -> dict[str, list[dict]]:
    shapes = [[int(x) for x in s.split("x")] for s in a.shapes]
    print(f"threads=1, seed {SEED}, warm-up >= {a.warmup_calls} calls and >= {a.warmup_s} s, "
          f"blocks of {a.block_s} s; env {ENV}")
    items = run_role("cases", [shapes, not a.no_int8], a)
    runs: dict[str, list[dict]] = {it["label"]: [] for it in items}
    for p in range(a.parents):  # round-robin: each case's parents spread over the run
        for it in items:
            t_spawn = time.monotonic()
            run = run_role("parent", it, a)
            runs[it["label"]].append({**run, "t_spawn": t_spawn})
        print(f"  round {p + 1}/{a.parents} done at {time.monotonic() - t0:.0f} s, "
              f"load {os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(runs, indent=1))
    return runs


def server_role(item: dict, a: argparse.Namespace) -> None:
    """A warm parent kept alive (--interleaved): each line on stdin asks for one fork
    invocation, whose median it prints."""
    import torch

    Prepared, probe_device, _ = torch_api()
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    prepared = Prepared(item["case"], item["backend"],
                        probe_device("cpu", item["case"]["recipe"])[0])
    prepared.call()
    _warm(prepared, a.warmup_calls, a.warmup_s)
    for _ in sys.stdin:
        print(json.dumps(_fork(prepared, a)), flush=True)


def interleaved(a: argparse.Namespace) -> None:
    """--interleaved: --parents warm parents of a case alive at once, one fork of each in
    a random order per round, --forks rounds. A process effect survives this; a time
    window's (a drift of the machine shared by one parent's consecutive forks) does not."""
    import random

    shapes = [[int(x) for x in s.split("x")] for s in a.shapes]
    rng = random.Random(SEED)
    args = ["--warmup-s", str(a.warmup_s), "--warmup-calls", str(a.warmup_calls),
            "--block-s", str(a.block_s), *(["--fresh-buffers"] if a.fresh_buffers else [])]
    print(f"interleaved: {a.parents} parents alive at once x {a.forks} rounds, one fork of "
          "each parent per round in a random order")
    print(f"{'case':34}{'sb %':>7}{'sw %':>7}{'ICC [90% CI]':>20}{'p':>8}")
    for item in run_role("cases", [shapes, not a.no_int8], a):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(item, f)
        servers = [subprocess.Popen(
            [sys.executable, __file__, "--role", "server", "--payload", f.name, *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
            env={**os.environ, **ENV}) for _ in range(a.parents)]
        medians: list[list[float]] = [[] for _ in servers]
        for _ in range(a.forks):
            for i in rng.sample(range(len(servers)), len(servers)):
                servers[i].stdin.write("fork\n")
                servers[i].stdin.flush()
                got = json.loads(servers[i].stdout.readline())
                if "ms" in got:
                    medians[i].append(got["ms"])
        for server in servers:
            server.stdin.close()
            server.wait()
        os.unlink(f.name)
        k = anova(medians)
        print(f"{item['label']:34}{pct(k['sb']):>7.2f}{pct(k['sw']):>7.2f}"
              f"{k['icc']:>8.2f} [{k['icc_lo']:.2f},{k['icc_hi']:.2f}]{k['p']:>8.3f}",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--parents", type=int, default=6)
    ap.add_argument("--forks", type=int, default=6)
    ap.add_argument("--blocks", type=int, default=6)
    ap.add_argument("--shapes", nargs="+", default=["128x256x256", "512x512x512",
                                                    "1024x1024x1024"])
    ap.add_argument("--no-int8", action="store_true", help="skip the torchao int8wo case")
    ap.add_argument("--block-s", type=float, default=0.2)
    ap.add_argument("--warmup-s", type=float, default=0.2)
    ap.add_argument("--warmup-calls", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="3 parents x 3 forks, one shape")
    ap.add_argument("--fresh-buffers", action="store_true",
                    help="each fork and block first draws its inputs and plain weights at new "
                         "addresses, as benchflow's invocations do (prepared.fresh_buffers)")
    ap.add_argument("--retakes", type=int, default=3,
                    help="retakes of an invocation whose block waited for a CPU")
    ap.add_argument("--min-cpu-wall", type=float, default=0.9,
                    help="a block with CPU/wall below this (threads=1) counts as disturbed")
    ap.add_argument("--json", help="also write every invocation's raw figures here")
    ap.add_argument("--reanalyze", metavar="JSON", help="only print the statistics of the "
                    "raw figures a --json run wrote (with this run's --min-cpu-wall)")
    ap.add_argument("--interleaved", action="store_true",
                    help="parents alive at once, their forks interleaved in time (a process "
                         "effect against a time window's)")
    ap.add_argument("--role", choices=["cases", "parent", "server"], help=argparse.SUPPRESS)
    ap.add_argument("--payload", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.role:
        payload = json.loads(Path(a.payload).read_text())
        if a.role == "server":
            server_role(payload, a)
            return
        fn = {"cases": lambda: cases_role(*payload), "parent": lambda: parent_role(payload, a)}
        print(json.dumps(fn[a.role]()))
        return
    if a.quick:
        a.parents, a.forks, a.blocks, a.shapes = 3, 3, 3, a.shapes[:1]
    if a.interleaved:
        print(f"load average at start: {os.getloadavg()}")
        interleaved(a)
        print(f"load average at end: {os.getloadavg()}")
        return
    t0 = time.monotonic()
    print(f"load average at start: {os.getloadavg()} ({os.cpu_count()} CPUs; the machine is "
          "shared with other users, whose load falls on these numbers)")
    if a.reanalyze:
        runs = json.loads(Path(a.reanalyze).read_text())
        some = next(iter(runs.values()))
        a.parents, a.forks, a.blocks = len(some), len(some[0]["forks"]), len(some[0]["blocks"])
        print(f"statistics of {a.reanalyze}, measured earlier")
    else:
        runs = measure(a, t0)
    costs: dict[str, list[float]] = {k: [] for k in ("fork", "block", "import torch")}
    for label, r in runs.items():
        add_costs(label, r, costs)
    print_costs(costs)
    warnings.simplefilter("ignore", RuntimeWarning)  # statistics of too few: nan
    print("\n== All invocations ==")
    report([summarize(label, r) for label, r in runs.items()], costs, a)
    retakes = [x.get("retakes", 0) for r in runs.values() for run in r
               for x in [run["fresh"], *run["forks"], *run["blocks"]]]
    print(f"(retaken: {sum(retakes)} takes over {len(retakes)} invocations, each up to "
          f"{a.retakes} times while its block's CPU/wall < {a.min_cpu_wall}; the last take "
          "is kept either way)")
    print(f"\n== Undisturbed invocations only (timed block's CPU/wall >= {a.min_cpu_wall}, "
          f"i.e. under {100 * (1 - a.min_cpu_wall):.0f} % of it waiting for a CPU) ==")
    report([summarize(label, r, a.min_cpu_wall) for label, r in runs.items()], costs, a)
    print(f"\nload average at end: {os.getloadavg()}; total {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
