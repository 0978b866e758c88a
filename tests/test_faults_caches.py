"""Faults of the machine and of the network around a measurement (issue 47, families 5
and 6): a package index that accepts and never answers, a full disk under a job's write,
each made for real (a local TCP socket that never answers, a tmpfs filled to the brim).

CASES is a source of the docs' table of malformed inputs and their messages:
(id, what goes wrong, a fragment of the expected one-line message).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from tests.conftest import tiny_suite, write_suite
from tests.test_faults import small_fs
from tests.test_gate_exit_codes import inconclusive_report, on_disk  # noqa: F401 - fixture
from workflow.backends import packages
from workflow.errors import ConfigError

CASES = [
    ("index-silent", "the package index accepts the connection and never answers "
     "(`benchflow bisect --package`: the releases between good and bad)",
     "the package index did not answer: 127.0.0.1:"),
    ("index-silent-install", "the package index never answers while a release is "
     "installed into its environment", "pip install: the package index did not answer"),
    ("package-cache-full", "`benchflow bisect --package`: the package cache is on a full "
     "disk (a 64 KiB tmpfs) when a release's environment is made",
     "a fault of this machine, not of the release: the package cache's disk refused a "
     "write"),
    ("job-enospc", "a job script's record onto a full file system (a 64 KiB tmpfs)",
     "benchflow: could not write"),
    ("job-enospc-bare", "a job script's own write onto a full file system, through a "
     "plain file object (the OS names no file)", "benchflow: could not write a file"),
    ("log-endless-print", "a torch model whose forward prints 400 KB a call (a 201 MB log "
     "before): the log keeps its first BENCHFLOW_LOG_CAP_MIB and its last 64 KiB, and the "
     "case's record says so (provenance.log_cut)", "log cut at 0.25 MiB: "),
    ("tool-endless-output", "a tool that writes 5 MB to stderr and then fails: its "
     "captured output is cut the same way, its last line still the reason",
     "[log cut at 1 MiB: "),
    ("bisect-enospc-measure", "`benchflow bisect`: the disk under a step's measurement "
     "is full (its input files onto a full 64 KiB tmpfs): a fault of the machine, the "
     "step not retried, the bisection stopped", "stopped by a fault of this machine"),
    ("bisect-enospc-build", "`benchflow bisect`: a revision's build in the cache fails "
     "with ENOSPC (the worker's one line): the machine's fault, the revision not skipped",
     "could not write"),
    ("bisect-cache-removed", "`benchflow bisect`: its cache removed while it runs (a "
     "cleaner, a second run): a step's build inputs are gone (a FileNotFoundError "
     "traceback before); the bisection stops, naming the file", "its build in the cache "
     "is gone"),
    ("bisect-cache-full", "`benchflow bisect`: the file system under --cache is full "
     "(a 64 KiB tmpfs): one line naming --cache and its file system, exit 2 (a fault "
     "naming neither, exit 3, before)", "refused a write: could not write"),
    ("ab-torch-none", "`benchflow ab`: a torch pair whose model's forward returns None "
     "(a forgotten `return`): the row failed before a block is timed, as the plain run "
     "fails the case", "TypeError: forward returned NoneType; expected a tensor"),
    ("configfile-fifo", "`snakemake --configfile FIFO` (a named pipe no one writes): "
     "Snakemake would open it before the Snakefile runs and block until killed; the "
     "logger plugin, imported first, refuses it (exit 2)",
     ": is a FIFO (named pipe), not a regular file; expected a suite file"),
    ("remeasure-enospc", "`benchflow check`: the gate's re-measure of an inconclusive "
     "case meets a full disk (its tool's write onto a 64 KiB tmpfs)",
     "NOT REMEASURED host/iree/w-f32/baseline: a fault of this machine, not of the case"),
    ("goldens-dir-misspelt", "`goldens: {dir: golden}` beside a `goldens/` of golden files "
     "(`benchflow validate`, and the run before any job)",
     "goldens.dir: golden: no such directory"),
    ("config-nested-number", "`--config 'timeouts={run_s: soon}'`: a nested value, read as "
     "YAML (`{run_s: 30}` sets the number 30)",
     "--config timeouts={\"run_s\": \"soon\"}: timeouts.run_s: expected number, got str"),
]
WHY = {row[0]: row[-1] for row in CASES}


@pytest.fixture
def silent_index(monkeypatch):
    """A package index at 127.0.0.1 that accepts every connection and never answers,
    the only place pip looks (no config files, no find-links), each request given up
    after 0.5 s."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    port = server.getsockname()[1]
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{port}/simple")
    for name in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("BENCHFLOW_PIP_TIMEOUT_S", "0.5")
    yield port
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.tool
def test_a_silent_index_is_named_and_given_up_soon(silent_index, capsys):
    start = time.monotonic()
    with pytest.raises(ConfigError) as err:
        packages.releases("iree-base-compiler", "3.10.0", "3.11.0")
    took = time.monotonic() - start
    message = str(err.value)
    assert WHY["index-silent"] + str(silent_index) in message, message
    assert "timed out after 0.5 s, 3 tries" in message and "\n" not in message
    # Said before the wait: which package, which index, how long at most.
    said = capsys.readouterr().err
    assert f"iree-base-compiler's releases: asking http://127.0.0.1:{silent_index}/simple" \
        in said and "each request at most 0.5 s, 2 retries" in said
    assert took < 30, took


@pytest.mark.tool
def test_a_silent_index_fails_an_install_in_one_line(silent_index, tmp_path, capsys):
    with pytest.raises(ConfigError) as err:
        packages.environment("iree-base-compiler", "3.10.0", tmp_path / "envs")
    message = str(err.value)
    assert message.startswith("iree-base-compiler==3.10.0: " + WHY["index-silent-install"])
    assert f"127.0.0.1:{silent_index}/simple/" in message and "\n" not in message
    said = capsys.readouterr().err
    assert "installing iree-base-compiler==3.10.0, iree-base-runtime==3.10.0: asking " \
           f"http://127.0.0.1:{silent_index}/simple" in said


@pytest.mark.tool
def test_a_full_package_cache_is_said_to_be_the_machines(tmp_path):
    with small_fs(tmp_path / "mnt", "full", None) as full:
        with pytest.raises(ConfigError) as err:
            packages.environment("iree-base-compiler", "3.10.0", full / "packages")
    (line,) = err.value.problems
    assert line.startswith(f"{full}/packages/iree-base-compiler-3.10.0: could not make a "
                           "venv: ") and "No space left on device" in line, line
    assert WHY["package-cache-full"] in line


def test_a_pip_timeout_that_is_no_number_is_refused(monkeypatch):
    monkeypatch.setenv("BENCHFLOW_PIP_TIMEOUT_S", "soon")
    with pytest.raises(ConfigError) as err:
        packages.pip_timeout_s()
    assert "BENCHFLOW_PIP_TIMEOUT_S='soon': expected a number of seconds" in str(err.value)


# A job script as scripts/*.py starts (jobs/job.py), then a write onto the full tmpfs.
JOB = textwrap.dedent("""
    import sys
    from workflow.jobs.job import end_quietly_on_ctrl_c
    from workflow.records.storage import write_json

    end_quietly_on_ctrl_c()
    target = sys.argv[1]
    if sys.argv[2] == "record":
        write_json(target, {"medians": [1.0 + i / 7 for i in range(20000)]})
    elif sys.argv[2] == "bare":
        with open(target, "w") as fh:
            fh.write("x" * 200_000)
    else:
        {}["a bug of ours"]
""")


def _job(target, how: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", JOB, str(target), how],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.tool
@pytest.mark.parametrize("how", ["record", "bare"])
def test_a_full_disk_ends_a_job_in_one_line(tmp_path, how):
    with small_fs(tmp_path / "mnt", "full", None) as results:
        target = results / "batch.json"
        done = _job(target, how)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr and len(lines) == 1, done.stderr
    expected = (f"{WHY['job-enospc']} {target}: No space left on device" if how == "record"
                else f"{WHY['job-enospc-bare']} (the OS did not say which): No space left "
                     "on device")
    assert lines[0] == expected


@pytest.mark.tool
def test_a_bug_in_a_job_keeps_its_traceback(tmp_path):
    done = _job(tmp_path / "x.json", "bug")
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "KeyError: 'a bug of ours'" in done.stderr


def test_a_misspelt_goldens_dir_is_refused_before_any_job(tmp_path, monkeypatch):
    from workflow.commands.validate import check_file
    from workflow.planning.plan import Refused, load_suite

    monkeypatch.chdir(tmp_path)
    (tmp_path / "goldens").mkdir()
    (tmp_path / "goldens" / "cpu-host.json").write_text("{}")
    suite = write_suite(tmp_path / "suite.yaml", tiny_suite(goldens={"dir": "golden"}))
    (problem,) = check_file(suite).problems
    assert problem.startswith(f"{suite}: {WHY['goldens-dir-misspelt']} (from {tmp_path}); "
                              "did you mean 'goldens', which holds golden files?"), problem
    with pytest.raises(Refused):  # the Snakefile's own first step
        load_suite([str(suite)], {})
    # A misspelt part of a longer path, the path absolute.
    (tmp_path / "goldens" / "ci").mkdir()
    (tmp_path / "goldens" / "ci" / "cpu-host.json").write_text("{}")
    nested = write_suite(tmp_path / "nested.yaml",
                         tiny_suite(goldens={"dir": str(tmp_path / "golden" / "ci")}))
    assert check_file(nested).problems == [
        f"{nested}: goldens.dir: {tmp_path}/golden/ci: no such directory; did you mean "
        f"'{tmp_path}/goldens/ci', which holds golden files? (a misspelt name would measure "
        "every case and then fail the gate: none has a golden); to start a new set of "
        "goldens under this name, make the directory first"]
    # A goldens.dir not made yet, with nothing like it beside it: a first run's, fine.
    fresh = write_suite(tmp_path / "fresh.yaml", tiny_suite(goldens={"dir": "ci-refs"}))
    assert check_file(fresh).problems == []
    # A name that extends an existing set's starts a new set: fine too.
    for name in ("goldens2", "goldens-ci", "goldens_v2"):
        second = write_suite(tmp_path / "second.yaml", tiny_suite(goldens={"dir": name}))
        assert check_file(second).problems == [], name


@pytest.mark.tool  # importing snakemake.cli probes for SLURM's tools
def test_a_nested_config_value_is_read_as_yaml(tmp_path):
    from snakemake.cli import parse_config

    from workflow.planning.plan import Refused, load_suite

    suite = str(write_suite(tmp_path / "suite.yaml", tiny_suite()))
    # Snakemake's own parsing of the command line's entries: nested scalars are strings.
    given = parse_config(["timeouts={run_s: 30, compile_s: 150.5}",
                          "goldens={allow_inconclusive: true, dir: refs}"])
    assert given["timeouts"] == {"run_s": "30", "compile_s": "150.5"}
    config = load_suite([suite], given).config
    assert config["timeouts"]["run_s"] == 30 and config["timeouts"]["compile_s"] == 150.5
    assert config["goldens"]["allow_inconclusive"] is True
    assert config["goldens"]["dir"] == "refs"
    with pytest.raises(Refused) as err:  # still judged by the schema
        load_suite([suite], parse_config(["timeouts={run_s: soon}"]))
    assert WHY["config-nested-number"] in str(err.value)


CHATTY = textwrap.dedent('''
    """A model whose forward prints 400 KB each call."""
    import sys

    from workflow.models.common import finish, seeded
    from workflow.models.registry import benchmark_model


    @benchmark_model(default_shape=(4, 8), shape_doc="[batch, 8]")
    def chatty(config, dtype, layers, shape):
        import torch

        class Chatty(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(8, 8)

            def forward(self, x):
                print("chatty " * 60000)
                return self.lin(x)

        gen = seeded()
        return finish(Chatty(), (torch.randn(*shape, generator=gen),), dtype)
''')


@pytest.mark.tool
def test_a_model_that_prints_without_end_gets_a_capped_log(tmp_path, monkeypatch):
    from tests.test_torch_bench import MEASURE, plan_of
    from workflow.jobs.torch import run_pass
    from workflow.records.case import torch_provenance
    from workflow.suite.load import load

    monkeypatch.setenv("BENCHFLOW_LOG_CAP_MIB", "0.25")
    (tmp_path / "chatty_models.py").write_text(CHATTY)
    cfg = tiny_suite(model_modules=[str(tmp_path / "chatty_models.py")],
                     workloads=[{"model": "chatty", "shapes": [[4, 8]]}],
                     backends=["torch-eager"])
    cfg["skus"] = {"host": {"torch": {"threads": 1}, "measurement": dict(MEASURE)}}
    suite = load([write_suite(tmp_path / "s.yaml", cfg)])
    cases, plan = plan_of(suite)
    log = tmp_path / "batch.log"
    (got,) = run_pass(plan, "batch", cases, timeout_per_case=120, log=str(log)).values()
    assert got["status"] == "ok", got
    text = log.read_bytes()
    # The head (0.25 MiB), the line saying what was left out, the last 64 KiB.
    assert len(text) < (256 + 64 + 1) << 10, len(text)
    assert f"[{WHY['log-endless-print']}".encode() in text
    assert got["log_cut"].startswith(WHY["log-endless-print"]) and str(log) in got["log_cut"]
    sku = {"torch": {"threads": 1}, "measurement": dict(MEASURE)}
    assert torch_provenance(sku, got)["log_cut"] == got["log_cut"]


@pytest.mark.tool
def test_a_tools_endless_output_is_cut_and_its_reason_kept(monkeypatch):
    from workflow.backends.proc import capture, run_tool
    from workflow.errors import StageError

    monkeypatch.setenv("BENCHFLOW_LOG_CAP_MIB", "1")
    argv = [sys.executable, "-c", "import sys; sys.stderr.write(('x' * 999 + '\\n') * 5000); "
            "sys.exit('the tool failed here')"]
    done = capture(argv, timeout=60)
    assert len(done.stderr) < (1024 + 64 + 1) << 10
    assert WHY["tool-endless-output"] in done.stderr
    assert done.stderr.rstrip().endswith("the tool failed here")
    with pytest.raises(StageError) as err:
        run_tool(argv, stage="run", timeout=60)
    assert err.value.message.startswith("python")
    assert "the tool failed here" in err.value.message.splitlines()[0]


def _bisect_side(npz, workload: str = "w") -> dict:
    """A built revision as bisect/prepare.py answers for one (what measure_pair reads
    before its first tool runs)."""
    from workflow.suite.defaults import measurement_defaults
    from workflow.suite.schema import load_schema

    ab = {k: v.get("default") for k, v in load_schema()["properties"]["ab"]["properties"]
          .items()}
    return {"identity": {"workload": workload, "sku": "host"}, "ab": ab,
            "timeouts": {"run_s": 30}, "inputs": str(npz), "dtypes": ["float32"],
            "vmfb": "module.vmfb",
            "sku": {"measurement": measurement_defaults(), "iree": {"device": "local-task"}}}


@pytest.mark.tool
def test_a_full_disk_under_a_bisect_step_is_a_fault_not_noise(tmp_path, monkeypatch):
    import numpy as np

    from workflow.bisect.measure import measure_pair
    from workflow.bisect.search import Revision, bisect
    from workflow.regression.gate import UNJUDGED

    npz = tmp_path / "inputs.npz"
    np.savez(npz, arg0=np.zeros((256, 256), np.float32))  # 256 KiB: past the 64 KiB
    sides = {name: _bisect_side(npz) for name in ("c1", "c2", "c3")}
    calls = []

    def measure(base, new, scale, final):
        calls.append((base, new, scale))
        return measure_pair((base, new), (sides[base], sides[new]), scale=scale,
                            log=str(tmp_path / "bisect.log"), final=final)

    with small_fs(tmp_path / "mnt", "full", None) as full:
        monkeypatch.setenv("TMPDIR", str(full))
        monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
        result = bisect([Revision("c1", "a"), Revision("c2", "b"), Revision("c3", "c")],
                        measure)
    assert calls == [("c1", "c3", 1)]  # not again "with a longer budget"
    assert result["outcome"] == UNJUDGED
    assert result["summary"].startswith(f"{WHY['bisect-enospc-measure']}, not of c3: "
                                        f"could not write {full}/"), result["summary"]
    assert result["summary"].count("No space left on device") == 1
    (step,) = [s for s in result["steps"] if s["kind"] != "skipped"]
    assert step["fault"].endswith(": No space left on device") and not step["retried"]


def test_a_build_the_disk_refused_stops_the_walk_instead_of_skipping(tmp_path):
    from workflow.bisect.measure import measure_pair
    from workflow.bisect.search import Revision, Step, bisect
    from workflow.regression.gate import UNJUDGED
    from workflow.stats.enums import ABVerdict

    side = _bisect_side(tmp_path / "inputs.npz")
    # prepare's answer for a revision whose build the worker could not write (its one line).
    broken = {**side, "failed": {"stage": "prepare", "error": (
        "python exited with 1: WriteError: could not write /cache/builds/k/module.vmfb: "
        "No space left on device\nWriteError: could not write /cache/builds/k/module.vmfb:"
        " No space left on device")}}

    def measure(base, new, scale, final):
        if new == "c2":
            return measure_pair((base, new), (side, broken), scale=scale, log="", final=final)
        return Step(base, new, ABVerdict.REGRESSION, 2.0, [1.9, 2.1], 8)

    result = bisect([Revision(f"c{i}", str(i)) for i in range(1, 4)], measure)
    assert result["outcome"] == UNJUDGED, result["summary"]
    assert (f"{WHY['bisect-enospc-build']} /cache/builds/k/module.vmfb: No space left on "
            "device") in result["summary"]
    assert not [s for s in result["steps"] if s["kind"] == "skipped" and s["revision"] == "c2"]


NONE_MODEL = textwrap.dedent('''
    """A model whose forward forgot its `return`."""
    from workflow.models.common import finish, seeded
    from workflow.models.registry import benchmark_model


    @benchmark_model(default_shape=(4, 8), shape_doc="[batch, 8]")
    def forgets_return(config, dtype, layers, shape):
        import torch

        class Forgets(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(8, 8)

            def forward(self, x):
                self.lin(x)

        gen = seeded()
        return finish(Forgets(), (torch.randn(*shape, generator=gen),), dtype)
''')


@pytest.mark.tool
def test_a_torch_ab_pair_of_a_model_returning_none_is_a_failed_row(tmp_path):
    from tests.test_ab_torch import side, torch_sku
    from workflow.comparisons.ab_torch import compare_torch_pair
    from workflow.planning.plan import torch_ab_plan
    from workflow.suite.load import load

    (tmp_path / "none_models.py").write_text(NONE_MODEL)
    workload = "forgets_return-f32"
    cfg = {"suite_name": "ab-none", "model_modules": [str(tmp_path / "none_models.py")],
           "skus": {"a": torch_sku(), "a-again": torch_sku()}, "backends": ["torch-eager"],
           "recipes": ["baseline"], "workloads": [{"model": "forgets_return"}],
           "ab_pairs": [{"base": side("a", workload), "new": side("a-again", workload)}],
           "ab": {"torch_block_s": 0.05, "max_rounds": 8, "budget_s": 30}}
    suite = load([write_suite(tmp_path / "suite.yaml", cfg)])
    pair = torch_ab_plan(suite, *next(iter(suite.torch_ab_pairs)))
    out = tmp_path / "row.json"
    row = compare_torch_pair(pair=pair, ab=suite.config["ab"], timeout=120, out=str(out),
                             log=str(tmp_path / "row.log"))
    assert row["verdict"] == "failed" and row["failed_stage"] == "prepare", row
    # The side whose worker is started first names it; both would fail alike.
    assert row["error"].endswith("+torch-eager+baseline: failed: TypeError: forward "
                                 "returned NoneType; expected a tensor or a tuple of tensors")
    assert WHY["ab-torch-none"] in row["error"] and "rounds" not in row


@pytest.mark.tool
def test_snakemake_refuses_a_fifo_configfile_instead_of_blocking(tmp_path):
    import os

    from snakemake_logger_plugin_benchflow.config_args import configfile_problems
    from tests.conftest import REPO

    fifo = tmp_path / "suite.yaml"
    os.mkfifo(fifo)
    expected = f"--configfile {fifo}{WHY['configfile-fifo']}"
    assert configfile_problems(["-n", f"--configfile={fifo}"])[0].startswith(expected)
    assert configfile_problems(["--configfiles", str(tmp_path), "--cores", "1"]) == [
        f"--configfile {tmp_path}: is a directory, not a regular file; expected a suite file "
        "(YAML or JSON)"]
    assert configfile_problems(["--configfile", str(tmp_path / "absent.yaml")]) == []
    done = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1",
                           "--configfile", str(fifo)], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.strip() == expected + " (YAML or JSON)"


@pytest.mark.tool
@pytest.mark.usefixtures("on_disk")  # CID's run stage, inputs and goldens in tmp_path
def test_a_full_disk_under_a_re_measure_is_said_to_be_the_machines(tmp_path, monkeypatch,
                                                                   capsys):
    from workflow.backends.proc import run_tool
    from workflow.cli.main import main
    from workflow.gating import remeasure
    from workflow.measure.protocol import Observation

    with small_fs(tmp_path / "mnt", "full", None) as full:
        def invocation(argv, timeout, log, m, layout=None):
            # The tool's own write of its output onto the full disk, for real.
            run_tool([sys.executable, "-c", "import sys; open(sys.argv[1], 'wb')"
                      ".write(b'x' * 200_000)", str(full / "trace.bin")], stage="run",
                     timeout=60)
            return Observation(1.0)

        monkeypatch.setattr(remeasure, "iree_invocation", invocation)
        assert main(["check", "--report", inconclusive_report(tmp_path), "--goldens",
                     "goldens"]) == 3
    out = capsys.readouterr().out
    assert f"{WHY['remeasure-enospc']}: " in out and "No space left on device" in out


def test_a_build_removed_from_the_cache_mid_bisection_stops_it_in_one_line(tmp_path):
    """The bisect cache removed while a bisection runs (a cleaner, a second run): the
    step's build inputs are gone. A fault of this machine that stops the bisection with
    one line naming the file, never a FileNotFoundError traceback."""
    from workflow.bisect.measure import measure_pair
    from workflow.bisect.search import Revision, bisect
    from workflow.regression.gate import UNJUDGED

    side = _bisect_side(tmp_path / "inputs.npz")  # never written: removed with the cache

    def measure(base, new, scale, final):
        return measure_pair((base, new), (side, side), scale=scale,
                            log=str(tmp_path / "bisect.log"), final=final)

    result = bisect([Revision("c1", "a"), Revision("c2", "b")], measure)
    assert result["outcome"] == UNJUDGED
    assert result["summary"].startswith(
        f"stopped by a fault of this machine, not of c2: {tmp_path / 'inputs.npz'}: "
        f"{WHY['bisect-cache-removed']}"), result["summary"]
    assert result["summary"].endswith("a longer budget would meet it again; rerun)")


@pytest.mark.tool
def test_a_full_disk_under_the_bisect_cache_names_it_and_its_file_system(tmp_path):
    """The file system under --cache refused a step's write: bad input (exit 2) in one
    line naming --cache and that file system (mount point, room), not a fault of no
    named place with exit 3. A full disk elsewhere (TMPDIR) stays the machine's fault."""
    from workflow.bisect.run import cache_refusal

    with small_fs(tmp_path / "mnt", "full", None) as full:
        cache = full / "bisect"
        fault = f"could not write {cache}/builds/k/module.vmfb: No space left on device"
        line = cache_refusal({"steps": [{"kind": "ends"}, {"fault": fault}]}, cache)
        assert line.startswith(f"--cache {cache}: the file system mounted at "
                               f"{tmp_path / 'mnt'} ("), line
        assert WHY["bisect-cache-full"] in line and fault in line, line
        elsewhere = fault.replace(str(cache), "/tmp/x")
        assert cache_refusal({"steps": [{"fault": elsewhere}]}, cache) is None
