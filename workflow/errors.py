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
# (failure_reason): the last exception of a Python traceback; a diagnostic (`error:`,
# MLIR's and LLVM's `FILE:LINE:COL: error: ...`, `Fatal Python error: ...`); a line the
# tool itself names (LLVM's `iree-compile: Unknown command line argument ...`); else the
# last line that is not part of a stack dump.
_TRACEBACK = "Traceback (most recent call last):"
_LOCATION = re.compile(r"^\S+:\d+:\d+:\s*(?=error:)")
_NOISE = re.compile(r"^(\s|#\d+\s|Stack dump:|PLEASE submit|Please report|Current thread|"
                    r"Thread 0x|Extension modules:)")
REASON_CHARS = 300


def failure_reason(output: str, tool: str | None = None, last_line: bool = True) -> str:
    """The one line of a failed tool's or worker's output that says why it failed ('' when
    none does): every place that shows an error's first line (the terminal, report.md,
    report.html, the CSV) then shows the reason, not only `python3 exited with 1:`.
    Without `last_line`, only an exception or a diagnostic counts (text that may end with
    another case's lines: a worker's log tail)."""
    lines = [ln.rstrip() for ln in output.splitlines() if ln.strip()]
    starts = [i for i, ln in enumerate(lines) if ln.strip() == _TRACEBACK]
    if starts:  # the exception line: the first unindented one after the last traceback
        found = next((ln for ln in lines[starts[-1] + 1:] if not ln[0].isspace()), None)
        if found:
            return _clip(found)
    found = next((ln for ln in lines if "error:" in ln), None)
    if found:
        return _clip(_LOCATION.sub("", found.strip()))
    if tool:
        found = next((ln for ln in lines if ln.startswith(f"{tool}: ")), None)
        if found:
            return _clip(found)
    found = next((ln for ln in reversed(lines) if not _NOISE.match(ln)), None)
    return _clip(found.strip()) if found and last_line else ""


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
