"""Shared fixtures: the repository root, tiny suites, and a snakemake runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"

# A run whose plan is estimated above an hour asks first (planning/plan_time.py); the
# estimate scales with the matmul peak measured at that moment, which a loaded test
# machine puts low, so a test's small suite must never wait on that question. The tests
# of the question itself (tests/test_plan_time.py) take this variable out of their env.
os.environ.setdefault("BENCHFLOW_CONFIRMED", "1")

# One export cache for the whole test session (jobs/export_cache.py): the e2e tests run
# the same few workloads in dozens of suite directories, and each would otherwise make
# each export again (101 exports of 34 distinct ones in one CI run, ~4 s each). Made by
# the session's first process, before pytest-xdist starts its workers, which inherit
# it; removed when that process ends. Tests of exporting itself (its timeouts, its
# failures, the cache's own) set or remove the variable themselves.
_OWN_EXPORT_CACHE = None
if "BENCHFLOW_EXPORT_CACHE" not in os.environ and "PYTEST_XDIST_WORKER" not in os.environ:
    import tempfile

    _OWN_EXPORT_CACHE = tempfile.mkdtemp(prefix="benchflow-test-exports-")
    os.environ["BENCHFLOW_EXPORT_CACHE"] = _OWN_EXPORT_CACHE


def pytest_unconfigure(config):
    import shutil

    if _OWN_EXPORT_CACHE and "PYTEST_XDIST_WORKER" not in os.environ:
        shutil.rmtree(_OWN_EXPORT_CACHE, ignore_errors=True)
    if "commands" in _WARM:
        _WARM["commands"].close()
        shutil.rmtree(_WARM["scratch"], ignore_errors=True)

# Small enough for seconds per case, large enough to exercise every protocol step (a
# fixed count: tests of the adaptive plan set max_invocations themselves). Never
# disturbed: the test workers load each other's cores, and a test of another feature
# must not retake invocations or show a flag that depends on that; disturbance has its
# own tests (test_measure_protocol.py, test_disturbance_hog.py).
FAST_MEASUREMENT = {"invocations": 3, "max_invocations": 3, "repetitions": 3,
                    "min_warmup_time_s": 0.05, "min_time_s": 0.01, "disturbed_share": 1.0}


def tiny_suite(**overrides) -> dict:
    suite = {
        "suite_name": "tiny",
        "skus": {
            "host": {"iree": {"target_cpu": "host"}, "measurement": dict(FAST_MEASUREMENT)},
            "generic": {"iree": {"target_cpu": "generic", "device": "local-sync"},
                        "measurement": dict(FAST_MEASUREMENT)},
        },
        "workloads": [
            {"model": "linear", "shapes": [[16, 32, 32]]},
            {"model": "ln_linear_relu", "shapes": [[16, 32, 64]]},
        ],
    }
    suite.update(overrides)
    return suite


def write_suite(path: Path, suite: dict) -> Path:
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    return path


def fast_bench_files(dest: Path, *, own_repetitions: bool = False) -> Path:
    """A copy of the shipped benchmarks/ at `dest` whose files warm up for
    FAST_MEASUREMENT's time and, unless `own_repetitions`, run its repetitions: a
    file's own (10 repetitions after 0.5 s) override the SKU's, and cost a second or two
    per invocation. For tests that run the files without judging their times against
    the files' goldens."""
    import json
    import shutil

    shutil.copytree(REPO / "benchmarks", dest)
    owned = ("--benchmark_min_warmup_time=",
             *(() if own_repetitions else ("--benchmark_repetitions=",)))
    for path in dest.rglob("*.json"):
        data = json.loads(path.read_text())
        if not own_repetitions:
            data["benchmark_repetitions"] = FAST_MEASUREMENT["repetitions"]
        data["benchmark_min_warmup_time"] = FAST_MEASUREMENT["min_warmup_time_s"]
        if "benchmark_flags" in data:
            data["benchmark_flags"] = [f for f in data["benchmark_flags"]
                                       if not f.startswith(owned)]
        path.write_text(json.dumps(data, indent=4))
    return dest


def init_repo(path: Path, branch: str = "main") -> Path:
    """A new git repository at `path` (made), its committer set for the tests' commits."""
    path.mkdir(parents=True, exist_ok=True)
    for args in (["init", "-q", "-b", branch], ["config", "user.email", "t@example.com"],
                 ["config", "user.name", "t"]):
        subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True)
    return path


# The snakemake runs of a test process are forks of one interpreter that imported
# Snakemake, its plugins and the planning code once (tests/shared_tools.WarmCommands):
# each run is still a process of its own, with its own environment, directory and
# exit, but its start costs ~1 s of CPU instead of ~3 (a CI run makes ~200 of them on
# 2 cores). A run given an `env` of its own starts a fresh interpreter: such an env
# can change what gets imported (PYTHONPATH, a package's version), which a fork of
# modules imported before would not see.
_WARM: dict = {}


def _warm_commands():
    if "commands" not in _WARM:
        import tempfile

        from tests.shared_tools import WarmCommands

        _WARM["scratch"] = Path(tempfile.mkdtemp(prefix="benchflow-warm-"))
        _WARM["commands"] = WarmCommands(_WARM["scratch"], programs=("snakemake",))
    return _WARM["commands"]


def snakemake(workdir: Path, *args: str, env: dict | None = None, check: bool = True):
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
           "--directory", str(workdir), "--cores", "2", *args]
    if env is None:
        proc = _warm_commands().run(
            ["snakemake", *cmd[3:]], Path.cwd(), dict(os.environ), timeout=900,
            script=str(Path(sys.executable).parent / "snakemake"))
    else:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def repo() -> Path:
    return REPO


# Test tiers (README "Tests"): a test that starts another program carries the marker
# of what it starts, so that `make check` (none of them) stays within seconds and never
# depends on a tool being installed. The audit hook makes the markers true rather than
# a convention: a process started by an unmarked test fails that test, naming what it ran.
PROCESS_MARKERS = ("e2e", "tool", "browser", "slurm")
_RUNNING: dict = {"item": None, "started": []}


def _audit(event: str, args) -> None:
    item = _RUNNING["item"]
    if item is None or event not in ("subprocess.Popen", "os.system", "os.posix_spawn",
                                      "os.exec"):
        return
    if any(item.get_closest_marker(m) for m in PROCESS_MARKERS):
        return
    if event == "subprocess.Popen" and isinstance(args[1], list | tuple) and args[1] \
            and args[1][0] in ("git", "uname"):
        return  # provenance's probes (the commit, platform.processor()): milliseconds
    # Recorded, not raised: raising inside a library's thread (playwright's asyncio
    # driver) breaks pytest itself; the test fails at teardown instead.
    program = args[1] if event == "subprocess.Popen" else args[0]
    _RUNNING["started"].append(f"{event}: {program!r:.200}")


sys.addaudithook(_audit)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _RUNNING["item"], _RUNNING["started"] = item, []
    try:
        return (yield)
    finally:
        _RUNNING["item"] = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "teardown" and _RUNNING["started"] and report.passed:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} started processes but carries none of the "
                           f"markers {PROCESS_MARKERS}: mark it; it started "
                           + "; ".join(_RUNNING["started"]))
    return report


# The kind of a test file, by the heaviest marker one of its tests carries: a file that
# runs Snakemake costs seconds to minutes, one that starts a tool seconds, the rest
# milliseconds. Within a kind, the seconds a run measured (tests/file_costs.py) decide.
_FILE_COST = (("e2e", 0), ("slurm", 0), ("quiet", 0), ("browser", 1), ("tool", 1))


def _file_cost(items) -> int:
    names = {m.name for item in items for m in item.iter_markers()}
    return min((rank for marker, rank in _FILE_COST if marker in names), default=2)


def pytest_collection_modifyitems(config, items):
    """The costly files first (a stable sort: each file's tests keep their order). With
    `-n 2 --dist loadfile` a worker takes the next file when it is free, so a costly file
    left for the end runs alone while the other worker idles: cheap files last fill in
    (longest-processing-time-first scheduling). The Makefile passes
    --no-loadscope-reorder: pytest-xdist otherwise reorders the files by their number of
    tests, putting the many-test unit files first and the few-test e2e files last."""
    from tests.file_costs import estimate, read_table

    files: dict[str, list] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    kind = {name: _file_cost(group) for name, group in files.items()}
    table = read_table()
    seconds = {name: estimate(name, kind[name], table, kind) for name in files}
    order = sorted(files, key=lambda name: (-seconds[name], kind[name]))
    items[:] = [item for name in order for item in files[name]]
