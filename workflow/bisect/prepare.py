"""One revision of a bisection, in a process of its own: its suite loaded from its tree,
the case found, its content key computed without measuring, and, when asked, its export
and module built into the revision's cache directory.

A process per revision because a revision's model file registers its model by name,
and every revision's file registers the same name: two revisions in one process would
be one model registered twice (models/registry.py), or worse, the first one's code
serving both. `python -m workflow.bisect.prepare REQUEST_JSON OUT_JSON`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from workflow.backends.worker_side import worker_main
from workflow.comparisons.ab_torch import torch_side
from workflow.errors import ConfigError
from workflow.records.storage import read_json, write_json

# Where the revision's tree appears in its key's parts: the key of two revisions with
# the same model files is the same although their trees are extracted in two places.
TREE = "<revision>"


def find_case(suite, case_id: str, where: str):
    """The suite's case of that id (as `benchflow list --cases` prints it)."""
    for case in suite.cases:
        if case.id == case_id:
            return case
    ids = [c.id for c in suite.cases]
    raise ConfigError([f"{where}: case {case_id!r}: not in the suite at this revision; "
                       f"expected one of `benchflow list --cases` ({len(ids)} case(s)"
                       + (f", e.g. {ids[0]}" if ids else "") + ")"])


def _relative(data, tree: Path):
    """`data` with the tree's absolute path replaced by TREE (a JSON round trip)."""
    text = json.dumps(data, sort_keys=True, default=str)
    return json.loads(text.replace(str(tree.resolve()), TREE))


def in_repository(sources: dict) -> dict:
    """{file: digest} of a revision's model sources as a user names the files, by their
    path in the repository: the explanation of a row prints them. The key's parts keep
    TREE, a placeholder for where the revision's tree was extracted, which names no file
    a user has."""
    return {path.removeprefix(TREE + "/"): digest for path, digest in sources.items()}


def case_key(tree: Path, suite_rel: str, case_id: str, tools: dict, label: str) -> dict:
    """The case at this revision: {key, parts, sku, spec, identity, ab, timeouts,
    model_sources}; `tools` overrides the SKU's iree tools (a package bisection's
    environment). ConfigError when the suite does not load or has no such case, or the
    case is not an IREE one."""
    from workflow.suite.load import IREE, load

    where = f"{suite_rel} at {label}"
    suite = load([tree / suite_rel])
    case = find_case(suite, case_id, where)
    if case.backend_kind != IREE:
        raise ConfigError([f"{where}: case {case_id!r}: backend {case.backend!r}; bisect "
                           "measures IREE cases (expected a case whose backend is iree)"])
    return _iree_prepared(suite, case, tree, tools, where)


def _iree_prepared(suite, case, tree: Path, tools: dict, where: str) -> dict:
    from workflow.backends.iree import gpu_chip
    from workflow.backends.iree import tools as iree
    from workflow.planning import keys

    sku = dict(suite.sku(case.sku))
    sku["iree"] = {**sku["iree"], **{k: str(v) for k, v in tools.items()}}
    sku, choice = gpu_chip.resolve_auto_chip(sku)
    if choice is not None and choice.chip is None:
        raise ConfigError([f"{where}: sku {case.sku}: target_chip auto: {choice.reason}"])
    spec = case.workload.export_spec()
    device_here = iree.device_absent_reason(sku["iree"]["device"]) is None
    parts = keys.case_parts({"spec": spec, "identity": case.identity()}, sku,
                            keys.dtype_tolerances(suite.config["accuracy"]), device_here,
                            choice.key() if choice else None)
    parts = _relative(parts, tree)
    return {"key": keys.digest(parts), "parts": parts, "sku": sku, "spec": spec,
            "identity": case.identity(), "ab": suite.config["ab"],
            "timeouts": suite.config["timeouts"],
            "model_sources": in_repository(parts["export"]["model sources"])}


def suite_keys(tree: Path, suite_rel: str, label: str) -> dict:
    """Every case of the suite at this revision and its content key, the suite loaded
    once (a whole-suite A/B keys a revision in one process): {"suite_name", "ab",
    "timeouts", "cases": {id: {"backend_kind", "key", "unsupported", "torch_side"}}}. A
    torch case's key covers what its batch's does (planning/keys.torch_batch_content:
    model sources, recipes, torch builds), its SKU's and backend's settings; its
    torch_side is what an A/B pair of it measures (torch_side). ConfigError when the
    suite does not load."""
    from workflow.planning import keys
    from workflow.suite.load import IREE, load

    where = f"{suite_rel} at {label}"
    suite = load([tree / suite_rel])
    cases = {}
    for case in suite.cases:
        side = None
        if case.unsupported:  # known before anything runs: listed, never measured
            key = keys.digest(case.identity())
        elif case.backend_kind == IREE:
            key = _iree_prepared(suite, case, tree, {}, where)["key"]
        else:
            side = torch_side(suite, case, label)
            content = _relative(keys.torch_batch_content([side["case"]["workload"]],
                                                         suite.sku(case.sku)), tree)
            # What the row's explanation names when the model's files changed.
            side["model_sources"] = in_repository(content["model sources"])
            key = keys.digest(_relative({**side["case"], "sku": side["sku"],
                                         "backend": side["backend"], "content": content},
                                        tree))
        cases[case.id] = {"backend_kind": case.backend_kind, "key": key,
                          "unsupported": case.unsupported, "torch_side": side}
    return {"suite_name": suite.config.get("suite_name"), "ab": suite.config["ab"],
            "timeouts": suite.config["timeouts"],
            # The gate's time tolerance: an A/B row inside it is no-difference where the
            # ab.margin was not reached (suite_ab.judged_at_tolerance).
            "tolerance": suite.config["goldens"]["tolerance"], "cases": cases}


def torch_programs(tree: Path, suite_rel: str, case_ids: list[str], label: str) -> dict:
    """Each torch case of `case_ids` at this revision as what torch runs (a rename moves
    nothing of it): {"program": digest} of its exported graph without names or debug
    locations, its weights and inputs (backends/torch/program.py), its recipe, backend
    and SKU settings and the torch builds (its key's content less the model sources);
    {"error"} for a case that cannot be built or exported here, which is then measured."""
    from workflow.backends.torch.program import program_digest
    from workflow.planning import keys
    from workflow.suite.load import load

    where = f"{suite_rel} at {label}"
    suite = load([tree / suite_rel])
    out = {}
    for case_id in case_ids:
        try:
            case = find_case(suite, case_id, where)
            side = torch_side(suite, case, label)
            content = keys.torch_batch_content([side["case"]["workload"]], suite.sku(case.sku))
            content.pop("model sources")
            graph = program_digest(side["case"]["workload"])
        except Exception as exc:  # the model's own failure: this case is measured instead
            out[case_id] = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
            continue
        settings = _relative({**side["case"], "sku": side["sku"], "backend": side["backend"],
                              "content": content}, tree)
        out[case_id] = {"program": keys.digest({"settings": settings, "graph": graph})}
    return out


def build(prepared: dict, out: Path, *, export_only: bool = False) -> dict:
    """The revision's export and module under `out` (the export reused while its content
    key holds: jobs/iree.export). Returns {vmfb, inputs, mlir, dtypes, compile_flags} or
    {failed: {stage, error}}: a model that does not export or compile at a revision is
    that revision's failed step, never a lost bisection. `export_only`: the export and
    the flags, no module (vmfb None): what suite_ab.same_module compares before anything
    is compiled."""
    from workflow.backends.iree import tools as iree
    from workflow.jobs.iree import compile_module, export

    out.mkdir(parents=True, exist_ok=True)
    log, timeouts = str(out / "bisect.log"), prepared["timeouts"]
    files = {k: str(out / "export" / f) for k, f in (
        ("mlir", "module.mlirbc"), ("inputs", "inputs.npz"),
        ("reference", "reference.npz"), ("meta", "export.json"))}
    exported = export(spec=prepared["spec"], timeout=timeouts["export_s"], log=log, **files)
    if not exported.ok:
        return {"failed": {"stage": exported.failed_stage or "export", "error": exported.error}}
    if export_only:
        return {"vmfb": None, "inputs": files["inputs"], "mlir": files["mlir"],
                "compile_flags": iree.compile_flags(prepared["sku"]),
                "run_flags": iree.device_flags(prepared["sku"]), "failed": None}
    vmfb = out / "compile" / "module.vmfb"
    vmfb.parent.mkdir(parents=True, exist_ok=True)
    compiled = compile_module(mlir=files["mlir"], export_meta=files["meta"],
                              sku=prepared["sku"], timeout=timeouts["compile_s"],
                              vmfb=str(vmfb), meta=str(vmfb.parent / "compile.json"), log=log)
    absent = compiled.ok and iree.device_absent_reason(prepared["sku"]["iree"]["device"])
    if absent or not compiled.ok:
        # `absent`: compiled, but its device is not here (a GPU SKU on a CPU machine),
        # which a whole-suite A/B lists as compiled only, as a report does.
        return {"failed": {"stage": "run" if absent else (compiled.failed_stage or "compile"),
                           "error": absent or compiled.error}, "absent": absent or None}
    dtypes = [i["dtype"] for i in read_json(files["meta"])["inputs"]]
    return {"vmfb": str(vmfb), "inputs": files["inputs"], "mlir": files["mlir"], "dtypes": dtypes,
            "compile_flags": iree.compile_flags(prepared["sku"]),
            "run_flags": iree.device_flags(prepared["sku"]), "failed": None}


def build_cases(tree: Path, suite_rel: str, case_ids: list[str], label: str,
                root: Path, *, export_only: bool = False) -> dict:
    """Each IREE case of `case_ids` at this revision, built under root/<its key>:
    id -> prepare's answer with the build's (built_under; `export_only`: exported, not
    compiled), or {"error"} for a case the revision cannot prepare."""
    from workflow.backends.iree import tools as iree
    from workflow.planning import keys
    from workflow.suite.load import load

    where = f"{suite_rel} at {label}"
    suite = load([tree / suite_rel])
    out, exports = {}, {}
    for case_id in case_ids:
        try:
            prepared = _iree_prepared(suite, find_case(suite, case_id, where), tree, {}, where)
        except ConfigError as exc:
            out[case_id] = {"error": " ".join(exc.problems)}
            continue
        same_export = exports.get(keys.digest(prepared["parts"]["export"]))
        if export_only and same_export is not None:
            # One workload's cases on two SKUs export one program (the export's key has
            # no SKU in it): exported once, each case with its own SKU's flags.
            out[case_id] = {**prepared, **{k: same_export.get(k) for k in (
                "vmfb", "inputs", "mlir", "failed")},
                "compile_flags": iree.compile_flags(prepared["sku"]),
                "run_flags": iree.device_flags(prepared["sku"])}
            continue
        out[case_id] = built_under(prepared, root, export_only=export_only)
        exports[keys.digest(prepared["parts"]["export"])] = out[case_id]
    return out


def built_under(prepared: dict, root: Path, *, export_only: bool = False) -> dict:
    """`prepared` with its build, made (or reused) under root/<its content key> while
    holding that directory's lock: the key covers everything the build is made from
    (model sources, SKU, tools), so two bisections or A/Bs at once in one cache, one
    per SKU, each build their own and never time the other's module."""
    from filelock import FileLock

    built = root / prepared["key"]
    built.mkdir(parents=True, exist_ok=True)
    with FileLock(str(built) + ".lock"):
        return {**prepared, **build(prepared, built, export_only=export_only)}


def main(argv: list[str]) -> None:
    request, out = json.loads(argv[0]), argv[1]
    tree, suite_rel, label = Path(request["tree"]), request["suite"], request["label"]
    try:
        if request.get("all"):
            write_json(out, suite_keys(tree, suite_rel, label))
            return
        if request.get("cases") is not None or request.get("programs") is not None:
            # One process per revision for both kinds: the model files are imported once.
            answer = {}
            if request.get("cases") is not None:
                answer["cases"] = build_cases(tree, suite_rel, request["cases"], label,
                                              Path(request["build"]),
                                              export_only=bool(request.get("export_only")))
            if request.get("programs") is not None:
                answer["programs"] = torch_programs(tree, suite_rel, request["programs"],
                                                    label)
            write_json(out, answer)
            return
        prepared = case_key(tree, suite_rel, request["case"], request.get("tools") or {},
                            label)
    except ConfigError as exc:
        write_json(out, {"error": " ".join(exc.problems)})
        return
    if request.get("build"):
        prepared = built_under(prepared, Path(request["build"]))
    write_json(out, prepared)


if __name__ == "__main__":
    worker_main(main)
    sys.exit(0)
