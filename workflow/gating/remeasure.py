"""Measuring an inconclusive case again before the gate gives up on it (DESIGN.md,
"Goldens and the gate").

A case the golden gate finds inconclusive had too little evidence for its noise.
`benchflow check` (and the gate rule, with goldens.remeasure_budget_s) measures it
again within a budget of seconds: more fresh invocations of the module its run stage
timed, with that stage's own recorded command (the same tool, device flags,
repetitions, warm-up and min time; only the input files, which the run stage wrote to a
temporary directory, are written again from the export's inputs.npz), then judges them
with the same verdict against the same golden.

The new invocation medians are judged alone, not pooled with the report's. Pooling
would look at the old invocations a second time after their verdict came out
inconclusive (stopping on the data, which inflates the false-alarm rate as
stats/sequential.py explains), and would mix two sessions, the report's run and now,
minutes to days apart under other load, into one sample whose spread the exact test
reads as the noise of exchangeable invocations. Judged alone, the re-measurement is a
fresh sample whose size is fixed before it is taken (from the budget and the duration
of one untimed invocation, never from the medians). The price is a second look against
the same golden: in the fixed-seed simulation (tests/test_verdict_simulation.py) the
false regressions of identical code over both looks stay within alpha (0 to 1.5 % at
CVs of 20 and 40 % and on a bimodal "loaded machine").

Only where the result is comparable: an IREE case (a suite case or a benchmark file's)
measured on this host, whose module, run command and inputs are still on disk. A torch
case is not re-measured (its invocations are worker processes of a whole batch, each
timing every case of the batch; one case cannot be timed apart), and says so.
"""

from __future__ import annotations

import math
import random
import socket
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

from workflow.backends.iree import tools as iree
from workflow.backends.output import machine_fault
from workflow.errors import StageError
from workflow.jobs.iree import iree_invocation
from workflow.measure.protocol import Observation, measure_one
from workflow.records.stage import StageResult
from workflow.records.storage import read_json
from workflow.regression import drift, gate
from workflow.stats import summary as stats
from workflow.stats import verdict
from workflow.stats.enums import Verdict
from workflow.suite.defaults import gate_settings, measurement_defaults, run_timeout_default


@dataclass(frozen=True)
class Remeasured:
    """What became of one inconclusive case."""

    case_id: str
    before: str                        # its time verdict in the report
    after: str | None                  # the verdict of the new invocations; None: not run
    why: str                           # what was measured, or why it was not
    invocation_medians_ms: tuple[float, ...] = ()
    seconds: float = 0.0

    def line(self) -> str:
        if self.after is None:
            return f"NOT REMEASURED {self.case_id}: {self.why}"
        return f"REMEASURED {self.case_id}: {self.before} -> {self.after}: {self.why}"

    def to_dict(self) -> dict:
        return {**asdict(self), "invocation_medians_ms": list(self.invocation_medians_ms)}


class NotFeasible(Exception):
    """Why a case cannot be measured again here (its message says so)."""


def run_stage_file(case: dict) -> str:
    """The run stage JSON of an IREE case: it records the command that timed it."""
    from workflow.paths import BF_RUN_TIMING, IREE_BASELINE_RUN_TIMING

    if (case.get("provenance") or {}).get("benchmark_file"):
        return BF_RUN_TIMING.format(sku=case["sku"], benchmark=case["workload"])
    return IREE_BASELINE_RUN_TIMING.format(sku=case["sku"], workload=case["workload"])


def with_inputs(argv: list[str], inputs: list[str]) -> list[str]:
    """The command with its `--input=` values replaced, in order."""
    at = [i for i, a in enumerate(argv) if a.startswith("--input=")]
    if len(at) != len(inputs):
        raise NotFeasible(f"the run command has {len(at)} --input arguments, the export "
                          f"{len(inputs)} inputs")
    out = list(argv)
    for i, value in zip(at, inputs, strict=True):
        out[i] = f"--input={value}"
    return out


def files_of(argv: list[str]) -> list[str]:
    """The files a command reads: its modules, parameter files and @file inputs."""
    out = []
    for a in argv[1:]:
        if a.startswith("--module="):
            out.append(a.removeprefix("--module="))
        elif a.startswith("--parameters="):
            out.append(a.removeprefix("--parameters=").rpartition("=")[2])
        elif a.startswith("--input=") and "=@" in a:
            out.append(a.rpartition("=@")[2])
    return out


def anchored(argv: list[str], base: Path | None) -> list[str]:
    """The command with the relative files it reads (files_of) made paths under `base`,
    the run's directory its run stage recorded them from; as it is when base is None."""
    if base is None:
        return list(argv)

    def under(path: str) -> str:
        return path if Path(path).is_absolute() else str(base / path)

    out = [argv[0]]
    for a in argv[1:]:
        if a.startswith("--module="):
            a = "--module=" + under(a.removeprefix("--module="))
        elif a.startswith("--parameters="):
            head, sep, path = a.removeprefix("--parameters=").rpartition("=")
            a = "--parameters=" + head + sep + under(path)
        elif a.startswith("--input=") and "=@" in a:
            head, _, path = a.rpartition("=@")
            a = f"{head}=@{under(path)}"
        out.append(a)
    return out


def command_again(case: dict, tmp: Path, base: Path | None = None) -> list[str]:
    """The run stage's command of an IREE case, runnable now; raises NotFeasible. `base`:
    the run's directory, which the report's paths (results/...) are relative to, when
    that is not the working directory (`check --report other/results/report.json`)."""
    from workflow.paths import EXPORT_INPUTS, EXPORT_META

    def there(path: str) -> str:
        return path if base is None else str(base / path)

    if case.get("backend") != "iree":
        raise NotFeasible(f"torch case ({case.get('backend')}): its invocations are worker "
                          "processes timing a whole batch, not one case")
    measured_on = (case.get("provenance") or {}).get("host")
    if measured_on and measured_on != socket.gethostname():
        raise NotFeasible(f"measured on {measured_on}, this is {socket.gethostname()}: "
                          "its invocations would not be comparable")
    path = there(run_stage_file(case))
    try:
        run = StageResult.read(path)
    except (OSError, ValueError, KeyError) as exc:
        raise NotFeasible(f"its run stage {path} cannot be read: {exc}") from None
    argv = run.data.get("command")
    if not run.ok or not argv:
        raise NotFeasible(f"its run stage {path} holds no command (status {run.status})")
    if not (case.get("provenance") or {}).get("benchmark_file"):
        # A suite case's inputs were written to a temporary directory: write them again.
        workload = case["workload"]
        try:
            dtypes = [i["dtype"] for i in read_json(there(EXPORT_META.format(
                workload=workload)))["inputs"]]
            inputs = iree.write_input_files(there(EXPORT_INPUTS.format(workload=workload)),
                                            dtypes, tmp)
        except (OSError, ValueError, KeyError) as exc:
            raise NotFeasible(f"its inputs cannot be written again from "
                              f"{there(EXPORT_INPUTS.format(workload=workload))}: "
                              f"{exc}") from None
        argv = with_inputs(argv, inputs)
    argv = anchored(argv, base)
    absent = [f for f in files_of(argv) if not Path(f).is_file()]
    if absent:
        where = "the working directory" if base is None else f"the run's directory {base}"
        raise NotFeasible(f"{absent[0]} is absent ({where} holds results/ without it)")
    return argv


def fewest_invocations(n_golden: int | None, p_threshold: float) -> int:
    """The fewest invocations whose exact test can reach p below the threshold."""
    return next(n for n in range(1, 10_000) if verdict.min_p(n, n_golden) < p_threshold)


def measure_again(case: dict, ref: verdict.GoldenRef, share_s: float, p_threshold: float,
                  invoke: Callable[[list[str]], Observation], m: dict,
                  base: Path | None = None) -> tuple[list[float], float]:
    """New invocation medians of a case within share_s seconds, and the seconds spent.

    One untimed invocation first (a module not run for a while pays page faults and cold
    caches, which would bias the gate toward a regression); its duration sets how many
    invocations fit: as many as the report had or the golden has, whichever is more (at
    least as many as the test needs to reach p_threshold), fewer when the share is
    short, none when too few fit for the test to reach p_threshold."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        argv = command_again(case, Path(tmp), base)
        n_golden = (len(ref.invocation_medians_ms) if ref.invocation_medians_ms
                    and len(ref.invocation_medians_ms) > 1 else None)
        needed = fewest_invocations(n_golden, p_threshold)
        target = max(len(case["timing"]["invocation_medians_ms"]), n_golden or 0, needed)
        if share_s <= 0:
            raise NotFeasible("the re-measure budget was spent on the cases before it")
        try:
            invoke(argv)
            each = time.monotonic() - start
            fit = min(target, math.floor((share_s - each) / each)) if each > 0 else target
            if fit < needed:
                raise NotFeasible(
                    f"its share of the budget, {share_s:.1f} s, fits {max(fit, 0)} invocations "
                    f"of {each:.2f} s; p < {p_threshold:g} against "
                    f"{n_golden or 'a single golden number'} needs at least {needed}")
            # A fixed count under the one protocol (disturbed invocations retaken).
            fixed = {**m, "invocations": fit, "max_invocations": fit, "rerun_noisy": False}
            medians = measure_one(lambda: invoke(argv), fixed).values
        except StageError as exc:
            fault = machine_fault(exc.message)
            if fault:  # a full disk is no noise: said so, never judged as the case's
                raise NotFeasible(f"a fault of this machine, not of the case: {fault}") \
                    from None
            raise NotFeasible(f"{exc.stage} failed: {exc.message}") from None
    return medians, time.monotonic() - start


def to_remeasure(report: dict) -> tuple[list[int], list[Remeasured]]:
    """The indexes of the inconclusive cases to measure again, and a line for each one
    kept out (kept_out: another configuration than its golden, a run's level that moved;
    each says so, as every case not measured again does). A case its pair decided, or
    found unchanged since blessed (baselines/pair.py), is neither: its verdict
    is the pair's."""
    todo, outcomes = [], []
    for i, c in enumerate(report["cases"]):
        g = c.get("golden") or {}
        if g.get("verdict") != Verdict.INCONCLUSIVE or g.get("basis") in ("paired",
                                                                          "unchanged"):
            continue
        why = kept_out(c)
        if why:
            outcomes.append(Remeasured(c["id"], Verdict.INCONCLUSIVE, None, why))
        else:
            todo.append(i)
    return todo, outcomes


def remeasure_inconclusive(report: dict, *, budget_s: float, gate_config: dict | None = None,
                           goldens_dir: str | Path | None = None, skus: dict | None = None,
                           timeout_s: float | None = None, log: str | None = None,
                           invoke: Callable[[list[str]], Observation] | None = None,
                           base: Path | None = None) -> tuple[dict, list[Remeasured]]:
    """The report with its inconclusive IREE cases measured again and judged afresh,
    within budget_s seconds in all (shared evenly by the cases still to measure, so time
    one case does not use passes to the next), and what became of each.

    gate_config: the suite's `goldens` settings; goldens_dir: judge against this
    directory's golden files (else the file each verdict came from); skus: the suite's
    SKU settings (a SKU's noisy_cv; else the schema's default), timeout_s: per
    invocation (else the schema's timeouts.run_s); invoke(argv) -> Observation: for
    tests; base: the run's directory, which the report's paths are relative to (None:
    the working directory)."""
    if budget_s <= 0:
        return report, []
    todo, outcomes = to_remeasure(report)
    if not todo:
        return report, outcomes
    timeout = timeout_s or run_timeout_default()
    p_threshold = gate_settings(gate_config).p_value
    cases = list(report["cases"])
    deadline = time.monotonic() + budget_s
    for k, i in enumerate(todo):
        case = cases[i]
        golden_file = gate.golden_file_for(case, goldens_dir, base)
        ref = gate.golden_ref(case, golden_file)
        share = (deadline - time.monotonic()) / (len(todo) - k)
        try:
            if ref is None or not ref.median_ms:
                raise NotFeasible("no golden time to judge new invocations against")
            m = {**measurement_defaults(),
                 **((skus or {}).get(case["sku"], {}).get("measurement") or {})}
            medians, seconds = measure_again(
                case, ref, share, p_threshold,
                invoke or partial(iree_invocation, timeout=timeout, log=log, m=m,
                                  layout=random.Random(case["id"]) if m["randomize_layout"]
                                  else None), m, base)
        except NotFeasible as exc:
            outcomes.append(Remeasured(case["id"], Verdict.INCONCLUSIVE, None, str(exc)))
            continue
        timing = {**case["timing"], "invocation_medians_ms": medians,
                  "median_ms": statistics.median(medians),
                  "noisy": stats.is_noisy(medians, m["noisy_cv"])}
        # Judged at the level its run was judged at (regression/drift.py), if any.
        golden = gate.judged_again({**case, "timing": timing}, golden_file, gate_config,
                                   drift.of_section(case.get("golden")))
        cases[i] = {**case, "golden": golden}
        outcomes.append(Remeasured(
            case["id"], Verdict.INCONCLUSIVE, golden["verdict"],
            f"{len(medians)} new invocations in {seconds:.1f} s, judged alone (not pooled "
            f"with the report's {len(case['timing']['invocation_medians_ms'])}): "
            f"{golden.get('reason')}", tuple(medians), seconds))
    order = {c["id"]: i for i, c in enumerate(cases)}  # the lines in the report's order
    return {**report, "cases": cases}, sorted(outcomes, key=lambda o: order[o.case_id])


def kept_out(case: dict) -> str | None:
    """Why an inconclusive case is not measured again whatever the budget, or None."""
    golden = case.get("golden") or {}
    if golden.get("config_differs"):
        return ("measured at another measurement configuration than its golden: new "
                "invocations would differ from the golden in the same way")
    if drift.level_moved(golden):
        return ("its run's level moved past the tolerance: new invocations of it alone "
                "cannot tell the machine from the code (judge against several runs)")
    return None


def run_gate_rule(*, report: str, out: str, log: str, goldens: dict, skus: dict,
                  timeouts: dict) -> dict:
    """The `gate` rule (results/gate.json): regression.gate.run_gate with the suite's
    `goldens` settings, re-measuring inconclusive cases first when
    goldens.remeasure_budget_s allows it (then the rule is a timing job)."""
    from workflow.baselines import pair

    budget = goldens["remeasure_budget_s"]

    def remeasure(data: dict) -> tuple[dict, list]:
        # Decided by what changed since blessed first (unchanged costs nothing; changed
        # cases are paired within the budget), then the rest measured again.
        start = time.monotonic()
        data, decided = pair.decide(data, report, goldens_dir=None, budget_s=budget,
                                    gate_on_machine=goldens.get("gate_on_machine", False),
                                    log=log)
        left = max(0.0, budget - (time.monotonic() - start))
        data, again = remeasure_inconclusive(data, budget_s=left, gate_config=goldens,
                                             skus=skus, timeout_s=timeouts["run_s"])
        return data, [*map(_Decision, decided), *again]

    return gate.run_gate(report, out, log, goldens, remeasure)


@dataclass(frozen=True)
class _Decision:
    """A pair.Decided as the gate's log lists re-measures (to_dict)."""

    decided: object

    def to_dict(self) -> dict:
        return asdict(self.decided)
