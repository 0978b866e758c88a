"""Which dispatches (IREE) or ops (torch) explain a change of a case's time (issue 25,
"Attributed"): pure functions over two profiles, no I/O.

A profile is a list of rows from one profiling invocation of a case, in either shape:
- IREE, one row per dispatch function (`iree-profile dispatch`):
  `{name, count, total_ms, mean_ms, share}`, e.g. `main$async_dispatch_1_matmul_128x256x256_f32`;
- torch, one row per aten op (torch.profiler's key_averages): `{name, calls, self_ms, share}`.
Only `name` and the time (`total_ms` / `self_ms`) are read: the counts depend on how
many times the profiling invocation called the entry function, which differs by side.

Rows are matched by name across the two sides. IREE numbers its dispatches in program
order (`..._dispatch_<ordinal>_...`), so a fusion change earlier in the program shifts
every later ordinal, and a name carries its shape (`matmul_64x256x512`), so a layer that
grows renames its dispatch. Exact names are matched first, then the names without the
ordinal, then without ordinal and shape (same op kind and element type, in program
order); such a row says what it was called on the base side. The rest are added or
removed dispatches: the fusion changed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# The program-order ordinal IREE puts in a dispatch's name ("main$async_dispatch_3_...",
# "main_dispatch_0_..."); torch op names carry none, so removing it changes nothing there.
_ORDINAL = re.compile(r"(dispatch)_\d+(?=_|$)")
# The shape IREE puts after the op kind ("_64x256x512", "_Dx256" with a dynamic dim).
_SHAPE = re.compile(r"_(?:\d+|D)(?:x(?:\d+|D))*(?=_|$)")

MATCHED, RENAMED, RESHAPED = "matched", "renamed", "reshaped"
ADDED, REMOVED, OTHER = "added", "removed", "other"


@dataclass(frozen=True)
class ProfileRow:
    """One dispatch or op of one side: its name and its time in the profiling invocation
    (total over its calls)."""
    name: str
    time_ms: float


@dataclass(frozen=True)
class RowChange:
    """One dispatch or op across the two sides. `base_ms` / `new_ms` are per call of the
    case's entry function (see `attribute`), None on the side that lacks the row;
    `base_name` is set when it differs from `name` (kind `renamed`: the ordinal shifted;
    `reshaped`: the shape changed; `name` is the new side's); `explains` is the fraction
    of the case's total change this row accounts for, None when that change is within
    noise. A row of kind `other` sums the rows past `top`."""
    name: str
    kind: str
    base_ms: float | None
    new_ms: float | None
    base_share: float | None
    new_share: float | None
    delta_ms: float
    delta_pct: float | None
    explains: float | None
    base_name: str | None = None


@dataclass(frozen=True)
class Attribution:
    """The rows ordered by |change| (the first `top`, then one `other` row for the rest),
    the case's two times and their change, and every added and removed name (also those
    grouped into `other`). `missing` names the side(s) without a profile ("base", "new",
    "both"), in which case `rows` is empty; `within_noise` says the total change is too
    small to divide among the rows."""
    rows: tuple[RowChange, ...]
    base_total_ms: float
    new_total_ms: float
    delta_ms: float
    within_noise: bool
    added: tuple[str, ...]
    removed: tuple[str, ...]
    missing: str | None = None


def normalize(rows: list[dict], side: str) -> list[ProfileRow]:
    """Profile rows of either shape (module docstring) as ProfileRows. A row of neither
    shape is our own record's bug: ValueError, one line."""
    out = []
    for i, row in enumerate(rows):
        if "total_ms" in row:
            time_ms = row["total_ms"]
        elif "self_ms" in row:
            time_ms = row["self_ms"]
        else:
            raise ValueError(f"{side} profile: row {i}: no total_ms or self_ms; expected an "
                             "IREE dispatch row {name, count, total_ms, ...} or a torch op "
                             "row {name, calls, self_ms, ...}")
        if not isinstance(row.get("name"), str) or not isinstance(time_ms, (int, float)) \
                or time_ms < 0:
            raise ValueError(f"{side} profile: row {i}: name {row.get('name')!r}, time "
                             f"{time_ms!r}; expected a name and a time of at least 0 ms")
        out.append(ProfileRow(row["name"], float(time_ms)))
    return out


def strip_ordinal(name: str) -> str:
    """A dispatch's name without its program-order ordinal (module docstring)."""
    return _ORDINAL.sub(r"\1", name)


def strip_shape(name: str) -> str:
    """A dispatch's name without ordinal and shape: what it does and its element type
    (`main$async_dispatch_matmul_f32`), the same for a matmul whose layer grew."""
    return _SHAPE.sub("", strip_ordinal(name))


def _ordinal(row: ProfileRow) -> int:
    m = re.search(r"dispatch_(\d+)(?=_|$)", row.name)
    return int(m.group(1)) if m else -1


# The matching passes, strictest first: (kind of the pairs it makes, the name's key).
_PASSES = ((MATCHED, lambda name: name), (RENAMED, strip_ordinal), (RESHAPED, strip_shape))


def match(base: list[ProfileRow], new: list[ProfileRow]) -> tuple[
        list[tuple[str, ProfileRow, ProfileRow]], list[ProfileRow], list[ProfileRow]]:
    """((kind, base row, new row) pairs, added new rows, removed base rows). Each pass
    pairs the rows the stricter ones left whose keys agree (_PASSES): exact names, then
    names without ordinal, then without ordinal and shape. Rows of one key pair up in
    program order (two reductions of one shape, say), the surplus going to the next pass
    and after the last to added or removed."""
    rest_base, rest_new = sorted(base, key=_ordinal), sorted(new, key=_ordinal)
    pairs = []
    for kind, key in _PASSES:
        unpaired = []
        for b in rest_base:
            partner = next((n for n in rest_new if key(n.name) == key(b.name)), None)
            if partner is None:
                unpaired.append(b)
            else:
                rest_new.remove(partner)
                pairs.append((kind, b, partner))
        rest_base = unpaired
    return pairs, rest_new, rest_base


def _scale(rows: list[ProfileRow], total_ms: float) -> float | None:
    """ms per call of the entry function per ms of profile time (None: no profile time)."""
    profiled = math.fsum(r.time_ms for r in rows)
    return total_ms / profiled if profiled > 0 else None


def _change(name, kind, b_ms, n_ms, b_total, n_total, total_delta, base_name=None):
    delta = (n_ms or 0.0) - (b_ms or 0.0)
    return RowChange(
        name=name, kind=kind, base_ms=b_ms, new_ms=n_ms,
        base_share=None if b_ms is None or not b_total else b_ms / b_total,
        new_share=None if n_ms is None or not n_total else n_ms / n_total,
        delta_ms=delta, delta_pct=100.0 * delta / b_ms if b_ms else None,
        explains=None if total_delta is None else delta / total_delta,
        base_name=base_name)


def attribute(base_rows: list[dict], new_rows: list[dict], base_total_ms: float,
              new_total_ms: float, *, top: int = 5, noise_ms: float = 0.0) -> Attribution:
    """Which rows explain the change from `base_total_ms` to `new_total_ms` (each side's
    measured median per call of the entry function).

    Normalization: a profiling invocation calls the entry function some number of times
    (its own repetitions, not counted in the timing) and the rows hold totals over those
    calls, so each side's row times are scaled by (that side's measured median / the sum
    of its profile's row times). Each row then reads as ms per call of the entry function,
    its share is its fraction of the profiled time, and a side's rows sum to its median:
    the rows' changes sum to the case's change, and each row's `explains` (its change / the
    case's change) to 1. Time outside every dispatch or op (runtime overhead) is spread
    over the rows in proportion; the profile does not see it.

    `noise_ms`: a total change of at most this size (e.g. the half-width of the
    comparison's interval) is within noise, and no row gets an `explains` (dividing by a
    change of about zero would give any number). Rows past `top` by |change| are summed
    into one `other` row."""
    base, new = normalize(base_rows, "base"), normalize(new_rows, "new")
    delta = new_total_ms - base_total_ms
    noisy = abs(delta) <= noise_ms or math.isclose(new_total_ms, base_total_ms, rel_tol=1e-9)
    b_scale, n_scale = _scale(base, base_total_ms), _scale(new, new_total_ms)
    missing = {(True, True): "both", (True, False): "base", (False, True): "new"}.get(
        (b_scale is None, n_scale is None))
    if missing:
        return Attribution((), base_total_ms, new_total_ms, delta, noisy, (), (), missing)
    pairs, added, removed = match(base, new)
    total = None if noisy else delta
    rows = [_change(n.name, kind, b.time_ms * b_scale, n.time_ms * n_scale, base_total_ms,
                    new_total_ms, total, None if kind == MATCHED else b.name)
            for kind, b, n in pairs]
    rows += [_change(n.name, ADDED, None, n.time_ms * n_scale, base_total_ms, new_total_ms,
                     total) for n in added]
    rows += [_change(b.name, REMOVED, b.time_ms * b_scale, None, base_total_ms, new_total_ms,
                     total) for b in removed]
    rows.sort(key=lambda r: (-abs(r.delta_ms), r.name))
    return Attribution(tuple(_group_tail(rows, top, base_total_ms, new_total_ms, total)),
                       base_total_ms, new_total_ms, delta, noisy,
                       tuple(n.name for n in added), tuple(b.name for b in removed))


def _group_tail(rows: list[RowChange], top: int, b_total: float, n_total: float,
                total_delta: float | None) -> list[RowChange]:
    """The first `top` rows, then the rest summed into one `other` row (its count in the
    name), so that many tiny dispatches or ops do not bury the few that matter."""
    if len(rows) <= top + 1:  # one row past top is shown as itself, not as "1 other"
        return rows
    tail = rows[top:]
    b_ms = math.fsum(r.base_ms or 0.0 for r in tail)
    n_ms = math.fsum(r.new_ms or 0.0 for r in tail)
    return rows[:top] + [_change(f"{len(tail)} others", OTHER, b_ms, n_ms, b_total, n_total,
                                 total_delta)]


def _ms(x: float) -> str:
    """A signed time in ms at a precision that keeps microsecond-scale dispatches apart."""
    return f"{x:+.0f}" if abs(x) >= 100 else f"{x:+.3g}"


def row_line(row: RowChange) -> str:
    """`+1.8 ms (+62 %) <name> explains 91 % of the change`, with `(added)` / `(removed)`
    in place of the percentage and `(was dispatch_2)` after a row matched across an
    ordinal shift."""
    if row.kind in (ADDED, REMOVED):
        how = row.kind
    elif row.delta_pct is None:
        how = "from 0 ms"
    else:
        how = f"{row.delta_pct:+.0f} %"
    was = ""
    if row.kind in (RENAMED, RESHAPED):  # the base name's part that differs, from ordinal on
        m = re.search(r"dispatch_\d+" if row.kind == RENAMED else r"dispatch_\d+.*",
                      row.base_name or "")
        was = f" (was {m.group(0) if m else row.base_name})"
    explains = "" if row.explains is None else \
        f" explains {100 * row.explains:.0f} % of the change"
    return f"{_ms(row.delta_ms)} ms ({how}) {row.name}{was}{explains}"


def _missing_line(a: Attribution) -> str:
    return "no profile on either side" if a.missing == "both" else \
        f"no profile on the {a.missing} side"


def _noise_line(a: Attribution) -> str:
    return (f"{_ms(a.delta_ms)} ms in total ({a.base_total_ms:.3g} -> {a.new_total_ms:.3g} "
            "ms) is within noise: not divided among the rows")


def summary_line(a: Attribution) -> str:
    """One line: the row with the largest change (row_line), or why there is none."""
    if a.missing:
        return _missing_line(a)
    if not a.rows:
        return "no dispatches or ops on either side"
    if a.within_noise:
        return f"{_noise_line(a)}; largest: {row_line(a.rows[0])}"
    return row_line(a.rows[0])


def summary_lines(a: Attribution, top: int = 3) -> list[str]:
    """A short form: the `top` rows by |change| (or why there are none), then the added
    and removed dispatches when the fusion changed."""
    if a.missing:
        return [_missing_line(a)]
    lines = [_noise_line(a)] if a.within_noise else []
    lines += [row_line(r) for r in a.rows[:top]]
    fusion = [f"{what}: {', '.join(names)}"
              for what, names in (("added", a.added), ("removed", a.removed)) if names]
    if fusion:
        lines.append("; ".join(fusion))
    return lines
