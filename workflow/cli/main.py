"""The `benchflow` command line: thin argument parsing over workflow functions."""

from __future__ import annotations

import argparse
import sys

from workflow.errors import ConfigError

# Modules that add subcommands (see build_parser); append one line per module.
COMMAND_MODULES: list[str] = [
    "workflow.cli.run",
    "workflow.render.coverage",
    "workflow.cli.goldens",
]


def cmd_list(args: argparse.Namespace) -> int:
    from workflow.models.registry import all_models

    print("models (name: configs; default shape; description):")
    for name, spec in all_models().items():
        layers = ", --layers" if spec.supports_layers else ""
        missing = spec.unavailable_reason()
        note = f" [unavailable: {missing}]" if missing else ""
        print(f"  {name}: {', '.join(spec.configs)}; "
              f"{list(spec.default_shape)} {spec.shape_doc}{layers}; {spec.description}{note}")
    # SKUs, backends and recipes of the default suite unless --configfile names others.
    from workflow.suite.load import load
    from workflow.suite.recipes import RECIPE_HELP

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


def cmd_validate(args: argparse.Namespace) -> int:
    from workflow.cli.validate import validate_files

    problems = validate_files(args.files)
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print(f"ok: {len(args.files)} file(s) valid")
    return 1 if problems else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="benchflow", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="print every model with its configs (and a suite's SKUs)")
    p.add_argument("--configfile", nargs="*", default=None,
                   help="also print the SKUs and case count of these suite files")
    p.add_argument("--cases", action="store_true", help="with --configfile: print every case id")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("validate", help="check suite files; every problem with file and key path")
    p.add_argument("files", nargs="+")
    p.set_defaults(func=cmd_validate)

    # Further commands live in their own modules, each with add_parsers(sub) that sets
    # `func` on its parsers; this keeps one concern per module.
    import importlib

    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["--list"], ["-l"]):  # Forge's `benchmark.py --list`
        argv[0] = "list"
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
