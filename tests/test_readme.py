"""The README and the user guide (docs/*.md) stay true: every code block that can run
here runs.

- ```python blocks (the custom-model example) are written to a file, loaded through a
  suite's `model_modules`, built and called, and a suite using them is validated;
- ```yaml blocks are suites (`benchflow validate`), or fragments of one (merged into the
  suite of the guide's Suites page, then validated);
- ```sh lines are run when cheap (listing, validating, dry runs of `snakemake`), in a
  temporary directory per page holding that page's first suite (else the Suites page's)
  as `my.yaml` and the torch page's workloads as `other.yaml` (the names the commands
  use); the rest are in COMMANDS with the reason they are not run;
- the example of a refused suite is reproduced, and outputs quoted from a cheap command
  are that command's output.

A new code block or command line, on any page, fails
test_every_block_and_command_is_accounted_for until it is run here or skipped with its
reason. Test ids name the page and the line of the block.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.shared_tools import WarmCommands

README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
VENV_BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository
    lang: str
    line: int  # of the opening fence
    text: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def page_blocks(path: Path) -> list[Block]:
    text = path.read_text()
    page = str(path.relative_to(REPO))
    return [Block(page, m.group(1), text[:m.start()].count("\n") + 1, m.group(2))
            for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)]


def commands(block: Block) -> list[str]:
    """The command lines of a shell block: continuations joined, comments dropped."""
    joined = block.text.replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        if line and not line.startswith("#"):
            out.append(re.sub(r"\s+", " ", line))
    return out


BLOCKS = [b for page in PAGES for b in page_blocks(page)]
SH_COMMANDS = [(b, c) for b in BLOCKS if b.lang == "sh" for c in commands(b)]
SUITES_PAGE = "docs/suites.md"
TORCH_PAGE = "docs/torch.md"

# Every command line of the README and the guide, by prefix: how it is checked, and what it
# must print (run: as written; dry: with snakemake's -n, which checks the command line and the suite
# without running a job; repo: as written, from the repository root, for a path into it),
# or why it does not run here (skip).
COMMANDS = [
    # (prefix, how, expected output fragment or the reason it is skipped)
    (". .venv/bin/activate", "env", "every command here runs with .venv/bin first on PATH"),
    ("benchflow list --configfile my.yaml --cases", "run",
     "cpu-host/iree/linear-512x512x512-f32/baseline"),
    ("benchflow list", "run", "models (name: configs; default shape; description):"),
    ("benchflow validate my.yaml other.yaml", "run", "ok: 2 file(s) valid"),
    ("benchflow validate my.yaml", "run", "ok: 1 file(s) valid"),
    ("benchflow list --configfile tests/data/upstream/torchao/", "repo",
     "cuda/torch-inductor-max-autotune/linear-1024x1024x1024-bf16-cuda/baseline"),
    ("benchflow --list", "run", "skus ("),
    ("benchflow benchmarks --model tiny_mlp --filename 'mlp*' --sku cpu-host", "run",
     "cpu-host/iree/tiny_mlp.mlp_cpu/baseline"),
    ("snakemake -n results/report.json", "run", "This was a dry-run"),
    ("snakemake -n --configfile my.yaml --config ", "run", "This was a dry-run"),
    ("snakemake -n --configfile dash.yml", "skip", "needs torchao's dashboard file as "
     "dash.yml; tests/test_plan_time.py runs docs/suites.md's subset of it as written"),
    ("snakemake --cores all results/report.json --configfile my.yaml", "dry",
     "This was a dry-run"),
    ("snakemake --cores all results/report.json", "dry", "This was a dry-run"),
    ("make report", "skip", "runs the default suite (minutes); its dry run is checked"),
    ("make test", "skip", "the whole test suite, this file included (and SLURM)"),
    ("make gpu", "skip", "needs an NVIDIA GPU: the GPU tier (pytest -m gpu), skipped with "
     "its reason elsewhere"),
    ("make check", "skip", "the fast tier of the test suite, this file's fast tests included"),
    ("benchflow run ", "skip", "measures a case (a minute or more each); tests/test_cli_run.py "
                               "runs the command end to end"),
    ("benchflow bless ", "skip", "needs results/report.json of a full run"),
    (".venv/bin/snakemake --cores all --configfile config/config.yaml results/report.json",
     "skip", "the default suite's full run (what `make report` runs): docs/ci.md's nightly "
             "recipe"),
    (".venv/bin/benchflow bless ", "skip", "needs a full run's report; "
     "tests/test_paired_baselines.py blesses and checks real runs"),
    ("benchflow compare ", "skip", "needs two reports of full runs"),
    ("benchflow ab --base main --new feature", "skip", "measures two revisions of a "
     "repository; tests/test_ab_revisions.py runs it end to end, tests/test_ci_recipes.py "
     "docs/ci.md's recipes"),
    ("benchflow check ", "skip", "needs results/report.json of a full run"),
    ("benchflow ab ", "skip", "measures interleaved rounds for a minute; tests/test_ab.py "
                              "runs it"),
    ("snakemake results/gate.json", "skip", "needs a full run's report"),
    ("benchflow benchmarks --model 'tiny_*' --run", "skip",
     "runs the benchmark files through snakemake (minutes)"),
    ("benchflow benchmarks --dir iree-test-suites/", "skip",
     "needs a checkout of iree-test-suites and its downloads"),
    ("snakemake --profile profiles/local all", "skip", "runs every report of the default "
                                                       "suite (minutes)"),
    ("snakemake --profile profiles/slurm all", "skip", "needs a SLURM cluster (pytest -m slurm "
                                                       "tests the profile)"),
    ("benchflow bisect ", "skip", "measures paired A/B steps between revisions (a minute); "
     "tests/test_bisect.py runs it on a 16-commit repository, test_bisect_packages.py on "
     "releases"),
    ("benchflow history ", "skip", "needs reports of full runs in a store; "
                                   "tests/test_history_cli.py runs each verb end to end"),
    ("snakemake results/history.html", "skip", "runs the suite first; "
                                               "tests/test_history_e2e.py runs the rule"),
    (".venv/bin/pytest ", "skip", "the test suite itself"),
    (".venv/bin/python tests/perf/", "skip", "benchmark scripts of minutes (15 for the gate)"),
]

# Unlabelled blocks are output, listings and formats, not commands: each named by its
# first characters, with what checks it (or nothing).
OUTPUT_BLOCKS = {
    "$ python tests/perf/eager_case_cost.py": "a perf script's printout on this machine "
                                              "(docs/evidence.md says when and under what load)",
    "$ python tests/perf/slot_sim.py": "the simulation's printout (its inputs are the "
                                       "H100's figures the text names)",
    "plan: 8 case(s), about": "a plan's estimate of a torchao file (its lines' shape: "
                              "tests/test_plan_time.py)",
    "benchflow: invalid suite, no job was run:": "test_the_refused_suite_example",
    "$ benchflow bisect sync/iree/widening": "a real run of tests/test_bisect.py's repository",
    "bf688bb39a78 against deb81df4e4bf": "a real run of tests/test_ab_revisions.py's "
                                         "repository (its lines' shape checked there)",
    "ok cpu-host/iree/bert-tiny-1x128-f32/baseline": "an example of benchflow run's output",
    '{"total_time": s, "total_samples": n': "the shape of a Forge results entry",
    "results/export/{workload}/module.mlirbc": "a listing of result paths",
    "benchflow: SLURM: SKU": "test_readmes_slurm_warning_is_the_one_printed",
    "$ squeue            # 8 one-GPU batches": "what squeue shows of an 8-GPU node "
                                                "(tests/test_slurm_gpus.py runs it)",
    "ok           host/iree/linear-16x32x32": "an excerpt of --logger benchflow's output "
                                                "(its lines: tests/test_progress.py)",
    "### Regressed (2)": "compare's Markdown on the default suite's gating SKU, host -> "
                         "generic (a real run's output, its lines' shape as "
                         "tests/test_attribution_e2e.py checks them)",
    "+0.0612 ms (added) aten::_to_copy": "a torch recipe pair's explanation "
                                         "(tests/test_attribution_e2e.py prints it)",
    "Regressed sync/iree/two_matmuls": "compare's explanation of a grown matmul "
                                       "(tests/test_attribution_e2e.py prints it)",
    "Similar sync/iree/ln_linear_gelu": "compare's explanation of a fusion change "
                                        "(tests/test_attribution_e2e.py prints it)",
    "$ benchflow history detect": "detect's and show's output on eight real nightly runs "
                                  "here (their lines' shape: tests/test_history_cli.py)",
    "ok           cpu-generic-sync/iree/mlp-64x256x512": "an excerpt of the default suite's run "
                                                   "(its lines: tests/test_progress.py)",
    "NO-DIFFERENCE before -> after  linear-256x256x256": "benchflow ab's lines "
                                                          "(tests/test_ab.py)",
    "ok: 0 of 14 case(s) regressed": "check's summary line on the default suite's run "
                                     "(tests/test_gate_exit_codes.py checks its outcomes)",
    "**`cpu-generic-sync/iree/mlp-64x256x512": "an excerpt of compare's Markdown "
                                               "(docs/attribution.md has all of it)",
    "cases: 5\n": "test_quoted_outputs_are_printed",
    "  cpu-host/iree/tiny_mlp.mlp_cpu/baseline": "test_quoted_outputs_are_printed",
    "benchflow: results/ab.json: pairs[1]": "the line the Snakefile prints for an edited "
                                            "ab.json (tests/test_ab_file.py checks it)",
    "$ benchflow check --report results/report.json --remeasure-budget 0\nCOULD NOT JUDGE":
        "check's lines for a golden of another measurement configuration "
        "(tests/test_like_with_like.py checks them)",
    "$ benchflow check --report results/report.json --against-history 5":
        "check --against-history's lines (tests/test_check_against_history.py checks them)",
    "bless: refused, nothing written:": "bless's refusal of a noisy case "
                                        "(tests/test_bless_noisy.py checks its lines)",
    # docs/DESIGN.md's diagram and listings.
    "config/config.yaml (+ --configfile, --config)": "the DAG, drawn",
    'id            "cpu-host/iree/': "the case record's fields, listed",
}
# ```yaml blocks that are not validated, by a line of theirs, with why.
SKIPPED_YAML: dict[str, str] = {
    "name: benchmarks\non: pull_request": "a GitHub Actions workflow, not a suite "
                                          "(tests/test_ci_recipes.py runs its steps)",
    "benchmarks:\n  rules:": "a GitLab CI job, not a suite (tests/test_ci_recipes.py runs "
                            "its script)",
    "name: nightly benchmarks\non:": "a GitHub Actions workflow, not a suite "
                                     "(tests/test_paired_baselines.py runs its check step)",
    "nightly:\n  rules:": "a GitLab CI job, not a suite (tests/test_paired_baselines.py "
                          "runs its check step)",
    "test_files: iree-test-suites/torch_models/examples":
        "selects the tests of an iree-test-suites checkout, absent here; "
        "tests/test_torch_models_e2e.py runs the same keys",
    "dir: iree-test-suites/sharktank_models/benchmarks":
        "selects the files of an iree-test-suites checkout, absent here; validate checks "
        "them as a run does (issue 23)",
}


def rule_for(command: str) -> tuple[str, str, str]:
    matches = [r for r in COMMANDS if command == r[0] or command.startswith(r[0])]
    assert matches, f"command not accounted for in COMMANDS: {command}"
    return max(matches, key=lambda r: len(r[0]))  # the most specific prefix


def is_suite(data: dict) -> bool:
    return any(k in data for k in ("workloads", "model_params", "benchmark_files"))


def first_suite(page: str) -> Block | None:
    return next((b for b in BLOCKS if b.page == page and b.lang == "yaml"
                 and "skus:\n" in b.text and is_suite(yaml.safe_load(b.text))), None)


@pytest.fixture(scope="module")
def page_dirs(tmp_path_factory) -> dict[str, Path]:
    """Per page, a directory holding its first suite (else the Suites page's) as my.yaml
    and the torch page's workloads as other.yaml (the names the commands use)."""
    torch_block = next(b for b in BLOCKS if b.page == TORCH_PAGE and b.lang == "yaml"
                       and "torch-eager" in b.text)
    dirs = {}
    for page in PAGES:
        name = str(page.relative_to(REPO))
        work = tmp_path_factory.mktemp(page.stem)
        suite = first_suite(name) or first_suite(SUITES_PAGE)
        (work / "my.yaml").write_text(suite.text)
        (work / "other.yaml").write_text(torch_block.text)
        dirs[name] = work
    return dirs


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """The `benchflow` and `snakemake` lines below each run in a process of their own,
    forked from one that imported them once (tests/shared_tools.py): the forty-odd
    cheap commands here would otherwise each pay ~2 s of CPU for the imports alone."""
    commands = WarmCommands(tmp_path_factory.mktemp("outputs"))
    yield commands
    commands.close()


def shell(argv: list[str], cwd: Path, warm: WarmCommands | None = None,
          timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    if warm is not None and argv[0] in ("benchflow", "snakemake"):
        return warm.run(argv, cwd, env, timeout)
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_every_block_and_command_is_accounted_for():
    langs = {b.lang for b in BLOCKS}
    assert langs <= {"sh", "yaml", "python", ""}, langs
    assert len(SH_COMMANDS) >= 20
    for block, command in SH_COMMANDS:
        assert any(command.startswith(r[0]) for r in COMMANDS), (
            f"{block.where}: command not accounted for in COMMANDS: {command}")
    used = {rule_for(c)[0] for _b, c in SH_COMMANDS}
    assert used == {r[0] for r in COMMANDS}, "rules no page uses: " + str(
        {r[0] for r in COMMANDS} - used)
    for block in BLOCKS:
        if block.lang == "":
            assert any(block.text.startswith(k) for k in OUTPUT_BLOCKS), (
                f"{block.where}: an output block OUTPUT_BLOCKS does not name")
    assert sum(b.lang == "python" for b in BLOCKS) == 1


def runnable() -> list[tuple[str, str]]:
    """(page, command) of each command run here, once per page."""
    seen = {}
    for block, command in SH_COMMANDS:
        if rule_for(command)[1] in ("run", "dry", "repo"):
            seen.setdefault((block.page, command), block.where)
    return [pytest.param(page, command, id=f"{where}:{command}")
            for (page, command), where in seen.items()]


@pytest.mark.e2e
@pytest.mark.parametrize(("page", "command"), runnable())
def test_documented_command_runs(page_dirs, warm, page, command):
    _prefix, how, expected = rule_for(command)
    argv = shlex.split(command)
    cwd = REPO if how == "repo" else page_dirs[page]
    if argv[0] == "snakemake":
        # From the repository root in the docs; here from a scratch directory.
        argv[1:1] = ["-s", str(REPO / "Snakefile")]
        if how == "dry":
            argv.append("-n")
    proc = shell(argv, cwd, warm)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert expected in proc.stdout + proc.stderr


@pytest.mark.tool
def test_quoted_outputs_are_printed(page_dirs, warm):
    """The README's quoted outputs of `benchflow list --cases` and `benchflow benchmarks`
    are what those commands print (the repository's path written as ~/benchflow)."""
    checks = [("cases: 5\n", ["benchflow", "list", "--configfile", "my.yaml", "--cases"]),
              ("  cpu-host/iree/tiny_mlp.mlp_cpu/baseline",
               ["benchflow", "benchmarks", "--model", "tiny_mlp", "--filename", "mlp*",
                "--sku", "cpu-host"])]
    for start, argv in checks:
        quoted = [b for b in BLOCKS if b.lang == "" and b.text.startswith(start)]
        assert quoted, start
        for block in quoted:
            proc = shell(argv, page_dirs[block.page], warm)
            assert proc.returncode == 0, proc.stderr
            printed = proc.stdout.replace(str(REPO), "~/benchflow")
            assert block.text in printed, f"{block.where}:\n{printed}"


@pytest.mark.tool
@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "yaml"],
                         ids=lambda b: b.where)
def test_documented_suite_validates(page_dirs, warm, tmp_path, block):
    for line, why in SKIPPED_YAML.items():
        if line in block.text:
            pytest.skip(why)
    data = yaml.safe_load(block.text)
    if not is_suite(data):
        # A fragment (goldens:, ...): the Suites page's suite with it.
        data = {**yaml.safe_load(first_suite(SUITES_PAGE).text), **data}
    suite = tmp_path / "block.yaml"
    suite.write_text(yaml.safe_dump(data, sort_keys=False))
    proc = shell(["benchflow", "validate", str(suite)], tmp_path, warm)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok: 1 file(s) valid" in proc.stdout


@pytest.mark.tool
def test_the_model_example_registers_builds_and_validates(page_dirs, warm, tmp_path):
    """The custom-model example, as written, listed under a suite's model_modules."""
    (block,) = [b for b in BLOCKS if b.lang == "python"]
    (tmp_path / "my_models.py").write_text(block.text)
    name = re.search(r"^def (\w+)\(", block.text, re.M).group(1)
    configs = yaml.safe_load(re.search(r"configs=(\[[^\]]*\])", block.text).group(1))
    suite = yaml.safe_load(first_suite(SUITES_PAGE).text)
    suite["model_modules"] = ["my_models.py"]
    suite["workloads"].append({"model": name, "configs": configs})
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    proc = shell(["benchflow", "validate", "suite.yaml"], tmp_path, warm)
    assert proc.returncode == 0 and "ok: 1 file(s) valid" in proc.stdout, proc.stderr
    proc = shell(["benchflow", "list", "--configfile", "suite.yaml", "--cases"], tmp_path,
                 warm)
    assert proc.returncode == 0, proc.stderr
    for config in configs:
        assert f"cpu-host/iree/{name}-{config}-f32/baseline" in proc.stdout
    # Loaded as the workflow loads it, built in every config and called.
    script = f"""
import torch
from workflow.suite.load import load
from workflow.models.registry import get_model
load(["suite.yaml"])
spec = get_model({name!r})
assert spec.source and spec.source.endswith("my_models.py"), spec.source
for config in {configs!r}:
    inst = spec.build(config, "f32")
    with torch.no_grad():
        out = inst.module(*inst.inputs)
    print(config, tuple(out.shape))
"""
    proc = shell([sys.executable, "-c", script], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["small (8, 64)", "big (8, 1024)"]


@pytest.mark.e2e
def test_the_refused_suite_example(tmp_path, warm):
    """The refused suite: the Suites page's suite with its SKU at 0 invocations and a
    second workload of bert with config `huge`, given to snakemake: no job, every problem
    on its line."""
    (block,) = [b for b in BLOCKS if b.text.startswith("benchflow: invalid suite")]
    suite = yaml.safe_load(first_suite(block.page).text)
    suite["skus"]["cpu-host"]["measurement"]["invocations"] = 0
    suite["workloads"][1] = {"model": "bert", "configs": ["huge"]}
    (tmp_path / "my.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    proc = shell(["snakemake", "-s", str(REPO / "Snakefile"), "-n", "results/report.json",
                  "--configfile", "my.yaml"], tmp_path, warm)
    assert proc.returncode != 0
    printed = proc.stderr.replace(f"{tmp_path}/", "")
    assert block.text in printed, printed


def test_the_quoted_slurm_warning_is_the_one_printed():
    """The docs quote the warning a GPU SKU without a gres gets under SLURM word for
    word (planning/placement.slurm_warnings makes it)."""
    from workflow.planning.placement import slurm_warnings

    skus = {"cuda-sm80": {"iree": {"target_backend": "cuda"}}}
    resources = {"slurm_account": "acct", "slurm_partition": "cpu"}
    quoted = {b.text.strip() for b in BLOCKS if b.text.startswith("benchflow: SLURM: SKU")}
    assert quoted and [*quoted] == slurm_warnings(skus, resources)


# A duration the guide says a run, a test tier or a command takes (or took).
TIMING = re.compile(r"\b(?:takes?|took)\s+(?:about\s+)?\d[\d.]*(?:\s+to\s+\d+)?"
                    r"\s+(?:minutes?|min|s)\b")


@pytest.mark.parametrize("page", [README, REPO / "docs" / "getting-started.md",
                                  REPO / "docs" / "ci.md", REPO / "docs" / "cluster.md"],
                         ids=lambda p: p.name)
def test_a_timing_says_the_machine_was_idle(page):
    """A reader's machine, busy with other work, takes longer: each duration the getting-
    started pages quote says, in its paragraph, that it is an idle machine's."""
    paragraphs = re.split(r"\n\s*\n", page.read_text())
    quoted = [p for p in paragraphs if TIMING.search(p) and not p.lstrip().startswith("```")]
    assert quoted
    assert [p for p in quoted if "idle" not in p] == []
