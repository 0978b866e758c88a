"""A failed export or compile says why on its error's first line (issue 45, item 6): the
line the terminal, report.md, report.html and the CSV show. A Python exception's line
comes last in its traceback and iree-compile's `error:` line after its exit status, so
the first line alone used to read `python exited with 1:`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import DATA, tiny_suite, write_suite
from workflow.backends.proc import failure_text, first_lines
from workflow.errors import failure_reason
from workflow.jobs.iree_batch import batch_job
from workflow.paths import iree_batch_path
from workflow.planning import keys
from workflow.planning.plan import iree_batch_plan
from workflow.render import common as c
from workflow.render import html, markdown
from workflow.suite.load import load

TRACEBACK = """\
/x/torch/_export.py:12: UserWarning: something about export
  warnings.warn(
ValueError: bad input
  second line of the message
Traceback (most recent call last):
  File "/x/export.py", line 3, in main
    forward(x)
ValueError: bad input
  second line of the message
"""
LLVM_FLAG = """\
iree-compile: Unknown command line argument '--bogus'.  Try: 'iree-compile --help'
iree-compile: Did you mean '--debug-pass'?
"""
CRASH = """\
iree-compile: /src/Pass.cpp:42: void f(): Assertion `ok' failed.
Please report issues to https://github.com/iree-org/iree/issues and include the crash backtrace.
Stack dump:
0.	Program arguments: iree-compile x.mlir
 #0 0x00007f iree::f()
"""


@pytest.mark.parametrize("output, tool, reason", [
    (TRACEBACK, "python", "ValueError: bad input"),
    ("x.mlir:18:0: error: failed to legalize 'torch.operator'\nnote: see current operation",
     "iree-compile", "error: failed to legalize 'torch.operator'"),
    ("Fatal Python error: Segmentation fault\n\nCurrent thread 0x7f (most recent call first):\n"
     "  File \"/x/m.py\", line 4 in forward", "python", "Fatal Python error: Segmentation fault"),
    (LLVM_FLAG, "iree-compile", "iree-compile: Unknown command line argument '--bogus'.  "
                                "Try: 'iree-compile --help'"),
    (CRASH, "iree-compile", "iree-compile: /src/Pass.cpp:42: void f(): Assertion `ok' failed."),
    ("loading\nRESOURCE_EXHAUSTED; out of memory\n", "iree-benchmark-module",
     "RESOURCE_EXHAUSTED; out of memory"),
    ("", "python", ""),
])
def test_the_reason_is_the_line_that_says_what_went_wrong(output, tool, reason):
    assert failure_reason(output, tool) == reason


def test_a_record_made_before_the_reason_led_gets_it_from_its_later_lines():
    """A failure reused from an earlier run keeps its old text: the summary finds the
    exception or the diagnostic below `exited with 1:`, and never takes a worker log's
    last line (another case's) for the reason."""
    assert c.error_summary("python exited with 1:\n" + TRACEBACK) == \
        "python exited with 1: ValueError: bad input"
    assert c.error_summary("torch worker exited with 3 (batch):\nok case a\n") == \
        "torch worker exited with 3 (batch):"


@pytest.fixture(scope="module")
def failed(tmp_path_factory) -> dict[str, dict]:
    """The records of real failures: a forward that raises ValueError (export), histc,
    which IREE cannot lower (compile), and a forward that SIGKILLs its process (export)."""
    tmp = tmp_path_factory.mktemp("failures")
    cwd = Path.cwd()
    try:
        import os
        os.chdir(tmp)
        cfg = tiny_suite(model_modules=[str(DATA / "extra_models.py")], workloads=[
            {"model": "raising_model"}, {"model": "histc_model"}, {"model": "crashing_model"}])
        cfg["skus"].pop("generic")
        suite = load([write_suite(tmp / "s.yaml", cfg)])
        (key,) = suite.iree_batches
        batch = iree_batch_path(key)
        Path(batch).parent.mkdir(parents=True, exist_ok=True)
        out = batch_job(cases=iree_batch_plan(suite, *key), sku=suite.sku("host"),
                        tolerances=keys.dtype_tolerances(suite.config["accuracy"]),
                        timeouts=suite.config["timeouts"], gate=suite.config["goldens"],
                        batch=batch, log=str(tmp / "batch.log"), content={"run": 1},
                        threads=2)
        return {x["id"].split("/")[2].split("-")[0]: json.loads(Path(x["case"]).read_text())
                for x in out["cases"]}
    finally:
        os.chdir(cwd)


@pytest.mark.tool
def test_a_failed_export_or_compile_says_why_on_its_first_line(failed):
    raised, histc, crashed = (failed[m] for m in ("raising_model", "histc_model",
                                                   "crashing_model"))
    assert (raised["stage"], histc["stage"], crashed["stage"]) == ("export", "compile",
                                                                   "export")
    first = {m: x["error"].splitlines()[0] for m, x in failed.items()}
    assert first["raising_model"].endswith(
        " exited with 1: ValueError: raising_model cannot take a (4, 8) input"), first
    assert first["histc_model"].startswith(
        "iree-compile exited with 1: error: failed to legalize operation 'torch.operator'")
    # Killed by a signal with nothing to say: the exit status is the reason.
    assert "exited with -9 (killed by SIGKILL)" in first["crashing_model"]
    # Every place that shows one line shows the reason: the summary (terminal, CSV) and
    # both reports' failure lists.
    report = {"cases": list(failed.values()), "provenance": {}}
    text, page = markdown.attention(report["cases"]), html.attention(report["cases"])
    for model, reason in (("raising_model", "ValueError: raising_model cannot take"),
                          ("histc_model", "error: failed to legalize operation")):
        assert reason in c.error_summary(failed[model]["error"])
        assert reason in text and any(reason in why for _, why in page)


# --- real messages whose first or last line is not the cause -----------------------------
# (tests/data/failures/README.md says how each was made.)
FAILURES = DATA / "failures"
REAL = {
    "iree_compile_unknown_cpu": ("iree-compile", "Unknown CPU for target architecture x86_64."),
    "iree_benchmark_module_shape": (
        "iree-benchmark-module", "INVALID_ARGUMENT; input0 shape dimension 0 mismatch; "
                                 "expected 4 but have 3;"),
    "iree_benchmark_module_no_function": (
        "iree-benchmark-module", "NOT_FOUND; no function `nosuch` exported by module"),
    "torch_export_data_dependent": (
        "python", "torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode: Could "
                  "not guard on data-dependent expression Eq(u0, 1)"),
}
# (id, description, expected fragment): docs/malformed-inputs.md's rows.
CASES = [
    ("reason-unknown-cpu", "iree-compile `--iree-llvmcpu-target-cpu=nonexistent`: the cause "
     "first, then `LLVM ERROR: 64-bit code requested ...` last (which the line showed)",
     "iree-compile exited with 1: Unknown CPU for target architecture x86_64."),
    ("reason-iree-status", "iree-benchmark-module with an input of the wrong shape: the status "
     "line, then the VM's stack line `[ 0] bytecode module@1:142 -` (which the line showed)",
     "iree-benchmark-module exited with 1: INVALID_ARGUMENT; input0 shape dimension 0 "
     "mismatch"),
    ("reason-old-record", "a failure recorded by an earlier version, its first line naming "
     "the consequence (`LLVM ERROR: ...`), shown again (reused, not retried)",
     "iree-compile exited with 1: Unknown CPU for target architecture x86_64."),
]


@pytest.mark.parametrize("name", sorted(REAL))
def test_the_reason_of_a_real_failure_names_its_cause(name):
    tool, reason = REAL[name]
    output = (FAILURES / f"{name}.stderr").read_text()
    assert failure_reason(output, tool).startswith(reason)
    # What the terminal, the summary and report.md show: the recorded error's one line.
    assert c.error_summary(failure_text(tool, 1, output)).startswith(
        f"{tool} exited with 1: {reason}")


def test_the_rows_messages_are_what_the_lines_show():
    cpu = (FAILURES / "iree_compile_unknown_cpu.stderr").read_text()
    shape = (FAILURES / "iree_benchmark_module_shape.stderr").read_text()
    assert c.error_summary(failure_text("iree-compile", 1, cpu)) == CASES[0][-1]
    assert c.error_summary(failure_text("iree-benchmark-module", 1, shape)).startswith(
        CASES[1][-1])
    # Recorded before: the consequence on the first line, the cause below it.
    old = ("iree-compile exited with 1: LLVM ERROR: 64-bit code requested on a subtarget "
           "that doesn't support it!\n" + first_lines(cpu))
    assert c.error_summary(old) == CASES[2][-1]
    stack = ("iree-benchmark-module exited with 1: [ 0] bytecode module@1:142 -\n"
             + first_lines(shape))
    assert c.error_summary(stack).startswith(CASES[1][-1])
    # A reason the lines below do not hold (cut from a longer output) is kept.
    kept = "python exited with 1: ValueError: bad\nW warning\ndef forward(x):\n"
    assert c.error_summary(kept) == "python exited with 1: ValueError: bad"


def test_every_short_reason_is_that_line(tmp_path):
    """`benchflow run`'s line and coverage's first problem show the same line."""
    from workflow.cli.run import summary_line
    from workflow.render.coverage import _backend_status

    cpu = (FAILURES / "iree_compile_unknown_cpu.stderr").read_text()
    rec = {"status": "failed", "id": "host/iree/w/baseline", "stage": "compile",
           "error": failure_text("iree-compile", 1, cpu)}
    assert summary_line(rec).endswith(f"at compile: {CASES[0][-1]}")
    assert _backend_status([rec])["first_problem"]["error"] == CASES[0][-1]


@pytest.mark.tool
def test_the_real_iree_compile_with_an_unknown_cpu_says_so_first(tmp_path):
    from workflow.backends.proc import run_tool, tool_path
    from workflow.errors import StageError

    mlir = tmp_path / "m.mlir"
    mlir.write_text("func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
                    "  return %a : tensor<4xf32>\n}\n")
    with pytest.raises(StageError) as raised:
        run_tool([tool_path("iree-compile"), str(mlir), "--iree-hal-target-device=local",
                  "--iree-hal-local-target-device-backends=llvm-cpu",
                  "--iree-llvmcpu-target-cpu=nonexistent", "-o", str(tmp_path / "m.vmfb")],
                 stage="compile", timeout=120)
    assert raised.value.message.splitlines()[0] == CASES[0][-1]
