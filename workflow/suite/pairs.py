"""A suite's `ab_pairs`, checked and expanded (docs/DESIGN.md, "A/B pairs").

A side is a SKU name (IREE: the two SKUs' modules of every workload both measure) or a
torch side {sku, backend, recipe, workload}: one of the suite's torch cases, whose
module a long-lived worker times block by block. Both sides of a pair are of one kind.
Each problem names the file, the key and what was expected.
"""

from __future__ import annotations

from dataclasses import dataclass

from workflow.paths import MAX_ID
from workflow.records.schemas import did_you_mean

ROLES = ("base", "new")
# Joins a side's parts into its label and two workloads into a pair's: no SKU, backend,
# recipe or workload id contains it, so labels are unambiguous, and path-safe.
JOIN = "+"


@dataclass(frozen=True)
class TorchSide:
    """One side of a torch pair: the case (SKU, backend, workload, recipe) it times."""
    case: object    # suite.load.Case

    @property
    def label(self) -> str:
        """`cpu-host+torch-inductor+int8wo`: the side in rows, paths and wildcards."""
        return JOIN.join((self.case.sku, self.case.backend, self.case.recipe))

    def to_dict(self) -> dict:
        return {"sku": self.case.sku, "backend": self.case.backend,
                "recipe": self.case.recipe, "workload": self.case.workload.id}


@dataclass(frozen=True)
class TorchPair:
    base: TorchSide
    new: TorchSide

    @property
    def workload(self) -> str:
        """The workload, or `base+new` when the sides time two different ones."""
        b, n = self.base.case.workload.id, self.new.case.workload.id
        return b if b == n else f"{b}{JOIN}{n}"

    @property
    def key(self) -> tuple[str, str, str]:
        return self.base.label, self.new.label, self.workload


def pair_problems(suite, source: str) -> list[str]:
    """Fills suite.ab_pairs (IREE) and suite.torch_ab_pairs from the suite's ab_pairs;
    returns the problems with them."""
    problems: list[str] = []
    for i, pair in enumerate(suite.config["ab_pairs"]):
        where = f"{source}: ab_pairs[{i}]"
        iree = [isinstance(pair[role], str) for role in ROLES]
        if iree[0] != iree[1]:
            kinds = ["a SKU name (IREE)" if s else "a torch side" for s in iree]
            problems.append(f"{where}: base is {kinds[0]} and new is {kinds[1]}; expected "
                            "two SKU names (IREE modules) or two torch sides {sku, backend, "
                            "recipe, workload}")
        else:
            problems += (_iree_pair if iree[0] else _torch_pair)(suite, pair, where)
            problems += _placement_problems(suite, pair, where)
    return problems


def _placement_problems(suite, pair: dict, where: str) -> list[str]:
    """One job runs both sides of a pair, placed as the base SKU's jobs (rules/ab.smk):
    a new side whose SKU asks SLURM for another partition, node feature or GPU would be
    measured where it was not meant to run (a GPU side on a CPU node), so such a pair is
    refused here, on every machine, as the suite is the same file on the cluster."""
    skus = [pair[r] if isinstance(pair[r], str) else pair[r]["sku"] for r in ROLES]
    if any(s not in suite.config["skus"] for s in skus) or skus[0] == skus[1]:
        return []  # an unknown SKU is reported by the pair's own check
    placed = [{k: v for k, v in (suite.config["skus"][s].get("slurm") or {}).items()
               if v is not None} for s in skus]
    if placed[0] == placed[1]:
        return []
    said = [", ".join(f"{k} {v!r}" for k, v in sorted(p.items())) or "the profile's defaults"
            for p in placed]
    return [f"{where}: SKU {skus[0]!r} runs on SLURM with {said[0]}, SKU {skus[1]!r} with "
            f"{said[1]}; expected the same `slurm` settings on both SKUs (one job measures "
            "both sides, on one node)"]


def _iree_pair(suite, pair: dict, where: str) -> list[str]:
    problems = []
    for role in ROLES:
        if pair[role] not in suite.config["skus"]:
            problems.append(f"{where}.{role}: unknown SKU {pair[role]!r}; "
                            f"expected one of {sorted(suite.config['skus'])}"
                            f"{did_you_mean([pair[role]], suite.config['skus'])}")
    key = (pair["base"], pair["new"])
    if pair["base"] == pair["new"]:
        problems.append(f"{where}: base and new are both {pair['base']!r}; "
                        "expected two SKUs (an A/A check: two SKUs with the same settings)")
    elif key in suite.ab_pairs:
        problems.append(f"{where}: the pair {key[0]} -> {key[1]} is "
                        "listed twice; expected each pair once")
    if problems:
        return problems
    base = {c.workload.id for c in suite.iree_cases if c.sku == key[0]}
    workloads = [c.workload.id for c in suite.iree_cases
                 if c.sku == key[1] and c.workload.id in base]
    if not workloads:
        problems.append(f"{where}: SKUs {key[0]!r} and {key[1]!r} measure "
                        "no IREE workload in common; expected at least one")
    suite.ab_pairs[key] = workloads
    return problems


def _side_problems(suite, side: dict, where: str) -> list[str]:
    """What a torch side names that the suite lacks: its SKU, backend, recipe, workload."""
    config, problems = suite.config, []
    if side["sku"] not in config["skus"]:
        problems.append(f"{where}.sku: unknown SKU {side['sku']!r}; expected one of "
                        f"{sorted(config['skus'])}{did_you_mean([side['sku']], config['skus'])}")
    if side["backend"] not in config["torch_backends"]:
        problems.append(f"{where}.backend: {side['backend']!r} is not a torch backend of the "
                        f"suite; expected one of {sorted(config['torch_backends'])}")
    recipes = sorted({c.recipe for c in suite.cases})
    if side["recipe"] not in recipes:
        problems.append(f"{where}.recipe: no case of the suite uses recipe "
                        f"{side['recipe']!r}; expected one of {recipes}")
    if side["workload"] is not None and side["workload"] not in suite.workloads:
        problems.append(f"{where}.workload: unknown workload {side['workload']!r}; expected "
                        f"one of {_some(suite.workloads)}")
    return problems


def _some(names, n: int = 12) -> str:
    names = sorted(names)
    return str(names[:n])[:-1] + (f", ... ({len(names)} in all)]" if len(names) > n else "]")


def _measured(suite, side: dict) -> dict:
    """The side's torch cases the suite measures (not known unsupported), by workload."""
    return {c.workload.id: c for c in suite.cases
            if (c.sku, c.backend, c.recipe) == (side["sku"], side["backend"], side["recipe"])
            and c.backend_kind != "iree" and not c.unsupported
            and side["workload"] in (None, c.workload.id)}


def _torch_pair(suite, pair: dict, where: str) -> list[str]:
    problems = [p for role in ROLES for p in _side_problems(suite, pair[role], f"{where}.{role}")]
    named = [pair[role]["workload"] is not None for role in ROLES]
    if named[0] != named[1]:
        problems.append(f"{where}.{ROLES[named.index(False)]}.workload: missing while "
                        f"{ROLES[named.index(True)]} names one; expected a workload on both "
                        "sides (a pair of two workloads) or on neither")
    if problems:
        return problems
    cases = {role: _measured(suite, pair[role]) for role in ROLES}
    for role in ROLES:
        if not cases[role]:
            s = pair[role]
            what = f"workload {s['workload']}" if s["workload"] else "any workload"
            problems.append(f"{where}.{role}: the suite measures no case of SKU {s['sku']}, "
                            f"backend {s['backend']}, recipe {s['recipe']} on {what}; "
                            "expected a side the suite measures (add them to a workload "
                            "entry), not one known unsupported")
    if problems:
        return problems
    if all(named):
        found = [TorchPair(TorchSide(cases["base"][pair["base"]["workload"]]),
                           TorchSide(cases["new"][pair["new"]["workload"]]))]
    else:
        found = [TorchPair(TorchSide(c), TorchSide(cases["new"][w]))
                 for w, c in cases["base"].items() if w in cases["new"]]
        if not found:
            problems.append(f"{where}: the sides measure no workload in common; expected "
                            "at least one (or name a workload on each side)")
    for p in found:
        longest = max(p.key, key=len)
        if p.base == p.new:
            problems.append(f"{where}: base and new are both {p.base.label} on {p.workload}; "
                            "expected two different sides (an A/A check: two SKUs with the "
                            "same settings)")
        elif p.key in suite.torch_ab_pairs:
            problems.append(f"{where}: the pair {p.base.label} -> {p.new.label} on "
                            f"{p.workload} is listed twice; expected each pair once")
        elif len(longest) > MAX_ID:  # the labels and the workload name its row's folders
            problems.append(f"{where}: {longest[:40]}... is {len(longest)} characters; "
                            f"expected at most {MAX_ID} for a side (sku+backend+recipe) or "
                            "a pair's workloads (base+new): it names a folder")
        else:
            suite.torch_ab_pairs[p.key] = p
    return problems
