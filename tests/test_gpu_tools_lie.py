"""GPU tools that lie, and automatic values that must be in the keys (issue 47, families 3
and 4), with stand-in tools first on PATH (shell scripts printing what the real tools
were seen or documented to print):

- nvidia-smi's `--query-gpu=... --format=csv,noheader` answer is read line by line: a
  warning line ("WARNING: infoROM is corrupted at gpu ...") is skipped, a data row is
  the queried fields exactly, and a runaway line is quoted capped, saying it was cut;
- an `nsys stats` kernel table cut short (inside its last name, a row missing fields, a
  quote left open) is refused as truncated: the case's `kernels` says why, and holds no
  kernel named after half a name;
- what `target_chip: auto`, `target_cpu: host` and `threads: 0` become on this machine is
  in the batch's content param (Snakemake reruns it on another machine) and in the case
  keys (the batch re-measures its cases there).

CASES is the table of the malformed tool outputs (tests/malformed_table.py renders it):
(id, what the tool printed, the stand-in's output, the expected fragment)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import FAST_MEASUREMENT, write_suite
from tests.test_gpu_kernels import DATA, MATMUL_KERNEL, STATISTICS, TABLE, M, _cuda_argv
from tests.test_gpu_targets import has_gpu
from workflow.backends.iree import gpu_chip, host_cpu
from workflow.comparisons.ab import compare_pair
from workflow.jobs.kernels import profiled_kernels
from workflow.planning import keys, plan
from workflow.records.stage import ERROR_CHARS, StageResult
from workflow.suite.load import load

A100 = "NVIDIA A100-SXM4-80GB, 8.0"
H100 = "NVIDIA H100 80GB HBM3, 9.0"
INFOROM = "WARNING: infoROM is corrupted at gpu 0000:00:04.0"
_CUT = TABLE.read_text()[:TABLE.read_text().index(MATMUL_KERNEL) + len("main_async_dis")]

CASES = [
    ("nvidia-smi-warning-only", "nvidia-smi prints only its infoROM warning (no data row)",
     f"{INFOROM}\n", "lists no GPU (it warned: WARNING: infoROM is corrupted"),
    ("nvidia-smi-runaway-line", "nvidia-smi prints one 1 MiB line where a GPU row belongs",
     "x" * (1 << 20) + "\n", "… [cut: 1048578 characters in all]"),
    ("nvidia-smi-extra-field", "a row with a field the query did not ask for",
     f"{A100}, 81920 MiB\n", "not a 'name, compute_cap' line of nvidia-smi"),
    ("nsys-table-cut-in-a-name", "an nsys stats kernel table cut inside its last kernel's "
     "name (no closing quote, no newline)", _CUT, "truncated: the table does not end with "
     "a newline"),
    ("nsys-table-quote-open", "the same table with a newline after the cut: a quoted name "
     "left open", _CUT + "\n", "a quoted field left open"),
    ("nsys-table-row-short", "a table whose last row lost its last fields",
     TABLE.read_text().rsplit("\n", 2)[0].rsplit(",", 3)[0] + "\n",
     "6 fields; expected 9, as the header has (a row cut short?)"),
    ("compile-statistics-cut", "iree-compile's CSV statistics cut inside the last field "
     "of its last row (which still has every column)", STATISTICS.read_text()[:-3],
     "truncated: does not end with a newline"),
]
SMI = [c for c in CASES if c[0].startswith("nvidia-smi")]
NSYS = [c for c in CASES if c[0].startswith("nsys")]


def fake_nvidia_smi(bin_dir: Path, stdout: str, monkeypatch) -> None:
    """An nvidia-smi first on PATH that answers the query gpu_chip asks with `stdout`
    (and anything else with an error, as a wrong query would get); the tests' stand-in
    variable is unset, so that gpu_chip runs it."""
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "nvidia-smi.out").write_text(stdout)
    script = bin_dir / "nvidia-smi"
    script.write_text('#!/bin/sh\n[ "$1 $2" = "--query-gpu=name,compute_cap '
                      '--format=csv,noheader" ] || { echo "bad query: $*" >&2; exit 2; }\n'
                      f'cat "{bin_dir}/nvidia-smi.out"\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.delenv(gpu_chip.FAKE_GPUS_ENV, raising=False)


# --- nvidia-smi ------------------------------------------------------------------------------

@pytest.mark.tool
def test_a_warning_line_does_not_hide_a_working_gpu(tmp_path, monkeypatch):
    fake_nvidia_smi(tmp_path / "bin", f"{INFOROM}\n{A100}\n", monkeypatch)
    gpus, why = gpu_chip.cuda_gpus()
    assert why is None
    assert gpus == [gpu_chip.Gpu("NVIDIA A100-SXM4-80GB", (8, 0))]


@pytest.mark.tool
@pytest.mark.parametrize("cid, desc, stdout, expected", SMI, ids=[c[0] for c in SMI])
def test_what_nvidia_smi_says_wrongly_is_the_reason_capped(tmp_path, monkeypatch, cid, desc,
                                                           stdout, expected):
    fake_nvidia_smi(tmp_path / "bin", stdout, monkeypatch)
    gpus, why = gpu_chip.cuda_gpus()
    assert gpus == [] and why.startswith("no NVIDIA GPU here: nvidia-smi ")
    assert expected in why
    assert len(why) < 400  # the reason enters every case record of the SKU


def test_a_stage_error_past_the_cap_is_cut_saying_so():
    """Whatever stage quotes a tool, its record's `error` is capped where every stage
    result is made (records/stage.StageResult)."""
    error = StageResult("compile", error="e" * (5 << 20)).error
    assert len(error) < ERROR_CHARS + 100
    assert error.endswith(f"… [cut: {5 << 20} characters in all]")


def test_runaway_texts_of_other_tools_are_capped_where_they_enter_a_record():
    """iree-benchmark-module's context strings (kept in the record's provenance) and a
    kernel's name in an nsys table (a row of `kernels`): capped, saying so."""
    import json

    from workflow.backends.iree import gpu_kernels, tools

    huge = "h" * (1 << 20)
    run = tools.parse_benchmark_json(json.dumps({
        "context": {"host_name": huge, "num_cpus": 2},
        "benchmarks": [{"run_type": "iteration", "real_time": 1.0, "time_unit": "ms"}]}))
    assert run.context["num_cpus"] == 2
    assert run.context["host_name"].endswith(f"… [cut: {1 << 20} characters in all]")
    assert len(run.context["host_name"]) < 400
    # Within csv's field limit (128 KiB); past it the table is refused as not CSV.
    table = TABLE.read_text().replace(MATMUL_KERNEL, huge[:100_000])
    (row, ) = [r for r in gpu_kernels.nsys_kernel_rows(table) if r["name"].startswith("hhh")]
    assert len(row["name"]) < gpu_kernels.NAME_CHARS + 100 and "[cut: " in row["name"]


# --- nsys stats ------------------------------------------------------------------------------

@pytest.mark.tool
@pytest.mark.parametrize("cid, desc, table, expected", NSYS, ids=[c[0] for c in NSYS])
def test_a_truncated_kernel_table_is_a_profile_refused_with_the_reason(
        tmp_path, monkeypatch, cid, desc, table, expected):
    """Through the stand-in nsys (tests/data/gpu_kernels/nsys) as a CUDA case is profiled:
    no rows, none named after half a kernel name, and the reason in `kernels.error`."""
    bin_dir, seen = tmp_path / "bin", tmp_path / "seen"
    bin_dir.mkdir()
    seen.mkdir()
    (bin_dir / "nsys").write_text((DATA / "nsys").read_text())
    (bin_dir / "nsys").chmod(0o755)
    (tmp_path / "table.csv").write_text(table)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_NSYS_DIR", str(seen))
    monkeypatch.setenv("FAKE_NSYS_TABLE", str(tmp_path / "table.csv"))
    section = profiled_kernels(_cuda_argv(tmp_path), M, 60, str(tmp_path / "log"))
    assert section["rows"] == [] and section["source"] == "nsys"
    assert "unreadable nsys stats output" in section["error"] and expected in section["error"]


def test_a_whole_kernel_table_without_its_last_newline_is_read():
    """Only a row cut short is a truncation: the last row whole (every field, its quoted
    name closed) but no newline after it is the whole table."""
    from workflow.backends.iree.gpu_kernels import nsys_kernel_rows

    whole = TABLE.read_text()
    assert nsys_kernel_rows(whole.rstrip("\n")) == nsys_kernel_rows(whole)
    with pytest.raises(ValueError, match=NSYS[0][-1]):
        nsys_kernel_rows(whole.rstrip("\n")[:-1])  # its closing quote cut


def test_cut_compile_statistics_are_refused_not_read_short():
    """The compile stage's own CSV (profile.compile_statistics) by the same rule: a file
    not ending in a newline, or a quote left open, is refused."""
    from workflow.backends.iree.profile import compile_statistics

    (row, ) = [c for c in CASES if c[0] == "compile-statistics-cut"]
    with pytest.raises(ValueError, match=row[-1]):
        compile_statistics(row[2])
    cut = STATISTICS.read_text()
    cut = cut[:cut.rindex("async_dispatch") + 5] + "\n"
    with pytest.raises(ValueError, match="unexpected end of data"):
        compile_statistics(cut)
    assert compile_statistics(STATISTICS.read_text())["dispatch_count"] == 3


# --- automatic values in the keys ---------------------------------------------------------

AUTO = {"iree": {"target_backend": "cuda", "target_chip": "auto", "device": "cuda"},
        "measurement": dict(FAST_MEASUREMENT)}
HOST = {"iree": {"target_backend": "llvm-cpu", "target_cpu": "host", "device": "local-task",
                 "task_topology_max_group_count": 2},
        "measurement": dict(FAST_MEASUREMENT)}
W = [{"model": "linear", "shapes": [[4, 8, 8]]}]


def _content_and_key(suite, sku: str) -> tuple[dict, str]:
    """The batch's content param (what Snakemake compares) and its case's key (what the
    batch job compares), as this machine sees them now."""
    ((sku_name, batch), ) = [k for k in suite.iree_batches if k[0] == sku]
    (case, ) = plan.iree_batch_plan(suite, sku_name, batch)
    content = plan.iree_batch_content(suite, sku_name, batch)
    return content, keys.digest(keys.case_parts(case, suite.sku(sku), {}, True))


@pytest.mark.tool
def test_another_gpu_reruns_an_auto_batch(tmp_path, monkeypatch):
    """One results directory, nvidia-smi an A100 and then an H100: the batch's content
    param differs (Snakemake reruns it, where it answered "Nothing to be done") and says
    which GPUs; the same GPU again plans the same content (a rerun there reuses)."""
    monkeypatch.chdir(tmp_path)
    suite = load([write_suite(tmp_path / "s.yaml", {"skus": {"gpu": AUTO}, "workloads": W})])
    # Two machines: two PATHs (nvidia-smi is asked once per process and PATH).
    fake_nvidia_smi(tmp_path / "a100", f"{A100}\n", monkeypatch)
    on_a100, a100_key = _content_and_key(suite, "gpu")
    assert on_a100["automatic values"] == {"cuda gpus": [["NVIDIA A100-SXM4-80GB", "8.0"]]}
    assert _content_and_key(suite, "gpu") == (on_a100, a100_key)
    fake_nvidia_smi(tmp_path / "h100", f"{H100}\n", monkeypatch)
    on_h100, h100_key = _content_and_key(suite, "gpu")
    assert on_h100 != on_a100 and h100_key != a100_key
    assert on_h100["automatic values"]["cuda gpus"] == [["NVIDIA H100 80GB HBM3", "9.0"]]


@pytest.mark.tool
def test_a_gpu_that_appears_reruns_a_compile_only_batch(tmp_path, monkeypatch):
    """A cuda SKU naming its chip, compiled only where no GPU was: on a machine with one
    its batch reruns and its case key differs, so it is timed there without --forcerun;
    a torch batch of cuda workloads likewise."""
    monkeypatch.chdir(tmp_path)
    named = {**AUTO, "iree": {**AUTO["iree"], "target_chip": "sm_80"}}
    suite = load([write_suite(tmp_path / "s.yaml", {"skus": {"gpu": named}, "workloads": W})])
    fake_nvidia_smi(tmp_path / "none", "", monkeypatch)
    nowhere = _content_and_key(suite, "gpu"), keys.torch_automatic({}, {"cuda"})
    assert nowhere[0][0]["automatic values"] == {"cuda gpus": []}
    fake_nvidia_smi(tmp_path / "a100", f"{A100}\n", monkeypatch)
    here = _content_and_key(suite, "gpu"), keys.torch_automatic({}, {"cuda"})
    assert here[0][0] != nowhere[0][0] and here[0][1] != nowhere[0][1]
    assert here[1] == {"cuda gpus": [["NVIDIA A100-SXM4-80GB", "8.0"]]} != nowhere[1]
    assert keys.torch_automatic({}, {"cpu"}) == {}


def test_another_cpu_reruns_a_host_batch(tmp_path, monkeypatch):
    """`target_cpu: host` on two CPU models (/proc/cpuinfo as each shows itself): the
    content param and the case key differ; a SKU naming its CPU is keyed as before."""
    monkeypatch.chdir(tmp_path)
    named = {**HOST, "iree": {**HOST["iree"], "target_cpu": "znver2"}}
    suite = load([write_suite(tmp_path / "s.yaml", {"skus": {"cpu": HOST, "zen": named},
                                                    "workloads": W})])
    seen = {}
    for cpu, model, flags in (("rocket", "167", "fpu avx2 avx512f"),
                              ("zen2", "49", "fpu avx2")):
        info = tmp_path / f"{cpu}.cpuinfo"
        info.write_text(f"processor\t: 0\nvendor_id\t: V\ncpu family\t: 6\nmodel\t\t: {model}"
                        f"\nmodel name\t: {cpu}\ncpu MHz\t\t: 2{model}\nflags\t\t: {flags}\n\n"
                        "processor\t: 1\n")
        monkeypatch.setattr(host_cpu, "CPUINFO", info)
        seen[cpu] = _content_and_key(suite, "cpu"), _content_and_key(suite, "zen")
        assert seen[cpu][0][0]["automatic values"]["target_cpu host"]["cpu model"][
            "model name"] == cpu
        assert "automatic values" not in seen[cpu][1][0]
    assert seen["rocket"][0][0] != seen["zen2"][0][0]
    assert seen["rocket"][0][1] != seen["zen2"][0][1]
    assert seen["rocket"][1] == seen["zen2"][1]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two CPUs to grant one of")
def test_threads_0_is_keyed_by_the_cpus_granted():
    """A torch SKU's `threads: 0` is the CPUs this process is granted (affinity): granted
    fewer, its batch's content differs; a SKU naming its threads does not."""
    sku = {"torch": {"threads": 0}}
    before = os.sched_getaffinity(0)
    wide = keys.torch_automatic(sku)
    try:
        os.sched_setaffinity(0, {min(before)})
        narrow = keys.torch_automatic(sku)
    finally:
        os.sched_setaffinity(0, before)
    assert narrow == {"torch threads 0": 1} and wide != narrow
    assert keys.torch_automatic({"torch": {"threads": 2}}) == {}


# --- a CUDA A/B pair on a machine without CUDA -------------------------------------------------

@pytest.mark.tool
@pytest.mark.skipif(has_gpu(), reason="this machine has a GPU: the pair would run")
def test_an_ab_pair_without_its_device_is_refused_before_anything_is_built(tmp_path,
                                                                           monkeypatch):
    """`benchflow ab`'s pair of two cuda SKUs here (no CUDA): a failed row at run naming the
    SKU and why, and no export nor module made for it (it used to export, compile the
    base and only then fail)."""
    monkeypatch.chdir(tmp_path)
    cuda = {"iree": {"target_backend": "cuda", "target_chip": "sm_80", "device": "cuda"},
            "measurement": dict(FAST_MEASUREMENT)}
    o1 = {**cuda, "iree": {**cuda["iree"], "compile_flags": ["--iree-opt-level=O1"]}}
    suite = load([write_suite(tmp_path / "s.yaml", {
        "skus": {"a": cuda, "b": o1}, "workloads": W, "ab_pairs": [{"base": "a", "new": "b"}]})])
    (workload, ) = suite.workloads
    row = compare_pair(base="a", new="b", workload=workload, skus=suite.config["skus"],
                       spec=suite.workloads[workload].export_spec(), ab=suite.config["ab"],
                       timeouts=suite.config["timeouts"], out=str(tmp_path / "row.json"),
                       log=str(tmp_path / "ab.log"))
    assert (row["verdict"], row["failed_stage"]) == ("failed", "run")
    assert row["error"].startswith("a: no cuda device here: ")
    assert "nothing was built" in row["error"]
    assert not (tmp_path / "results").exists()


def test_cpu_flags_are_keyed_whole_not_after_a_cut():
    """Two CPUs whose flags differ only late in a long line (avx512f after 700
    characters) are two keys: the flags are digested before any cap."""
    from workflow.backends.iree.host_cpu import cpu_model

    base = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel\t\t: 85\nflags\t\t: " + \
        " ".join(f"f{i:03d}" for i in range(160))
    assert cpu_model(base + " avx2fm\n") != cpu_model(base + " avx512\n")  # equal length
    assert cpu_model(base + " avx2\n") == cpu_model(base + " avx2\n")
