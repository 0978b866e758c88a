"""The stage model: how every stage runs, fails and records its result.

A stage body returns its data; `run_stage` wraps it into one `StageResult` and writes
it as the stage JSON. Two kinds of failure are told apart on purpose:

- a *tool's* failure (non-zero exit, timeout, signal, killed for memory, output that
  cannot be read) is raised by the backends as `StageError`: it becomes a recorded
  failed result, the job succeeds, and the case record names the stage and the error;
- anything else raised in benchflow's own code is a bug: it propagates, the Snakemake
  job fails loudly, nothing is cached as a result, and Snakemake's retries (and the
  SLURM memory escalation of planning/resources.py) apply.

A stage whose upstream failed records that failure unchanged instead of running.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from workflow.errors import StageError
from workflow.records.stage import NO_DEVICE, StageResult
from workflow.records.storage import touch_empty
from workflow.stats.enums import Status


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def run_stage(stage: str, meta_path: str, artifacts: list[str], upstream: list[str],
              body: Callable[[], dict]) -> StageResult:
    """Runs `body` unless an upstream stage failed; writes meta_path unless our own code
    raised (then the job fails and Snakemake removes its outputs)."""
    result = StageResult(stage=stage, started_at=now_iso())
    failed_up = next((up for up in map(StageResult.read, upstream) if not up.ok), None)
    if failed_up is not None:
        result.status, result.failed_stage = Status.FAILED, failed_up.failed_stage
        result.error = failed_up.error
    else:
        try:
            result.data = body()
        except StageError as exc:
            result.status, result.failed_stage, result.error = (Status.FAILED, stage,
                                                                exc.message)
    if not result.ok:
        # Snakemake requires every declared output: a failed stage leaves them empty.
        for art in artifacts:
            touch_empty(art)
    result.finished_at = now_iso()
    result.write(meta_path)
    return result


def not_run(stage: str, meta_path: str, upstream: list[str], reason: str) -> StageResult | None:
    """The stage result of a stage not run because its device is absent (`reason`), written
    to meta_path; None when an upstream stage is not ok (run_stage records that instead)."""
    if not all(StageResult.read(up).ok for up in upstream):
        return None
    result = StageResult(stage=stage, status=NO_DEVICE, failed_stage=stage, error=reason,
                         started_at=now_iso())
    result.finished_at = result.started_at
    result.write(meta_path)
    return result
