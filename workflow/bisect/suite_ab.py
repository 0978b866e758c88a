"""The whole suite at two revisions, paired: `benchflow ab --base REV --new REV`.

Each revision's tree is prepared as a bisection's is (bisect/revisions.py), and each
revision keys every case of its suite in one process (prepare.suite_keys). A case whose
content key is equal at both revisions cannot have changed and is not measured; a case
at one revision only is added or removed. The IREE cases whose keys differ are built at
their own revision (prepare.build_cases, one process per revision, each build kept by
its key) and measured as a bisection step is: an interleaved, paired A/B of the two
modules with the suite's `ab` stopping rule and the attribution of its dispatches
(bisect/measure.measure_pair), unless both revisions built the same module byte for
byte (a renamed variable, a comment: `same_module`), which is listed, not measured. A
torch case whose inputs changed is measured as a suite's own torch pair is
(comparisons/ab_torch: a long-lived worker per side, each importing its revision's model
files, timed blocks interleaved), unless both revisions export the same torch program
(`same_program`: the graph without names or debug locations, the weights and inputs).
Before anything is compiled, both kinds are exported at both revisions at once and those
that run the same program are set aside (set_aside_same_programs). A base that moved on
since the new revision branched off is replaced by their merge base, as `git diff
base...new` compares (`revisions`). An inconclusive row whose interval lies within the
suite's time tolerance is no-difference at that margin (judged_at_tolerance).
"""

from __future__ import annotations

import fnmatch
import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from workflow.backends.proc import run_tool, tool_path
from workflow.bisect import revisions as git
from workflow.bisect.history import now
from workflow.bisect.measure import measure_pair
from workflow.bisect.run import OUTCOME_HEADS, call_prepare
from workflow.errors import REASON_CHARS, ConfigError, StageError, error_line
from workflow.records.storage import file_sha256
from workflow.regression.gate import PASSED, REGRESSED, UNJUDGED
from workflow.stats import paired
from workflow.stats.enums import ABVerdict

SCHEMA_VERSION = "1.1"


@dataclass(frozen=True)
class Revisions:
    repo: Path
    suite: str        # the suite file, relative to the repository
    base: str         # full shas: base is what the new revision is compared against,
    new: str          # the merge base when --base moved on since new branched off
    base_ref: str = ""        # --base as given, and the commit it named
    base_named: str = ""

    def label(self, sha: str) -> str:
        return sha[:12]

    @property
    def merge_base(self) -> bool:
        """Whether --base moved on, so the merge base stands in for it."""
        return bool(self.base_named) and self.base_named != self.base

    def merge_base_line(self) -> str | None:
        """What is compared when --base moved on (None when it did not)."""
        if not self.merge_base:
            return None
        return (f"--base {self.base_ref!r} ({self.label(self.base_named)}) moved on since "
                f"--new branched off: comparing against their merge base "
                f"{self.label(self.base)}, as `git diff {self.base_ref}...NEW` does (the "
                "base branch's own later commits are not this change)")

    def to_dict(self) -> dict:
        """ab.json's `revisions`: base is the commit compared against; base_ref and
        base_named what --base said; merge_base whether base is their merge base."""
        return {"repo": str(self.repo), "suite": self.suite, "base": self.base,
                "new": self.new, "base_ref": self.base_ref,
                "base_named": self.base_named or self.base, "merge_base": self.merge_base}


def revisions(repo: Path | None, suite: Path, base: str, new: str) -> Revisions:
    """The two commits, checked before anything is prepared: both exist, the suite file
    is in the repository, and the work tree has no uncommitted change to a tracked file
    (the comparison reads commits; uncommitted edits would be silently left out).
    ConfigError otherwise. When --base is not an ancestor of --new (the base branch
    moved on after the pull request branched off it, as a merge request's target does),
    the comparison is against their merge base, as `git diff base...new` shows a pull
    request's change: the base branch's own later commits are not this change."""
    root = git.repo_root(repo or suite.resolve().parent)
    rel = git.suite_in_repo(root, suite)
    b, n = git.resolve(root, base, "--base"), git.resolve(root, new, "--new")
    fork = git.merge_base(root, b, n, f"--base {base!r} .. --new {new!r}",
                          f"{root}: --base {base!r} and --new {new!r} have no common "
                          "ancestor; expected the base branch the new revision was made "
                          "from (a pull request's base)")
    if fork == n != b:
        # Nothing of --new is outside --base: the comparison would be of one commit with
        # itself, which is what two revisions given the other way round look like.
        raise ConfigError([f"{root}: --new {new!r} is an ancestor of --base {base!r}, so "
                           "there is no change to compare; expected --base the branch the "
                           "new revision was made from and --new the later work (given the "
                           "other way round?)"])
    # At the commits compared: the merge base stands for --base where the base moved on.
    for sha, flag, rev in ((fork, "--base", base), (n, "--new", new)):
        git.require_suite_at(root, rel, sha, flag, rev)
    dirty = git.dirty_files(root)
    if dirty:
        raise ConfigError([f"{root}: the work tree has uncommitted changes to {len(dirty)} "
                           f"tracked file(s) (e.g. {dirty[0]}); `benchflow ab` compares "
                           "commits: commit or stash them first"])
    return Revisions(root, rel, fork, n, base_ref=base, base_named=b)


def _keys(revs: Revisions, sha: str, cache: Path) -> dict:
    tree = git.materialize(revs.repo, sha, cache)
    answer = call_prepare({"tree": str(tree), "suite": revs.suite, "label": revs.label(sha),
                           "all": True}, cache / "logs" / f"{sha}.log")
    if answer.get("error") or answer.get("failed"):
        why = answer.get("error") or answer["failed"]["error"]
        raise ConfigError([f"{revs.suite} at {revs.label(sha)}: the suite does not load: "
                           f"{error_line(why, REASON_CHARS) or 'no reason given'}"])
    return answer


def classify(base: dict, new: dict, pattern: str | None) -> dict:
    """The cases of both revisions' keys (prepare.suite_keys' "cases"), sorted into
    unchanged (equal keys), added, removed, unsupported (known before anything runs, at
    either revision), and the changed ones to measure, torch and iree;
    `pattern`: only the ids it matches (fnmatch)."""
    ids = sorted(set(base) | set(new))
    if pattern:
        ids = [i for i in ids if fnmatch.fnmatchcase(i, pattern)]
    out = {k: [] for k in ("unchanged", "added", "removed", "unsupported", "torch", "iree",
                           "same_module", "compile_only")}
    for case_id in ids:
        b, n = base.get(case_id), new.get(case_id)
        if b is None or n is None:
            out["added" if b is None else "removed"].append(case_id)
        elif b["unsupported"] or n["unsupported"]:  # nothing to compare it with
            out["unsupported"].append(case_id)
        elif b["key"] == n["key"]:
            out["unchanged"].append(case_id)
        else:
            out["torch" if n["backend_kind"] != "iree" else "iree"].append(case_id)
    return out


def compare(revs: Revisions, cache: Path, *, pattern: str | None = None,
            allow_inconclusive: bool = False, say=print, keep=None) -> dict:
    """The comparison as results/ab.json holds it (records/ab's schema, its rows
    measure_pair's with the case's id): rows of the changed IREE cases, then the lists
    of the others, and the outcome (gate outcome, summary line). `keep(steps)`, given
    each measured IREE case's (Step, {sha: its side built}), stores the sides and says
    what became of them (doc["history"]; keep_sides)."""
    started = datetime.now(UTC)
    if revs.merge_base:
        say(revs.merge_base_line())
    keys = _both(revs, lambda sha: _keys(revs, sha, cache))
    sorted_ = classify(keys[revs.base]["cases"], keys[revs.new]["cases"], pattern)
    if pattern and not any(sorted_.values()):
        raise ConfigError([f"--cases {pattern!r}: matches no case of {revs.suite} at either "
                           "revision; expected a glob over `benchflow list --cases` ids"])
    set_aside_same_programs(revs, sorted_, cache, say)
    rows, steps = _measure_iree(revs, sorted_, cache, say)
    tolerance = keys[revs.base].get("tolerance")
    for i, case_id in enumerate(sorted_["torch"], 1):
        say(f"measuring {case_id} (torch, {i} of {len(sorted_['torch'])}) ...")
        rows.append({**torch_pair(revs, keys, case_id, cache), "case": case_id})
    rows = [judged_at_tolerance(row, keys[revs.base]["ab"]["margin"], tolerance)
            for row in rows]
    doc = {"schema_version": SCHEMA_VERSION, "suite_name": keys[revs.new].get("suite_name"),
           "config_hash": "", "generated_at": started.isoformat(timespec="seconds"),
           "revisions": revs.to_dict(),
           "pairs": rows, **{k: sorted_[k] for k in ("unchanged", "same_module", "compile_only",
                                                     "added", "removed", "unsupported")},
           "seconds": round((datetime.now(UTC) - started).total_seconds(), 1)}
    if keep is not None:
        doc["history"] = keep(steps)
    doc["outcome"], doc["summary"] = outcome(doc, allow_inconclusive)
    # The first word, as the gates and bisect head their lines.
    doc["headline"] = f"{OUTCOME_HEADS[doc['outcome']]}: {doc['summary']}"
    return doc


def set_aside_same_programs(revs: Revisions, sorted_: dict, cache: Path, say) -> None:
    """The changed cases whose program is the same at both revisions, moved from
    sorted_["iree"] / ["torch"] to sorted_["same_module"]: what each runs, exported at
    both revisions before anything is compiled or measured (a rename, a comment or a
    moved line changes a key but not the program)."""
    if not (sorted_["iree"] or sorted_["torch"]):
        return
    say(f"exporting {len(sorted_['iree']) + len(sorted_['torch'])} changed case(s) at "
        "both revisions to compare their programs ...")
    # The torch programs in processes of their own: a model that ends its process
    # when called (os._exit, a signal) loses its revision's torch programs, which are
    # then measured, never the IREE exports beside them.
    shas = (revs.base, revs.new)
    answers = _at_once({**{("iree", sha): (lambda sha=sha: _built(
        revs, sha, sorted_["iree"], cache, export_only=True)) for sha in shas},
        **{("torch", sha): (lambda sha=sha: _programs(revs, sha, sorted_["torch"], cache))
           for sha in shas}})
    for case_id in list(sorted_["iree"]):
        if same_module(*(answers["iree", sha]["cases"][case_id] for sha in shas)):
            sorted_["iree"].remove(case_id)
            sorted_["same_module"].append(case_id)
    for case_id in list(sorted_["torch"]):
        if same_program(*(answers["torch", sha].get(case_id) for sha in shas)):
            sorted_["torch"].remove(case_id)
            sorted_["same_module"].append(case_id)
    sorted_["same_module"].sort()


def _measure_iree(revs: Revisions, sorted_: dict, cache: Path, say) -> tuple[list, list]:
    """The changed IREE cases built at both revisions and measured (measure_pair): their
    rows, and each one's (Step, {sha: side}) for `keep`; a case compiled for a device
    this machine lacks is moved to sorted_["compile_only"]."""
    rows, steps = [], []
    if not sorted_["iree"]:
        return rows, steps
    say(f"building {len(sorted_['iree'])} changed IREE case(s) at both revisions ...")
    built = _both(revs, lambda sha: _built(revs, sha, sorted_["iree"], cache)["cases"])
    for i, case_id in enumerate(sorted_["iree"], 1):
        sides = (built[revs.base][case_id], built[revs.new][case_id])
        if sides[0].get("absent") and sides[1].get("absent"):
            # Compiled at both revisions for a device this machine lacks: nothing to
            # time here, as the report's compile-only cases; never a failure.
            sorted_["compile_only"].append({"case": case_id, "why": sides[1]["absent"]})
            continue
        say(f"measuring {case_id} ({i} of {len(sorted_['iree'])}) ...")
        measured_at = now()
        step = measure_pair((revs.base, revs.new), sides, scale=1,
                            log=str(cache / "logs" / "ab.log"))
        step.row["measured_at"] = measured_at
        rows.append({**step.row, "case": case_id})
        steps.append((step, dict(zip((revs.base, revs.new), sides, strict=True))))
    return rows, steps


def torch_pair(revs: Revisions, keys: dict, case_id: str, cache: Path) -> dict:
    """The A/B row of a torch case at the two revisions: a suite's own torch pair's
    protocol (comparisons/ab_torch.compare_torch_pair: a long-lived worker per side, timed
    blocks interleaved, fresh workers every few rounds), each side's worker importing
    its own revision's model files; the base revision's `ab` settings and run timeout,
    as a bisection step takes them. A side that cannot run is a failed row."""
    from workflow.comparisons.ab_torch import compare_torch_pair

    sides = {role: keys[sha]["cases"][case_id]["torch_side"]
             for role, sha in (("base", revs.base), ("new", revs.new))}
    pair = {"workload": sides["base"]["side"]["workload"], **sides}
    out = cache / "ab" / f"{revs.label(revs.base)}-{revs.label(revs.new)}" / \
        (case_id.replace("/", "~") + ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    base = keys[revs.base]
    row = compare_torch_pair(pair=pair, ab=base["ab"], timeout=base["timeouts"]["run_s"],
                             out=str(out), log=str(cache / "logs" / "ab.log"))
    return {**row, "base": revs.base, "new": revs.new}


def _at_once(tasks: dict) -> dict:
    """Each task called at once, {name: its answer}: each is a process of its own
    (prepare.py), and none waits for another (a revision's, or an IREE export's). An
    interrupt (Ctrl-C, or a task's own error) ends the others' processes first, so that
    leaving never waits for them (each runs in a session of its own, which the
    terminal's Ctrl-C does not reach)."""
    from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

    from workflow.backends.groups import kill_own_groups

    if not tasks:
        return {}
    pool = ThreadPoolExecutor(len(tasks))
    try:
        futures = {name: pool.submit(task) for name, task in tasks.items()}
        # Waited for in short steps: an interrupt is taken between them, never only when
        # every process has ended.
        while wait(futures.values(), timeout=0.2, return_when=FIRST_EXCEPTION).not_done:
            if any(f.done() and f.exception() for f in futures.values()):
                break
        return {name: future.result() for name, future in futures.items()}
    except BaseException:
        kill_own_groups()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _both(revs: Revisions, ask) -> dict:
    """ask(sha) for both revisions at once, {sha: answer}."""
    return _at_once({sha: (lambda sha=sha: ask(sha)) for sha in (revs.base, revs.new)})


def _built(revs: Revisions, sha: str, case_ids: list[str], cache: Path, *,
           export_only: bool = False) -> dict:
    """{"cases": each IREE case built at `sha` (prepare.build_cases; `export_only`:
    exported, not compiled)}, one process. A process that failed, or a case the revision
    cannot prepare, is that side's failure, which measure_pair records."""
    if not case_ids:
        return {"cases": {}}
    tree = git.materialize(revs.repo, sha, cache)
    answer = call_prepare({"tree": str(tree), "suite": revs.suite, "label": revs.label(sha),
                           "cases": case_ids, "build": str(cache / "builds"),
                           "export_only": export_only}, cache / "logs" / f"{sha}.log")
    if answer.get("failed") or answer.get("error"):
        failed = answer.get("failed") or {"stage": "suite", "error": answer["error"]}
        return {"cases": {c: {"failed": failed, "identity": {"workload": c.split("/")[2]}}
                          for c in case_ids}}
    return {"cases": {c: ({**a, "identity": {"workload": c.split("/")[2]}} if a.get("error")
                          else a) for c, a in answer["cases"].items()}}


def _programs(revs: Revisions, sha: str, case_ids: list[str], cache: Path) -> dict:
    """Each torch case's program at `sha` (prepare.torch_programs), one process; a
    process that failed (a model that ended it) gives none, so every case is measured."""
    if not case_ids:
        return {}
    tree = git.materialize(revs.repo, sha, cache)
    answer = call_prepare({"tree": str(tree), "suite": revs.suite, "label": revs.label(sha),
                           "programs": case_ids}, cache / "logs" / f"{sha}.programs.log")
    return answer.get("programs") or {}


def same_program(base: dict | None, new: dict | None) -> bool:
    """Whether a torch case runs the same program at both revisions: both exported, and
    the digests of their graphs without names or debug locations, weights, inputs,
    recipe, backend, SKU settings and torch builds are equal (prepare.torch_programs).
    A side that could not be exported is measured, never assumed the same."""
    digests = [(side or {}).get("program") for side in (base, new)]
    return digests[0] is not None and digests[0] == digests[1]


def judged_at_tolerance(row: dict, margin: float, tolerance: float | None) -> dict:
    """An inconclusive row whose interval lies within the suite's tolerance band
    [1 / goldens.tolerance, goldens.tolerance] is no-difference at that margin: the
    ab.margin (1 %) was not reached within its rounds, but the interval shows that the
    change is smaller than any the gate would call a regression. An equivalence test at
    the interval's own level, its margin fixed by the suite before anything ran
    (stats/paired.classify with it); the row says which margin decided it
    (`equivalence`), and keeps what the ab.margin gave (`ab_margin_verdict`). Any other
    row is returned as it is."""
    wider = None if tolerance is None else tolerance - 1
    if row["verdict"] != ABVerdict.INCONCLUSIVE or not row.get("ci") or wider is None \
            or wider <= margin:
        return row
    if paired.classify(row["ratio"], tuple(row["ci"]), wider) != ABVerdict.NO_DIFFERENCE:
        return row
    return {**row, "verdict": ABVerdict.NO_DIFFERENCE, "ab_margin_verdict": row["verdict"],
            "equivalence": {"margin": wider, "setting": "goldens.tolerance",
                            "tolerance": tolerance, "ab_margin": margin}}


def same_module(base: dict, new: dict) -> bool:
    """Whether both sides built the same program with the same flags, tools and inputs:
    their sources differ (a renamed variable, a comment) but what would be timed does
    not, so measuring it could only find noise. The exported MLIR is compared without
    its debug locations (which name the source lines, so a rename moves them): each
    re-emitted by iree-opt --strip-debuginfo, byte for byte; the compiled modules carry
    those locations too, so they are not what is compared."""
    if any(side.get("failed") or side.get("error") for side in (base, new)):
        return False
    # The run's device flags too (the device, local-task's topology): the same module
    # run otherwise is timed otherwise.
    if any(base.get(k) != new.get(k) for k in ("compile_flags", "run_flags")) \
            or base["parts"]["tools"] != new["parts"]["tools"]:
        return False
    with np.load(base["inputs"]) as a, np.load(new["inputs"]) as b:
        if sorted(a.files) != sorted(b.files) or not all(
                np.array_equal(a[k], b[k]) for k in a.files):
            return False
    with tempfile.TemporaryDirectory() as tmp:
        digests = []
        for i, side in enumerate((base, new)):
            out = Path(tmp) / f"{i}.mlirbc"
            try:
                run_tool([tool_path("iree-opt"), "--strip-debuginfo", "--emit-bytecode",
                          side["mlir"], "-o", str(out)], stage="ab", timeout=600)
            except StageError:
                return False  # no iree-opt, or it could not read the module: measure it
            digests.append(file_sha256(out))
    return digests[0] == digests[1]


def outcome(doc: dict, allow_inconclusive: bool = False) -> tuple[str, str]:
    """The gate outcome and its line: REGRESSED when a measured case regressed, UNJUDGED
    when any changed case could not be judged (failed, inconclusive unless allowed),
    else PASSED."""
    verdicts = [r["verdict"] for r in doc["pairs"]]
    count = {v: verdicts.count(v) for v in set(verdicts)}
    unjudged = count.get(ABVerdict.FAILED, 0) + (
        0 if allow_inconclusive else count.get(ABVerdict.INCONCLUSIVE, 0))
    parts = [f"{len(doc['pairs'])} changed case(s) measured",
             f"{len(doc['unchanged'])} with unchanged inputs (not measured)"]
    if doc["same_module"]:
        parts.append(f"{len(doc['same_module'])} changed in source only (same program, "
                     "not measured)")
    if doc["compile_only"]:
        parts.append(f"{len(doc['compile_only'])} compiled only (device absent here)")
    parts += [f"{len(doc[k])} {k}" for k in ("added", "removed") if doc[k]]
    tail = ", ".join(parts)
    if count.get(ABVerdict.REGRESSION):
        return REGRESSED, f"{count[ABVerdict.REGRESSION]} case(s) regressed; {tail}"
    if unjudged:
        return UNJUDGED, f"{unjudged} changed case(s) could not be judged; {tail}"
    return PASSED, f"no regression; {tail}"


def keep_sides(revs: Revisions, suite: Path, store_config: dict, store: Path | None,
               out_dir: Path):
    """`compare`'s keep: each measured IREE case's two sides into the history store as a
    bisection's steps are (bisect/history.keep: a run per side under its revision's
    commit), named query.AB_RUN, which `history detect` shows but never uses to locate
    a change. A torch row's sides are not kept (a side's record there is an IREE one)."""
    from workflow.bisect.history import history_line, keep
    from workflow.bisect.run import Source
    from workflow.history.query import AB_RUN

    source = Source("commit", str(revs.repo), revs.suite, [revs.base, revs.new],
                    tree=lambda sha: sha, suite_dir=suite.resolve().parent)

    def kept(steps: list) -> dict | None:
        done = {"store": None, "ingested": [], "already": [], "runs": 0}
        for i, (step, built) in enumerate(steps):
            try:
                one = keep([step], built, source, store_config, store, out_dir / f"case{i:03d}",
                           run_name=AB_RUN)
            except ConfigError as exc:
                why = " ".join(exc.problems)
                return {"error": why, "line": f"history: {why}; the sides were not kept"}
            if one.get("skipped"):
                # Said where --store asked for it; a suite without a store hears nothing.
                return {**one, "line": history_line(one)} if store is not None else None
            done.update(store=one["store"], runs=done["runs"] + one["runs"])
            done["ingested"] += one["ingested"]
            done["already"] += one["already"]
        if not steps:
            return None
        return {**done, "line": history_line(done)}
    return kept


def step_summary_path() -> Path | None:
    """GitHub Actions' job summary file, when the job sets one."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    return Path(path) if path else None
