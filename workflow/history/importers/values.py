"""What the v3 table's columns can hold and what a quantity can be, checked on every
run an importer made before anything is written: a value the table would wrap (an
integer wider than its column), turn into infinity or null (a float beyond Float32), or
that cannot be the quantity (a negative time or rate) refuses the file in one line naming
the row and the field. Times are checked where they are read (importers/run.unix_time)."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

from workflow.errors import ConfigError

FLOAT32_MAX = 3.4028234663852886e38
UINT32_MAX = 2**32 - 1
UINT64_MAX = 2**64 - 1
# A run measured "in the future" by up to a day is clock skew between machines (or a
# Forge date, which is a day); beyond that it is a wrong clock or another unit.
FUTURE_TOLERANCE_S = 86_400
# Units whose quantity cannot be negative: times, sizes, counts, ratios of times (x),
# and every rate (a unit ending in /s). A unit not named here (a v3 file's own, a
# correlation, a score, a percentage that may be a change) may be negative.
# A time that, read as milliseconds (or micro-, nanoseconds), falls after this one (2000)
# is named as one: no benchmark stored here was measured before.
SINCE_HINT = 946_684_800
NONNEGATIVE_UNITS = frozenset({"ms", "s", "us", "ns", "count", "bytes", "KB", "MB", "GB",
                               "KiB", "MiB", "GiB", "x"})
RUNNER_INTS = ("cpu_count", "avail_mem_in_gb", "gpu_count", "avail_gpu_mem_in_gb")


def now() -> int:
    return int(time.time())


def iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def time_problem(seconds: float, latest: int | None = None) -> str | None:
    """Why `seconds` is no unix time of a measurement (None when it is one): before
    1970, not finite, or later than now plus FUTURE_TOLERANCE_S; a millisecond or
    microsecond epoch is named as such."""
    latest = (now() if latest is None else latest) + FUTURE_TOLERANCE_S
    if not math.isfinite(seconds):
        return f"{seconds!r} is not a finite number"
    if seconds < 0:
        return f"{seconds:.0f} is before 1970"
    if seconds <= latest:
        return None
    for scale, unit in ((1e3, "milliseconds"), (1e6, "microseconds"), (1e9, "nanoseconds")):
        if SINCE_HINT <= seconds / scale <= latest:
            return (f"{seconds:.0f} looks like {unit} since 1970 ({iso(int(seconds / scale))}"
                    f" if so)")
    return f"{seconds:.0f} is in the future"


def nonnegative(unit: str) -> bool:
    return unit in NONNEGATIVE_UNITS or unit.endswith("/s")


def _float_problem(value, unit: str) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{value!r} is not a number"
    if not math.isfinite(value) or abs(value) > FLOAT32_MAX:
        return f"{value!r} is beyond the Float32 column (|x| <= 3.4e38, finite)"
    if value < 0 and nonnegative(unit):
        return f"{value!r} is negative, which a quantity in {unit} cannot be"
    return None


def _int_problem(value, top: int) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{value!r} is not a whole number"
    if not 0 <= value <= top:
        return f"{value} is outside the column's range 0..{top}"
    return None


def check_run(run) -> None:
    """Every value of a run's rows as the table can hold it (module docstring); raises
    ConfigError naming the file, the row (its case and metric) and the field."""
    stamp = time_problem(run.timestamp)
    if stamp:
        _refuse(run.path, "timestamp", stamp, "unix seconds of a time since 1970, not "
                "later than now")
    for i, row in enumerate(run.rows):
        metric = row["metric"]
        where = (f"rows[{i}] (case {row['benchmark']['extra_info'].get('case_id', '?')!r}, "
                 f"metric {metric.get('name')!r})")
        if "timestamp" in row and time_problem(row["timestamp"]):
            _refuse(run.path, f"{where}: timestamp", time_problem(row["timestamp"]),
                    "unix seconds of a time since 1970, not later than now")
        unit = str(metric.get("extra_info", {}).get("unit", ""))
        for j, value in enumerate(metric.get("benchmark_values") or []):
            bad = _float_problem(value, unit)
            if bad:
                _refuse(run.path, f"{where}: benchmark_values[{j}]", bad, _want(unit))
        bad = _float_problem(metric.get("target_value", 0.0), "")
        if bad:
            _refuse(run.path, f"{where}: target_value", bad, "a finite Float32 number")
        for k, runner in enumerate(row.get("runners") or []):
            for key in RUNNER_INTS:
                if key in runner:
                    bad = _int_problem(runner[key], UINT32_MAX)
                    if bad:
                        _refuse(run.path, f"{where}: runners[{k}].{key}", bad,
                                "a whole number the UInt32 column holds")


def _want(unit: str) -> str:
    if nonnegative(unit):
        return f"a finite number of at least 0 in {unit} that a Float32 column holds"
    return "a finite number that a Float32 column holds"


def _refuse(path, key: str, what: str, expected: str):
    raise ConfigError([f"{path}: {key}: {what}; expected {expected}"])
