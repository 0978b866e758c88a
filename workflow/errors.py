"""Exceptions that carry enough context for a user to fix their input."""


class ConfigError(Exception):
    """A suite, benchmark or golden file that does not match what benchflow expects.

    `problems` lists every finding as "file: key.path: what was expected", so a user
    fixes them all in one pass instead of one per run.
    """

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class StageError(Exception):
    """A failed stage (export, compile, run, verify): recorded in the case, never raised past it."""

    def __init__(self, stage: str, message: str):
        self.stage = stage
        self.message = message
        super().__init__(f"{stage}: {message}")
