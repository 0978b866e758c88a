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
    from workflow.models.registry import suite_models
    from workflow.stages.plan import command_suite
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
        print(f"  {name}: {sku['description']}")
    print(f"backends: {', '.join(['iree', *suite.config.get('torch_backends', {})])}")
    print(f"recipes: {RECIPE_HELP.removeprefix('a recipe: ')}")
    print(f"cases: {len(suite.cases)}")
    if args.cases:
        for case in suite.cases:
            print(f"  {case.id}")
    return 0
