"""A bisection from start to end: the revisions (commits of a repository, or releases of
a package), each one's content key for the case (bisect/prepare.py, a process for each
revision whose files the case reads changed: bisect/dag.py), the search over the groups
of equal keys (bisect/search.py) with paired A/B steps (bisect/measure.py), each side
built once at its own revision."""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from workflow.backends.output import machine_fault
from workflow.backends.proc import run_python
from workflow.bisect import dag
from workflow.bisect import revisions as git
from workflow.bisect.history import now
from workflow.bisect.measure import FINAL_ROUNDS, measure_pair, scaled
from workflow.bisect.search import Revision, Step, bisect
from workflow.errors import ConfigError, StageError
from workflow.records.storage import read_json
from workflow.regression.gate import PASSED, REGRESSED, UNJUDGED
from workflow.render.text import clipped
from workflow.stats.ratio_text import ratio_text

# The packages whose releases an IREE case is bisected over, and the SKU keys their
# tools become (the suite's own per-SKU tool keys: suite/load.py).
# A compiler release is timed with its own runtime (packages.COMPANIONS): a module one
# release compiles need not load in another's.
PACKAGE_TOOLS = {"iree-base-compiler": {"compile_tool": "iree-compile",
                                        "benchmark_tool": "iree-benchmark-module"},
                 "iree-base-runtime": {"benchmark_tool": "iree-benchmark-module"}}
KEY_TIMEOUT_S = 300


@dataclass
class Source:
    """What is bisected: `names` good..bad, each one's tree, tools and how it is shown."""
    kind: str                                   # commit | release
    where: str                                  # the repository, or the package
    suite: str                                  # the suite file, relative to a tree
    names: list[str]
    tree: Callable[[str], Path]
    tools: Callable[[str], dict] = field(default=lambda name: {})
    # The suite's directory here: where git says which repository and branch the
    # history's runs of the steps belong to (history/runs.fill_meta).
    suite_dir: Path | None = None

    def label(self, name: str) -> str:
        return name[:12] if self.kind == "commit" else name


def commit_source(repo: Path | None, suite: Path, good: str, bad: str, cache: Path) -> Source:
    """The commits from good to bad of `repo` (default: the suite's repository)."""
    root = git.repo_root(repo or suite.resolve().parent)
    rel = git.suite_in_repo(root, suite)
    names = git.commits(root, good, bad)
    for sha, flag, rev in ((names[0], "--good", good), (names[-1], "--bad", bad)):
        git.require_suite_at(root, rel, sha, flag, rev)
    return Source("commit", str(root), rel, names,
                  tree=lambda sha: git.materialize(root, sha, cache),
                  suite_dir=suite.resolve().parent)


def package_source(package: str, suite: Path, good: str, bad: str, cache: Path) -> Source:
    """The releases of `package` from good to bad (workflow/backends/packages.py: each
    installed once into an environment of its own under the cache), the suite as it is
    here, its case's SKU given that environment's tools."""
    from workflow.backends import packages

    if package not in PACKAGE_TOOLS:
        known = ", ".join(PACKAGE_TOOLS)
        raise ConfigError([f"--package {package!r}: bisect measures IREE cases, whose tools "
                           f"come from {known}; expected one of those (torch and torchao "
                           "releases change torch cases, which bisect does not measure yet)"])
    names = packages.releases(package, good, bad)
    if len(names) < 2:
        raise ConfigError([f"--package {package}: {good}..{bad} holds {len(names)} "
                           "release(s); expected two or more, good before bad"])
    envs = cache / "packages"

    def tools(version: str) -> dict:
        env = packages.environment(package, version, envs)
        return {key: str(env.tools[tool]) for key, tool in PACKAGE_TOOLS[package].items()}

    return Source("release", package, suite.name, names,
                  tree=lambda version: suite.resolve().parent, tools=tools,
                  suite_dir=suite.resolve().parent)


def call_prepare(request: dict, log: Path, timeout: float = KEY_TIMEOUT_S) -> dict:
    """bisect/prepare.py's answer to `request`, in a process of its own (a revision's
    model files register its models: two revisions in one process would collide). A
    failure of the process (its model raised, or ended it) is {"failed": {stage, error}}."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        answer = Path(tmp) / "prepared.json"
        try:
            run_python("workflow.bisect.prepare", [json.dumps(request), str(answer)],
                       stage="prepare", timeout=timeout, log=str(log))
        except StageError as exc:
            return {"failed": {"stage": exc.stage, "error": exc.message}}
        # A process that exited 0 without its answer, or with one cut short, is this
        # revision's failure, as one that raised is: its suite or a model file ended the
        # process (os._exit(0) at import), it is no fault of benchflow's.
        try:
            return read_json(answer)
        except FileNotFoundError:
            why = "without its answer"
        except (OSError, ValueError) as exc:
            why = f"with an answer that cannot be read ({exc})"
        return {"failed": {"stage": "prepare", "error": (
            f"the revision's process exited 0 {why}: its suite or a model file ended "
            f"the process (os._exit?); its log: {log}")}}


def _prepare(source: Source, name: str, case: str, cache: Path, build: bool) -> dict:
    """prepare's answer for one revision; with `build`, its build under
    cache/builds/<the case's content key> (prepare.built_under). A failure of the
    process is the revision's failed build."""
    request = {"tree": str(source.tree(name)), "suite": source.suite, "case": case,
               "tools": source.tools(name), "label": source.label(name),
               "build": str(cache / "builds") if build else None}
    answer = call_prepare(request, cache / "logs" / f"{name}.log")
    return {"key": f"? {name}", **answer} if answer.get("failed") else answer


def keyed(source: Source, case: str, cache: Path,
          say: Callable[[str], None] | None = None) -> tuple[list[Revision], dict]:
    """Every revision with its case's content key (parents first, with its parents), and
    the good end's suite `ab` settings. The case must be in the suite at both ends
    (ConfigError); a revision between them that cannot be keyed (its suite does not
    load or lacks the case, its model raised or ended the process) gets a key of its
    own and why, and is skipped by the search. Over commits, a commit that changed none
    of the files its parent's key read inherits that key without a process (bisect/dag);
    the ends are always keyed."""
    graph = dag.graph(Path(source.where), source.names) if source.kind == "commit" else None
    names = graph.order if graph else source.names
    ends = {names[0], names[-1]}
    keys, read, broken, ab = {}, {}, {}, {}
    progress = dag.Progress(say or (lambda line: None), len(names))
    for i, name in enumerate(names):
        progress(i)
        parent = dag.inherits(graph, name, read) if graph and name not in ends else None
        if parent is not None:
            keys[name], read[name], broken[name] = keys[parent], read[parent], broken[parent]
            continue
        prepared = _prepare(source, name, case, cache, build=False)
        progress.prepared += 1
        if prepared.get("error") and name in ends:
            raise ConfigError([prepared["error"]])
        if name in ends and not prepared.get("failed"):
            _require_device(prepared, case, source.label(name))
        ab = ab or prepared.get("ab") or {}
        keys[name] = prepared.get("key") or f"? {name}"
        read[name] = dag.paths_read(prepared, source.suite)
        broken[name] = _unkeyed(prepared)
    progress.done()
    return [Revision(n, keys[n], graph.parents.get(n, ()) if graph else None, broken[n])
            for n in names], ab


def _require_device(prepared: dict, case: str, label: str) -> None:
    """ConfigError, before anything is built, when the case's device is not on this
    machine (a CUDA case on a machine without CUDA): every step times the case here, so
    both ends would be built, tried twice, and judged by nothing. `ab --base --new`
    lists such a case as compiled only; a bisection has nothing else to do with it."""
    from workflow.backends.iree.tools import device_absent_reason

    absent = device_absent_reason(prepared["sku"]["iree"]["device"])
    if absent:
        raise ConfigError([f"case {case!r} at {label}: {absent}; bisect times the case on "
                           "this machine: run it where its device is (expected a case whose "
                           "device this machine has)"])


def _unkeyed(prepared: dict) -> str | None:
    """Why a revision could not be keyed, in one line (None: it was)."""
    failed = prepared.get("failed")
    why = prepared.get("error") or (failed and f"{failed['stage']} failed: {failed['error']}")
    if not why:
        return None
    line = next((part for part in str(why).splitlines() if part.strip()), str(why))
    return f"could not be keyed ({clipped(line, 200)})"


# keep(steps, built) -> what became of them in the history (bisect/history.keep).
Keep = Callable[[list[Step], dict], dict]


def run(source: Source, case: str, cache: Path, *, say=print, keep: Keep | None = None,
        known: dict[tuple[str, str], Step] | None = None) -> dict:
    """The bisection's result (search.bisect's), steps labelled, the revisions' count,
    the final pair's row (its attribution) when a first bad revision was found, and
    with `keep`, what became of the steps' measurements in the history ("history": a
    store refused is its one line under "error", and the bisection's answer stands).
    `known`: pairs (base, new) already measured at the suite's budget, taken as this
    bisection's steps instead of measuring them again (`history confirm` hands over the
    pair of ends that confirmed the change); a final pair is always measured."""
    revisions, ab = keyed(source, case, cache, say=say)
    built: dict[str, dict] = {}
    measured: list[Step] = []
    log = str(cache / "bisect.log")

    def measure(base: str, new: str, scale: int, final: bool = False) -> Step:
        if not final and scale == 1 and (base, new) in (known or {}):
            say(f"measured {source.label(new)} against {source.label(base)} already: "
                f"{known[(base, new)].verdict}")
            return known[(base, new)]
        for name in (base, new):
            if name not in built:
                built[name] = _prepare(source, name, case, cache, build=True)
        say(f"measuring {source.label(new)} against {source.label(base)}"
            + (f" (x{scale} budget)" if scale > 1 else "")
            + (f" (final pair: {FINAL_ROUNDS} rounds at least)" if final else "") + " ...")
        sys.stdout.flush()
        started = now()
        step = measure_pair((base, new), (built[base], built[new]), scale=scale, log=log,
                            final=final)
        step.row["measured_at"] = started
        measured.append(step)
        say(f"  {step.verdict}" + (f" x{ratio_text(step.ratio)}" if step.ratio else "")
            + (f" in {step.rounds} rounds" if step.rounds else "")
            + (f" ({step.row.get('error')})" if step.row.get("error") else ""))
        return step

    # A step against the good end with the final pair's rounds is the final pair itself
    # (the rounds measure.scaled gives a final pair: FINAL_ROUNDS, at most max_rounds).
    final_rounds = scaled(ab, 1, final=True)["min_rounds"] if ab else FINAL_ROUNDS
    result = bisect(revisions, measure, final_rounds=final_rounds)
    refused = cache_refusal(result, cache)
    if refused:
        raise ConfigError([refused])
    final = result.pop("final")
    result.update(kind=source.kind, where=source.where, case=case,
                  revisions=[r.name for r in revisions],
                  final=final.row if final is not None else None)
    if keep is not None:
        try:
            result["history"] = keep(measured, built)
        except ConfigError as exc:
            result["history"] = {"error": " ".join(exc.problems)}
    return result


def cache_refusal(result: dict, cache: Path) -> str | None:
    """The one line (exit 2) for a bisection stopped because the file system under
    --cache refused a write (full, over quota, read-only): the cache is what the user
    gave, and its file system what to free; no step could be judged there. None when
    the bisection did not stop so (another file system's fault stays a fault, exit 3)."""
    fault = next((s["fault"] for s in result.get("steps", []) if s.get("fault")), None)
    if not fault or not machine_fault(fault) or str(cache) not in fault:
        return None
    return (f"--cache {cache}: {file_system_words(cache)} refused a write: {fault}; free "
            "space there or name a --cache on another file system, and rerun (the builds "
            "made so far are reused)")


def file_system_words(path: Path) -> str:
    """`the file system mounted at /mnt (12 KiB free of 64 KiB)` for the file system
    holding `path` (its nearest existing folder)."""
    import os

    here = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
    dev, mount = os.stat(here).st_dev, here
    while mount.parent != mount and os.stat(mount.parent).st_dev == dev:
        mount = mount.parent
    st = os.statvfs(here)
    return (f"the file system mounted at {mount} ({_size(st.f_bavail * st.f_frsize)} free "
            f"of {_size(st.f_blocks * st.f_frsize)})")


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:g} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1024
    return f"{n} GiB"


# The first word of the result's line, as the gates and `history detect` head theirs.
OUTCOME_HEADS = {PASSED: "ok", REGRESSED: "FAIL", UNJUDGED: "COULD NOT JUDGE"}
