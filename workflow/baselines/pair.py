"""`check`'s and the gate rule's decision of each case by what changed since its golden
was blessed (docs/goldens.md, "Unchanged, paired, unpaired").

Numbers measured minutes or days apart on a shared machine drift more between runs
(+-5 % per case, 10-20 % per run here) than the changes users ask about, so a time
judged against a golden's numbers cannot settle a 6 % question. Measured together,
two sides share the machine's state and their ratio settles it in seconds. So:

- unchanged: the case's identity (identity.py) is the golden's. What is timed is what
  was blessed: ok by construction. A time that moved past the tolerance is said as the
  machine's drift, in the line and in the record (`golden.machine_drift`), never as a
  regression of the code (`--gate-on-machine` judges it as measured).
- paired: the identity changed and the golden keeps its baseline (keep.py): the blessed
  module (or model files) and today's are measured again in an interleaved A/B, the
  `ab` protocol's rounds, stopping rule and attribution, and the pair decides.
- unpaired: the baseline cannot be measured again (its artifacts pruned, a tool release
  that cannot be installed here, a golden of numbers only, no seconds left): judged as
  before, from the numbers, saying why.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from workflow.baselines import artifacts
from workflow.baselines.identity import NotKept, load_suite, made, results_root
from workflow.baselines.keep import store_of
from workflow.errors import ConfigError
from workflow.regression import gate, goldens
from workflow.stats.enums import ABVerdict, Status, Verdict

UNCHANGED, PAIRED, UNPAIRED = "unchanged", "paired", "unpaired"
# A pair given fewer seconds than this cannot finish its first look (8 rounds of two
# fresh invocations, or two torch workers' start and blocks): left unpaired, saying so.
MIN_PAIR_S = 10.0
# A pair's rounds and seconds against the suite's `ab` (as a bisection scales a step it
# measures again): at the default plan, 768 rounds and 480 s at most, the budget first.
PAIR_SCALE = 4
AB_VERDICTS = {ABVerdict.REGRESSION: Verdict.REGRESSION,
               ABVerdict.IMPROVEMENT: Verdict.IMPROVEMENT,
               ABVerdict.NO_DIFFERENCE: Verdict.PASS,
               ABVerdict.INCONCLUSIVE: Verdict.INCONCLUSIVE}
DRIFTED = (Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.INCONCLUSIVE)


@dataclass(frozen=True)
class Decided:
    case_id: str
    basis: str          # unchanged | paired | unpaired
    line: str           # what check prints ("" for an unchanged case that did not move)
    seconds: float = 0.0


@dataclass
class _Todo:
    index: int
    golden_file: Path
    baseline: dict
    now: object         # identity.Made


def decide(report: dict, report_path: str | Path, *, goldens_dir: str | Path | None,
           budget_s: float, gate_on_machine: bool = False, log: str | None = None,
           pair=None) -> tuple[dict, list[Decided]]:
    """The report with each judged case decided by what changed since its golden, and
    what became of each; changed cases are paired within budget_s seconds in all (shared
    evenly by the cases still to pair). pair(case, todo, suite, seconds, log) -> A/B row:
    for tests (default: run_pair)."""
    pair = pair or run_pair
    root, cases, out, todo = results_root(report_path), list(report["cases"]), [], []
    suite, suite_why = _suite(report)
    for i, case in enumerate(cases):
        g = case.get("golden") or {}
        if case.get("status") != Status.OK or not case.get("timing") \
                or g.get("verdict") in (None, Verdict.NO_GOLDEN):
            continue
        # A relative golden source is the run's directory's (check run from elsewhere).
        golden_file = gate.golden_file_for(case, goldens_dir, root)
        entry = _entry(golden_file, case["id"])
        if entry is None or not entry.get("baseline"):
            # A benchmark file's own goldens (another machine's thresholds), or a golden
            # of numbers only (bless --numbers-only, or blessed before goldens kept
            # their baselines): judged from the numbers, as it always was.
            continue
        try:
            if suite is None:
                raise NotKept(suite_why)
            now = made(case, report, root, suite)
        except NotKept as exc:
            cases[i], d = _unpaired(case, str(exc))
            out.append(d)
            continue
        if now.identity == entry["baseline"]["identity"]:
            cases[i], d = _unchanged(case, gate_on_machine)
            out.append(d)
        else:
            todo.append(_Todo(i, golden_file, entry["baseline"], now))
    deadline = time.monotonic() + budget_s
    for k, t in enumerate(todo):
        share = (deadline - time.monotonic()) / (len(todo) - k)
        case, start = cases[t.index], time.monotonic()
        try:
            # Its files first: a pruned or damaged baseline is the reason to say, even
            # where no seconds were left to pair it.
            store = store_of(t.golden_file, t.baseline)
            for role in t.baseline["files"]:
                _stored(store, t.baseline, role)
            if share < MIN_PAIR_S:
                raise NotKept(f"the pair budget left {max(share, 0):.0f} s for it, fewer "
                              f"than the {MIN_PAIR_S:g} s a first look needs (raise "
                              "--remeasure-budget, or goldens.remeasure_budget_s)")
            row = pair(case, t, suite, share, log)
            cases[t.index], d = _paired(case, row, time.monotonic() - start)
        except NotKept as exc:
            cases[t.index], d = _unpaired(case, str(exc))
        out.append(d)
    return {**report, "cases": cases}, out


def _suite(report: dict):
    try:
        return load_suite(report), None
    except NotKept as exc:
        return None, str(exc)


def _entry(golden_file: Path | None, case_id: str) -> dict | None:
    # Each case's entry of one file: the file parsed and checked once per content.
    entry = goldens.entry_of(golden_file, case_id) if golden_file is not None else None
    return None if not entry or entry.get("compile_only") else entry


def _unchanged(case: dict, gate_on_machine: bool) -> tuple[dict, Decided]:
    """Ok by construction; a time that moved is the machine's drift, said, not judged
    (unless gate_on_machine)."""
    g = dict(case["golden"])
    moved = g.get("verdict") in DRIFTED
    drift = ({"verdict": g["verdict"], "ratio": g.get("ratio"), "reason": g.get("reason")}
             if moved else None)
    same = ("unchanged since blessed: the same program, inputs, flags, tool releases and "
            "measurement configuration")
    g.update(basis=UNCHANGED, machine_drift=drift, pair=None)
    if not gate_on_machine:
        g.update(verdict=Verdict.PASS, config_differs=[],
                 reason=f"{same}: ok by construction" + (
                     f"; measured here x{drift['ratio']:.3f} of its golden "
                     f"({drift['verdict']} as measured): this machine's drift, not the "
                     "code's" if drift and drift["ratio"] else ""))
    line = ""
    if moved:
        ratio = f"x{drift['ratio']:.3f}" if drift["ratio"] else "a time"
        line = (f"MACHINE DRIFT {case['id']}: {same}, measured {ratio} of its golden "
                f"({drift['verdict']} as measured): the machine moved, not the code"
                + ("; --gate-on-machine: judged as measured" if gate_on_machine
                   else "; counted as ok (--gate-on-machine judges it)"))
    return {**case, "golden": g}, Decided(case["id"], UNCHANGED, line)


def _unpaired(case: dict, why: str) -> tuple[dict, Decided]:
    g = {**case["golden"], "basis": UNPAIRED, "pair": {"why": why}}
    verdict = g.get("verdict")
    return {**case, "golden": g}, Decided(
        case["id"], UNPAIRED, f"UNPAIRED {case['id']}: changed since blessed, judged from "
                              f"the numbers across runs ({verdict}): {why}")


def _paired(case: dict, row: dict, seconds: float) -> tuple[dict, Decided]:
    """The case's golden section decided by its pair's row (a failed pair: unpaired)."""
    if row.get("verdict") == ABVerdict.FAILED:
        raise NotKept(f"its pair failed at {row.get('failed_stage')}: {row.get('error')}")
    g = dict(case["golden"])
    ci = row.get("ci95") or row.get("ci") or [None, None]
    verdict = AB_VERDICTS[row["verdict"]]
    tol = g.get("tolerance")
    within = ""
    if verdict == Verdict.INCONCLUSIVE and tol and ci[0] and 1 / tol <= ci[0] \
            and ci[1] <= tol:
        # The margin not reached, but the whole interval inside the golden's own
        # tolerance: no regression the gate's tolerance would call one is possible.
        verdict, within = Verdict.PASS, (f"; the {row.get('margin', 0):.0%} margin not "
                                         f"reached, the interval inside the tolerance "
                                         f"x{tol:g}")
    attribution = row.get("attribution") or {}
    reason = (f"paired with its blessed baseline: x{row['ratio']:.3f} "
              f"[{ci[0]:.3f}, {ci[1]:.3f}] over {row['rounds']} interleaved rounds "
              f"({row.get('seconds', seconds):.0f} s, {row.get('stop_reason')}), margin "
              f"{row.get('margin', 0):.0%}{within}")
    g.update(basis=PAIRED, verdict=verdict, ratio=row["ratio"], p_value=row.get("p_value"),
             test="interleaved A/B of the blessed baseline and today's case (sign test on "
                  "the rounds' ratios)", reason=reason, config_differs=[], drift=None,
             machine_drift=None,
             pair={k: row.get(k) for k in ("verdict", "ratio", "ci95", "rounds", "seconds",
                                           "stop_reason", "margin", "mde")}
             | {"why": attribution.get("lines") or [],
                "what_changed": attribution.get("what_changed")})
    return {**case, "golden": g}, Decided(case["id"], PAIRED,
                                          f"PAIRED {case['id']}: {verdict}: {reason}", seconds)


def _ab(suite, seconds: float) -> dict:
    """The suite's `ab` settings for a pair of `check`: PAIR_SCALE times its rounds and
    seconds, within the case's share of the budget. A golden's pair is asked a finer
    question than the suite's own pairs (a few percent, where runs drift more), and the
    budget, not the round count, is what a user sets for it."""
    ab = dict(suite.config["ab"])
    ab["max_rounds"] *= PAIR_SCALE
    ab["budget_s"] = max(1.0, min(ab["budget_s"] * PAIR_SCALE, seconds - MIN_PAIR_S / 2))
    return ab


def run_pair(case: dict, t: _Todo, suite, seconds: float, log: str | None) -> dict:
    """The A/B row of the golden's baseline against today's case, within `seconds`;
    NotKept when the baseline cannot be measured again."""
    store = store_of(t.golden_file, t.baseline)
    log = log or str(Path(tempfile.gettempdir()) / "benchflow-check-pairs.log")
    with tempfile.TemporaryDirectory() as tmp:
        if t.now.identity["kind"] == "iree":
            return _iree_pair(case, t, suite, seconds, store, log)
        return _torch_pair(case, t, suite, seconds, store, Path(tmp), log)


def _stored(store: Path, baseline: dict, role: str) -> Path:
    try:
        return artifacts.get(store, baseline["files"][role]["sha256"])
    except (artifacts.Missing, KeyError) as exc:
        raise NotKept(f"its baseline's {role} cannot be read: {exc}") from None


def _iree_pair(case, t: _Todo, suite, seconds, store: Path, log: str) -> dict:
    from workflow.comparisons.ab_modules import pair_modules

    base_tools, now_tools = t.baseline["identity"]["tools"], t.now.identity["tools"]
    # Like with like: both modules under today's SKU settings; only the blessed side's
    # runtime release is its own when it changed.
    sku = dict(t.now.side["sku"])
    base_sku = _runtime_sku(sku, base_tools.get("runtime"), now_tools.get("runtime"))
    common = {"ab": suite.config["ab"], "timeouts": suite.config["timeouts"]}
    base = {**t.baseline["side"], **common, "sku": base_sku,
            "vmfb": str(_stored(store, t.baseline, "module")),
            "inputs": str(_stored(store, t.baseline, "inputs"))}
    new = {**t.now.side, **common, "vmfb": str(t.now.files["module"]),
           "inputs": str(t.now.files["inputs"])}
    return pair_modules(("golden", "today"), (base, new), _ab(suite, seconds), log=log)


def _runtime_sku(sku: dict, blessed: str | None, now: str | None) -> dict:
    """Today's SKU, its benchmark tool the blessed runtime release's where that changed
    (a package environment, as a package bisection installs it)."""
    if not blessed or not now or blessed == now or sku["iree"].get("benchmark_tool"):
        return sku
    from workflow.backends import packages
    from workflow.backends.iree.tools import cache_dir

    try:
        env = packages.environment("iree-base-runtime", blessed,
                                   cache_dir() / "bisect" / "packages")
    except ConfigError as exc:
        raise NotKept(f"its runtime release changed ({blessed} -> {now}) and the blessed "
                      f"one cannot be installed here: {' '.join(exc.problems)}") from None
    return {**sku, "iree": {**sku["iree"],
                            "benchmark_tool": str(env.tools["iree-benchmark-module"])}}


def _torch_pair(case, t: _Todo, suite, seconds, store: Path, tmp: Path, log: str) -> dict:
    from workflow.comparisons.ab_torch import compare_torch_pair

    base_side, now_side = t.baseline["side"], t.now.side
    versions = (t.baseline["identity"]["versions"], t.now.identity["versions"])
    if versions[0] != versions[1]:
        raise NotKept(f"torch releases changed ({versions[0]} -> {versions[1]}): a worker "
                      "of the blessed release needs that release installed")
    if not base_side.get("model_modules") and \
            t.baseline["identity"]["sources"] != t.now.identity["sources"]:
        raise NotKept("a built-in model whose code changed since blessed: benchflow keeps "
                      "no copy of its own code (put the model in the suite's model_modules "
                      "to keep it)")
    for name in base_side.get("model_modules") or []:
        shutil.copyfile(_stored(store, t.baseline, name), tmp / name)
    workload = {**base_side["case"]["workload"],
                "model_modules": [str(tmp / n) for n in base_side.get("model_modules") or []]}
    base = {**base_side, "label": "golden", "case": {**base_side["case"], "workload": workload},
            "model_sources": base_side.get("sources")}
    new = {**now_side, "label": "today", "model_sources": now_side.get("sources")}
    pair = {"base": base, "new": new, "workload": case["workload"]}
    return compare_torch_pair(pair=pair, ab=_ab(suite, seconds),
                              timeout=suite.config["timeouts"]["run_s"],
                              out=str(tmp / "row.json"), log=log)


def finding_lines(report: dict, regressed) -> dict[str, list[str]]:
    """The lines under a REGRESSED case that its pair decided: the dispatches or ops
    that explain the change, and what changed, from the pair's own rounds and profiles."""
    by_id = {c["id"]: c for c in report["cases"]}
    out = {}
    for f in regressed:
        g = by_id[f.case_id].get("golden") or {}
        if g.get("basis") == PAIRED and g.get("pair"):
            said = [*(g["pair"].get("why") or []), g["pair"].get("what_changed")]
            out[f.case_id] = [f"    {line}" for line in said if line]
    return out
