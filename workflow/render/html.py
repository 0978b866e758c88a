"""results/report.html: one self-contained page (inline CSS, JS and PNG data URIs; nothing
loaded from the network): summary with regressions first, a sortable and filterable table
with one row per case, latency with intervals, M x K heatmaps of shape sweeps, and the
GEMM-like cases' achieved GFLOP/s against the machine's measured peak, and where each
profiled case's time goes (a stacked bar of its kernels' shares, its top ones). This module
computes the values; templates/report.html.j2 lays them out (escaped: `templating`)."""

from __future__ import annotations

import zlib

from workflow.records.kernels import others_name
from workflow.render import brief, history, plots, templating
from workflow.render import common as c
from workflow.stats.enums import Status, status_at

# (header, kind, cell function); kind "num" sorts numerically on the cell's data-v.
Col = tuple[str, str, object]
# The column whose cell links to the case's series in history.html (history_link).
LINKED = "Workload"
# The flag of a case whose measurement stayed disturbed by outside load: a word, styled
# by the row's class, so that it shows without an emoji font.
DISTURBED = "disturbed"


def speedup(which: str):
    """A speedup column's cell: (its value, which sorts, and the text, which says what
    it is: '2.3 (cross-run, 3 min apart)' or '2.3 (paired [2.2, 2.4])')."""
    def cell(x: dict) -> tuple[float, str] | None:
        basis = c.speedup_basis(x, which)
        if basis is None:
            return None
        value = c.speedups(x)[which]
        return value, f"{c.fmt(value)} ({c.basis_text(basis, '.4g')})"
    return cell


def _columns(index: c.Index, peak: dict | None) -> list[Col]:
    def timing(key):
        return lambda x: c.section(x, "timing").get(key) if c.median_ms(x) is not None else None

    def ci(x):
        interval = c.section(x, "timing").get("ci95_ms") or []
        return (f"[{c.fmt(interval[0])}, {c.fmt(interval[1])}]" + brief.stop_note(x)
                if len(interval) == 2 and c.median_ms(x) is not None else "")

    # What a reader scans first comes first, so that it shows in a 1,400 px window: the
    # status with the golden verdict beside it (an `ok` row may be `inconclusive ×1.38`),
    # the case, its time and interval, the speedups. Free text ("note" columns) is cut
    # short with the whole on hover: one CUDA driver message was 1,800 px wide.
    return [
        # The status as a word; its shape is CSS on the row's st-<status> class (the
        # page's style), so it shows without an emoji font and reads aloud as the word.
        ("Status", "txt", lambda x: c.status(x)
                                    + (f" ({x['stage']})" if x.get("stage") else "")
                                    + (f" · {DISTURBED}" if c.disturbed(x) else "")),
        ("Golden", "note", c.verdict_text),
        # The id is sku/backend/workload/recipe: its parts are the columns, so the table
        # stays narrow; the row's title and data-id carry the whole id.
        ("Workload", "txt", lambda x: x["workload"]),
        ("SKU", "txt", lambda x: x["sku"]),
        ("Backend", "txt", lambda x: x["backend"]),
        ("Recipe", "txt", lambda x: x["recipe"]),
        ("Mode", "txt", lambda x: x["mode"]),
        ("Median ms", "num", timing("median_ms")),
        ("95% CI ms", "txt", ci),
        # The CV in % with the noisy flag as text; it sorts on the CV itself.
        ("CV", "num", lambda x: ((c.section(x, "timing")["cv"], c.cv_text(x))
                                 if c.median_ms(x) is not None else None)),
        ("Speedup vs eager", "num", speedup("vs_eager")),
        ("Speedup vs baseline", "num", speedup("vs_baseline")),
        # Why a compile-only case has no time ("unsupported: no cuda device here: ...").
        ("Not measured", "note", lambda x: c.not_measured(x, "timing") or ""),
        ("Eager ms", "num", index.eager_ms),
        ("GFLOP/s", "num", lambda x: c.section(x, "throughput").get("gflops")),
        ("% of peak", "num", lambda x: c.percent_of_peak(x, peak)),
        ("Compile s", "num", lambda x: c.section(x, "compile").get("seconds")),
        ("Dispatches", "num", lambda x: c.section(x, "compile").get("dispatch_count")),
        ("PCC", "num", lambda x: c.section(x, "accuracy").get("pcc")),
    ]


def _cell(kind: str, value) -> tuple[str, str, str]:
    """(kind, data-v, text): a number's data-v is its full value, which the sort reads;
    a (value, text) pair is a number shown with its own text; a note is shown cut short."""
    if kind == "num" and isinstance(value, tuple):
        return kind, repr(float(value[0])), value[1]
    if kind == "num":
        raw = "" if value is None else repr(float(value))
        spec = ".6f" if isinstance(value, float) and 0.99 < value <= 1 else ".4g"
        return kind, raw, c.fmt(value, spec, blank="")
    if kind == "note":  # the whole text goes to the cell's title, shown on hover
        text = " ".join(str(value).split())
        return kind, text, brief.short(text)
    return kind, "", str(value)


def table(cases: list[dict], index: c.Index, peak: dict | None,
          history_link: bool = False) -> tuple[list, list[dict]]:
    """The header's (name, kind) and one row per case, in the report's order; with
    history_link, each row's LINKED cell links to its latency series in history.html."""
    cols = _columns(index, peak)
    linked = [name for name, _, _ in cols].index(LINKED) if history_link else -1
    rows = []
    for x in c.ordered(cases):
        whys = [c.error_summary(x.get("error")) or "; ".join(c.degraded_reasons(x)),
                c.disturbance_reason(x) if c.disturbed(x) else ""]
        why = "; ".join(w for w in whys if w)
        rows.append({
            "classes": f"st-{c.status(x)}" + (" regression" if c.regressions(x) else "")
                       + (f" {DISTURBED}" if c.disturbed(x) else ""),
            "id": x["id"],
            "title": x["id"] + (f": {why}" if why else ""),
            "cells": [_cell(kind, fn(x)) for _, kind, fn in cols],
            "linked": linked,
            "link": f"history.html#{history.anchor(x['id'])}" if history_link else "",
        })
    return [(name, kind) for name, kind, _ in cols], rows


def attention(cases: list[dict]) -> list[tuple[str, str]]:
    """(id, why) of each regression, failure and accuracy loss, in the report's order."""
    items = []
    for x in c.ordered(cases):
        if c.regressions(x):
            why = c.regression_text(x)
        elif x["status"] == Status.FAILED:
            why = f"{status_at(x)}: {c.error_summary(x.get('error'))}"
        elif c.status(x) == c.DEGRADED:
            why = "; ".join(c.degraded_reasons(x))
        else:
            continue
        items.append((x["id"], why))
    return items


# A reason's unsupported cases are listed open up to this many; more fold under it (a
# torchao sweep on IREE: 210 ids of one reason).
OPEN_IDS = 12


# A profile's stacked bar: its largest kernels in colour, the rest one grey segment; and
# the list under it, the few a reader acts on (report.md lists as many).
BAR_SEGMENTS = 8
LISTED = 3
# Tableau 10 without its grey, which is the rest's.
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#2f4b7c")
OTHERS_COLOUR = "#bbbbbb"


def kernel_colours(names: list[str]) -> dict[str, str]:
    """Each of a bar's kernels, largest first, its colour: the one its name picks (crc32,
    the same in every run, so a dispatch mostly keeps its colour across cases), or the
    next one free in this bar when a larger kernel took it, so that neighbours differ."""
    out: dict[str, str] = {}
    for name in names:
        pick = zlib.crc32(name.encode()) % len(PALETTE)
        taken = set(out.values())
        free = [PALETTE[(pick + i) % len(PALETTE)] for i in range(len(PALETTE))]
        out[name] = next((colour for colour in free if colour not in taken), free[0])
    return out


def _segment(name: str, share: float, colour: str, title: str) -> dict:
    return {"name": name, "share": repr(share), "width": f"{100 * share:.4f}",
            "colour": colour, "title": title}


def kernel_bar(top: c.TopKernels) -> list[dict]:
    """The segments of a profile's stacked bar: each kernel's share of the profile's time
    (a compile-only or zero-time profile has none), the rest one grey '(N others)'."""
    colours = kernel_colours([row["name"] for row in top.rows])
    segments = [_segment(row["name"], row["share"], colours[row["name"]],
                         f"{row['name']}: {c.kernel_text(row)}")
                for row in top.rows if row.get("share")]
    if top.more and top.more_share:
        name = others_name(top.more)
        segments.append(_segment(name, top.more_share, OTHERS_COLOUR,
                                 f"{name}: {100 * top.more_share:.1f} %"))
    return segments


def kernel_profiles(cases: list[dict]) -> list[dict]:
    """Each profiled case, regressions first: what profiled it, its bar, its top kernels
    (full name, shortened name, colour, figures) and how many more; or why it has none."""
    out = []
    for x in c.ordered(cases):
        bar, listed = c.top_kernels(x, BAR_SEGMENTS), c.top_kernels(x, LISTED)
        if bar is None:
            continue
        colours = kernel_colours([row["name"] for row in bar.rows])
        out.append({"id": x["id"], "error": bar.error, "what": c.kernels_text(bar),
                    "segments": [] if bar.error else kernel_bar(bar),
                    "top": [{"name": row["name"], "short": c.short_name(row["name"]),
                             "colour": colours[row["name"]],
                             "text": c.kernel_text(row)} for row in listed.rows],
                    "more": listed.more, "more_share": listed.more_share})
    return out


def meta(report: dict, peak: dict | None) -> list[tuple[str, str]]:
    """(name, value) of the page's header: where, when and with what it was measured."""
    prov = report.get("provenance", {})
    host = prov.get("host", {})
    versions = ", ".join(f"{k} {v}" for k, v in prov.get("versions", {}).items() if v)
    mem = host.get("memory_bytes")
    peak_text = (f"{peak['gflops']:.1f} GFLOP/s ({peak.get('method', '')}, measured "
                 f"{peak.get('measured_at', '?')})" if peak else "not measured")
    items = [
        ("Generated", report.get("generated_at")),
        ("Git", prov.get("git_sha") or "unknown"),
        ("Suite", f"{prov.get('suite_name', '?')} ({prov.get('config_source', '?')}, "
                  f"hash {prov.get('config_hash', '?')})"),
        ("Host", f"{host.get('name', '?')}: {host.get('cpu_model', '?')}, "
                 f"{host.get('cores', '?')} cores"
                 + (f", {mem / 1024**3:.1f} GiB" if mem else "")),
        ("Measured peak", peak_text),
        ("Versions", versions),
        # What the suite changed of its files' settings (e.g. a torchao_device override).
        *([("Notes", "; ".join(prov["notes"]))] if prov.get("notes") else []),
    ]
    return [(k, str(v)) for k, v in items]


def render(report: dict, peak: dict | None = None, history_link: bool = False) -> str:
    """The page; history_link (the suite's history.ingest: results/history.html is
    built beside it) links each case to its series there."""
    cases = report["cases"]
    header, rows = table(cases, c.Index.of(cases), peak, history_link)
    n = c.counts(cases)
    heatmaps = plots.heatmaps(cases)
    return templating.render(
        "report.html.j2",
        suite_name=report.get("provenance", {}).get("suite_name", "?"),
        meta=meta(report, peak),
        cases=len(cases),
        counts=[(n[k], k) for k in c.SYMBOLS if n[k] or k == Status.OK],
        counts_by_status=n,
        flags=c.flag_counts(cases),
        disturbed=[(x["id"], c.disturbance_reason(x)) for x in c.ordered(cases)
                   if c.disturbed(x)],
        attention=attention(cases),
        unsupported=brief.grouped(c.unsupported(cases), c.skip_reason),
        open_ids=OPEN_IDS,
        out_of_reach=brief.OUT_OF_REACH_TEXT,
        skipped=[(x["id"], c.skip_reason(x)) for x in c.skipped(cases)],
        compile_only=[(x["id"], c.skip_reason(x)) for x in c.compile_only(cases)],
        header=header,
        rows=rows,
        heatmaps=heatmaps,
        kernels=kernel_profiles(cases),
        listed=LISTED,
        latency=plots.latency(c.ordered(cases)),
        gemm=plots.gemm_throughput(c.ordered(cases), peak),
        peak=peak,
    )
