"""results/report.md: a coverage table in the style of pytorch2.0_ttnn's README, the
regressions and failures above it, what each column means, where each profiled case's
time goes (its top dispatches or ops), models passing per backend and an aten op table
per model. Filled into templates/report.md.tmpl."""

from __future__ import annotations

import re
from importlib import resources
from string import Template

from workflow.render import brief
from workflow.render import common as c
from workflow.render.text import printable
from workflow.stats.enums import Status, status_at

COLUMNS = (
    ("Model", "the registered model (`benchflow list`)."),
    ("Config", "the model's named configuration (tiny, base, ...; `default` when it has none)."),
    ("Dtype", "the data type the model ran in."),
    ("Shape", "the workload's shape parameter, e.g. [M, K, N] of a linear layer or "
              "[batch, seq] of a transformer."),
    ("Backend", "what ran it: `iree` (iree-compile + iree-benchmark-module), `torch-eager`, "
                "`torch-inductor` (torch.compile)."),
    ("Recipe", "the numerics variant: `baseline` is unquantized; others are torchao recipes "
               "such as `int8wo`."),
    ("Mode", "`inference` (forward passes) or `training` (whole training steps: forward, "
             "backward and optimizer step); a training case's times are of steps."),
    ("SKU", "the machine configuration of the suite (target CPU, device, threads)."),
    ("Status", "✅ ran and is within its accuracy threshold with no golden regression; "
               "🚧 ran but is degraded: accuracy below its threshold (`accuracy.accurate` "
               "false: PCC below `min_pcc` for baseline, SQNR against the unquantized "
               "module below `min_sqnr_db` for a quantizing recipe, as torchao judges "
               "quantization; `accuracy.metric` names the rule) or a golden regression "
               "(time, dispatch count "
               "or binary size); ✘ failed (the stage is named); ⊘ unsupported and ⏭ skipped "
               "(each listed under Unsupported or Skipped with why); "
               "⚙ compile-only: compiled here (dispatches, binary size and compile time, "
               "judged against their goldens) but not run, its device being absent here "
               "(listed with why; its time and accuracy are unsupported there). "
               "⚠ disturbed after any of them: other processes took the CPUs while its "
               "kept invocations ran, after the retakes the budget allowed (listed under "
               "Disturbed with the reason): its time is partly the load's."),
    ("Golden verdict", "the comparison with the SKU's golden: pass, regression, improvement, "
                       "inconclusive or no-golden, with median / golden ratio (to its run's level "
                       "where `of level ×F` follows: the median ratio of its group's cases, "
                       "taken out against a golden of one run); dispatch-count "
                       "and size verdicts when they are not pass; then `detects ≥×R`, the "
                       "smallest slowdown the gate would have caught with 80 % power at this "
                       "case's noise (`timing.mde_ratio`): a pass says nothing about smaller "
                       "changes."),
    ("Aten ops before (unique)", "aten ops in the exported graph before any lowering; in "
                                 "parentheses the number of distinct ops."),
    ("IREE dispatches", "dispatches in the compiled IREE module (IREE cases only)."),
    ("Compile s", "seconds to compile: iree-compile, or torch.compile's first (compiling) "
                  "call."),
    ("Eager ms", "median latency of torch-eager on the same SKU, workload and recipe, "
                 "beside a case that has a time of its own."),
    ("Backend ms [95% CI]", "this case's median latency in milliseconds, the median of its "
                            "invocation medians, and the 95% interval of that median "
                            "(none below 6 invocations, where no interval reaches 95%); "
                            "then why measuring stopped, where it stopped short: "
                            + brief.OUT_OF_REACH_TEXT),
    ("CV", "the coefficient of variation of the invocation medians, in %; `noisy` when it "
           "is above the SKU's `noisy_cv` (counted in the summary beside ⚠ disturbed)."),
    ("Speedup", "eager ms / backend ms: above 1 the backend is faster than eager. "
                "*cross-run*: the ratio of two medians measured at different moments (how "
                "far apart, where both times are known; the times and both case ids are in "
                "report.json's `speedup.basis` and report.csv), so drift and outside load "
                "between the two are in it; *paired*: the two sides measured interleaved "
                "in one A/B job, with the 95% interval of the speedup."),
    ("Speedup vs baseline", "baseline ms / this recipe's ms on the same SKU, backend and "
                            "workload (torchao's speedup of a quantization recipe): above 1 "
                            "the recipe is faster; cross-run or paired as Speedup."),
    ("Accuracy (PCC)", "Pearson correlation of the outputs with the fp32 eager reference "
                       "(1 is identical)."),
)


def cell(value: str) -> str:
    """A Markdown table cell: control characters shown as escapes (a tool's error or a
    dispatch name may carry a terminal's clear-screen or window-title sequence, which a
    reader of report.md in a terminal or a viewer must see, not obey: text.printable),
    HTML and pipes escaped, one line (common.md_text)."""
    return c.md_text(printable(str(value)))


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(map(cell, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


# The flag of a case whose measurement stayed disturbed by outside load (its status
# stays ok: the code ran fine, the machine did not).
DISTURBED = "⚠ disturbed"


def status_cell(case: dict) -> str:
    st = c.status(case)
    text = f"{c.SYMBOLS[st]} {st}"
    if st == Status.FAILED and case.get("stage"):
        text += f" ({case['stage']})"
    if c.disturbed(case):
        text += f" {DISTURBED}"
    return text


def coverage_row(case: dict, index: c.Index) -> list[str]:
    graph, comp = c.section(case, "graph"), c.section(case, "compile")
    ops = (f"{graph['aten_ops']} ({graph['aten_ops_unique']})" if graph else "—")
    # A section not measured (a compile-only case's time and accuracy) says so; the reason
    # is listed under Compile-only.
    timing = ("⊘ unsupported" if c.not_measured(case, "timing")
              else c.interval_text(case) + brief.stop_note(case))
    pcc = ("⊘ unsupported" if c.not_measured(case, "accuracy")
           else c.fmt(c.section(case, "accuracy").get("pcc"), ".6f"))
    return [case["model"], case["config"], case["dtype"], c.shape_text(case),
            case["backend"], case["recipe"], case["mode"], case["sku"], status_cell(case),
            c.verdict_text(case) + mde_text(case), ops, c.fmt(comp.get("dispatch_count")),
            c.fmt(comp.get("seconds"), ".3g"), c.fmt(index.eager_ms(case)), timing,
            c.cv_text(case), c.speedup_text(case, "vs_eager"),
            c.speedup_text(case, "vs_baseline"), pcc]


def mde_text(case: dict) -> str:
    """The minimum detectable effect of the case's golden comparison, where known."""
    mde = (c.section(case, "timing") or {}).get("mde_ratio")
    return f" · detects ≥×{mde:.3g}" if mde else ""


def attention(cases: list[dict]) -> str:
    """Regressions, failures and degraded cases: what a reader should look at first."""
    regressed = [x for x in cases if c.regressions(x)]
    failed = [x for x in cases if x["status"] == Status.FAILED]
    degraded = [x for x in cases if c.status(x) == c.DEGRADED and not c.regressions(x)]
    parts = []
    if regressed:
        lines = [f"- `{x['id']}`: {cell(c.regression_text(x))}" for x in regressed]
        parts.append(f"### Regressions ({len(regressed)})\n\n" + "\n".join(lines))
    if failed:
        lines = [f"- `{x['id']}`: {cell(status_at(x))}: "
                 f"{cell(c.error_summary(x.get('error')))}" for x in failed]
        parts.append(f"### Failures ({len(failed)})\n\n" + "\n".join(lines))
    if degraded:
        lines = [f"- `{x['id']}`: {cell('; '.join(c.degraded_reasons(x)))}" for x in degraded]
        parts.append(f"### Degraded accuracy ({len(degraded)})\n\n" + "\n".join(lines))
    text = "\n\n".join(parts) or "No regressions, failures or accuracy losses."
    text += unsupported_section(cases)
    skipped = c.skipped(cases)
    if skipped:
        lines = [f"- `{x['id']}`: {cell(c.skip_reason(x))}" for x in skipped]
        text += (f"\n\n### Skipped ({len(skipped)})\n\nCases that cannot run here (a "
                 "benchmark file's device, chip or absent files), with why:\n\n"
                 + "\n".join(lines))
    compiled = c.compile_only(cases)
    if compiled:
        lines = [f"- `{x['id']}`: {cell(c.skip_reason(x))}" for x in compiled]
        text += (f"\n\n### Compile-only ({len(compiled)})\n\nCompiled here, their dispatch "
                 "count, binary size and compile time judged against their goldens; not "
                 "run (no time, no accuracy) because their device is absent here:\n\n"
                 + "\n".join(lines))
    return text + disturbed_section(cases)


def unsupported_section(cases: list[dict]) -> str:
    """The unsupported cases with why, one line per reason (a recipe a backend cannot run
    is one reason for every workload), its cases under it by SKU, backend and recipe with
    their workloads (brief.grouped): hundreds of ids of one reason stay a few lines."""
    found = c.unsupported(cases)
    if not found:
        return ""
    lines = []
    for why, n, groups in brief.grouped(found, c.skip_reason):
        if n == 1:
            lines.append(f"- {cell(why)} (1): `{groups[0][0]}`")
            continue
        lines.append(f"- {cell(why)} ({n}):")
        lines += [f"  - `{key}`" + (f" ({len(ws)}): " + ", ".join(f"`{w}`" for w in ws)
                                    if ws else "") for key, ws in groups]
    return (f"\n\n### Unsupported ({len(found)})\n\nCombinations this backend, recipe or "
            "mode cannot run (not failures), with why:\n\n" + "\n".join(lines))


def disturbed_section(cases: list[dict]) -> str:
    """The disturbed cases with why: ok by status, but their times are partly the load's."""
    found = [x for x in cases if c.disturbed(x)]
    if not found:
        return ""
    lines = [f"- `{x['id']}`: {cell(c.disturbance_reason(x))}" for x in found]
    return (f"\n\n### ⚠ Disturbed ({len(found)})\n\nCases whose kept invocations ran while "
            "other processes took the CPUs, after the retakes the budget allowed: they ran "
            "fine, but their times are partly the load's; measure them again on a quiet "
            "machine:\n\n" + "\n".join(lines))


# Kernels listed per profiled case: the few a reader acts on, the rest counted.
TOP_KERNELS = 3


def code(text: str) -> str:
    """A code span showing `text` as written: Markdown reads nothing inside one (no HTML,
    no emphasis, no GitHub math between the `$` of two IREE dispatch names), so a
    kernel name needs no escaping but its backticks, which a longer fence encloses."""
    text = " ".join(printable(str(text)).splitlines())
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def kernels_lines(case: dict, top: c.TopKernels) -> str:
    """A profiled case's list item: what profiled it, then its top kernels, each with its
    share, time and runs per call (or its dispatch sites, compile-only), then how many
    more; a profiling failure says why."""
    head = f"- `{case['id']}`: "
    if top.error:
        return head + f"no profile (the case's time stands): {cell(top.error)}"
    lines = [head + cell(c.kernels_text(top))]
    for row in top.rows:
        figures = c.kernel_text(row)
        lines.append(f"  - {code(c.short_name(row['name']))}"
                     + (f": {cell(figures)}" if figures else ""))
    if top.more:
        share = "" if top.more_share is None else f" ({100 * top.more_share:.1f} %)"
        lines.append(f"  - +{top.more} more{share}")
    return "\n".join(lines)


def kernels_section(cases: list[dict]) -> str:
    """Where the time goes: every profiled case (regressions first), its top kernels."""
    found = [(x, c.top_kernels(x, TOP_KERNELS)) for x in c.ordered(cases)]
    lines = [kernels_lines(x, top) for x, top in found if top is not None]
    return "\n".join(lines) or ("No case was profiled (`measurement.profile` off, or no "
                                "case ran).")


def counts_line(cases: list[dict]) -> str:
    n = c.counts(cases)
    shown = ", ".join(f"{n[k]} {c.SYMBOLS[k]} {k}" for k in c.SYMBOLS
                      if n[k] or k == Status.OK)
    return f"{len(cases)} cases: {shown}." + flags_text(cases)


def flags_text(cases: list[dict]) -> str:
    """' Of 12 timed: 3 noisy, 1 ⚠ disturbed.' (nothing when none was timed)."""
    f = c.flag_counts(cases)
    return (f" Of {f['timed']} timed: {f['noisy']} noisy, {f['disturbed']} {DISTURBED}."
            if f["timed"] else "")


def model_key(case: dict) -> str:
    return case["model"] if case["config"] == "default" else f"{case['model']}-{case['config']}"


def backend_status(cases: list[dict], op: str) -> str:
    """One op table cell: how one backend fared with the graphs that contain `op` (its
    cases of this model whose exported graph has the op)."""
    if not cases:
        return "—"
    failed = [x for x in cases if x["status"] == Status.FAILED]
    base = op.rsplit(".", 1)[0] if op.count(".") >= 2 else op  # aten.histc.default -> aten.histc
    if any(re.search(re.escape(base) + r"\b", x.get("error") or "") for x in failed):
        return "✘ op"
    if failed:
        return f"✘ ({', '.join(sorted({x.get('stage') or '?' for x in failed}))})"
    if any(x["status"] == Status.UNSUPPORTED for x in cases):
        return "⊘"
    if all(x["status"] == Status.SKIPPED for x in cases):
        return "⏭"
    if all(x["status"] in (Status.SKIPPED, Status.COMPILE_ONLY) for x in cases):
        return c.SYMBOLS[Status.COMPILE_ONLY]  # compiled, never run here
    return "✅"


def op_tables(cases: list[dict]) -> str:
    backends = sorted({x["backend"] for x in cases})
    out = []
    for key in sorted({model_key(x) for x in cases}):
        mine = [x for x in cases if model_key(x) == key]
        counts: dict[str, set[int]] = {}
        for x in mine:
            for op, n in c.section(x, "graph").get("op_histogram", {}).items():
                counts.setdefault(op, set()).add(n)
        if not counts:
            out.append(f"#### {cell(key)}\n\nNo exported graph (every export failed or the model "
                       "ran nowhere).")
            continue
        rows = []
        for op in sorted(counts):
            n = sorted(counts[op])
            having = [x for x in mine if op in c.section(x, "graph").get("op_histogram", {})]
            rows.append([op, str(n[0]) if len(n) == 1 else f"{n[0]}–{n[-1]}",
                         *(backend_status([x for x in having if x["backend"] == b], op)
                           for b in backends)])
        out.append(f"#### {cell(key)}\n\n" + table(["aten op", "count", *backends], rows))
    return "\n\n".join(out)


def passing_table(cases: list[dict]) -> str:
    """Per backend: models whose every supported case is ✅ ok (unsupported combinations,
    e.g. a torchao recipe on IREE, are not failures; compile-only cases did not run, so
    they neither pass nor fail a model, and have their own column), and the case counts."""
    rows = []
    for b in sorted({x["backend"] for x in cases}):
        mine = [x for x in cases if x["backend"] == b]
        tried = [x for x in mine
                 if x["status"] not in (Status.UNSUPPORTED, Status.SKIPPED,
                                        Status.COMPILE_ONLY)]
        models = {model_key(x) for x in tried}
        passing = {m for m in models
                   if all(c.status(x) == Status.OK for x in tried if model_key(x) == m)}
        n = c.counts(mine)
        rows.append([b, f"{len(passing)} / {len(models)}", f"{n[Status.OK]} / {len(mine)}",
                     str(n[c.DEGRADED]), str(n[Status.FAILED]), str(n[Status.UNSUPPORTED]),
                     str(n[Status.COMPILE_ONLY])])
    return table(["backend", "models passing", "cases ✅ ok", "🚧 degraded", "✘ failed",
                  "⊘ unsupported", "⚙ compile-only"], rows)


def render(report: dict, source: str = "results/report.json") -> str:
    cases = report["cases"]
    index = c.Index.of(cases)
    prov = report.get("provenance", {})
    versions = prov.get("versions", {})
    host = prov.get("host", {})
    template = Template(resources.files("workflow.render").joinpath("templates/report.md.tmpl")
                        .read_text())
    header = [name for name, _ in COLUMNS]
    return template.substitute(
        source=cell(source),
        # Every field of the report is text to show, never markup (common.md_text).
        suite_name=cell(prov.get("suite_name", "—")),
        generated_at=cell(report.get("generated_at", "—")),
        git_sha=f"`{cell(prov.get('git_sha') or 'unknown')}`",
        host=cell(f"{host.get('name', '?')} ({host.get('cpu_model', '?')}, "
                  f"{host.get('cores', '?')} cores)"),
        versions=cell(", ".join(f"{k} {v}" for k, v in versions.items() if v)),
        counts=counts_line(cases),
        attention=attention(c.ordered(cases)),
        coverage_table=table(header, [coverage_row(x, index) for x in c.ordered(cases)]),
        explanation="\n".join(f"**{name}**: {text}  " for name, text in COLUMNS),
        kernels=kernels_section(cases),
        top_kernels=TOP_KERNELS,
        passing_table=passing_table(cases),
        op_tables=op_tables(cases),
    )
