"""The command line's flags: an option is matched whole, never by a prefix (`--config`
is not `--configfile`); `list` and `benchmarks` take `--config KEY=VALUE` as a run
does; an unknown option is said to be unknown; a misspelt subcommand gets the nearest;
-V / --version name the commit and the IREE and torch installed."""

from __future__ import annotations

import argparse
import json

import pytest

from tests.conftest import DATA, tiny_suite, write_suite
from workflow.cli import benchmarks
from workflow.cli.main import build_parser, main
from workflow.errors import ConfigError

# torchao's dashboard file: every entry `device: "cuda"`, 240 cases.
CUDA_FILE = (DATA / "upstream" / "torchao" / "published"
             / "dbef6992fb6b.dashboard.microbenchmark_quantization_config.yml")


def every_parser(parser: argparse.ArgumentParser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from every_parser(child)


def test_no_parser_matches_an_option_by_its_prefix():
    parsers = list(every_parser(build_parser()))
    assert len(parsers) > 12  # benchflow, its subcommands, history's verbs
    assert [p.prog for p in parsers if p.allow_abbrev] == []


def test_list_takes_config_as_a_run_does_not_as_configfile(capsys):
    argv = ["list", "--configfile", str(CUDA_FILE), "--cases", "--config", "torchao_device=cpu"]
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "cases: 240" in out and "skus (" in out
    ids = [line.strip() for line in out.splitlines() if line.startswith("  cpu-host/")]
    assert len(ids) == 240 and not any("cuda" in i for i in ids)


# CASES (also a table of docs/malformed-inputs.md): (id, description, argv, the exit
# status, a fragment of the one line on stderr).
CASES = [
    ("flag-prefix-of-another", "`benchflow ab --config x.yaml`: --config, a prefix of "
     "--configfile, which ab does not take", ["ab", "--config", "x.yaml"], 2,
     "unknown option --config (did you mean --configfile?)"),
    ("flag-misspelt-required", "`benchflow check --reprot R`: a misspelt required option",
     ["check", "--reprot", "results/report.json"], 2,
     "unknown option --reprot (did you mean --report?)"),
    ("command-misspelt", "`benchflow lsit`: a misspelt subcommand", ["lsit"], 2,
     "invalid choice: 'lsit' (did you mean 'list'?"),
    ("list-config-no-value", "`benchflow list --config max_cases`: no =VALUE",
     ["list", "--config", "max_cases"], 1, "--config max_cases: expected KEY=VALUE"),
    ("list-config-bad-value", "`benchflow list --config max_cases=many`: a value the "
     "schema refuses", ["list", "--config", "max_cases=many"], 1,
     '--config max_cases="many": max_cases: expected integer'),
    ("benchmarks-config-unknown-key", "`benchflow benchmarks --config bogus=1`: a key the "
     "suite schema lacks", ["benchmarks", "--config", "bogus=1"], 1,
     "--config bogus=1: <top>: unknown key(s) ['bogus']"),
]


@pytest.mark.parametrize("cid,desc,argv,code,expected", CASES, ids=[c[0] for c in CASES])
def test_a_bad_flag_is_one_line(cid, desc, argv, code, expected, capsys):
    try:
        got = main(argv)
    except SystemExit as exc:  # argparse's own refusals: its usage, then the line
        got = exc.code
    assert got == code
    err = capsys.readouterr().err
    assert expected in err.strip().splitlines()[-1] and "Traceback" not in err


def test_a_misspelt_verb_gets_the_nearest(capsys):
    with pytest.raises(SystemExit):
        main(["history", "shwo"])
    assert "(did you mean 'show'?" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_names_commit_iree_and_torch(flag, capsys):
    from workflow.records.provenance import package_version

    with pytest.raises(SystemExit) as exc:
        main([flag])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("benchflow ") and "  commit: " in out
    for name in ("iree-base-compiler", "torch"):
        assert f"  {name}: {package_version(name) or 'not installed'}" in out


def bench_root(tmp_path):
    root = tmp_path / "benchmarks"
    base = {"inputs": ["4xf32=1"], "function_run": "main", "benchmark_repetitions": 3,
            "benchmark_min_warmup_time": 0.1, "device": "local-task",
            "mlir_file_path": "m.mlir"}
    for name in ("a_cpu", "b_cpu"):
        (root / "alpha").mkdir(parents=True, exist_ok=True)
        (root / "alpha" / f"{name}.json").write_text(json.dumps(base))
    (root / "m.mlir").write_text("// a module for selection only\n")
    return root


def test_benchmarks_takes_config_for_the_listing_and_the_run(tmp_path, monkeypatch, capsys):
    root = bench_root(tmp_path)
    suite = write_suite(tmp_path / "s.yaml", tiny_suite(
        benchmark_files={"dir": str(root), "models": ["alpha"]}))
    commands = []
    monkeypatch.setattr(benchmarks, "run_attached", lambda cmd: commands.append(cmd) or 0)
    monkeypatch.chdir(tmp_path)
    argv = ["benchmarks", "--configfile", str(suite), "--config", "benchmark_files="
            "{filename: b*, skus: [host]}", "max_cases=5"]
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "  host/iree/alpha.b_cpu/baseline" in out and "a_cpu" not in out
    assert "1 benchmark case(s) selected" in out
    # The suite's own run: the same overrides on snakemake's command line.
    assert main([*argv, "--run"]) == 0
    config = commands[-1][commands[-1].index("--config") + 1:]
    assert 'benchmark_files={"filename": "b*", "skus": ["host"]}' in config
    # A selection of its own, elsewhere: the overrides too, under the options.
    assert main([*argv, "--backend", "cpu", "--run"]) == 0
    config = commands[-1][commands[-1].index("--config") + 1:]
    assert "max_cases=5" in config
    assert any(c.startswith("benchmark_files=") and '"filename": "b*"' in c
               and '"backends": ["cpu"]' in c for c in config)


ENTRIES = ["nn=3", "xx=0.5", "flag=True", "off=False", "empty=", "quoted='cpu'",
           "tt=torchao_device", "dd={a: 1, b: [x, 2]}", "ll=[1, 2]", "bad={a: ",
           "dd={c: 3}", "dash-key=v", "yes=yes", "null=null"]


@pytest.mark.tool  # importing snakemake.cli loads its executor plugins (`which sacct`)
def test_config_entries_read_as_snakemake_reads_them():
    from snakemake.cli import parse_config

    from workflow.suite.overrides import parse_entries

    assert parse_entries(ENTRIES) == parse_config(ENTRIES)
    for refused in ("n=3", "novalue", "1x=2", "x-=1"):  # Snakemake's keys are 2 or more long
        with pytest.raises(ValueError):
            parse_config([refused])
        with pytest.raises(ConfigError):
            parse_entries([refused])


def test_list_counts_a_suites_benchmark_file_cases_and_says_why_one_is_skipped(
        tmp_path, capsys):
    """A torch_models suite makes its cases from test files: `list --cases` counts and
    names them, each one that cannot run here with why, and a SKU without a description
    says what it is."""
    torch_models = DATA / "upstream" / "iree-test-suites" / "612f936" / "torch_models"
    suite = write_suite(tmp_path / "tm.yaml", {
        "skus": {"cpu-host": {"iree": {"target_cpu": "host"}}},
        "torch_models": {"test_files": str(torch_models / "examples"),
                         "modules": str(torch_models), "artifacts": str(tmp_path),
                         "markers": "quick"}})
    assert main(["list", "--configfile", str(suite)]) == 0
    out = capsys.readouterr().out
    assert "  cpu-host: iree llvm-cpu host, device local-task\n" in out
    assert "cases: 0; 3 benchmark file case(s) skipped here (--cases says why)" in out
    assert main(["list", "--configfile", str(suite), "--cases"]) == 0
    out = capsys.readouterr().out
    assert ("  skipped torch_models.clip_cpu_benchmark on cpu-host: https://sharkpublic"
            in out and "has no local copy" in out)
    # With its files there, they are its cases.
    from tests.test_torch_models import place

    place(tmp_path)
    assert main(["list", "--configfile", str(suite), "--cases"]) == 0
    out = capsys.readouterr().out
    assert "  cpu-host/iree/torch_models.clip_cpu_benchmark/baseline\n" in out
    assert ("cases: 2 (0 of its workloads, 2 of its benchmark files); 1 benchmark file "
            "case(s) skipped here\n") in out
