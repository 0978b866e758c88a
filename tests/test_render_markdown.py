"""results/report.md: one coverage row per case, regressions and failures on top, every
column explained, op tables, models passing per backend."""

from __future__ import annotations

import re

from tests.render_data import (
    find,
    iree_report,
    torch_report,
    with_kernels,
    with_synthetic_verdicts,
    with_training,
)
from workflow.render import markdown

# Column positions by header name: the table gained columns (Mode, CV) over time.
COL = {name: i for i, (name, _) in enumerate(markdown.COLUMNS)}
SKU, STATUS, SPEEDUP = COL["SKU"], COL["Status"], COL["Speedup"]


def coverage_rows(text: str) -> list[list[str]]:
    """Cells of the coverage table's body rows."""
    section = text.split("## Coverage", 1)[1].split("### Explanation", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
            for line in lines[1:]]


def test_one_row_per_case_with_status_symbols():
    report = iree_report()
    rows = coverage_rows(markdown.render(report))
    assert len(rows) == len(report["cases"])
    header = [name for name, _ in markdown.COLUMNS]
    assert all(len(row) == len(header) for row in rows)
    status = {(r[0], r[3], r[SKU]): r[header.index("Status")] for r in rows}
    assert status[("histc_model", "8x16", "host")] == "✘ failed (compile)"
    assert status[("linear", "16x32x32", "host")] == "✅ ok"


def test_failures_and_regressions_are_summarised_first():
    text = markdown.render(with_synthetic_verdicts(iree_report()))
    summary = text.split("## Coverage", 1)[0]
    assert "### Regressions (2)" in summary and "### Failures (2)" in summary
    assert "### Degraded accuracy (1)" in summary and "pcc 0.950000 &lt; 0.999" in summary
    assert summary.index("Regressions") < summary.index("Failures") < summary.index("Degraded")
    # iree-compile's first line says little; the summary adds the compiler's error.
    assert "iree-compile exited with 1: error: failed to legalize operation" in summary
    rows = coverage_rows(text)
    firsts = [r[STATUS] for r in rows[:5]]
    assert firsts[:2] == ["🚧 degraded", "🚧 degraded"]  # the two regressions
    assert firsts[2:4] == ["✘ failed (compile)"] * 2 and firsts[4] == "🚧 degraded"
    # The golden verdict stands beside the status, not off to the right of the table.
    golden = COL["Golden verdict"]
    assert golden == STATUS + 1
    assert "regression ×1.300" in rows[0][golden] or "regression ×1.300" in rows[1][golden]


def test_backend_ms_carries_its_interval_and_every_column_is_explained():
    report = iree_report()
    text = markdown.render(report)
    case = next(c for c in report["cases"] if c["id"] == "host/iree/linear-16x32x32-f32/baseline")
    lo, hi = case["timing"]["ci95_ms"]
    row = next(r for r in coverage_rows(text) if r[0] == "linear" and r[3] == "16x32x32"
               and r[SKU] == "host")
    want = f"{case['timing']['median_ms']:.4g} [{lo:.4g}, {hi:.4g}]"
    assert row[COL["Backend ms [95% CI]"]] == want
    explained = re.findall(r"^\*\*(.+?)\*\*:", text, flags=re.M)
    assert explained == [name for name, _ in markdown.COLUMNS]


def test_op_tables_and_passing_models():
    text = markdown.render(iree_report())
    histc = text.split("#### histc_model", 1)[1].split("####", 1)[0]
    assert "| aten.histc.default | 1 | ✘ op |" in histc  # iree-compile names the op
    linear = text.split("#### linear", 1)[1].split("####", 1)[0]
    assert "| aten.linear.default | 1 | ✅ |" in linear
    assert "| iree | 2 / 3 | 12 / 14 | 0 | 2 | 0 |" in text


def test_pipes_in_cells_are_escaped():
    assert markdown.cell("a|b\nc") == "a\\|b c"


def test_torch_backends_eager_ms_speedup_and_unsupported_cases():
    report = torch_report()
    text = markdown.render(report)
    rows = coverage_rows(text)
    assert len(rows) == len(report["cases"])
    by_key = {(r[3], r[4], r[5]): r for r in rows}  # shape, backend, recipe
    eager = find(report, "host/torch-eager/linear-64x64x64-f32/int8wo")
    compiled = find(report, "host/torch-inductor/linear-64x64x64-f32/int8wo")
    row = by_key[("64x64x64", "torch-inductor", "int8wo")]
    assert row[COL["Eager ms"]] == f"{eager['timing']['median_ms']:.4g}"  # the eager sibling
    # This report predates speedup.basis: its speedups are ratios of medians, cross-run.
    assert row[SPEEDUP] == f"{compiled['speedup']['vs_eager']:.3g}× (cross-run)"
    assert row[COL["Compile s"]] == f"{compiled['compile']['seconds']:.3g}"
    assert row[COL["IREE dispatches"]] == "—"
    assert by_key[("64x64x64", "torch-eager", "int8wo")][SPEEDUP] == "—"  # eager vs itself
    assert by_key[("64x64x64", "iree", "int8wo")][STATUS] == "⊘ unsupported"
    # Unsupported combinations are not failures: every model passes where it can run.
    assert "| iree | 2 / 2 | 5 / 10 | 0 | 0 | 5 |" in text
    linear = text.split("#### linear", 1)[1].split("####", 1)[0]
    assert "| aten.linear.default | 1 | ✅ | ✅ | ✅ |" in linear
    assert "| aten.mm.default | 1 | — | ✅ | ✅ |" in linear  # only int8wo graphs have it


def test_the_verdict_says_how_much_a_pass_could_have_missed():
    from workflow.render.markdown import mde_text

    assert mde_text({"timing": {"mde_ratio": 1.1234}}) == " · detects ≥×1.12"
    assert mde_text({"timing": {"mde_ratio": None}}) == mde_text({"timing": None}) == ""


def test_training_cases_show_their_mode_and_every_timed_case_its_cv():
    report = with_training(torch_report())
    rows = coverage_rows(markdown.render(report))
    by_key = {(r[COL["Shape"]], r[COL["Backend"]], r[COL["Recipe"]], r[COL["Mode"]]): r
              for r in rows}
    training = [r for r in rows if r[COL["Mode"]] == "training"]
    assert len(training) == 4 and len(rows) - 4 == len(torch_report()["cases"])
    assert {r[COL["Mode"]] for r in rows} == {"inference", "training"}
    # A quiet case shows its CV alone, a noisy one the marker, an untimed one a dash.
    assert by_key[("64x64x64", "torch-eager", "baseline", "training")][COL["CV"]] == "3.1 %"
    noisy = find(report, "host/torch-eager/linear-64x64x64-f32/baseline")["timing"]
    assert noisy["noisy"]
    assert by_key[("64x64x64", "torch-eager", "baseline", "inference")][COL["CV"]] == \
        f"{100 * noisy['cv']:.1f} % noisy"
    assert by_key[("64x64x64", "iree", "baseline", "training")][COL["CV"]] == "—"
    assert by_key[("64x64x64", "iree", "baseline", "training")][STATUS] == "⊘ unsupported"


def test_every_unsupported_case_is_listed_with_its_reason():
    report = with_training(torch_report())
    summary = markdown.render(report).split("## Coverage", 1)[0]
    unsupported = [x for x in report["cases"] if x["status"] == "unsupported"]
    assert f"### Unsupported ({len(unsupported)})" in summary and len(unsupported) == 7
    for x in unsupported:  # each by its whole id, or by its workload in its group
        assert (f"`{x['id']}`" in summary or f"`{x['workload']}`" in summary) \
            and markdown.cell(x["error"]) in summary
    # One line per reason: the five IREE int8wo cases share theirs, and their SKU,
    # backend and recipe (one line under it, their workloads listed).
    assert summary.count("runs only `baseline` (5):\n  - `host/iree/…/int8wo` (5): ") == 1
    assert ("- the IREE backend benchmarks inference only (1): "
            "`host/iree/linear-64x64x64-f32-train/baseline`") in summary
    assert markdown.render(iree_report()).count("### Unsupported") == 0


def test_an_unsupported_reason_is_text_not_markup():
    report = with_training(torch_report())
    find(report, "host/iree/linear-64x64x64-f32-train/baseline")["error"] = \
        "needs <img src=x onerror=alert(1)> | a & b"
    summary = markdown.render(report).split("## Coverage", 1)[0]
    assert "- needs &lt;img src=x onerror=alert(1)> \\| a &amp; b (1): " in summary
    assert "<img" not in summary


def kernels_part(text: str) -> str:
    return text.split("## Where the time goes", 1)[1].split("## Models passing", 1)[0]


def test_where_the_time_goes_lists_each_profiled_cases_top_kernels():
    report = with_kernels(iree_report())
    part = kernels_part(markdown.render(report))
    items = re.findall(r"^- `([^`]+)`", part, flags=re.M)
    profiled = [x["id"] for x in report["cases"] if x["kernels"]]
    assert sorted(items) == sorted(profiled) and len(items) == 4  # the rest: not profiled
    gelu = part.split("`host/iree/ln_linear_relu-16x32x64-f32/baseline`", 1)[1]
    gelu = gelu.split("\n- ", 1)[0]
    total = find(report, "host/iree/ln_linear_relu-16x32x64-f32/baseline")["kernels"]
    matmul = total["rows"][0]
    assert gelu.startswith(f": iree-profile (host-execution), 5 calls, "
                           f"{total['total_ms'] / 5:.3g} ms per call\n")
    assert (f"  - `main$async_dispatch_2_matmul_128x256x256_f32`: "
            f"{100 * matmul['share']:.1f} %, {matmul['total_ms'] / 5:.3g} ms per call, "
            "1× per call") in gelu
    assert gelu.count("\n  - ") == 3 and "more" not in gelu  # its three, nothing more
    # Eleven dispatches: three listed, then the count and share of the rest.
    block = part.split("`host/iree/linear-64x128x64-f32/baseline`", 1)[1].split("\n- ", 1)[0]
    assert block.count("\n  - `main$") == 3 and re.search(r"\n  - \+8 more \(39\.0 %\)", block)
    # Compile-only: the compiler's dispatches without times; a failure: its reason.
    gpu = part.split("`gpu/iree/ln_linear_gelu-128x256x256-f32/baseline`", 1)[1]
    assert gpu.split("\n- ", 1)[0].count(": 1 dispatch site") == 3 and " ms " not in \
        gpu.split("\n- ", 1)[0]
    assert ("- `generic/iree/linear-64x32x32-f32/baseline`: no profile (the case's time "
            "stands): profiling (dispatch-events) failed: ") in part
    assert "mode &lt;dispatch-events> \\| not supported" in part  # text, not markup
    torch = kernels_part(markdown.render(with_kernels(torch_report())))
    assert "  - `aten::addmm`: 70.1 %, " in torch and "\n  - +5 more (14.7 %)" in torch


def test_kernel_names_are_code_spans_that_show_as_written():
    assert markdown.code("main$async_dispatch_0 <x> | a*b*") == \
        "`main$async_dispatch_0 <x> | a*b*`"
    assert markdown.code("a`b") == "``a`b``" and markdown.code("`a") == "`` `a ``"
    assert "No case was profiled" in kernels_part(markdown.render(iree_report()))


def test_a_recipe_row_shows_its_speedup_against_the_baseline_recipe():
    """torchao's runner shows each quantization recipe's speedup over the baseline; so does
    report.md, beside the speedup against eager, from the record's vs_baseline."""
    report = torch_report()
    rows = {(r[0], r[3], r[4], r[5]): r for r in coverage_rows(markdown.render(report))}
    vs_baseline = COL["Speedup vs baseline"]
    case = find(report, "host/torch-eager/linear-64x64x64-f32/int8wo")
    assert rows[("linear", "64x64x64", "torch-eager", "int8wo")][vs_baseline].startswith(
        f"{case['speedup']['vs_baseline']:.3g}× (cross-run")
    # The baseline itself has none (it is the baseline).
    assert rows[("linear", "64x64x64", "torch-eager", "baseline")][vs_baseline] == "—"
