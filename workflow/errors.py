"""Exceptions that carry enough context for a user to fix their input, and the line
between a tool's failure (a recorded result) and benchflow's own bug (a failed job)."""

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
