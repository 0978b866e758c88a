"""`benchflow bless` and noisy cases: a case whose run its SKU's noisy_cv called noisy is
refused as a golden (exit 3, the case, its CV and the limit named, nothing written)
unless --allow-noisy is given; a dry run says that --yes would refuse it."""

from __future__ import annotations

import json

from tests.test_goldens import BASE, make_case, make_report
from workflow.cli.main import main
from workflow.records.storage import write_json
from workflow.regression import goldens

NOISY = "host/iree/b-f32/baseline"
QUIET = "host/iree/a-f32/baseline"


def reports(tmp_path, noisy_cv: float = 0.25):
    """A report of a quiet and a noisy case (cv 29 %), measured by a suite whose SKU
    `host` holds cases to measurement.noisy_cv `noisy_cv`."""
    suite = tmp_path / "suite.yaml"
    suite.write_text(json.dumps({"skus": {"host": {"iree": {"target_cpu": "host"},
                                                   "measurement": {"noisy_cv": noisy_cv}}}}))
    noisy = make_case(NOISY, [1.0, 1.5, 0.8, 1.6, 0.9], noisy=True)
    noisy["timing"]["cv"] = 0.29
    report = make_report(make_case(QUIET, BASE), noisy)
    report["provenance"]["config_source"] = str(suite)
    path = tmp_path / "report.json"
    write_json(path, report)
    return path


def test_a_noisy_case_is_refused_with_its_cv_and_the_limit(tmp_path, capsys):
    gdir = tmp_path / "goldens"
    code = main(["bless", "--report", str(reports(tmp_path)), "--goldens", str(gdir), "--yes"])
    err = capsys.readouterr().err
    assert code == 3, err
    assert "bless: refused, nothing written: 1 case(s) too noisy to be goldens:" in err
    assert (f"{NOISY}: cv 29.0% above the noise limit 25% "
            "(skus.host.measurement.noisy_cv)") in err
    assert QUIET not in err
    assert err.splitlines()[-1] == (  # as docs/goldens.md quotes it
        "  bless a quieter run (several reports pool their runs), leave them out with "
        "--cases, or bless them all the same with --allow-noisy")
    assert not gdir.exists()


def test_allow_noisy_blesses_and_says_so(tmp_path, capsys):
    gdir = tmp_path / "goldens"
    assert main(["bless", "--report", str(reports(tmp_path)), "--goldens", str(gdir), "--yes",
                 "--allow-noisy"]) == 0
    out = capsys.readouterr().out
    assert "--allow-noisy: blessing 1 noisy case(s) all the same:" in out
    assert f"{NOISY}: cv 29.0% above the noise limit 25%" in out
    assert sorted(goldens.read(gdir / "host.json")["cases"]) == [QUIET, NOISY]


def test_a_dry_run_says_yes_would_refuse_and_the_quiet_cases_bless(tmp_path, capsys):
    report, gdir = reports(tmp_path), tmp_path / "goldens"
    assert main(["bless", "--report", str(report), "--goldens", str(gdir)]) == 0
    assert "bless: --yes would refuse this: 1 case(s)" in capsys.readouterr().err
    assert main(["bless", "--report", str(report), "--goldens", str(gdir), "--yes",
                 "--cases", "*/a-*"]) == 0
    assert list(goldens.read(gdir / "host.json")["cases"]) == [QUIET]


def test_the_limit_unknown_when_the_suite_is_gone(tmp_path, capsys):
    report = reports(tmp_path)
    (tmp_path / "suite.yaml").unlink()
    assert main(["bless", "--report", str(report), "--goldens", str(tmp_path / "g"),
                 "--yes"]) == 3
    assert f"{NOISY}: cv 29.0% above its SKU's noise limit " \
           "(skus.host.measurement.noisy_cv)" in capsys.readouterr().err


def test_a_pooled_golden_is_noisy_when_one_of_its_runs_was(tmp_path, capsys):
    earlier = make_case(QUIET, BASE, noisy=True)
    earlier["timing"]["cv"] = 0.12
    first = tmp_path / "first.json"
    write_json(first, make_report(earlier))
    assert main(["bless", "--report", str(first), str(reports(tmp_path, noisy_cv=0.1)),
                 "--goldens", str(tmp_path / "g"), "--yes", "--cases", "*/a-*"]) == 3
    assert f"{QUIET}: cv 12.0% above the noise limit 10%" in capsys.readouterr().err
