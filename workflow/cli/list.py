"""`benchflow list` (also `benchflow -l | --list`, `benchflow run -l`): the models, and
a suite's SKUs, backends, recipes and cases."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    p = sub.add_parser("list", help="print every model with its configs (and a suite's SKUs)")
    p.add_argument("--configfile", nargs="*", default=None,
                   help="also print the SKUs and case count of these suite files")
    p.add_argument("--cases", action="store_true", help="with --configfile: print every case id")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from workflow.models.registry import all_models

    print("models (name: configs; default shape; description):")
    for name, spec in all_models().items():
        layers = ", --layers" if spec.supports_layers else ""
        missing = spec.unavailable_reason()
        note = f" [unavailable: {missing}]" if missing else ""
        print(f"  {name}: {', '.join(spec.configs)}; "
              f"{list(spec.default_shape)} {spec.shape_doc}{layers}; {spec.description}{note}")
    # SKUs, backends and recipes of the default suite unless --configfile names others.
    from workflow.backends.torch.recipes import RECIPE_HELP
    from workflow.suite.load import load

    suite = load(args.configfile)
    print(f"skus ({suite.source}):")
    for name, sku in suite.config["skus"].items():
        print(f"  {name}: {sku['description']}")
    print(f"backends: {', '.join(['iree', *suite.config.get('torch_backends', {})])}")
    print(f"recipes: {RECIPE_HELP.removeprefix('a recipe: ')}")
    print(f"cases: {len(suite.cases)}")
    if args.cases:
        for case in suite.cases:
            print(f"  {case.id}")
    return 0
