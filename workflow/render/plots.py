"""The HTML page's plots, as PNG data URIs so the page loads nothing from anywhere.

Figures are made with matplotlib's object API on the Agg canvas (no pyplot): no global
state, no display needed.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatter

from workflow.render import common as c

DPI = 100


def data_uri(fig: Figure) -> str:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def latency(cases: list[dict]) -> str | None:
    """Median latency of every case that ran, with its 95% interval, log scale."""
    fig = latency_figure(cases)
    return None if fig is None else data_uri(fig)


def latency_figure(cases: list[dict]) -> Figure | None:
    timed = [x for x in cases if c.median_ms(x) is not None]
    if not timed:
        return None
    fig = Figure(figsize=(9, 1.2 + 0.3 * len(timed)))
    ax = fig.add_subplot()
    ys = list(range(len(timed)))[::-1]
    meds = [c.median_ms(x) for x in timed]
    cis = [c.section(x, "timing").get("ci95_ms") or [m, m] for x, m in zip(timed, meds,
                                                                           strict=True)]
    lo = [m - ci[0] for m, ci in zip(meds, cis, strict=True)]
    hi = [ci[1] - m for m, ci in zip(meds, cis, strict=True)]
    colors = ["#c0392b" if c.status(x) == c.DEGRADED else "#e67e22" if c.disturbed(x)
              else "#2c6fbb" for x in timed]
    ax.errorbar(meds, ys, xerr=[lo, hi], fmt="none", ecolor="#777", capsize=3)
    ax.scatter(meds, ys, c=colors, zorder=3, s=18)
    ax.set_yticks(ys, [x["id"] for x in timed], fontsize=8)
    ax.set_xscale("log")
    # Plain decimals (0.2, 5, 30): matplotlib's log axis writes 2×10^-1.
    ax.xaxis.set_major_formatter(PlainLogFormatter(labelOnlyBase=False))
    ax.xaxis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False,
                                                   minor_thresholds=(1, 0.4)))
    ax.set_xlabel("median latency (ms), bar: 95% interval of the median")
    ax.grid(axis="x", which="both", alpha=0.3)
    return fig


class PlainLogFormatter(LogFormatter):
    """A log axis's tick labels as plain decimals, on the ticks matplotlib's own log
    formatter labels (it leaves most minor ticks blank where the axis spans decades)."""

    def __call__(self, x, pos=None) -> str:
        if not super().__call__(x, pos):
            return ""
        return np.format_float_positional(x, precision=4, unique=True, fractional=False,
                                          trim="-")


@dataclass(frozen=True)
class Heatmap:
    title: str
    label: str  # what the colour is
    uri: str


def _kinds(cells: list[dict], which: str) -> str:
    """What the sweep's speedups are: 'cross-run', 'paired' or 'cross-run and paired'."""
    kinds = {b["kind"] for b in (c.speedup_basis(x, which) for x in cells) if b}
    return " and ".join(sorted(kinds))


def _sweep_metric(cells: list[dict]) -> tuple[str, dict[str, float]] | None:
    """What a sweep's heatmap shows: the speedup over eager where any cell has one, else
    the speedup over baseline (non-baseline recipes), else achieved GFLOP/s."""
    by_id = {x["id"]: c.speedups(x) for x in cells}
    eager = {i: s["vs_eager"] for i, s in by_id.items() if s["vs_eager"] is not None}
    if eager and any(x["backend"] != c.EAGER for x in cells):
        return f"speedup vs torch-eager (×, {_kinds(cells, 'vs_eager')})", eager
    base = {i: s["vs_baseline"] for i, s in by_id.items() if s["vs_baseline"] is not None}
    if base and any(x["recipe"] != c.BASELINE for x in cells):
        return f"speedup vs baseline recipe (×, {_kinds(cells, 'vs_baseline')})", base
    gflops = {x["id"]: c.section(x, "throughput")["gflops"] for x in cells
              if c.section(x, "throughput").get("gflops") is not None}
    return ("achieved GFLOP/s (no speedup recorded)", gflops) if gflops else None


def sweeps(cases: list[dict]) -> dict[tuple, dict[int, list[dict]]]:
    """Shape sweeps: GEMM-like cases that ran, grouped by everything but the shape, then
    by N; a group counts when some N has more than one (M, K) cell."""
    groups: dict[tuple, dict[int, list[dict]]] = {}
    for x in cases:
        mkn = c.gemm_mkn(x)
        if mkn is None or c.median_ms(x) is None:
            continue
        key = (x["model"], x["config"], x["dtype"], x["sku"], x["backend"], x["recipe"])
        groups.setdefault(key, {}).setdefault(mkn[2], []).append(x)
    return {k: v for k, v in groups.items() if any(len(cells) > 1 for cells in v.values())}


def heatmaps(cases: list[dict]) -> list[Heatmap]:
    """One M x K heatmap per sweep and N, each cell annotated with its value."""
    out = []
    for key, by_n in sorted(sweeps(cases).items()):
        for n, cells in sorted(by_n.items()):
            if len(cells) < 2:
                continue
            chosen = _sweep_metric(cells)
            if chosen is None:
                continue
            label, values = chosen
            if not any(x["id"] in values for x in cells):
                continue
            ms = sorted({c.gemm_mkn(x)[0] for x in cells})
            ks = sorted({c.gemm_mkn(x)[1] for x in cells})
            grid = [[float("nan")] * len(ks) for _ in ms]
            for x in cells:
                m, k, _ = c.gemm_mkn(x)
                if x["id"] in values:
                    grid[ms.index(m)][ks.index(k)] = values[x["id"]]
            model = key[0] if key[1] == "default" else f"{key[0]}-{key[1]}"
            title = f"{model} {key[2]} · {key[3]} · {key[4]} · {key[5]} · N={n}"
            out.append(Heatmap(title, label, _heatmap(grid, ms, ks, label, title)))
    return out


def _heatmap(grid, ms, ks, label: str, title: str) -> str:
    fig = Figure(figsize=(1.6 + 1.1 * len(ks), 1.4 + 0.7 * len(ms)))
    ax = fig.add_subplot()
    finite = [v for row in grid for v in row if v == v]
    if label.startswith("speedup"):
        # Ratios: 1 (as fast) is the neutral colour; each side spans its own range, so a
        # 500x and a 0.1x share one map without a meaningless negative end.
        norm = TwoSlopeNorm(vcenter=1.0, vmin=min(min(finite), 0.95),
                            vmax=max(max(finite), 1.05))
        image = ax.imshow(grid, cmap="RdYlGn", norm=norm, origin="lower", aspect="auto")
    else:
        image = ax.imshow(grid, cmap="viridis", origin="lower", aspect="auto")
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            if v == v:
                ax.text(j, i, c.fmt(v, ".3g"), ha="center", va="center", fontsize=9,
                        color="black", bbox={"facecolor": "white", "alpha": 0.6, "lw": 0})
    ax.set_xticks(range(len(ks)), [str(k) for k in ks])
    ax.set_yticks(range(len(ms)), [str(m) for m in ms])
    ax.set_xlabel("K")
    ax.set_ylabel("M")
    ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax, label=label)
    return data_uri(fig)


def gemm_throughput(cases: list[dict], peak: dict | None) -> str | None:
    """Achieved GFLOP/s of the GEMM-like cases, with the measured peak as a line."""
    rows = [x for x in cases if c.gemm_mkn(x) is not None
            and c.section(x, "throughput").get("gflops") is not None]
    if not rows:
        return None
    fig = Figure(figsize=(9, 1.4 + 0.3 * len(rows)))
    ax = fig.add_subplot()
    ys = list(range(len(rows)))[::-1]
    ax.barh(ys, [x["throughput"]["gflops"] for x in rows], color="#2c6fbb")
    ax.set_yticks(ys, [x["id"] for x in rows], fontsize=8)
    if peak:
        ax.axvline(peak["gflops"], color="#c0392b", linestyle="--",
                   label=f"measured peak {peak['gflops']:.1f} GFLOP/s (f32 matmul)")
        ax.legend(loc="lower right", fontsize=8)
    ax.set_xlabel("achieved GFLOP/s")
    ax.grid(axis="x", alpha=0.3)
    return data_uri(fig)
