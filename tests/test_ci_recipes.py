"""docs/ci.md's CI recipes, run: the GitHub Actions job's and the GitLab CI job's shell
steps, as written, in a clone of a local repository with a base branch and a feature
branch, with the variables each CI service sets. The checkout and artifact steps are
the services' own; the install step (`make setup`) is this project's, done already
here (the clone gets this environment's .venv). The feature branch changes a notes file
only: the comparison measures nothing and passes (tests/test_ab_revisions.py measures a
real regression)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, init_repo, write_suite
from tests.test_ab_revisions import commit, git, suite

pytestmark = [pytest.mark.tool]

PAGE = REPO / "docs" / "ci.md"
INSTALL = "make setup"


def recipes() -> dict[str, dict]:
    blocks = re.findall(r"```yaml\n(.*?)```", PAGE.read_text(), flags=re.S)
    docs = [yaml.safe_load(b) for b in blocks]
    github = next(d for d in docs if "jobs" in d)
    gitlab = next(d for d in docs if "benchmarks" in d)
    return {"github": github["jobs"]["ab"], "gitlab": gitlab["benchmarks"]}


def shell_steps(service: str, job: dict) -> tuple[list[str], dict]:
    """The job's shell lines in order and its variables."""
    if service == "github":
        lines = [s["run"] for s in job["steps"] if "run" in s]
        return lines, dict(job.get("env") or {})
    return list(job["script"]), dict(job.get("variables") or {})


@pytest.fixture
def clone(tmp_path) -> Path:
    """A pull request's checkout: origin holds main; the clone is on a feature branch
    whose one commit edits notes.txt; the suite is SUITE's path in it."""
    origin = init_repo(tmp_path / "origin")
    write_suite(origin / "suite.yaml", suite())
    commit(origin, "base")
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "-q", str(origin), str(work)], check=True)
    git(work, "config", "user.email", "t@example.com")
    git(work, "config", "user.name", "t")
    git(work, "checkout", "-q", "-b", "feature")
    commit(work, "release notes", notes="a note\n")
    (work / ".venv").symlink_to(REPO / ".venv")  # what `make setup` makes
    return work


@pytest.mark.e2e
@pytest.mark.parametrize("service", ["github", "gitlab"])
def test_the_recipe_compares_the_pull_request_with_its_base(clone, tmp_path, service):
    lines, variables = shell_steps(service, recipes()[service])
    assert INSTALL in lines
    env = {**os.environ, **{k: str(v) for k, v in variables.items()},
           "SUITE": "suite.yaml", "BENCHFLOW_CACHE_DIR": str(tmp_path / "cache"),
           "GITHUB_BASE_REF": "main", "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    outputs = []
    for line in lines:
        if line == INSTALL:
            continue
        proc = subprocess.run(["bash", "-ec", line], cwd=clone, env=env, capture_output=True,
                              text=True, timeout=600)
        outputs.append(proc.stdout)
        assert proc.returncode == 0, f"{line}\n{proc.stdout}\n{proc.stderr}"
    assert outputs[-1].splitlines()[-1].startswith("ok: no regression; 0 changed case(s)")
    summary = (clone / "benchflow-ab.md").read_text()
    assert summary.startswith("### benchflow ab: pr, ")
    if service == "github":
        assert Path(env["GITHUB_STEP_SUMMARY"]).read_text() == summary
    assert (clone / "results" / "ab.json").is_file()
