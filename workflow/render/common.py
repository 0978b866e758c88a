"""Pure helpers shared by every renderer: what a case's status means to a reader, which
cases are its siblings (the eager and baseline cases it is compared with), and the
figures derived from them. Every format calls these, so a speedup or a percentage is
the same number in the Markdown, the CSV, the dashboard JSON and the HTML page (speedups
are the record's own, computed once at aggregation by workflow.stats.speedup).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from workflow.errors import error_line
from workflow.records.kernels import others_count
from workflow.stats.enums import Status, Verdict
from workflow.stats.ratio_text import ratio_text
from workflow.stats.speedup import CROSS_RUN, PAIRED

EAGER = "torch-eager"
INDUCTOR = "torch-inductor"
BASELINE = "baseline"

# Reader-facing status: the record's status, with `ok` split into ok and degraded.
# compile-only: compiled (dispatches, size, compile time judged), not run: no device here.
DEGRADED = "degraded"
SYMBOLS = {Status.OK: "✅", DEGRADED: "🚧", Status.FAILED: "✘", Status.UNSUPPORTED: "⊘",
           Status.SKIPPED: "⏭", Status.COMPILE_ONLY: "⚙"}
# Regressions first, then failures, then accuracy losses: what a reader acts on first.
_ORDER = {Verdict.REGRESSION: 0, Status.FAILED: 1, DEGRADED: 2, Status.UNSUPPORTED: 3,
          Status.SKIPPED: 4, Status.COMPILE_ONLY: 5, Status.OK: 6}
_VERDICT_KEYS = (("verdict", "time"), ("dispatch_verdict", "dispatch count"),
                 ("size_verdict", "binary size"))


def section(case: dict, name: str) -> dict:
    """A record section, {} when null (failed stages leave theirs null)."""
    return case.get(name) or {}


def median_ms(case: dict) -> float | None:
    return (section(case, "timing").get("median_ms") if case.get("status") == Status.OK
            else None)


def regressions(case: dict) -> list[str]:
    """What the golden comparison flagged: time, dispatch count, binary size."""
    golden = section(case, "golden")
    return [what for key, what in _VERDICT_KEYS if golden.get(key) == Verdict.REGRESSION]


def accuracy_problem(case: dict) -> str | None:
    """Why the outputs are below their threshold, None when they are not (or unknown)."""
    acc = section(case, "accuracy")
    if not acc:
        return None
    if acc.get("metric") == "sqnr":  # a quantizing recipe: its SQNR alone decides
        if acc.get("accurate") is not False:
            return None
        sqnr, floor = acc.get("sqnr_db"), acc["min_sqnr_db"]
        # A null SQNR of an inaccurate case is a nan or -inf one (a zero reference).
        return (f"sqnr {sqnr:.1f} dB < {floor:g} dB" if sqnr is not None
                else f"sqnr undefined, needs >= {floor:g} dB")
    pcc, min_pcc = acc.get("pcc"), acc.get("min_pcc")
    if pcc is not None and min_pcc is not None and pcc < min_pcc:
        return f"pcc {pcc:.6f} < {min_pcc:g}"
    if acc.get("accurate") is False:
        return (f"outside rtol {acc.get('rtol')}, atol {acc.get('atol')} "
                f"(max abs err {acc.get('max_abs_err'):.3g})")
    return None


def status(case: dict) -> str:
    """ok | degraded | failed | unsupported | skipped | compile-only. Degraded: it ran, but
    its accuracy is below its threshold or the golden comparison found a regression (a
    compile-only case stays compile-only; its dispatch or size regression is listed with
    the regressions)."""
    if case["status"] != Status.OK:
        return case["status"]
    return DEGRADED if regressions(case) or accuracy_problem(case) else Status.OK


def regression_text(case: dict) -> str:
    """'time regression: median 1.3 ms vs golden 1 ms (×1.300, p = 0.012)'; dispatch and
    size regressions are named only (the golden keeps just their verdicts)."""
    kinds = regressions(case)
    text = ", ".join(kinds) + " regression"
    if "time" in kinds:
        golden = section(case, "golden")
        level = (f" of its run's level ×{ratio_text(golden['drift']['factor'])}"
                 if golden.get("drift") else "")
        text += (f": median {fmt(median_ms(case))} ms vs golden {fmt(golden.get('value_ms'))}"
                 f" ms (×{fmt(golden.get('ratio'), '.3f')}{level}, "
                 f"p = {fmt(golden.get('p_value'), '.3g')})")
    return text


def degraded_reasons(case: dict) -> list[str]:
    reasons = [f"{what} regression" for what in regressions(case)]
    problem = accuracy_problem(case)
    if problem:
        reasons.append(f"accuracy: {problem}")
    return reasons


def sort_key(case: dict) -> tuple:
    """Regressions first, then failures, degraded accuracy, the rest; by id within."""
    rank = Verdict.REGRESSION if regressions(case) else status(case)
    return (_ORDER[rank], case["id"])


def ordered(cases: list[dict]) -> list[dict]:
    return sorted(cases, key=sort_key)


def gemm_mkn(case: dict) -> tuple[int, int, int] | None:
    """[M, K, N] of a GEMM-like case (the torchao shape convention of the linear family
    and mlp: M rows of width K times a K x N weight); None for other shapes."""
    shape = case.get("shape") or []
    if len(shape) == 3 and all(isinstance(v, int) for v in shape):
        return shape[0], shape[1], shape[2]
    return None


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


@dataclass(frozen=True)
class Index:
    """Cases by (sku, backend, workload, recipe): how a case finds its siblings."""

    by_key: dict[tuple[str, str, str, str], dict]

    @classmethod
    def of(cls, cases: list[dict]) -> Index:
        return cls({(c["sku"], c["backend"], c["workload"], c["recipe"]): c for c in cases})

    def median(self, case: dict, *, backend: str | None = None,
               recipe: str | None = None) -> float | None:
        """The median of the sibling that differs from `case` in backend and/or recipe."""
        key = (case["sku"], backend or case["backend"], case["workload"],
               recipe or case["recipe"])
        sibling = self.by_key.get(key)
        return median_ms(sibling) if sibling else None

    def eager_ms(self, case: dict) -> float | None:
        """torch-eager's median for the same SKU, workload and recipe, beside a case that
        has a time of its own: an unsupported or failed row with an eager time reads as
        if it had been compared."""
        return self.median(case, backend=EAGER) if median_ms(case) is not None else None

    def compiled_backend(self, case: dict) -> str | None:
        """The backend whose times are torchao's 'compiled' ones for this case: its own,
        unless it is torch-eager; then torch-inductor (or torch-inductor-<mode>)."""
        if case["backend"] != EAGER:
            return case["backend"]
        found = sorted({b for (sku, b, w, _) in self.by_key
                        if sku == case["sku"] and w == case["workload"]
                        and b.startswith(INDUCTOR)})
        return INDUCTOR if INDUCTOR in found else (found[0] if found else None)

    def torchao_times(self, case: dict) -> dict[str, float | None]:
        """torchao's four times for this case's SKU and workload: baseline and quantized
        (this case's recipe), eager (torch-eager) and compiled (`compiled_backend`)."""
        compiled = self.compiled_backend(case)
        return {
            "baseline_eager": self.median(case, backend=EAGER, recipe=BASELINE),
            "quantized_eager": self.median(case, backend=EAGER),
            "baseline_compiled": (self.median(case, backend=compiled, recipe=BASELINE)
                                  if compiled else None),
            "quantized_compiled": (self.median(case, backend=compiled)
                                   if compiled else None),
        }


def speedups(case: dict) -> dict[str, float | None]:
    """The case's own speedup section (ratios of medians, > 1: this case is faster), as
    workflow.stats.speedup.fill_speedups computed it when the report was aggregated
    (every report.json has one: the schema requires it). Renderers read it, never
    recompute it, so every format shows the number the record holds."""
    own = section(case, "speedup")
    return {"vs_eager": own.get("vs_eager"), "vs_baseline": own.get("vs_baseline")}


def speedup_basis(case: dict, which: str) -> dict | None:
    """What the case's speedup `which` (vs_eager, vs_baseline) is: the record's
    speedup.basis entry; None where there is no speedup. A report written before
    speedup.basis existed holds only ratios of medians: those are cross-run."""
    own = section(case, "speedup")
    if own.get(which) is None:
        return None
    return (own.get("basis") or {}).get(which) or {"kind": CROSS_RUN}


def _seconds_between(first: str | None, second: str | None) -> float | None:
    try:
        return abs((datetime.fromisoformat(second) - datetime.fromisoformat(first))
                   .total_seconds())
    except (TypeError, ValueError):  # a time not recorded (null) or not ISO 8601
        return None


def duration_text(seconds: float) -> str:
    """'<1 s', '42 s', '17 min', '2.5 h': how far apart two measurements were."""
    if seconds < 1:
        return "<1 s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def basis_text(basis: dict, spec: str = ".3g") -> str:
    """'cross-run, 3 min apart' (how far apart the two sides were measured, where both
    times are known), or 'paired [1.9, 2.1]' with the pair's interval."""
    if basis.get("kind") == PAIRED:
        ci = basis.get("ci95")
        return (f"paired [{fmt(ci[0], spec)}, {fmt(ci[1], spec)}]" if ci
                else "paired, no 95% interval")
    gap = _seconds_between(basis.get("base_measured_at"), basis.get("case_measured_at"))
    return CROSS_RUN + (f", {duration_text(gap)} apart" if gap is not None else "")


def speedup_text(case: dict, which: str, spec: str = ".3g") -> str:
    """'2.3× (cross-run, 3 min apart)', '2.3× (paired [2.2, 2.4])' or '—': every speedup
    shown says what it is."""
    basis = speedup_basis(case, which)
    if basis is None:
        return "—"
    return f"{fmt(speedups(case)[which], spec)}× ({basis_text(basis, spec)})"


def disturbed(case: dict) -> bool:
    """Whether the case's kept invocations stayed disturbed by outside load."""
    return bool(section(case, "timing").get("disturbed"))


def disturbance_reason(case: dict) -> str:
    """Why the case is disturbed, on one line."""
    why = (section(case, "timing").get("disturbance") or {}).get("reason")
    return " ".join((why or "disturbed by outside load (no reason recorded)").split())


def flag_counts(cases: list[dict]) -> dict[str, int]:
    """How many timed cases are noisy (CV of invocation medians above the SKU's noisy_cv)
    and how many disturbed (outside load during their kept invocations)."""
    timed = [x for x in cases if median_ms(x) is not None]
    return {"timed": len(timed),
            "noisy": sum(bool(section(x, "timing").get("noisy")) for x in timed),
            "disturbed": sum(disturbed(x) for x in timed)}


def percent_of_peak(case: dict, peak: dict | None) -> float | None:
    """Achieved GFLOP/s over the machine's measured f32 matmul peak, for GEMM-like f32
    cases. The record's own value wins. Other dtypes have other peaks: left blank."""
    own = section(case, "throughput").get("percent_of_peak")
    if own is not None:
        return own
    gflops = section(case, "throughput").get("gflops")
    if not peak or not gflops or gemm_mkn(case) is None or case.get("dtype") != "f32":
        return None
    return 100.0 * gflops / peak["gflops"]


def fmt(value: Any, spec: str = ".4g", blank: str = "—") -> str:
    """A number for a reader; `blank` for null, NaN or inf (never 'None')."""
    if value is None:
        return blank
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and not math.isfinite(value):
        return blank
    if isinstance(value, int | float):
        return format(value, spec)
    return str(value)


def shape_text(case: dict) -> str:
    return "x".join(str(v) for v in case.get("shape") or []) or "—"


def interval_text(case: dict) -> str:
    """'1.23 [1.20, 1.30]': the median and its 95% interval, in ms."""
    med = median_ms(case)
    if med is None:
        return "—"
    ci = section(case, "timing").get("ci95_ms") or []
    if len(ci) == 2:
        return f"{fmt(med)} [{fmt(ci[0])}, {fmt(ci[1])}]"
    return fmt(med)


def md_text(value: Any) -> str:
    """Text for a Markdown cell or list item, shown as written: `&` and `<` escaped as
    HTML, so that a tool's error (or any field of a report) carrying `<script>` or
    `<img onerror=...>` stays text instead of markup a viewer renders or runs (`<` opens
    every kind of raw HTML and autolink, `&` every entity; `>` opens nothing, so arrows
    and comparisons stay readable in the file); `|` escaped, which would end a table
    cell; `$` escaped, which GitHub reads as math between two of them (IREE's dispatch
    names carry one each: `main$async_dispatch_0_...`); on one line. Case ids need none
    of it: they go in code spans, whose content Markdown never reads as markup, and their
    schema allows no backtick."""
    text = (str(value).replace("&", "&amp;").replace("<", "&lt;").replace("|", "\\|")
            .replace("$", "\\$"))
    return " ".join(text.splitlines())


def error_summary(text: str | None, limit: int = 200) -> str:
    """One line about a failure, naming its cause (errors.error_line)."""
    return error_line(text, limit)


def verdict_text(case: dict) -> str:
    """The golden verdict of the time, plus the dispatch-count and size verdicts where
    they say something (not pass, not no-golden)."""
    golden = section(case, "golden")
    if not golden:
        return "—"
    text = golden.get("verdict") or "—"
    if golden.get("ratio") is not None:
        text += f" ×{ratio_text(golden['ratio'])}"
        if golden.get("drift"):  # judged against its run's level (regression/drift.py)
            text += f" of level ×{ratio_text(golden['drift']['factor'])}"
    extra = [f"{what}: {golden[key]}" for key, what in _VERDICT_KEYS[1:]
             if golden.get(key) not in (None, Verdict.PASS, Verdict.NO_GOLDEN)]
    return "; ".join([text, *extra])


def skipped(cases: list[dict]) -> list[dict]:
    """The skipped cases, by id: every one is shown with its reason, never dropped."""
    return sorted((x for x in cases if x["status"] == Status.SKIPPED), key=lambda x: x["id"])


def unsupported(cases: list[dict]) -> list[dict]:
    """The unsupported cases, by id: each is shown with why (the record's error)."""
    return sorted((x for x in cases if x["status"] == Status.UNSUPPORTED),
                  key=lambda x: x["id"])


def cv_text(case: dict) -> str:
    """'3.1 %' or '12.4 % noisy': the CV of a timed case's invocation medians, with the
    noisy flag (its CV above the SKU's noisy_cv); '—' for a case not timed (the same
    cases `flag_counts` counts as timed)."""
    if median_ms(case) is None:
        return "—"
    timing = section(case, "timing")
    cv = timing.get("cv")
    text = "—" if cv is None else f"{100 * cv:.1f} %"
    return text + (" noisy" if timing.get("noisy") else "")


def compile_only(cases: list[dict]) -> list[dict]:
    """The compile-only cases, by id: each is shown with why it was not run."""
    return sorted((x for x in cases if x["status"] == Status.COMPILE_ONLY),
                  key=lambda x: x["id"])


def not_measured(case: dict, name: str) -> str | None:
    """'unsupported: <reason>' for a section a stage did not measure (a compile-only case's
    timing and accuracy), None when it was measured or simply is absent."""
    entry = (case.get("not_measured") or {}).get(name)
    if not entry:
        return None
    why = " ".join(entry.get("reason", "").split())
    return f"{entry.get('status', Status.UNSUPPORTED)}: {why}"


def skip_reason(case: dict) -> str:
    """Why a case was skipped, is unsupported or only compiled (the record's error), on
    one line."""
    return " ".join((case.get("error") or "no reason recorded").split())


def counts(cases: list[dict]) -> dict[str, int]:
    out = dict.fromkeys(SYMBOLS, 0)
    for case in cases:
        out[status(case)] += 1
    return out


# --- where a case's time goes: its profile's kernels (issue 25) ------------------------

# The record's row that sums the kernels past the kept ones (report.schema.json, kernels).


@dataclass(frozen=True)
class TopKernels:
    """A case's top dispatches or ops for a reader: `rows` the `n` largest (the record's
    rows, largest first, each with `ms_per_call` and `per_call` added where its times
    and the profile's calls are known), `more` how many kernels are past them and
    `more_share` their part of the time (None when compile-only or unknown)."""

    source: str
    mode: str | None
    calls: int | None
    ms_per_call: float | None
    rows: list[dict]
    more: int
    more_share: float | None
    error: str | None

    @property
    def compile_only(self) -> bool:
        return self.calls is None


def kernels(case: dict) -> dict | None:
    """The case's kernels block; None when it was not profiled."""
    return case.get("kernels") or None


def top_kernels(case: dict, n: int) -> TopKernels | None:
    """The `n` largest kernels of the case's profile (`TopKernels`); None when the case
    was not profiled. A block whose tool failed has no rows and says why in `error`."""
    block = kernels(case)
    if block is None:
        return None
    calls = block.get("calls")
    named, others = [], 0
    for row in block.get("rows") or []:
        rest = others_count(row["name"])
        if rest is not None:
            others += rest
        else:
            named.append(row)
    shown = [{**row, "ms_per_call": ratio(row.get("total_ms"), calls),
              "per_call": ratio(row.get("count"), calls)} for row in named[:n]]
    shares = [row.get("share") for row in shown]
    more = len(named) - len(shown) + others
    more_share = max(0.0, 1.0 - sum(shares)) if more and None not in shares else None
    return TopKernels(source=block["source"], mode=block.get("mode"), calls=calls,
                      ms_per_call=ratio(block.get("total_ms"), calls), rows=shown,
                      more=more, more_share=more_share, error=block.get("error"))


def kernels_text(top: TopKernels) -> str:
    """What the profile is, on one line: 'iree-profile (host-execution), 5 calls, 1.79 ms
    per call' or "iree-compile's dispatch list (compile-only: no times)"."""
    if top.compile_only:
        return f"{top.source}'s dispatch list (compile-only: no times)"
    what = f"{top.source} ({top.mode})" if top.mode else top.source
    return (f"{what}, {top.calls} calls"
            + (f", {fmt(top.ms_per_call, '.3g')} ms per call" if top.ms_per_call else ""))


def kernel_text(row: dict) -> str:
    """A kernel's figures after its name: '86.4 %, 0.308 ms per call, 1× per call' (its
    share of the profile's time, its time and how often it runs per call of the entry
    function), or, compile-only, '1 dispatch site'."""
    if row.get("per_call") is None:  # compile-only: the compiler's dispatch sites
        count = row.get("count")
        return "" if count is None else f"{count} dispatch site{'s' * (count != 1)}"
    share = "—" if row.get("share") is None else f"{100 * row['share']:.1f} %"
    return (f"{share}, {fmt(row.get('ms_per_call'), '.3g')} ms per call, "
            f"{fmt(row['per_call'], '.3g')}× per call")


def short_name(name: str, limit: int = 72) -> str:
    """A long kernel name shortened in the middle (its head, e.g. the dispatch number,
    and its tail, e.g. the shape and type, kept); the record has it whole."""
    if len(name) <= limit:
        return name
    head = (limit - 1) * 2 // 5  # the tail, the op, its shape and types, says more
    return name[:head] + "…" + name[len(name) - (limit - 1 - head):]
