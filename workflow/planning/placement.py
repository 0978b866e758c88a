"""Placement: where a SKU's jobs go on SLURM (snakemake-executor-plugin-slurm). A SKU's
`slurm` settings send its jobs to a partition of their own (`slurm_partition`) with
node features (`constraint`), and the jobs that use its device ask for its GPU
(`gres`); a SLURM run whose profile leaves the account or partition unset is warned.

The plugin quotes slurm_partition and constraint for the shell and checks gres against
its pattern (config/schema.yaml holds a SKU's values to the same); slurm_extra, which
it passes unquoted, is never taken from a suite."""

from __future__ import annotations

import ast
import os

GPU_TARGETS = ("cuda", "rocm", "vulkan-spirv")
SLURM_VARIABLES = {"slurm_account": "BENCHFLOW_SLURM_ACCOUNT",
                   "slurm_partition": "BENCHFLOW_SLURM_PARTITION"}


def default_resource(resources, name: str) -> str | None:
    """A --default-resources value (profiles/slurm) as the plugin receives it, for the
    Snakefile: the profile's quoted Python literal ("'$VAR'") with the environment
    expanded, or a bare word as snakemake keeps it; None when not given."""
    entry = resources.get(name) if resources is not None else None
    raw = getattr(entry, "raw", entry)
    if raw is None:
        return None
    text = os.path.expandvars(str(raw))
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        value = text
    return str(value)


def slurm_partition(sku: dict, default: str | None) -> str | None:
    """The partition of every job of the SKU: its own, else the profile's default."""
    return (sku.get("slurm") or {}).get("partition") or default


def slurm_gres(sku: dict) -> str | None:
    """The generic resources (e.g. gpu:1) of the SKU's jobs that use its device: the IREE
    batches, benchmark-file runs, torch batches and A/B pairs, never a compile job."""
    return (sku.get("slurm") or {}).get("gres")


def slurm_exclusive(sku: dict) -> bool:
    """Whether the SKU's timing jobs hold a whole node: its `slurm.exclusive`, else only
    a SKU without a gres (a CPU measurement beside other jobs is not comparable; a GPU
    job has its own GPU and CPUs)."""
    chosen = (sku.get("slurm") or {}).get("exclusive")
    return (slurm_gres(sku) is None) if chosen is None else bool(chosen)


def slurm_timing_extra(sku: dict) -> str | None:
    """sbatch options of a slotted timing job beyond the plugin's: --exclusive or none.
    A constant, never a suite's text (the plugin passes slurm_extra unquoted)."""
    return "--exclusive" if slurm_exclusive(sku) else None


def slurm_cpus_per_gpu(sku: dict) -> int | None:
    """CPUs a shared-node GPU timing job asks for with its GPU (--cpus-per-gpu)."""
    if slurm_gres(sku) is None or slurm_exclusive(sku):
        return None
    return int((sku.get("slurm") or {}).get("cpus_per_gpu") or 8)


def slurm_constraint(sku: dict) -> str | None:
    """Node features every job of the SKU asks for (sbatch --constraint)."""
    return (sku.get("slurm") or {}).get("constraint")


def slurm_in_use(resources, argv: list[str]) -> bool:
    """Whether this run submits to SLURM: the profile's slurm_* default resources, or
    an --executor slurm on the command line."""
    named = any(default_resource(resources, name) is not None for name in SLURM_VARIABLES)
    pairs = zip(argv, [*argv[1:], None], strict=True)
    return named or "--executor=slurm" in argv or any(
        flag in ("--executor", "-e") and value == "slurm" for flag, value in pairs)


def slurm_warnings(skus: dict, resources) -> list[str]:
    """What a SLURM run is missing, one line each: an account or partition left unset
    (the profile's `$BENCHFLOW_...` then reaches sbatch by name), a GPU SKU that names
    no gres (its jobs land on CPU nodes, where its cases are compile-only)."""
    lines = []
    for name, variable in SLURM_VARIABLES.items():
        value = default_resource(resources, name)
        if value is None or "$" in value:
            lines.append(f"benchflow: SLURM: {variable} is not set, so sbatch gets "
                         f"{value or 'no ' + name}; export {variable}=<your "
                         f"{name.split('_')[1]}> (docs/cluster.md)")
    for sku, settings in skus.items():
        target = (settings.get("iree") or {}).get("target_backend")
        if target in GPU_TARGETS and not slurm_gres(settings):
            lines.append(f"benchflow: SLURM: SKU {sku!r} targets {target} but names no "
                         f"slurm.gres: its jobs run on CPU nodes, where its cases are "
                         f"compile-only; set skus.{sku}.slurm.gres (e.g. gpu:1) and "
                         f"slurm.partition to time them there")
    return lines
