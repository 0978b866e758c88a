"""The user guide builds (issue 36): `mkdocs build --strict` of docs/ succeeds, and a
broken link or anchor makes it fail, so the check can fail. The README's own links into
the repository are checked here too: MkDocs reads docs/ only, and GitHub renders the
README from the repository root."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

from tests.conftest import REPO

MKDOCS = Path(sys.executable).parent / "mkdocs"
# [text](target), not inside code: targets with a scheme are outside links.
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def build(root: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(MKDOCS), "build", "--strict", "--config-file",
                           str(root / "mkdocs.yml"), "--site-dir", str(site)],
                          cwd=root, capture_output=True, text=True, timeout=120,
                          env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"})


def guide_copy(tmp_path: Path) -> Path:
    """The guide and its config copied, the rest of the repository linked beside them
    (the pages link into the code, and mkdocs_hooks.py checks those links)."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(REPO / "docs", root / "docs")
    for entry in REPO.iterdir():
        if entry.name not in {"mkdocs.yml", "docs", "site", ".git"}:
            (root / entry.name).symlink_to(entry)
    return root


@pytest.mark.tool
def test_the_guide_builds_in_strict_mode(tmp_path):
    proc = build(REPO, tmp_path / "site")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "ab.html").is_file()


@pytest.mark.tool
@pytest.mark.parametrize(("broken", "expected"), [
    ("[the gate](goldens.md#no-such-heading)", "does not contain an anchor '#no-such-heading'"),
    ("[a page](no-such-page.md)", "not found among documentation files"),
])
def test_a_broken_link_fails_the_build(tmp_path, broken, expected):
    root = guide_copy(tmp_path)
    page = root / "docs" / "ab.md"
    page.write_text(page.read_text() + f"\nSee {broken}.\n")
    proc = build(root, tmp_path / "site")
    assert proc.returncode != 0
    assert expected in proc.stderr, proc.stderr


@pytest.mark.tool
def test_a_link_into_the_code_is_checked(tmp_path):
    """A page's link to a file of the repository outside docs/ builds when the file is
    there (docs/DESIGN.md links into workflow/: the strict build above) and fails the
    build when it is not."""
    root = guide_copy(tmp_path)
    page = root / "docs" / "DESIGN.md"
    page.write_text(page.read_text() + "\nSee [`gone.py`](../workflow/gone.py).\n")
    proc = build(root, tmp_path / "site")
    assert proc.returncode != 0
    assert "'../workflow/gone.py'" in proc.stderr, proc.stderr
    assert "../workflow/paths.py" not in proc.stderr  # the links that hold build


def without_code(text: str, inline: bool = True) -> str:
    """The Markdown outside fenced code blocks (and inline code, unless told)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text) if inline else text


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, as MkDocs' toc (and GitHub) make them."""
    headings = re.findall(r"^#{1,6} (.+)$", without_code(page.read_text(), inline=False), re.M)
    return {slugify(h.replace("`", ""), "-") for h in headings}


def link_problems(text: str, base: Path) -> list[str]:
    """Links of `text`, read as a page in `base`, that name no file of the repository
    or no heading of the page they name."""
    wrong = []
    for target in LINK.findall(without_code(text)):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        file = (base / path).resolve()
        if not file.is_relative_to(REPO) or not file.exists():
            wrong.append(f"{target}: no such file in the repository")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            wrong.append(f"{target}: no heading with that anchor")
    return wrong


def test_the_readmes_links_stay_in_the_repository():
    """Everything a user reads is in the repository: each README link names a file of it
    (and a heading of that page, for an anchor)."""
    text = (REPO / "README.md").read_text()
    assert len(LINK.findall(without_code(text))) >= 10
    assert link_problems(text, REPO) == []


def test_the_link_check_finds_a_broken_link():
    text = ("[design](../shared/DESIGN.md), [ab](docs/ab.md#nowhere), "
            "[gate](docs/goldens.md#exit-codes-of-the-gates), [pyperf](https://pyperf.rtfd.io)")
    assert link_problems(text, REPO) == [
        "../shared/DESIGN.md: no such file in the repository",
        "docs/ab.md#nowhere: no heading with that anchor"]


def test_the_readme_stays_short():
    """A README people finish (issue 36): the reference lives in the guide."""
    assert len((REPO / "README.md").read_text().splitlines()) <= 250
