"""results/ab.json read back (issue 37, family 3): checked against its schema and against
the pair records it was built from, so that a hand edit is never taken for the
measurement. A damaged file is one line naming the file, the row or key and what was
expected; the Snakefile builds it again from the records; the gate refuses one that
still differs (exit 2), and the renders never crash on it.

CASES is the table of damaged ab.json files, one row each:
(id, what was done to the file, expected fragment of the one-line message).
"""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import snakemake, write_suite
from workflow.comparisons.ab import ab_damage, ab_repair, aggregate
from workflow.errors import ConfigError
from workflow.gating import gates
from workflow.paths import AB, AB_ROW
from workflow.records.ab import check_ab
from workflow.records.storage import read_json, write_json
from workflow.render import ab as ab_render

WORKLOAD = "linear-128x256x256-f32"
PAIRS = (("host", "host-again"), ("host", "generic"))


def record(new: str) -> dict:
    """A pair's row record as ab_pair writes it: A/A no difference, host -> generic a
    regression of x1.37."""
    slower = new == "generic"
    return {"base": "host", "new": new, "workload": WORKLOAD, "kind": "iree",
            "verdict": "regression" if slower else "no-difference",
            "ratio": 1.37 if slower else 1.001, "ci95": [1.3, 1.45] if slower else [0.99, 1.01],
            "level": 0.96, "p_value": 0.001 if slower else 0.8, "rounds": 12, "seconds": 3.0,
            "stop_reason": "decided", "mde": 1.05, "base_ms": [1.0] * 12, "new_ms": [1.4] * 12}


def row_paths() -> list[str]:
    return [AB_ROW.format(base=b, new=n, workload=WORKLOAD) for b, n in PAIRS]


@pytest.fixture
def built(tmp_path, monkeypatch):
    """A working directory whose results/ab.json was built from its two pair records."""
    monkeypatch.chdir(tmp_path)
    for (_, new), path in zip(PAIRS, row_paths(), strict=True):
        write_json(path, record(new))
    aggregate(row_paths(), AB, suite_name="ab", config_hash="h")
    return tmp_path


def _edit(change):
    def apply(_path):
        doc = read_json(AB)
        change(doc)
        write_json(AB, doc)
    return apply


def _raw(data: bytes):
    def apply(_path):
        with open(AB, "wb") as fh:
            fh.write(data)
    return apply


def _cut(_path):
    data = open(AB, "rb").read()
    with open(AB, "wb") as fh:
        fh.write(data[:len(data) // 2])


def _directory(_path):
    os.remove(AB)
    os.mkdir(AB)


def _set(i: int, key: str, value):
    def change(doc):
        doc["pairs"][i][key] = value
    return change


CASES = [
    ("ab-edited-verdict", "results/ab.json: the regression row's verdict edited to "
     "no-difference (its record says regression x1.37)", _edit(_set(1, "verdict",
                                                                     "no-difference")),
     f"pairs[1] (host -> generic {WORKLOAD}): verdict: 'no-difference' here, 'regression' "
     "in its record"),
    ("ab-edited-ratio", "results/ab.json: a row's ratio edited from 1.37 to 1.0",
     _edit(_set(1, "ratio", 1.0)), "ratio: 1.0 here, 1.37 in its record"),
    ("ab-dropped-row", "results/ab.json: the regression row deleted",
     _edit(lambda d: d["pairs"].pop()),
     "pairs: 1 row(s), but the suite's pairs have 2 record(s)"),
    ("ab-added-row", "results/ab.json: a row copied twice",
     _edit(lambda d: d["pairs"].append(d["pairs"][0])),
     "pairs: 3 row(s), but the suite's pairs have 2 record(s)"),
    ("ab-swapped-rows", "results/ab.json: the two rows swapped",
     _edit(lambda d: d["pairs"].reverse()), "pairs[0] (host -> host-again"),
    ("ab-cut", "results/ab.json cut in half", _cut, "not valid JSON"),
    ("ab-not-json", "results/ab.json holds a line of text", _raw(b"all good\n"),
     "not valid JSON"),
    ("ab-empty", "results/ab.json empty (0 bytes)", _raw(b""), "empty file"),
    ("ab-binary", "results/ab.json holds bytes that are not UTF-8", _raw(b"\xff\xfe{}"),
     "not UTF-8"),
    ("ab-list", "results/ab.json is a JSON list", _raw(b"[]"), "a JSON list, not A/B results"),
    ("ab-retyped-verdict", "a row's verdict retyped as the number 7",
     _edit(_set(1, "verdict", 7)), "pairs[1].verdict: expected one of"),
    ("ab-retyped-ratio", "a row's ratio retyped as the string \"1.37\"",
     _edit(_set(1, "ratio", "1.37")), "pairs[1].ratio: expected number, got str"),
    ("ab-pairs-object", "pairs retyped as an object", _edit(lambda d: d.update(pairs={})),
     "pairs: expected array"),
    ("ab-no-rounds", "a decided row without its rounds", _edit(lambda d: d["pairs"][1].pop(
        "rounds")), "pairs[1]: 'rounds' is a required property"),
    ("ab-escape-in-row", "a row's verdict is a terminal escape sequence",
     _edit(_set(0, "verdict", "\x1b[2J")), "pairs[0].verdict: expected one of"),
    ("ab-directory", "results/ab.json is a directory", _directory, "a directory"),
]


@pytest.mark.parametrize("row", CASES, ids=[r[0] for r in CASES])
def test_a_damaged_ab_json_is_one_line_and_built_again(built, row):
    _id, _what, damage, fragment = row
    damage(built)
    problem = ab_damage(AB, row_paths())
    assert problem is not None and fragment in problem, problem
    assert problem.startswith(f"{AB}: ") and "\n" not in problem
    # At load: a new repair note (the `ab` rule reruns) and a line saying so, escaped.
    note, line = ab_repair(AB, row_paths(), check=True)
    assert note and line.startswith(f"benchflow: {AB}: ") and "\x1b" not in line
    assert line.endswith("it is built again from the records")
    # The gate refuses it (bad input: exit 2), in one line, escaped.
    with pytest.raises(ConfigError) as exc:
        gates.read_rows(built / AB, row_paths())
    (message,) = exc.value.problems
    assert fragment in message and "\n" not in message and "\x1b" not in message
    if os.path.isdir(AB):  # never replaced: what is there is the user's
        with pytest.raises(ConfigError, match="is a directory, not a regular file"):
            aggregate(row_paths(), AB, suite_name="ab", config_hash="h", repair=note)
        return
    # Built again from the records (what the rule does), it holds them again.
    aggregate(row_paths(), AB, suite_name="ab", config_hash="h", repair=note)
    assert ab_damage(AB, row_paths()) is None
    assert [r["verdict"] for r in gates.read_rows(built / AB, row_paths())] == [
        "no-difference", "regression"]


def test_a_sound_ab_json_keeps_its_note_so_a_finished_run_reruns_nothing(built):
    assert ab_damage(AB, row_paths()) is None
    assert ab_repair(AB, row_paths(), check=True) == (None, None)
    _edit(_set(1, "verdict", "improvement"))(built)
    note, _ = ab_repair(AB, row_paths(), check=True)
    aggregate(row_paths(), AB, suite_name="ab", config_hash="h", repair=note)
    assert read_json(AB)["repair"] == note
    # The next plan sees the note the rule ran with: no rerun.
    assert ab_repair(AB, row_paths(), check=True) == (note, None)
    # A process that does not plan (a SLURM job's snakemake) never checks.
    _edit(_set(1, "verdict", "improvement"))(built)
    assert ab_repair(AB, row_paths(), check=False) == (note, None)


def test_no_ab_json_or_a_record_not_made_yet_is_no_damage(built):
    os.remove(row_paths()[0])
    _edit(_set(1, "verdict", "improvement"))(built)
    assert ab_damage(AB, row_paths()) is None  # its pair's job and the rule run anyway
    os.remove(AB)
    assert ab_damage(AB, row_paths()) is None


@pytest.mark.parametrize("change", [
    _set(1, "verdict", 7), _set(1, "ratio", "1.37"), _set(0, "p_value", None),
    lambda d: d["pairs"][1].pop("rounds"), lambda d: d.update(pairs=[None]),
], ids=["verdict-int", "ratio-str", "p-null", "no-rounds", "row-null"])
def test_the_renders_refuse_a_retyped_row_in_one_line(built, change):
    doc = read_json(AB)
    change(doc)
    for render in (ab_render.markdown, ab_render.html):
        with pytest.raises(ConfigError) as exc:
            render(doc)
        (message,) = exc.value.problems
        assert message.startswith(f"{AB}: pairs") and "\n" not in message
    with pytest.raises(ConfigError):
        check_ab(doc, AB)


def test_benchflow_ab_refuses_an_ab_json_that_differs_from_its_records(built, monkeypatch,
                                                                       capsys):
    """The gate's own check, when snakemake did not build the file again (here it is not
    run at all): exit 2 and the line, never the edited verdict's exit 0."""
    from tests.test_ab import ab_suite
    from workflow.cli.main import main

    suite = write_suite(built / "suite.yaml", ab_suite())
    monkeypatch.setattr(gates, "run_attached", lambda cmd: 0)
    assert main(["ab", "--configfile", str(suite), "--directory", str(built)]) == 1
    _edit(_set(1, "verdict", "no-difference"))(built)
    assert main(["ab", "--configfile", str(suite), "--directory", str(built)]) == 2
    err = capsys.readouterr().err
    assert ("verdict: 'no-difference' here, 'regression' in its record "
            f"{built / AB_ROW.format(base='host', new='generic', workload=WORKLOAD)}") in err
    assert "Traceback" not in err


@pytest.mark.e2e
def test_snakemake_builds_an_edited_ab_json_again_from_its_records(tmp_path):
    """The issue's case end to end: ab.json edited by hand after it was written (its
    regression row said no-difference). The next run prints one line and builds it again
    from the pair records before anything reads it; the run after that does nothing.
    The pair records are made by hand and marked done (--touch): the rounds are not what
    is tested here."""
    from tests.test_ab import ab_suite

    suite = str(write_suite(tmp_path / "suite.yaml", ab_suite()))
    for (_, new), path in zip(PAIRS, row_paths(), strict=True):
        write_json(tmp_path / path, record(new))
    snakemake(tmp_path, "--touch", *row_paths(), "--configfile", suite)
    snakemake(tmp_path, AB, "--configfile", suite)
    ab = tmp_path / AB
    doc = json.loads(ab.read_text())
    doc["pairs"][1]["verdict"] = "no-difference"
    ab.write_text(json.dumps(doc))
    proc = snakemake(tmp_path, AB, "--configfile", suite)
    assert (f"benchflow: {AB}: pairs[1] (host -> generic {WORKLOAD}): verdict: "
            "'no-difference' here, 'regression' in its record") in proc.stderr
    assert [r["verdict"] for r in json.loads(ab.read_text())["pairs"]] == [
        "no-difference", "regression"]
    again = snakemake(tmp_path, AB, "--configfile", suite, "-n")
    assert "Nothing to be done" in again.stdout + again.stderr, again.stdout


def test_a_huge_ratio_read_back_is_printed_in_a_few_digits():
    """A row's ratio of 1e308 (a hand-edited or hostile ab.json): `{:.3f}` printed 310
    digits. Large ratios are printed in significant digits; ordinary ones as before."""
    from workflow.cli.ab import line
    from workflow.stats.ratio_text import ratio_text

    assert (ratio_text(1.5), ratio_text(1e308), ratio_text(12345.678)) == (
        "1.500", "1e+308", "1.235e+04")
    row = {"verdict": "regression", "base": "a", "new": "b", "workload": "w", "ratio": 1e308,
           "ci95": [1e307, 1e308], "p_value": 0.01, "rounds": 8, "seconds": 1.0,
           "stop_reason": "decided", "mde": 1e308}
    text = line(row)
    assert "x1e+308 [1e+307, 1e+308]" in text and "detectable x1e+308" in text, text
    assert len(text) < 200, text
