"""A run's metadata columns, filled as pytorch/test-infra's uploader fills them
(.github/actions/upload-benchmark-results/action.yml -> scripts/benchmarks/
gather_metadata.py): repo (github.repository), head_branch (the pull request's head ref,
else github.ref, e.g. `refs/heads/main`), head_sha, workflow_id (github.run_id),
run_attempt, job_id (0 where the CI does not say), name.

Where each comes from, first found wins per key: explicit overrides (the CLI's --repo /
--branch / --sha), the run file's own metadata (a v3 file's columns; a benchflow
report's provenance git_sha, the commit that was measured), the CI's variables (GitHub
Actions, GitLab CI), git of the suite's directory (its HEAD at ingest time: the last
resort, as it may have moved since the run). A pure function of those inputs
(`run_meta`); `git_facts` is asked only when something is still missing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path

from workflow.backends import git
from workflow.errors import ConfigError

KEYS = ("repo", "head_branch", "head_sha", "workflow_id", "run_attempt", "job_id", "name")
INT_KEYS = ("workflow_id", "run_attempt", "job_id")
# The v3 columns' widths: workflow_id and job_id UInt64, run_attempt UInt32.
INT_MAX = {"workflow_id": 2**64 - 1, "run_attempt": 2**32 - 1, "job_id": 2**64 - 1}
DEFAULTS = {"repo": "", "head_branch": "", "head_sha": "", "workflow_id": 0,
            "run_attempt": 1, "job_id": 0, "name": "benchflow"}
# Which keys git can answer; the CI ids it cannot.
GIT_KEYS = ("repo", "head_branch", "head_sha")


def github(env: Mapping[str, str]) -> dict:
    """GitHub Actions' variables as the uploader's action maps them. In a pull request
    GITHUB_HEAD_REF is the head branch; the action takes the head commit from the event
    payload, which no variable holds, so GITHUB_SHA (the merge commit) stands in."""
    if env.get("GITHUB_ACTIONS") != "true" and not env.get("GITHUB_RUN_ID"):
        return {}
    return {"repo": env.get("GITHUB_REPOSITORY"),
            "head_branch": env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF"),
            "head_sha": env.get("GITHUB_SHA"),
            "workflow_id": env.get("GITHUB_RUN_ID"),
            "run_attempt": env.get("GITHUB_RUN_ATTEMPT")}


def gitlab(env: Mapping[str, str]) -> dict:
    """GitLab CI's: the pipeline is the workflow, a retried job gets a new job id (so
    no attempt count); a branch as a ref (`refs/heads/...`), as GitHub names one, so
    that runs of one branch from either CI or from git are one branch in the store."""
    if env.get("GITLAB_CI") != "true" and not env.get("CI_PIPELINE_ID"):
        return {}
    branch = env.get("CI_MERGE_REQUEST_SOURCE_BRANCH_NAME")
    if not branch and env.get("CI_COMMIT_BRANCH"):
        branch = "refs/heads/" + env["CI_COMMIT_BRANCH"]
    if not branch and env.get("CI_COMMIT_TAG"):
        branch = "refs/tags/" + env["CI_COMMIT_TAG"]
    return {"repo": env.get("CI_PROJECT_PATH"),
            "head_branch": branch or env.get("CI_COMMIT_REF_NAME"),
            "head_sha": env.get("CI_COMMIT_SHA"),
            "workflow_id": env.get("CI_PIPELINE_ID"),
            "job_id": env.get("CI_JOB_ID")}


def repo_name(remote: str) -> str:
    """`owner/name` (GitLab: `group/.../name`) of a remote URL, as the CI variables name a
    repository: git@github.com:o/n.git, https://github.com/o/n, ssh://git@h/g/s/n.git."""
    text = remote.strip()
    if "://" in text:
        text = text.split("://", 1)[1].split("/", 1)[-1]  # drop the scheme and the host
        return text.removesuffix("/").removesuffix(".git")
    if ":" in text:  # scp-like: user@host:path
        return text.split(":", 1)[1].removesuffix("/").removesuffix(".git")
    return text.removesuffix("/").removesuffix(".git")


def from_git(facts: Mapping[str, str]) -> dict:
    branch = facts.get("branch")
    return {"repo": repo_name(facts["remote"]) if facts.get("remote") else None,
            "head_branch": "refs/heads/" + branch if branch else None,
            "head_sha": facts.get("sha")}


def _present(value) -> bool:
    return value is not None and value != ""


def _merge(layers: list[Mapping]) -> dict:
    out = {}
    for key in KEYS:
        value = next((layer[key] for layer in layers if _present(layer.get(key))),
                     DEFAULTS[key])
        if key in INT_KEYS and not str(value).strip().isdigit():
            raise ConfigError([f"run metadata: {key}: {value!r} is not a whole number; "
                               "expected the CI's numeric id"])
        if key in INT_KEYS and int(value) > INT_MAX[key]:
            # The UInt column would wrap it (2**70 is stored as 0).
            raise ConfigError([f"run metadata: {key}: {int(value)} is beyond its column "
                               f"(at most {INT_MAX[key]}); expected the CI's numeric id"])
        out[key] = int(value) if key in INT_KEYS else str(value)
    return out


def run_meta(env: Mapping[str, str], file_meta: Mapping | None = None,
             overrides: Mapping | None = None,
             git_facts: Callable[[], Mapping[str, str]] | Mapping | None = None) -> dict:
    """The seven metadata columns (KEYS) of one run. `git_facts`: backends/git.py's
    head_facts of the suite's directory, or a callable giving them, called only when
    a key git answers is still missing."""
    layers = [overrides or {}, file_meta or {}, github(env), gitlab(env)]
    if any(not any(_present(layer.get(k)) for layer in layers) for k in GIT_KEYS) \
            and git_facts is not None:
        facts = git_facts() if callable(git_facts) else git_facts
        layers.append(from_git(facts or {}))
    return _merge(layers)


@lru_cache(maxsize=16)
def _head_facts(directory: str) -> tuple:
    # Once per directory in a process (one CLI command): ingesting a hundred reports
    # of one suite asks git once, not a hundred times.
    return tuple(sorted(git.head_facts(directory).items()))


def fill_meta(run, *, env: Mapping[str, str], overrides: Mapping | None = None,
              suite_dir: Path | str | None = None) -> None:
    """Sets run.meta to its seven columns (run_meta), git asked of `suite_dir` only
    when the file and the CI leave a key git answers unknown."""
    facts = (lambda: dict(_head_facts(str(Path(suite_dir).resolve())))) \
        if suite_dir is not None else None
    try:
        run.meta = run_meta(env, run.meta, overrides, facts)
    except ConfigError as exc:  # which file's run it was: the message names it
        raise ConfigError([f"{run.path}: {line}" for line in exc.problems]) from None
