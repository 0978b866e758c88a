"""The layout rule of docs/DESIGN.md: sub-packages by concern, imports only downward."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "workflow"

# Top to bottom; a module may import its own package and any lower layer, never a
# higher one or a peer on its own level.
LAYERS = [
    ("cli",),
    ("bisect",),
    ("commands", "gating"),
    ("baselines",),
    ("comparisons",),
    ("jobs",),
    ("planning",),
    ("history",),
    ("regression",),
    ("suite", "render", "benchfile"),
    ("backends",),
    ("measure",),
    ("records",),
    ("slots",),
    ("models",),
    ("stats",),
    ("files",),
    ("errors", "paths", "schemas"),
]
RANK = {name: len(LAYERS) - i for i, names in enumerate(LAYERS) for name in names}
# The rooms of what was stages/: what the Snakefile, rules and scripts may import.
STAGE_ROOMS = ("commands", "gating", "baselines", "comparisons", "jobs", "planning")
MAX_LOOSE = 8


def _top(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "workflow" and len(parts) > 1 else None


def _imports(path: Path):
    """Every `workflow.*` import of a file, module level or inside functions."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names] \
                if node.module == "workflow" else [node.module]
            yield node.lineno, names
        elif isinstance(node, ast.Import):
            yield node.lineno, [a.name for a in node.names]


def test_every_workflow_module_belongs_to_a_layer():
    for path in PKG.rglob("*.py"):
        own = path.relative_to(PKG).parts[0].removesuffix(".py")
        if own != "__init__":
            assert own in RANK, f"{path}: add {own!r} to a layer in tests/test_layout.py"


@pytest.mark.slow
def test_imports_only_go_downward():
    wrong = []
    for path in sorted(PKG.rglob("*.py")):
        own = path.relative_to(PKG).parts[0].removesuffix(".py")
        if own == "__init__":
            continue
        for line, names in _imports(path):
            for name in names:
                top = _top(name)
                if top is None or top == own:
                    continue
                if RANK.get(top, 0) >= RANK[own]:
                    wrong.append(f"{path.relative_to(PKG.parent)}:{line}: {own} imports {name}")
    assert not wrong, "imports against the layer order:\n" + "\n".join(wrong)


def test_few_loose_modules_and_documented_packages():
    loose = [p.name for p in PKG.glob("*.py") if p.name != "__init__.py"]
    assert len(loose) <= MAX_LOOSE, loose
    packages = [p for p in PKG.iterdir() if (p / "__init__.py").exists()]
    assert len(packages) >= 5
    for pkg in packages:
        doc = ast.get_docstring(ast.parse((pkg / "__init__.py").read_text()))
        assert doc and "import" in doc.lower(), f"{pkg.name}: say what it owns and imports"



def _module_name(path: Path, pkg: Path) -> str:
    parts = path.relative_to(pkg.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(pkg: Path = PKG) -> dict[str, set[str]]:
    """Module -> the workflow modules it imports, at module level or inside functions.
    `from a.b import c` is the module a.b.c when there is one, else a.b; a package's
    __init__ is the package's own name."""
    modules = {_module_name(p, pkg): p for p in pkg.rglob("*.py")}

    def resolve(name: str) -> str | None:
        parts = name.split(".")
        return next((".".join(parts[:n]) for n in range(len(parts), 0, -1)
                     if ".".join(parts[:n]) in modules), None)

    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found |= {resolve(f"{node.module}.{a.name}") or resolve(node.module)
                          for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {resolve(a.name) for a in node.names}
        graph[name] = found - {None, name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_circles_are_found():
    """The finder itself: a circle through a function-level import, and none in a chain."""
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


@pytest.mark.slow
def test_no_import_circles():
    """No two workflow modules need each other, through any chain of imports, module level
    or inside functions: where two did, the idea they share has a module of its own
    (benchfile/formats.py, benchfile/attach.py, history/importers/run.py)."""
    circles = _circles(_import_graph())
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)

# A module a reader can hold in mind, a function that does one job its name says.
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


@pytest.mark.slow
def test_modules_and_functions_stay_small():
    big = []
    for path in sorted(PKG.rglob("*.py")):
        text = path.read_text()
        where = path.relative_to(PKG.parent)
        if len(text.splitlines()) > MAX_MODULE_LINES:
            big.append(f"{where}: {len(text.splitlines())} lines (at most {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    big.append(f"{where}:{node.lineno}: {node.name} is {n} lines (at most "
                               f"{MAX_FUNCTION_LINES}): split it into named steps")
    assert not big, "too big:\n" + "\n".join(big)


@pytest.mark.slow
def test_only_backends_proc_starts_processes():
    """Every tool runs through workflow/backends/proc.py: argument lists, timeouts, output
    decoded with errors="replace", failures in one form. No other module of workflow/ or
    scripts/ imports subprocess."""
    proc = PKG / "backends" / "proc.py"
    wrong = []
    for path in sorted([*PKG.rglob("*.py"), *(PKG.parent / "scripts").glob("*.py")]):
        if path == proc:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) else [])
            if any(n and n.split(".")[0] == "subprocess" for n in names):
                wrong.append(f"{path.relative_to(PKG.parent)}:{node.lineno}")
    assert not wrong, "subprocess outside backends/proc.py:\n" + "\n".join(wrong)


def test_rules_and_scripts_import_only_stage_rooms_and_paths():
    """A rule says what is built from what; how lives in the stage rooms (DESIGN.md,
    Rooms): the Snakefile, rules and scripts reach the package only through the stage
    rooms and workflow.paths, never a lower package directly."""
    repo = PKG.parent
    allowed = {f"workflow.{room}" for room in STAGE_ROOMS} | {"workflow.paths"}
    wrong = []
    for path in [repo / "Snakefile", *sorted((repo / "rules").glob("*.smk")),
                 *sorted((repo / "scripts").glob("*.py"))]:
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            found = re.match(r"\s*(?:from|import)\s+(workflow(?:\.\w+)?)", line)
            if found and found.group(1) not in allowed:
                wrong.append(f"{path.relative_to(repo)}:{lineno}: {line.strip()}")
    assert not wrong, "imports past the stage rooms and paths:\n" + "\n".join(wrong)


def test_one_measurement_loop():
    """issue 22: the protocol is measure/'s alone. Elsewhere no module judges a
    sequential plan, applies the noisy rule or writes a loop of timed invocations; a
    runner only makes one invocation (jobs: iree_invocation, the torch worker's pass,
    the torch A/B worker's block)."""
    own = {"measure", "stats"}
    wrong = []
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG)
        if rel.parts[0] in own:
            continue
        text = path.read_text()
        for pattern in (r"sequential\.decide\(", r"\bPlan\(", r"\bcv\([^)]*\)\s*>",
                        r"\bis_noisy\(", r"\[\s*\w*invoke\w*\([^)]*\)\s+for\s"):
            for m in re.finditer(pattern, text):
                line = text.count("\n", 0, m.start()) + 1
                if pattern == r"\bis_noisy\(" and rel.as_posix() == "gating/remeasure.py":
                    continue  # the noisy flag of re-measured medians, not a rerun rule
                wrong.append(f"workflow/{rel}:{line}: {m.group(0)!r}")
    assert not wrong, "measurement protocol outside workflow/measure:\n" + "\n".join(wrong)
