"""The GPU tier: the two H100 suites (tests/data/gpu/) run end to end by Snakemake on
this machine's CUDA GPU, one run per suite, and what a GPU run must show: every case
measured or unsupported/skipped with its reason, medians within 10 % of a standalone
measurement of the same module and inputs, per-kernel attribution of the CUDA cases,
and the memory snapshots the torch suite asks for (tests/gpu/checks.py has the rules).

Without an NVIDIA GPU (nvidia-smi -L), IREE's CUDA HAL (for the IREE suite) or a CUDA
build of torch (for the torch suite), each test is skipped, its reason naming what is
missing. `make gpu` runs the tier: `pytest -m gpu tests/gpu -rs`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import snakemake
from tests.gpu import checks
from workflow.records.report import read_report
from workflow.suite.load import load

# e2e too: each run starts Snakemake (tests/conftest.py fails a test that starts a
# process without such a marker), and `make check`'s fast tier leaves them out.
pytestmark = [pytest.mark.gpu, pytest.mark.e2e]


def run_suite(workdir: Path, suite_file: Path) -> tuple[Path, list[dict], object]:
    """The suite run once in `workdir`: the working directory, the report's cases (read
    back and checked against the schema), and the suite as benchflow planned it."""
    snakemake(workdir, "results/report.json", "--configfile", str(suite_file), "--keep-going")
    report = read_report(workdir / "results" / "report.json")
    return workdir, report["cases"], load([suite_file])


def run_or_skip(tmp_path_factory, suite_file: Path, runtime_missing: str | None):
    """run_suite, or the test skipped naming what this machine lacks for the suite: an
    NVIDIA GPU, and the runtime the suite needs (`runtime_missing`: why it is absent)."""
    reason = checks.missing_reason(suite_file, [checks.nvidia_gpu_missing(), runtime_missing])
    if reason:
        pytest.skip(reason)
    return run_suite(tmp_path_factory.mktemp(suite_file.stem), suite_file)


@pytest.fixture(scope="module")
def iree_run(tmp_path_factory):
    return run_or_skip(tmp_path_factory, checks.IREE_SUITE, checks.iree_cuda_missing())


@pytest.fixture(scope="module")
def torch_run(tmp_path_factory):
    return run_or_skip(tmp_path_factory, checks.TORCH_SUITE, checks.torch_cuda_missing())


def _lines(problems: list[str]) -> str:
    return "\n".join(problems)


@pytest.mark.parametrize("run", ["iree_run", "torch_run"])
def test_every_case_measured_or_says_why(run, request):
    _, cases, suite = request.getfixturevalue(run)
    problems = checks.missing_cases(cases, {c.id for c in suite.cases})
    problems += checks.status_problems(cases)
    assert not problems, _lines(problems)


def _standalone_ms(backend: str, workdir: Path, case: dict, suite) -> float:
    """The case measured alone, outside benchflow's protocol (checks.py)."""
    if backend == "iree":
        return checks.iree_standalone_ms(workdir, case, suite.sku(case["sku"]))
    return checks.torch_standalone_ms(suite, case)


KERNEL_PROBLEMS = {"iree": checks.iree_kernel_problems, "torch": checks.torch_kernel_problems}


@pytest.mark.parametrize("run, backend", [("iree_run", "iree"), ("torch_run", "torch")])
def test_medians_match_a_standalone_run(request, run, backend):
    workdir, cases, suite = request.getfixturevalue(run)
    measured = checks.ok_cases(cases, backend)
    assert measured, f"no {backend} case was measured"
    alone = {c["id"]: _standalone_ms(backend, workdir, c, suite) for c in measured}
    problems = checks.time_problems(measured, alone)
    assert not problems, _lines(problems)


@pytest.mark.parametrize("run, backend", [("iree_run", "iree"), ("torch_run", "torch")])
def test_cuda_cases_list_their_kernels(request, run, backend):
    """IREE CUDA cases name their dispatches' kernels; torch CUDA cases list CUDA kernels."""
    _, cases, _ = request.getfixturevalue(run)
    assert any(checks.on_cuda(c) for c in checks.ok_cases(cases, backend)), \
        f"no {backend} case was measured on CUDA"
    problems = KERNEL_PROBLEMS[backend](cases)
    assert not problems, _lines(problems)


def test_torch_memory_snapshots_where_asked(torch_run):
    workdir, cases, suite = torch_run
    asked = {w.id for w in suite.workloads.values() if w.memory_profiler}
    assert asked, f"{checks.TORCH_SUITE.name} asks for no memory snapshot"
    assert any(c["workload"] in asked for c in checks.ok_cases(cases, "torch")), \
        "no case of a workload asking for a memory snapshot was measured"
    problems = checks.snapshot_problems(cases, asked, workdir)
    assert not problems, _lines(problems)
