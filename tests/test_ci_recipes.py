"""docs/ci.md's CI recipes, run: the GitHub Actions job's and the GitLab CI job's shell
steps, as written, in a clone of a local repository with a base branch and a feature
branch, with the variables each CI service sets. The checkout and artifact steps are
the services' own; the install step (`make setup`) is this project's, done already
here (the clone gets this environment's .venv). The base branch has moved on since the
feature branched off it, and the feature changes a notes file, or renames a variable of
a model that runs on IREE and torch: the comparison is against the merge base, measures
nothing and passes (tests/test_ab_revisions.py measures a real regression)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
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


SCENARIOS = {
    # The base branch got a commit after the feature branched off (a merge request whose
    # target moved): compared with the merge base; the feature changed a notes file.
    "moved-base": {"notes": "a note\n"},
    # The feature renames a variable of a model that runs on IREE and torch-eager: the
    # same module and the same torch program at both revisions, nothing measured.
    "rename-only": {"rows": "rows"},
}


def make_clone(tmp_path: Path, scenario: str) -> Path:
    """A pull request's checkout: origin holds main; the clone is on a feature branch
    with one commit (SCENARIOS); origin's main then moves on (for every scenario: a
    merge request's target usually has) and the clone has fetched it, as the CI
    checkout does."""
    origin = init_repo(tmp_path / "origin")
    write_suite(origin / "suite.yaml", suite())
    commit(origin, "base")
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "-q", str(origin), str(work)], check=True)
    git(work, "config", "user.email", "t@example.com")
    git(work, "config", "user.name", "t")
    git(work, "checkout", "-q", "-b", "feature")
    commit(work, scenario, **SCENARIOS[scenario])
    # Main moves on: a wider model there, which is not the feature's change.
    commit(origin, "main moves on", width=512, notes="on main\n")
    git(work, "fetch", "-q", "origin")
    (work / ".venv").symlink_to(REPO / ".venv")  # what `make setup` makes
    return work


@pytest.mark.e2e
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("service", ["github", "gitlab"])
def test_the_recipe_compares_the_pull_request_with_its_base(tmp_path, service, scenario):
    clone = make_clone(tmp_path, scenario)
    lines, variables = shell_steps(service, recipes()[service])
    assert INSTALL in lines
    env = {**os.environ, **{k: str(v) for k, v in variables.items()},
           "SUITE": "suite.yaml", "BENCHFLOW_CACHE_DIR": str(tmp_path / "cache"),
           "GITHUB_BASE_REF": "main", "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    outputs, took = [], 0.0
    for line in lines:
        if line == INSTALL:
            continue
        start = time.monotonic()
        proc = subprocess.run(["bash", "-ec", line], cwd=clone, env=env, capture_output=True,
                              text=True, timeout=600)
        took = time.monotonic() - start
        outputs.append(proc.stdout)
        assert proc.returncode == 0, f"{line}\n{proc.stdout}\n{proc.stderr}"
    print(outputs[-1], f"({took:.0f} s)")
    last = outputs[-1].splitlines()
    assert last[-1].startswith("ok: no regression; 0 changed case(s)"), last
    assert "merge base" in last[1], last  # said, since main moved on
    doc = json.loads((clone / "results" / "ab.json").read_text())
    assert doc["revisions"]["merge_base"] is True
    assert doc["revisions"]["base"] == git(clone, "merge-base", "origin/main", "HEAD")
    if scenario == "rename-only":
        assert doc["same_module"] == [
            "gpu/iree/widening-64x256-f32/baseline", "sync/iree/widening-64x256-f32/baseline",
            "sync/torch-eager/widening-64x256-f32/baseline"], doc
        # What the pull request asked for: a rename passes within a minute.
        assert took < 60, f"the comparison took {took:.0f} s"
    summary = (clone / "benchflow-ab.md").read_text()
    assert summary.startswith("### benchflow ab: pr, ")
    if service == "github":
        assert Path(env["GITHUB_STEP_SUMMARY"]).read_text() == summary
