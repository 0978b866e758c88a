"""results/report.html: one self-contained page (inline CSS, JS and PNG data URIs; nothing
loaded from the network): summary with regressions first, a sortable and filterable table
with one row per case, latency with intervals, M x K heatmaps of shape sweeps, and the
GEMM-like cases' achieved GFLOP/s against the machine's measured peak."""

from __future__ import annotations

from html import escape
from importlib import resources
from string import Template

from workflow.render import common as c
from workflow.render import plots

# (header, kind, cell function); kind "num" sorts numerically on the cell's data-v.
Col = tuple[str, str, object]


def _columns(index: c.Index, peak: dict | None) -> list[Col]:
    def timing(key):
        return lambda x: c.section(x, "timing").get(key) if c.median_ms(x) is not None else None

    def ci(x):
        interval = c.section(x, "timing").get("ci95_ms") or []
        return (f"[{c.fmt(interval[0])}, {c.fmt(interval[1])}]"
                if len(interval) == 2 and c.median_ms(x) is not None else "")

    return [
        ("Status", "txt", lambda x: f"{c.SYMBOLS[c.status(x)]} {c.status(x)}"
                                    + (f" ({x['stage']})" if x.get("stage") else "")),
        # The id is sku/backend/workload/recipe: its parts are the columns, so the table
        # stays narrow; the row's title and data-id carry the whole id.
        ("Workload", "txt", lambda x: x["workload"]),
        ("SKU", "txt", lambda x: x["sku"]),
        ("Backend", "txt", lambda x: x["backend"]),
        ("Recipe", "txt", lambda x: x["recipe"]),
        ("Median ms", "num", timing("median_ms")),
        # Why a compile-only case has no time ("unsupported: no cuda device here: ...").
        ("Not measured", "txt", lambda x: c.not_measured(x, "timing") or ""),
        ("95% CI ms", "txt", ci),
        ("CV", "num", timing("cv")),
        ("Eager ms", "num", index.eager_ms),
        ("Speedup vs eager", "num", lambda x: c.speedups(x)["vs_eager"]),
        ("Speedup vs baseline", "num", lambda x: c.speedups(x)["vs_baseline"]),
        ("GFLOP/s", "num", lambda x: c.section(x, "throughput").get("gflops")),
        ("% of peak", "num", lambda x: c.percent_of_peak(x, peak)),
        ("Compile s", "num", lambda x: c.section(x, "compile").get("seconds")),
        ("Dispatches", "num", lambda x: c.section(x, "compile").get("dispatch_count")),
        ("PCC", "num", lambda x: c.section(x, "accuracy").get("pcc")),
        ("Golden", "txt", c.verdict_text),
    ]


def _td(kind: str, value) -> str:
    if kind == "num":
        raw = "" if value is None else repr(float(value))
        spec = ".6f" if isinstance(value, float) and 0.99 < value <= 1 else ".4g"
        return f'<td data-v="{raw}">{escape(c.fmt(value, spec, blank=""))}</td>'
    return f'<td class="t">{escape(str(value))}</td>'


def table(cases: list[dict], index: c.Index, peak: dict | None) -> tuple[str, str]:
    cols = _columns(index, peak)
    header = "".join(f'<th data-type="{kind}" class="{"t" if kind == "txt" else ""}">'
                     f"{escape(name)}</th>" for name, kind, _ in cols)
    rows = []
    for x in c.ordered(cases):
        classes = f"st-{c.status(x)}" + (" regression" if c.regressions(x) else "")
        why = c.error_summary(x.get("error")) or "; ".join(c.degraded_reasons(x))
        title = escape(x["id"] + (f": {why}" if why else ""))
        cells = "".join(_td(kind, fn(x)) for _, kind, fn in cols)
        rows.append(f'<tr class="{classes}" data-id="{escape(x["id"])}" title="{title}">'
                    f"{cells}</tr>")
    return header, "\n".join(rows)


def _reasons_list(cases: list[dict], title: str, css: str, note: str) -> str:
    """A titled list of cases with why each did not run ("" when there are none)."""
    if not cases:
        return ""
    lines = [f"<li><code>{escape(x['id'])}</code>: {escape(c.skip_reason(x))}</li>"
             for x in cases]
    return (f'\n<h3>{title} ({len(cases)})</h3>\n<p class="note">{note}</p>'
            f'\n<ul class="{css}">\n' + "\n".join(lines) + "\n</ul>")


def attention(cases: list[dict]) -> str:
    items = []
    for x in c.ordered(cases):
        if c.regressions(x):
            why = c.regression_text(x)
        elif x["status"] == "failed":
            why = f"failed at {x.get('stage')}: {c.error_summary(x.get('error'))}"
        elif c.status(x) == "degraded":
            why = "; ".join(c.degraded_reasons(x))
        else:
            continue
        items.append(f"<li><code>{escape(x['id'])}</code>: {escape(why)}</li>")
    html = ('<ul class="attention">\n' + "\n".join(items) + "\n</ul>" if items
            else "<p>No regressions, failures or accuracy losses.</p>")
    html += _reasons_list(c.skipped(cases), "Skipped", "skipped",
                          "Cases that cannot run here (a benchmark file's device, chip or "
                          "absent files), with why:")
    html += _reasons_list(c.compile_only(cases), "Compile-only", "compile-only",
                          "Compiled here, their dispatch count, binary size and compile time "
                          "judged against their goldens; not run (no time, no accuracy) "
                          "because their device is absent here:")
    return html


def meta(report: dict, peak: dict | None) -> str:
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
    ]
    return "\n".join(f"<dt>{escape(k)}</dt><dd>{escape(str(v))}</dd>" for k, v in items)


def figure(uri: str | None, caption: str, alt: str, empty: str = "Nothing to plot.") -> str:
    if uri is None:
        return f'<p class="note">{escape(empty)}</p>'
    return (f'<figure><img src="{uri}" alt="{escape(alt)}">'
            f"<figcaption>{escape(caption)}</figcaption></figure>")


def render(report: dict, peak: dict | None = None) -> str:
    cases = report["cases"]
    index = c.Index.of(cases)
    header, rows = table(cases, index, peak)
    n = c.counts(cases)
    counts = " ".join(f"<span>{n[k]} {c.SYMBOLS[k]} {k}</span>" for k in c.SYMBOLS
                      if n[k] or k == "ok")
    maps = plots.heatmaps(cases)
    heatmaps = ('<div class="heatmaps">' + "".join(figure(h.uri, h.title, h.title)
                                                  for h in maps) + "</div>"
                if maps else '<p class="note">No shape sweep: no GEMM-like cases that ran '
                             "with more than one (M, K) for the same N.</p>")
    template = Template(resources.files("workflow.render").joinpath("templates/report.html.tmpl")
                        .read_text())
    return template.substitute(
        suite_name=escape(report.get("provenance", {}).get("suite_name", "?")),
        meta=meta(report, peak),
        counts=f"{len(cases)} cases: {counts}",
        attention=attention(cases),
        header=header,
        rows=rows,
        latency=figure(plots.latency(c.ordered(cases)),
                       "Median latency per case (dot) and the 95% interval of the median "
                       "(bar), log scale; red: degraded.",
                       "latency per case", "No case has a timing."),
        heatmaps=heatmaps,
        gemm=figure(plots.gemm_throughput(c.ordered(cases), peak),
                    "Achieved GFLOP/s of GEMM-like cases ([M, K, N] shapes); dashed: this "
                    "machine's measured f32 matmul peak." if peak else
                    "Achieved GFLOP/s of GEMM-like cases ([M, K, N] shapes); no peak measured.",
                    "GEMM throughput", "No GEMM-like case with a GFLOP/s figure."),
    )
