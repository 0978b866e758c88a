"""The result of one stage: the single shape every stage returns and writes.

A stage JSON on disk is this record flattened (`status`, `stage`, `failed_stage`,
`error`, `started_at`, `finished_at` and the stage's own data side by side), so that
earlier results stay readable and a user can read one file per stage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workflow.errors import capped
from workflow.records.storage import read_json, write_json
from workflow.stats.enums import Status

# A stage's status is a case status (ok, failed, unsupported: the first that is not ok
# becomes the case's, records/case.py) or this one, a stage's own. Not run: the stage's
# runtime device does not exist on the machine that would measure
# (tools.device_absent_reason); `error` is that reason. After an ok compile, the case
# assembler makes the case `compile-only` (records/case.py).
NO_DEVICE = "no-device"
# The most of a stage's `error` a record keeps: a reason is a line (errors.REASON_CHARS), a
# tool's own words a few lines; far more is a tool gone wrong, not more to read.
ERROR_CHARS = 4000
_OWN = ("stage", "status", "failed_stage", "error", "started_at", "finished_at")


@dataclass
class StageResult:
    stage: str
    status: str = Status.OK          # ok | failed | unsupported | no-device
    failed_stage: str | None = None  # the stage that failed: this one or one upstream
    #                                  (no-device: the stage that was not run)
    error: str | None = None         # the tool's own words (first lines), or the reason
    data: dict[str, Any] = field(default_factory=dict)
    started_at: str | None = None
    finished_at: str | None = None

    def __post_init__(self):
        # The common door of a tool's words into a case record (and so into report.md,
        # report.html, the CSV, dashboard.json): capped here, saying so, whatever stage
        # quoted them (issue 47).
        if isinstance(self.error, str):
            self.error = capped(self.error, ERROR_CHARS)

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    def to_json(self) -> dict:
        return {**self.data, "stage": self.stage, "status": self.status,
                "failed_stage": self.failed_stage, "error": self.error,
                "started_at": self.started_at, "finished_at": self.finished_at}

    @classmethod
    def from_json(cls, d: dict) -> StageResult:
        return cls(stage=d.get("stage", "?"), status=d["status"],
                   failed_stage=d.get("failed_stage"), error=d.get("error"),
                   data={k: v for k, v in d.items() if k not in _OWN},
                   started_at=d.get("started_at"), finished_at=d.get("finished_at"))

    @classmethod
    def read(cls, path: str | Path) -> StageResult:
        return cls.from_json(read_json(path))

    def write(self, path: str | Path) -> None:
        write_json(path, self.to_json())
