"""`iree.target_chip: auto` (issue 35, item 1): a cuda SKU compiled for this machine's GPU,
the newest sm_XY target the installed iree-compile accepts at or below the compute
capability nvidia-smi reports, chosen where the SKU's cases run and recorded in them.

No GPU here: nvidia-smi's answer is stood in for by gpu_chip.FAKE_GPUS_ENV (tests only), in
nvidia-smi's own `--query-gpu=name,compute_cap --format=csv,noheader` format; which
chips the compiler accepts is asked of the installed iree-compile (`tool` tests), never
assumed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import FAST_MEASUREMENT, write_suite
from tests.test_gpu_targets import has_gpu
from workflow.backends.iree import gpu_chip, tools
from workflow.errors import ConfigError
from workflow.jobs.iree import case_job
from workflow.jobs.iree_batch import batch_job
from workflow.paths import iree_batch_path
from workflow.planning import keys
from workflow.planning.plan import iree_batch_plan
from workflow.render import dashboard
from workflow.stats.enums import Status
from workflow.suite.load import load
from workflow.suite.schema import validate_suite

H100 = "NVIDIA H100 80GB HBM3, 9.0"
A100 = "NVIDIA A100-SXM4-80GB, 8.0"
W = [{"model": "linear", "shapes": [[4, 8, 8]]}]
AUTO = {"iree": {"target_backend": "cuda", "target_chip": "auto", "device": "cuda"},
        "measurement": dict(FAST_MEASUREMENT)}


@pytest.fixture(autouse=True)
def chip_cache(tmp_path_factory, monkeypatch) -> Path:
    """One chip cache for this file's tests (the compiler's answers do not change between
    them, and asking it every candidate again would cost seconds a test); never the
    user's cache."""
    cache = tmp_path_factory.getbasetemp() / "chip-auto-cache"
    monkeypatch.setenv(tools.CACHE_ENV, str(cache))
    return cache


def gpu(text: str) -> list[gpu_chip.Gpu]:
    return gpu_chip.parse_nvidia_smi(text)


def only(*accepted: str):
    """A compiler stand-in accepting exactly `accepted` (for the choice's own logic)."""
    def check(backend: str, chip: str) -> tools.ChipCheck:
        assert backend == "cuda"
        return tools.ChipCheck(chip in accepted, None if chip in accepted else
                               f"missing GPU target {chip}", "3.13.0")
    return check


# --- nvidia-smi's answer ---------------------------------------------------------------------

def test_nvidia_smi_lines_become_gpus():
    out = "NVIDIA H100 80GB HBM3, 9.0\nNVIDIA GeForce RTX 2080 Ti, 7.5\n\n"
    assert gpu_chip.parse_nvidia_smi(out) == [gpu_chip.Gpu("NVIDIA H100 80GB HBM3", (9, 0)),
                                           gpu_chip.Gpu("NVIDIA GeForce RTX 2080 Ti", (7, 5))]
    assert gpu_chip.parse_nvidia_smi("NVIDIA B200, 10.0")[0].capability_text == "10.0"
    with pytest.raises(ValueError, match="not a 'name, compute_cap' line of nvidia-smi: "
                                         "'NVIDIA H100 80GB HBM3, \\[N/A\\]'"):
        gpu_chip.parse_nvidia_smi("NVIDIA H100 80GB HBM3, [N/A]")


def test_the_stand_in_answers_as_nvidia_smi_would(monkeypatch):
    monkeypatch.setenv(gpu_chip.FAKE_GPUS_ENV, H100)
    assert gpu_chip.cuda_gpus() == ([gpu_chip.Gpu("NVIDIA H100 80GB HBM3", (9, 0))], None)
    monkeypatch.setenv(gpu_chip.FAKE_GPUS_ENV, "")
    assert gpu_chip.cuda_gpus() == (
        [], f"no NVIDIA GPU here: ${gpu_chip.FAKE_GPUS_ENV} lists no GPU")
    monkeypatch.setenv(gpu_chip.FAKE_GPUS_ENV, "No devices were found")
    gpus, why = gpu_chip.cuda_gpus()
    assert gpus == [] and why.startswith(f"no NVIDIA GPU here: ${gpu_chip.FAKE_GPUS_ENV} "
                                         "answered unreadably: not a 'name, compute_cap'")


def test_without_nvidia_smi_there_is_no_gpu(monkeypatch):
    monkeypatch.delenv(gpu_chip.FAKE_GPUS_ENV, raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert gpu_chip.cuda_gpus() == ([], "no NVIDIA GPU here: nvidia-smi is not on PATH")


# --- the choice ------------------------------------------------------------------------------

def test_the_newest_accepted_chip_at_or_below_the_capability_is_chosen():
    choice = gpu_chip.choose_auto_chip("cuda", gpu(H100), check=only("sm_80", "sm_86", "sm_75"))
    assert choice.chip == "sm_86"
    assert choice.reason == (
        "sm_86: the newest CUDA target of iree-compile 3.13.0 at or below compute "
        "capability 9.0 (NVIDIA H100 80GB HBM3, nvidia-smi); not sm_90 (missing GPU target "
        "sm_90); not sm_89 (missing GPU target sm_89); not sm_87 (missing GPU target sm_87)")
    assert choice.provenance() == {
        "requested": "auto", "chip": "sm_86", "gpu": "NVIDIA H100 80GB HBM3",
        "capability": "9.0", "compiler": "3.13.0", "reason": choice.reason}
    # A chip newer than the device is never asked about: its code would not run there.
    assert gpu_chip.choose_auto_chip("cuda", gpu(A100), check=only("sm_86", "sm_80")).chip \
        == "sm_80"


def test_several_gpus_get_the_chip_of_the_oldest():
    both = gpu(f"{H100}\nNVIDIA GeForce RTX 2080 Ti, 7.5")
    choice = gpu_chip.choose_auto_chip("cuda", both, check=only("sm_80", "sm_75"))
    assert (choice.chip, choice.gpu.name) == ("sm_75", "NVIDIA GeForce RTX 2080 Ti")
    assert "the lowest of this machine's 2 GPUs" in choice.reason


def test_no_gpu_or_one_older_than_every_accepted_chip_is_no_chip_with_the_reason():
    none = gpu_chip.choose_auto_chip("cuda", [], check=only("sm_80"))
    assert (none.chip, none.gpu, none.reason) == (None, None, "no NVIDIA GPU here")
    # Older than every candidate: nothing to ask the compiler.
    old = gpu_chip.choose_auto_chip("cuda", gpu("Tesla K80, 3.7"), check=only("sm_80"))
    assert (old.chip, old.gpu.name) == (None, "Tesla K80")
    assert old.reason == (f"iree-compile {tools.compiler_version()} accepts no CUDA target "
                          "at or below compute capability 3.7 (Tesla K80); tried none")
    # Candidates at or below the device that the compiler refuses: each named, with why.
    maxwell = gpu_chip.choose_auto_chip("cuda", gpu("Tesla M40, 5.2"), check=only("sm_80"))
    assert maxwell.chip is None and maxwell.reason == (
        "iree-compile 3.13.0 accepts no CUDA target at or below compute capability 5.2 "
        "(Tesla M40); tried sm_52 (missing GPU target sm_52), sm_50 (missing GPU target "
        "sm_50)")
    with pytest.raises(ValueError, match="for cuda, not rocm"):
        gpu_chip.choose_auto_chip("rocm", gpu(H100), check=only())


def test_a_sku_naming_its_chip_is_left_alone(monkeypatch):
    monkeypatch.setenv(gpu_chip.FAKE_GPUS_ENV, H100)
    sku = {"iree": {"target_backend": "cuda", "target_chip": "sm_80", "device": "cuda"}}
    assert gpu_chip.resolve_auto_chip(sku) == (sku, None)


@pytest.mark.tool
def test_the_installed_compiler_decides_which_chip(monkeypatch):
    """Which sm_XY iree-compile accepts is asked, then: capability 9.0 gets the newest of
    them at or below 9.0 (iree-compile 3.13 has no sm_90 nor sm_100: sm_89), 7.5 one at
    or below sm_75, and a device older than all of them none."""
    accepted = [c for c in gpu_chip.CUDA_CANDIDATES if tools.check_target_chip("cuda", c).accepted]
    assert "sm_80" in accepted  # the chip the project's GPU suites use

    def newest_at_or_below(cap):
        return max((c for c in accepted if gpu_chip.sm_capability(c) <= cap),
                   key=gpu_chip.sm_capability, default=None)

    monkeypatch.setenv(gpu_chip.FAKE_GPUS_ENV, H100)
    sku, choice = gpu_chip.resolve_auto_chip(AUTO)
    assert choice.chip == newest_at_or_below((9, 0)) is not None
    assert sku["iree"]["target_chip"] == choice.chip and AUTO["iree"]["target_chip"] == "auto"
    assert choice.compiler == tools.compiler_version()
    turing = gpu_chip.choose_auto_chip("cuda", gpu("NVIDIA T4, 7.5"))
    assert turing.chip == newest_at_or_below((7, 5))
    assert turing.chip is None or gpu_chip.sm_capability(turing.chip) <= (7, 5)
    oldest = min(accepted, key=gpu_chip.sm_capability)
    major, minor = gpu_chip.sm_capability(oldest)
    older = f"Old GPU, {major - 1 if minor == 0 else major}.{9 if minor == 0 else minor - 1}"
    monkeypatch.setenv(gpu_chip.FAKE_GPUS_ENV, older)
    sku, refused = gpu_chip.resolve_auto_chip(AUTO)
    assert refused.chip is None and sku["iree"]["target_chip"] == "auto"
    assert refused.reason.startswith(f"iree-compile {tools.compiler_version()} accepts no "
                                     "CUDA target at or below compute capability")


@pytest.mark.tool
def test_a_compiler_from_no_package_is_named_by_what_it_says(tmp_path, monkeypatch):
    """An iree-compile that no installed package brought (a source build on PATH, the
    unpacked wheel the H100 check ran) is named by its own --version, not "unknown" (the
    H100's auto choice read "the newest CUDA target of iree-compile unknown")."""
    real = tools.tool_path("iree-compile")
    monkeypatch.setattr(tools, "package_version", lambda name: None)
    monkeypatch.setattr(tools, "tool_path", lambda name: real)
    said = tools.compiler_version()
    version, at, commit = said.split()
    assert at == "@" and len(commit) == 12 and version[0].isdigit(), said
    other = tmp_path / "other-compile"
    other.write_text("#!/bin/sh\necho\necho 'Forge compiler 0.3 (built today)'\necho more\n")
    other.chmod(0o755)
    assert tools.tool_version(str(other)) == "Forge compiler 0.3 (built today)"
    assert tools.tool_version(str(tmp_path / "absent")) is None


# --- validation ------------------------------------------------------------------------------

def test_auto_loads_for_cuda_without_asking_the_compiler(monkeypatch):
    def no_probe(*args, **kwargs):
        raise AssertionError("auto is chosen where the cases run, not at load")

    monkeypatch.setattr(tools, "check_target_chip", no_probe)
    suite = validate_suite({"skus": {"gpu": AUTO}, "workloads": W}, "s.yaml")
    assert suite["skus"]["gpu"]["iree"]["target_chip"] == "auto"


@pytest.mark.parametrize("iree, expected", [
    ({"target_backend": "llvm-cpu", "target_chip": "auto"},
     "s.yaml: skus.cpu.iree.target_chip: target_backend 'llvm-cpu' takes target_cpu, not a "
     "chip; expected null, got 'auto' (this machine's CPU is target_cpu: host)"),
    ({"target_backend": "rocm", "target_chip": "auto", "device": "hip"},
     "s.yaml: skus.cpu.iree.target_chip: 'auto' is chosen from the device's compute "
     "capability, for target_backend cuda only; rocm chip names are not ordered, so name "
     "the chip, e.g. gfx942"),
])
def test_auto_is_refused_where_no_chip_can_be_chosen(iree, expected):
    with pytest.raises(ConfigError) as err:
        validate_suite({"skus": {"cpu": {"iree": iree}}, "workloads": W}, "s.yaml")
    assert err.value.problems == [expected]


def test_benchmark_files_skip_an_auto_sku_saying_why():
    from workflow.benchfile.select import sku_reason

    class File:
        data = {"device": "cuda"}

    sku = validate_suite({"skus": {"gpu": AUTO}, "workloads": W}, "s.yaml")["skus"]["gpu"]
    assert "target_chip is 'auto', which only the suite's IREE batches resolve" in \
        sku_reason(File(), "gpu", sku, "gpu")


# --- content keys ----------------------------------------------------------------------------

def test_the_key_covers_the_resolved_chip_and_the_gpu():
    suite = validate_suite({"skus": {"gpu": AUTO}, "workloads": W}, "s.yaml")
    case = {"spec": {"model": "linear", "config": "default", "dtype": "f32",
                     "shape": [4, 8, 8], "layers": None, "model_modules": []},
            "identity": {"id": "gpu/iree/linear-4x8x8-f32/baseline"}}
    sku = suite["skus"]["gpu"]

    def key(nvidia_smi: str, check) -> str:
        choice = gpu_chip.choose_auto_chip("cuda", gpu(nvidia_smi), check=check)
        resolved = {**sku, "iree": {**sku["iree"], "target_chip": choice.chip}}
        return keys.digest(keys.case_parts(case, resolved, {}, True, choice.key()))

    h100 = key(H100, only("sm_80"))
    assert key(H100, only("sm_80")) == h100                  # a rerun here reuses
    assert key(A100, only("sm_80")) != h100                  # same chip, another GPU
    assert key(H100, only("sm_80", "sm_90")) != h100         # a compiler that has sm_90
    # A SKU naming its chip keeps the key it had before `auto` existed.
    assert "target chip" not in keys.case_parts(case, sku, {}, True)


# --- recorded where the case runs ------------------------------------------------------------

def test_without_a_gpu_an_auto_case_is_unsupported_with_the_reason(tmp_path, monkeypatch):
    """case_job with a choice of no chip: no export, no compile, a case record saying why
    (not compile-only: no chip was chosen to compile for), with the choice's provenance."""
    monkeypatch.chdir(tmp_path)
    suite = load([write_suite(tmp_path / "s.yaml", {"skus": {"gpu": AUTO}, "workloads": W})])
    (key, ) = suite.iree_batches
    (case, ) = iree_batch_plan(suite, *key)
    choice = gpu_chip.choose_auto_chip("cuda", [], check=only("sm_80"))
    record = case_job(spec=case["spec"], identity=case["identity"], sku=suite.sku("gpu"),
                      tolerances={}, timeouts=suite.config["timeouts"],
                      gate=suite.config["goldens"], key="k", case="results/case.json",
                      log="logs/case.log", chip_choice=choice)
    assert (record["status"], record["stage"]) == (Status.UNSUPPORTED, None)
    assert record["error"] == "target_chip 'auto': no NVIDIA GPU here"
    assert record["not_measured"]["timing"] == {"status": "unsupported",
                                                "reason": record["error"]}
    assert record["provenance"]["target_chip"] == {
        "requested": "auto", "chip": None, "gpu": None, "capability": None,
        "compiler": tools.compiler_version() or "unknown", "reason": "no NVIDIA GPU here"}
    assert json.loads(Path("results/case.json").read_text())["status"] == "unsupported"
    assert not Path("results/export").exists()
    assert "target_chip auto: no NVIDIA GPU here" in Path("logs/case.log").read_text()


@pytest.mark.tool
@pytest.mark.skipif(has_gpu(), reason="this machine has a GPU: its cases would run")
def test_a_batch_compiles_for_the_chosen_chip_and_records_why(tmp_path, monkeypatch):
    """batch_job on a machine whose nvidia-smi lists an H100 (stand-in) but whose IREE
    runtime has no cuda device (this one): compiled for the chip chosen here, so
    compile-only, its record naming the chip, the GPU, its capability, the compiler and
    why; run again here it is reused, on an A100 it is measured again."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(gpu_chip.FAKE_GPUS_ENV, H100)
    suite = load([write_suite(tmp_path / "s.yaml", {"skus": {"gpu": AUTO}, "workloads": W})])
    (key, ) = suite.iree_batches

    def run(content: dict) -> dict:
        """The batch job as Snakemake starts it: with a `content` param that differs
        from its last run's (the same context twice means a forced rerun)."""
        batch = iree_batch_path(key)
        Path(batch).parent.mkdir(parents=True, exist_ok=True)
        out = batch_job(cases=iree_batch_plan(suite, *key), sku=suite.sku("gpu"),
                        tolerances=keys.dtype_tolerances(suite.config["accuracy"]),
                        timeouts=suite.config["timeouts"], gate=suite.config["goldens"],
                        batch=batch, log=str(tmp_path / "batch.log"), content=content)
        (case, ) = out["cases"]
        return case, json.loads(Path(case["case"]).read_text())

    expected = gpu_chip.choose_auto_chip("cuda", gpu(H100))
    listed, record = run({"run": 1})
    assert record["status"] == Status.COMPILE_ONLY, record["error"]
    chip = record["provenance"]["target_chip"]
    assert chip == {"requested": "auto", "chip": expected.chip, "gpu": "NVIDIA H100 80GB HBM3",
                    "capability": "9.0", "compiler": tools.compiler_version(),
                    "reason": expected.reason}
    assert f"--iree-cuda-target={expected.chip}" in record["compile"]["flags"]
    assert record["provenance"]["gpu_name"] == "NVIDIA H100 80GB HBM3"
    again, _ = run({"run": 2})
    assert again["reused"] and again["key"] == listed["key"]
    monkeypatch.setenv(gpu_chip.FAKE_GPUS_ENV, A100)
    elsewhere, record = run({"run": 3})
    assert not elsewhere["reused"] and elsewhere["key"] != listed["key"]
    assert record["provenance"]["target_chip"]["gpu"] == "NVIDIA A100-SXM4-80GB"
    assert "target chip changed" in (tmp_path / "batch.log").read_text()


def test_a_dashboard_row_of_an_iree_gpu_case_names_its_gpu():
    """An IREE case that ran on a GPU whose name its record holds (the auto chip's GPU):
    its dashboard runner and arch name that GPU, not the CPU nor the SKU."""
    from tests.render_data import PEAK, iree_report

    report = iree_report()
    case = next(c for c in report["cases"] if c["status"] == "ok")
    case["provenance"] = {**case["provenance"], "iree_device": "cuda",
                          "gpu_name": "NVIDIA H100 80GB HBM3",
                          "synthetic": "SYNTHETIC IREE CUDA case for renderer tests"}
    rows = [r for r in dashboard.render(report, PEAK)
            if r["benchmark"]["extra_info"]["case_id"] == case["id"]]
    assert rows
    for row in rows:
        assert (row["runners"][0]["name"], row["runners"][0]["type"]) == (
            "cuda", "NVIDIA H100 80GB HBM3")
        assert row["benchmark"]["extra_info"]["arch"] == "NVIDIA H100 80GB HBM3"
    del case["provenance"]["gpu_name"]
    rows = [r for r in dashboard.render(report, PEAK)
            if r["benchmark"]["extra_info"]["case_id"] == case["id"]]
    # No GPU name recorded: unknown, never the CPU model of the report's host.
    assert {r["benchmark"]["extra_info"]["arch"] for r in rows} == {"unknown"}


@pytest.mark.e2e
@pytest.mark.skipif(has_gpu(), reason="this machine has a GPU: its cases would run")
def test_snakemake_records_auto_cases_in_the_report(tmp_path):
    """The whole workflow with an auto SKU: without a GPU the report holds the case as
    unsupported with the reason; with one (nvidia-smi's stand-in: an H100, and no cuda
    device in IREE's runtime here) the batch reruns by itself and compiles for the chip
    chosen there, and again on an A100: the report's case says which, for which GPU, and
    why."""
    import os

    from tests.conftest import snakemake

    suite = str(write_suite(tmp_path / "suite.yaml", {"skus": {"gpu": AUTO}, "workloads": W}))
    report = tmp_path / "results" / "report.json"
    snakemake(tmp_path, "results/report.json", "--configfile", suite,
              env={**os.environ, gpu_chip.FAKE_GPUS_ENV: ""})
    (case,) = json.loads(report.read_text())["cases"]
    assert (case["status"], case["compile"]) == ("unsupported", None)
    assert case["error"] == (f"target_chip 'auto': no NVIDIA GPU here: "
                             f"${gpu_chip.FAKE_GPUS_ENV} lists no GPU")
    assert case["provenance"]["target_chip"]["chip"] is None
    # The GPUs listed where the run is planned are in the batch's content param (issue
    # 47): another machine's answer reruns it, no --forcerun.
    snakemake(tmp_path, "results/report.json", "--configfile", suite,
              env={**os.environ, gpu_chip.FAKE_GPUS_ENV: H100})
    (case,) = json.loads(report.read_text())["cases"]
    chip = gpu_chip.choose_auto_chip("cuda", gpu(H100)).chip
    assert case["status"] == "compile-only", case["error"]
    assert case["provenance"]["target_chip"]["chip"] == chip
    assert case["provenance"]["target_chip"]["gpu"] == "NVIDIA H100 80GB HBM3"
    assert f"--iree-cuda-target={chip}" in case["compile"]["flags"]
    # Then an A100, as a real nvidia-smi on PATH (a script printing its answer) tells it,
    # warning line included: rebuilt for sm_80, which the record names.
    bin_dir = tmp_path / "a100-bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(
        "#!/bin/sh\necho 'WARNING: infoROM is corrupted at gpu 0000:00:04.0'\n"
        f"echo '{A100}'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != gpu_chip.FAKE_GPUS_ENV}
    proc = snakemake(tmp_path, "results/report.json", "--configfile", suite,
                     env={**env, "PATH": f"{bin_dir}:{env['PATH']}"})
    assert "Nothing to be done" not in proc.stdout + proc.stderr
    (case,) = json.loads(report.read_text())["cases"]
    assert case["status"] == "compile-only", case["error"]
    assert case["provenance"]["target_chip"]["chip"] == "sm_80"
    assert case["provenance"]["target_chip"]["gpu"] == "NVIDIA A100-SXM4-80GB"
    assert "--iree-cuda-target=sm_80" in case["compile"]["flags"]
