"""Package bisection on real releases (issue 38): iree-base-compiler releases from the
package index, each installed once into a cached environment
(workflow/backends/packages.py), and `benchflow bisect --package` over them naming the
release at which a case's time changed, or saying that none did.

These need the network (the index) and about 80 MB of wheels per release, 30 s each to
install here; the bisection itself a few minutes. One cache serves the whole module, so
each release is installed once. Three releases, 3.11.0 to 3.13.0: each is timed with its
own runtime (packages.COMPANIONS), as a module compiled by 3.11.0 does not load in
3.13.0's runtime (the HAL's dispatch import changed).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import FAST_MEASUREMENT, write_suite
from workflow.backends.packages import environment, releases
from workflow.errors import ConfigError

GOOD, MIDDLE, BAD = "3.11.0", "3.12.0", "3.13.0"
PACKAGE = "iree-base-compiler"
CASE = "sync/iree/linear-64x256x256-f32/baseline"
pytestmark = [pytest.mark.tool, pytest.mark.slow]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    # `benchflow bisect --cache C` keeps its environments in C/packages.
    return tmp_path_factory.mktemp("bisect")


def _run(argv, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, **kw)


def test_the_index_lists_the_releases_between_two():
    assert releases(PACKAGE, "3.10.0", BAD) == ["3.10.0", "3.11.0", "3.12.0", "3.13.0"]
    with pytest.raises(ConfigError, match="3.12.1: not a release on the package index; "
                                          "nearest: 3.12.0 and 3.13.0"):
        releases(PACKAGE, "3.10.0", "3.12.1")


def test_a_release_is_installed_once_and_is_that_release(cache):
    start = time.monotonic()
    env = environment(PACKAGE, GOOD, cache / "packages")
    installed_s = time.monotonic() - start
    version = _run([env.tools["iree-compile"], "--version"], timeout=60)
    assert f"IREE compiler version {GOOD}" in version.stdout
    # The interpreter is the project's environment with this one release swapped in.
    probe = _run([env.python, "-c", "import importlib.metadata as m, workflow, torch; "
                  f"print(m.version({PACKAGE!r}))"], timeout=120)
    assert probe.stdout.strip() == GOOD, probe.stderr
    marker = env.prefix / ".benchflow-env.json"
    stamp = marker.stat().st_mtime_ns
    start = time.monotonic()
    assert environment(PACKAGE, GOOD, cache / "packages") == env
    assert time.monotonic() - start < 1 and marker.stat().st_mtime_ns == stamp
    print(f"installed {PACKAGE}=={GOOD} in {installed_s:.0f} s")


def test_a_release_without_a_wheel_is_a_one_line_error(tmp_path):
    with pytest.raises(ConfigError) as err:
        environment(PACKAGE, "0.0.1", tmp_path)
    message = str(err.value)
    assert message.startswith(f"{PACKAGE}==0.0.1: pip install failed: ")
    assert "0.0.1" in message.split("failed: ", 1)[1] and "\n" not in message


def _suite(path: Path) -> Path:
    # One single-threaded SKU and a module of some size, so that a round is stable
    # enough on a shared machine; a 25 % margin, so that the ends' rounds decide (a
    # change or none) within the budget instead of ending inconclusive.
    return write_suite(path, {
        "suite_name": "bisect-packages",
        "skus": {"sync": {"iree": {"target_cpu": "host", "device": "local-sync"},
                          "measurement": dict(FAST_MEASUREMENT)}},
        "workloads": [{"model": "linear", "shapes": [[64, 256, 256]]}],
        "ab": {"margin": 0.25, "target_rel_width": 0.25, "budget_s": 60},
    })


def test_bisect_over_releases_names_the_release_or_none(tmp_path, cache):
    suite = _suite(tmp_path / "suite.yaml")
    start = time.monotonic()
    done = _run([sys.executable, "-m", "workflow.cli.main", "bisect", CASE,
                 "--package", PACKAGE, "--good", GOOD, "--bad", BAD,
                 "--configfile", suite, "--cache", cache, "--format", "json"],
                timeout=1500, cwd=tmp_path)
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["kind"] == "release" and result["revisions"] == [GOOD, MIDDLE, BAD]
    if done.returncode == 1:
        order = [GOOD, MIDDLE, BAD]
        assert result["first_bad"] in (MIDDLE, BAD)
        assert result["last_good"] == order[order.index(result["first_bad"]) - 1]
    else:
        assert result["first_bad"] is None
    [ends] = [s for s in result["steps"] if s["kind"] == "ends"]
    assert (ends["revision"], ends["against"]) == (BAD, GOOD) and ends["verdict"] != "failed"
    # Each end was compiled by its own release; their dispatch counts say whether the
    # compiler split or fused the module differently.
    # Builds are kept by content key (its tools' builds among it), each naming its compiler.
    # A release's iree-compile names its build ("3.11.0rc20260316 @ e4a3b0405d7d").
    made = [json.loads(f.read_text()) for f in (cache / "builds").glob("*/compile/compile.json")]
    counts = {}
    for version in (GOOD, BAD):
        (build, ) = [b for b in made if b["compiler_version"].startswith(version)]
        counts[version] = build["dispatch_count"]
    assert all(isinstance(n, int) and n > 0 for n in counts.values())
    print(f"{result['summary']} (dispatches {counts}; {time.monotonic() - start:.0f} s)")
