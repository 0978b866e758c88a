"""The case record has one definition, workflow/schemas/report.schema.json: its statuses
and verdicts are enums made from the schema's lists, its builders follow the schema's key
order and defaults, and the gate's defaults are the suite schema's (DESIGN.md, "The case
record")."""

import dataclasses
import json
from pathlib import Path

from workflow.records import schemas
from workflow.records.case import IDENTITY, case_record, section, unsupported_case
from workflow.records.report import report_schema
from workflow.records.stage import NO_DEVICE
from workflow.stats import paired
from workflow.stats.enums import ABVerdict, Status, Verdict
from workflow.stats.verdict import Settings
from workflow.suite.defaults import gate_settings
from workflow.suite.schema import load_schema

DATA = Path(__file__).parent / "data"
CASE = report_schema()["$defs"]["case"]["properties"]


def test_the_enums_are_the_schemas_lists_in_order():
    assert [s.value for s in Status] == CASE["status"]["enum"]
    assert [s.name for s in Status] == ["OK", "FAILED", "UNSUPPORTED", "SKIPPED",
                                        "COMPILE_ONLY"]
    golden = CASE["golden"]["properties"]
    assert [v.value for v in Verdict] == golden["verdict"]["enum"]
    assert [v.name for v in Verdict] == ["PASS", "REGRESSION", "IMPROVEMENT", "INCONCLUSIVE",
                                         "NO_GOLDEN"]
    for aspect in ("dispatch_verdict", "size_verdict"):
        assert set(golden[aspect]["enum"]) <= set(Verdict)
    assert NO_DEVICE not in set(Status)  # a stage's own status, never a case's
    ab = schemas.load("ab")["properties"]["pairs"]["items"]["properties"]["verdict"]
    assert [v.value for v in ABVerdict] == ab["enum"]
    assert {paired.REGRESSION, paired.IMPROVEMENT, paired.NO_DIFFERENCE,
            paired.INCONCLUSIVE} < set(ABVerdict)


def test_members_are_their_strings_in_json_and_text():
    assert Status.COMPILE_ONLY == "compile-only" and f"{Verdict.NO_GOLDEN}" == "no-golden"
    assert json.dumps({Status.OK: [Verdict.PASS]}) == json.dumps({"ok": ["pass"]})


def test_a_record_follows_the_schemas_order_and_defaults():
    ident = {"id": "h/iree/w/baseline", "model": "m", "config": "default", "dtype": "f32",
             "shape": [1], "sku": "h", "backend": "iree", "recipe": "baseline",
             "mode": "inference", "workload": "w"}
    rec = unsupported_case(ident, "why")
    assert list(rec) == list(CASE)
    assert rec["device"] == "cpu" and rec["provenance"] == {} and rec["timing"] is None
    assert rec["speedup"] == {"vs_baseline": None, "vs_eager": None,
                              "basis": {"vs_baseline": None, "vs_eager": None}}
    required = CASE["timing"]["oneOf"][1]["required"]
    timing = section("timing", dict.fromkeys(required, 1.0))
    assert (timing["disturbed"], timing["disturbance"], timing["measured_at"]) == \
        (False, None, None)
    assert rec["golden"] == section("golden", {})
    assert rec["golden"]["verdict"] == rec["golden"]["dispatch_verdict"] == Verdict.NO_GOLDEN
    assert section("memory", {"peak_bytes": 1, "kind": "rss", "extra": 0}) == \
        {"peak_bytes": 1, "kind": "rss"}


def test_the_checked_in_reports_rebuild_byte_for_byte():
    for name in ("report_iree.json", "report_torch.json"):
        for case in json.loads((DATA / name).read_text())["cases"]:
            rest = {k: v for k, v in case.items() if k not in IDENTITY}
            # Fields added since the reports were made come back at their null.
            want = {**case, "not_measured": case.get("not_measured"),
                    "kernels": case.get("kernels"), "cost": case.get("cost")}
            assert json.dumps(case_record(case, **rest)) == json.dumps(want), case["id"]


def test_the_gate_defaults_are_the_suite_schemas_only():
    assert all(f.default is dataclasses.MISSING for f in dataclasses.fields(Settings))
    goldens = load_schema()["properties"]["goldens"]["properties"]
    assert gate_settings() == Settings(goldens["tolerance"]["default"],
                                       goldens["size_tolerance"]["default"],
                                       goldens["p_value"]["default"])
    assert gate_settings({"p_value": 0.01}).p_value == 0.01


def test_the_protocols_timing_section_is_the_schemas():
    """What the one invocation loop writes (measure/protocol.timing_section: the
    disturbance of the kept invocations, a probe that could not read /proc/stat giving
    nulls) is a timing section the schema takes, the flag set."""
    from workflow.measure.protocol import Measured, Observation, timing_section

    def probe(share):  # the keys of measure/disturbance.Probe.result
        return {"wall_s": 0.5, "cpu_s": 0.9, "cpu_per_wall": 1.8, "nivcsw": 3, "load1": 2.0,
                "outside_share": share, "steal_share": None if share is None else 0.0,
                "disturbed": bool(share and share > 0.25), "reason": None}
    kept = [Observation(1.0 + i / 100, None, probe(s))
            for i, s in enumerate([0.1, 0.6, None, 0.05, 0.7, 0.1])]
    member = Measured(kept=kept, retaken=[Observation(9.0, None, probe(0.9))],
                      sampling={"stop_reason": "fixed"})
    given = timing_section(member, {"disturbed_share": 0.25, "noisy_cv": 0.1})
    timing = section("timing", {**given, "repetitions": None, "first_run_ms": None})
    schema = {"$defs": report_schema()["$defs"], **CASE["timing"]}
    schemas.validator(schema).validate(timing)
    assert timing["disturbed"] is True and "2 of 6" in timing["disturbance"]["reason"]
