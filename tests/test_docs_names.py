"""What the docs, module docstrings and script headers name exists (issue 21): a module,
a file, a function or class that was moved or renamed makes this fail, naming where."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import REPO

PKG = REPO / "workflow"
PACKAGES = sorted(p.name for p in PKG.iterdir() if (p / "__init__.py").exists())
# workflow.a.b.name, or a/b.py and a/b.name relative to workflow/ (DESIGN.md's short form).
DOTTED = re.compile(r"\bworkflow(?:\.[A-Za-z_]\w*)+")
SHORT = re.compile(r"(?<![\w/.-])(?:workflow/)?((?:" + "|".join(PACKAGES)
                   + r")(?:/\w+)+)(?:\.py)?(?:\.(\w+))?")


@cache
def defined(module: Path) -> frozenset[str]:
    names = set()
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return frozenset(names)


def module_file(parts: list[str]) -> Path | None:
    path = REPO.joinpath(*parts)
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return None


def dotted_problem(name: str) -> str | None:
    parts = name.split(".")
    if any(len(p) == 1 for p in parts[1:]):
        return None  # a placeholder: `from workflow.x import y`
    for cut in range(len(parts), 0, -1):
        found = module_file(parts[:cut])
        if found is None:
            continue
        rest = parts[cut:]
        if not rest or rest[0] in defined(found) or module_file(parts[:cut + 1]):
            return None
        return f"{name}: {found.relative_to(REPO)} defines no {rest[0]}"
    return f"{name}: no such module"


def short_problem(path: str, name: str | None) -> str | None:
    file = PKG / f"{path}.py"
    if not file.is_file():
        data = list((PKG / path).parent.glob((PKG / path).name + ".*"))  # schemas/x.json
        return None if (PKG / path).is_dir() or data else f"workflow/{path}: no such module"
    if name and name not in defined(file):
        return f"workflow/{path}.{name}: not defined there"
    return None


def problems_in(text: str, where: str) -> list[str]:
    found = [dotted_problem(m) for m in DOTTED.findall(text)]
    found += [short_problem(p, n) for p, n in SHORT.findall(text)]
    return [f"{where}: {p}" for p in found if p]


def test_the_docs_name_what_exists():
    wrong = []
    docs = sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))
    for doc in ["README.md", *docs]:
        wrong += problems_in((REPO / doc).read_text(), doc)
    assert not wrong, "\n".join(wrong)


@pytest.mark.slow
def test_module_docstrings_name_what_exists():
    wrong = []
    for path in sorted(PKG.rglob("*.py")):
        tree = ast.parse(path.read_text())
        texts = [ast.get_docstring(n) or "" for n in ast.walk(tree)
                 if isinstance(n, ast.Module | ast.FunctionDef | ast.ClassDef)]
        comments = [line for line in path.read_text().splitlines() if line.strip().startswith("#")]
        wrong += problems_in("\n".join(texts + comments), str(path.relative_to(REPO)))
    assert not wrong, "\n".join(wrong)


def test_script_headers_name_the_function_they_call():
    wrong = []
    for script in sorted((REPO / "scripts").glob("*.py")):
        text = script.read_text()
        if not text.startswith("# Adapter:"):
            wrong.append(f"{script.name}: no '# Adapter: ...' header")
        # One rule, one function (render.py serves several rules: its names are checked
        # by the docstring test's patterns below).
        wrong += problems_in(text.split("\nimport", 1)[0].split("\nfrom", 1)[0], script.name)
        header = re.match(r"# Adapter: Snakemake rule `(\w+)` -> ([\w.]+)", text)
        if header is None:
            continue
        target = header.group(2).rstrip(".")
        module, _, func = target.rpartition(".")
        problem = dotted_problem(target)
        if problem:
            wrong.append(f"{script.name}: {problem}")
        elif f"from {module} import" not in text or func not in text.split("\n", 2)[-1]:
            wrong.append(f"{script.name}: its header names {target}, which it does not call")
        rule = header.group(1)
        if not any(re.search(rf"^rule {rule}:", smk.read_text(), re.M)
                   for smk in (REPO / "rules").glob("*.smk")):
            wrong.append(f"{script.name}: no rule {rule} in rules/")
    assert not wrong, "\n".join(wrong)
