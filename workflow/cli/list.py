"""`benchflow list` (also `benchflow -l | --list`, `benchflow run -l`): the models, and
a suite's SKUs, backends, recipes and cases."""

from __future__ import annotations

import argparse

from workflow.cli.options import add_config_overrides, config_overrides


def add_parser(sub) -> None:
    p = sub.add_parser("list", help="print every model with its configs (and a suite's SKUs)")
    p.add_argument("--configfile", nargs="*", default=None,
                   help="also print the SKUs and case count of these suite files")
    p.add_argument("--cases", action="store_true", help="with --configfile: print every case id")
    add_config_overrides(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from workflow.backends.torch.recipes import RECIPE_HELP
    from workflow.benchfile.attach import attach
    from workflow.models.registry import suite_models
    from workflow.planning.plan import command_suite

    # The default suite unless --configfile names others, with --config over them as a
    # run has it, loaded first: that imports its model_modules, whose models are listed
    # with the built-in ones (and its SKUs, backends and recipes below).
    suite = command_suite(args.configfile, config_overrides(args.config))
    print("models (name: configs; default shape; description):")
    for name, spec in suite_models(suite.config["model_modules"]).items():
        layers = ", --layers" if spec.supports_layers else ""
        missing = spec.unavailable_reason()
        note = f" [unavailable: {missing}]" if missing else ""
        origin = f" [model_modules: {spec.source}]" if spec.source else ""
        print(f"  {name}: {', '.join(spec.configs)}; {list(spec.default_shape)} "
              f"{spec.shape_doc}{layers}; {spec.description}{origin}{note}")
    print(f"skus ({suite.source}):")
    for name, sku in suite.config["skus"].items():
        print(f"  {name}: {sku_text(sku)}")
    print(f"backends: {', '.join(['iree', *suite.config.get('torch_backends', {})])}")
    print(f"recipes: {RECIPE_HELP.removeprefix('a recipe: ')}")
    # The cases a run makes: its workloads' and its benchmark files' (sharktank files,
    # torch_models tests), as the Snakefile selects them; the files that cannot run here
    # with why, which the run records as skipped cases.
    files = attach(suite)
    if args.configfile:
        # What running it would take, before it runs (planning/plan_time.py); before the
        # cases, whose list follows their count.
        from workflow.planning.plan_time import estimate, plan_line

        print(plan_line(estimate(suite)))
    print(cases_line(len(suite.cases), len(files.cases), len(files.skipped), args.cases))
    if args.cases:
        for case in [*suite.cases, *files.cases]:
            print(f"  {case.id}")
        for fid, sku, why in files.skipped:
            print(f"  skipped {fid} on {sku}: {why}")
    return 0


def sku_text(sku: dict) -> str:
    """A SKU in one line: its description, else what it compiles for and runs on (a SKU
    without a description would say nothing)."""
    if sku["description"]:
        return sku["description"]
    iree = sku["iree"]
    target = iree.get("target_chip") or iree.get("target_cpu")
    return (f"iree {iree['target_backend']}{f' {target}' if target else ''}, "
            f"device {iree['device']}")


def cases_line(workloads: int, files: int, skipped: int, listed: bool) -> str:
    """`cases: N`, with where they come from when benchmark files give some, and the
    files skipped here (their reasons with --cases)."""
    line = f"cases: {workloads + files}"
    if files:
        line += f" ({workloads} of its workloads, {files} of its benchmark files)"
    if skipped:
        line += (f"; {skipped} benchmark file case(s) skipped here"
                 + ("" if listed else " (--cases says why)"))
    return line
