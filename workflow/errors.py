"""Exceptions that carry enough context for a user to fix their input, and the line
between a tool's failure (a recorded result) and benchflow's own bug (a failed job)."""

import re
from pathlib import Path


class ConfigError(Exception):
    """A suite, benchmark or golden file that does not match what benchflow expects.

    `problems` lists every finding as "file: key.path: what was expected", so a user
    fixes them all in one pass instead of one per run.
    """

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def key_path(parts) -> str:
    """`skus.cpu-host.measurement.invocations`, `workloads[2].model`; `<top>` for the root."""
    out = ""
    for part in parts:
        if not isinstance(part, int) and not str(part).isprintable():
            part = repr(part)  # a key with a newline must not start a line of its own
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top>"


class StageError(Exception):
    """A failed stage (export, compile, run, verify): recorded in the case, never raised past it."""

    def __init__(self, stage: str, message: str):
        self.stage = stage
        self.message = message
        super().__init__(f"{stage}: {message}")


class OwnBug(Exception):
    """benchflow's own code failed (here or in one of its worker processes).

    Never recorded as a case result: it fails the Snakemake job, so nothing is cached
    and Snakemake's retries apply. A tool's failure is a StageError instead."""


# The exit status of a worker process whose failure was benchflow's own (EX_SOFTWARE).
OWN_BUG_EXIT = 70

_OWN_CODE = Path(__file__).resolve().parent
# Model definitions are the workload, not the harness: their failures are the tool's.
_MODEL_CODE = _OWN_CODE / "models"


def raised_in_own_code(exc: BaseException) -> bool:
    """Whether `exc` was raised by benchflow's own code rather than by a tool.

    The rule: the innermost frame of the traceback decides. An exception raised inside
    torch, torchao, IREE's Python packages or a model's code (workflow/models/, a
    suite's model_modules) is the tool's failure; one raised in workflow/ outside
    models/ (a KeyError in our plan handling, say) is our bug. A wrong call of ours
    into a library surfaces in the library and counts as the tool's: the rule errs
    towards recording a result, never towards hiding a bug as a pass."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    where = Path(tb.tb_frame.f_code.co_filename).resolve()
    return where.is_relative_to(_OWN_CODE) and not where.is_relative_to(_MODEL_CODE)


# What a failed tool's output says went wrong, for the first line of its recorded error
# (failure_reason), the first of these found: the last exception of a Python traceback;
# a diagnostic (`error:`, MLIR's and LLVM's `FILE:LINE:COL: error: ...`, `Fatal Python
# error: ...`); an IREE runtime status (`FILE:LINE: INVALID_ARGUMENT; input0 shape ...`,
# from iree-benchmark-module and iree-run-module, under which come the VM's stack lines);
# a line saying what the tool does not know (LLVM's `Unknown CPU for target architecture
# x86_64.`, `iree-compile: Unknown command line argument ...`: for an unknown
# --iree-llvmcpu-target-cpu LLVM then dies with `LLVM ERROR: 64-bit code requested on a
# subtarget that doesn't support it!`, a consequence); a line the tool itself names; an
# `LLVM ERROR:` line; else the last line that is not part of a stack dump.
_TRACEBACK = "Traceback (most recent call last):"
_LOCATION = re.compile(r"^\S+:\d+:\d+:\s*(?=error:)")
# IREE's status codes (iree/base/status.h), after the source location IREE prints first.
_IREE_STATUS = re.compile(
    r"^(?:\S+:\d+:\s+)?((?:CANCELLED|UNKNOWN|INVALID_ARGUMENT|DEADLINE_EXCEEDED|NOT_FOUND|"
    r"ALREADY_EXISTS|PERMISSION_DENIED|RESOURCE_EXHAUSTED|FAILED_PRECONDITION|ABORTED|"
    r"OUT_OF_RANGE|UNIMPLEMENTED|INTERNAL|UNAVAILABLE|DATA_LOSS|UNAUTHENTICATED|DEFERRED|"
    r"INCOMPATIBLE); .*)$")
_UNKNOWN = re.compile(r"^(?:[\w.-]+: )?Unknown \S")
_NOISE = re.compile(r"^(\s|#\d+\s|Stack dump:|PLEASE submit|Please report|Current thread|"
                    r"Thread 0x|Extension modules:)")
REASON_CHARS = 300


def failure_reason(output: str, tool: str | None = None, last_line: bool = True) -> str:
    """The one line of a failed tool's or worker's output that says why it failed ('' when
    none does): every place that shows an error's first line (the terminal, report.md,
    report.html, the CSV) then shows the reason, not only `python3 exited with 1:`, nor a
    consequence printed after it. Without `last_line`, only the lines that name a cause
    count, not the last line (text that may end with another case's lines: a worker's
    log tail)."""
    lines = [ln.rstrip() for ln in output.splitlines() if ln.strip()]
    starts = [i for i, ln in enumerate(lines) if ln.strip() == _TRACEBACK]
    if starts:  # the exception line: the first unindented one after the last traceback
        found = next((ln for ln in lines[starts[-1] + 1:] if not ln[0].isspace()), None)
        if found:
            return _clip(found)
    found = next((ln for ln in lines if "error:" in ln), None)
    if found:
        return _clip(_LOCATION.sub("", found.strip()))
    found = next((m for m in map(_IREE_STATUS.match, lines) if m), None)
    if found:
        return _clip(found.group(1))
    found = next((ln for ln in lines if _UNKNOWN.match(ln)), None)
    if not found and tool:
        found = next((ln for ln in lines if ln.startswith(f"{tool}: ")), None)
    found = found or next((ln for ln in lines if ln.startswith("LLVM ERROR: ")), None)
    if found:
        return _clip(found.strip())
    found = next((ln for ln in reversed(lines) if not _NOISE.match(ln)), None)
    return _clip(found.strip()) if found and last_line else ""


# The first line of a recorded error (backends/proc.failure_text): `TOOL exited with N:`,
# `TOOL exited with -9 (killed by SIGKILL):`, then the reason.
_EXITED = re.compile(r"^(?P<tool>\S+(?: worker)?) exited with -?\d+(?: \([^)]*\))?:")


def error_line(text: str | None, limit: int = 200) -> str:
    """One line about a failure, naming its cause: what the terminal line, the summary,
    report.md, report.html, the CSV, `benchflow run` and coverage show of a recorded
    error. Its first line carries the reason (proc.failure_text); a record made by an
    earlier version, whose first line gave no reason (`iree-compile exited with 1:`) or
    a consequence (`LLVM ERROR: ...`, an IREE stack line) while the cause is among the
    lines below, gets the cause from them, by failure_reason's own order."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return ""
    summary = lines[0]
    exited = _EXITED.match(summary)
    # The lines below, indented ones (traceback frames) too, less the mark of lines cut
    # (proc.first_lines): a traceback cut there has no exception line.
    rest = (text or "").strip().partition("\n")[2].removesuffix("\n...")
    reason = failure_reason(rest, exited["tool"] if exited else None, last_line=False)
    given = summary[exited.end():].strip() if exited else ""
    if reason and reason not in summary and given \
            and any(given in line for line in lines[1:]):
        # The reason given is one of the lines below, and not the one naming the cause.
        summary = f"{exited.group(0)} {reason}"
    elif reason and (summary.endswith(":") or ("error:" in reason
                                               and "error:" not in summary)):
        summary += f" {reason}"
    return summary if len(summary) <= limit else summary[: limit - 1] + "…"


def _clip(line: str) -> str:
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 1] + "…"


def capped(text: str, limit: int = REASON_CHARS) -> str:
    """`text` from a tool, cut to `limit` characters where longer, saying so: what a tool
    prints enters case records and every report made from them, and one runaway line (a
    1 MiB nvidia-smi line) must not make a 5 MB record. The note names the whole length,
    so a reader knows the text is not all there."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [cut: {len(text)} characters in all]"
