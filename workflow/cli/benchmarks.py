"""`benchflow benchmarks`: list (or run) the sharktank-format benchmark files a suite
selects, with the options of sharktank's run_benchmarks.py.

A run with selection options (--dir, --model, ...) is not the suite's own run: its
report holds other cases. So it works in a directory of its own,
`runs/benchmarks-<hash>/` under the directory it is started in (the hash of the suite
files and the options: the same selection finds its results again), and never replaces
the suite's results/ (planning/suite_dir.py keeps one suite's from another's the same
way). Without options it is the suite's run, where snakemake puts it."""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

from workflow.backends.proc import run_attached
from workflow.cli.options import add_config_overrides, config_overrides

# The options that are paths, relative to the directory the command is started in.
PATH_OPTIONS = ("dir", "artifacts_dir", "external_files_dir")


def add_parser(sub) -> None:
    p = sub.add_parser("benchmarks", help="list or run the sharktank-format benchmark files a "
                                          "suite selects (run_benchmarks.py's options)")
    p.add_argument("--configfile", nargs="*", default=None, help="suite files (default suite)")
    add_config_overrides(p)
    p.add_argument("--dir", help="directory of benchmark files")
    p.add_argument("--model", nargs="+", help="model directories (globs)")
    p.add_argument("--filename", help="glob on file names without .json")
    p.add_argument("--sku", nargs="+", help="suite SKUs that run them")
    p.add_argument("--backend", nargs="+", help="file-name backend suffixes (e.g. cpu)")
    p.add_argument("--artifacts-dir", help="where <model>_<submodel>/ hold downloaded MLIR "
                                           "and weights (default $IREE_TEST_FILES/artifacts)")
    p.add_argument("--external-file-directory", help="the external test files directory "
                                                     "(mlir_file_name; sharktank's option)")
    p.add_argument("--run", action="store_true",
                   help="run them: snakemake TARGET; with any option above, in "
                        "runs/benchmarks-<hash>/ of its own (its reports: there in "
                        "results/), never over the suite's results/")
    p.add_argument("--target", default="results/report.json",
                   help="what snakemake builds (default results/report.json), relative to "
                        "the directory the run works in")
    p.add_argument("--cores", default="all")
    p.add_argument("-n", "--dry-run", action="store_true", help="with --run: snakemake -n")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Lists (or runs) the benchmark files a suite selects, with sharktank's options
    (jobs/sharktank.py selects them and builds the snakemake command)."""
    from workflow.jobs.sharktank import run_files_argv, select_files

    # The options as the suite's benchmark_files keys, those given only.
    override = {k: v for k, v in {
        "dir": args.dir, "models": args.model, "filename": args.filename, "skus": args.sku,
        "backends": args.backend, "artifacts_dir": args.artifacts_dir,
        "external_files_dir": args.external_file_directory}.items() if v is not None}
    config = config_overrides(args.config)
    suite, sel = select_files(args.configfile, override, config)
    for case in sel.cases:
        print(f"  {case.id}  ({case.file.path})")
    for fid, sku, why in sel.skipped:
        print(f"  skipped {fid} on {sku}: {why}")
    print(f"{len(sel.cases)} benchmark case(s) selected")
    if not args.run:
        return 0
    if not override:  # the suite's own run
        cmd = run_files_argv(args.configfile, config, cores=args.cores, target=args.target,
                             dry_run=args.dry_run)
    else:
        configfiles = [str(Path(f).resolve()) for f in args.configfile or []]
        config = anchored(suite.config, override, config)
        where = own_directory(configfiles, config)
        print(f"benchflow benchmarks: this selection works in {where}/ (its reports: "
              f"{where}/results/); the suite's own results/ are left as they are", flush=True)
        cmd = run_files_argv(configfiles, config, cores=args.cores, target=args.target,
                             dry_run=args.dry_run, directory=Path.cwd() / where)
    print("$ " + " ".join(cmd), flush=True)
    return run_attached(cmd)


def anchored(config: dict, override: dict, given: dict | None = None) -> dict:
    """The --config sections of a run elsewhere: the user's own --config (`given`), the
    options, and every path of the suite relative to the directory the command was
    started in made absolute from it (planning/suite_dir.anchor_paths), as a suite that
    moves to runs/ has them."""
    import copy

    from workflow.planning.suite_dir import CWD_RELATIVE, anchor_paths
    from workflow.suite.schema import deep_merge

    home = Path.cwd()
    config = copy.deepcopy(config)
    anchor_paths(config, home)
    sections: dict = {"benchmark_files": {
        k: str(home / v) if k in PATH_OPTIONS else v for k, v in override.items()}}
    for section, key in CWD_RELATIVE:
        value = config.get(section, {}).get(key)
        if isinstance(value, str) and value:
            sections.setdefault(section, {})[key] = value
    # The user's --config first: the options, and the paths made absolute, win over it.
    return deep_merge(copy.deepcopy(given or {}), sections)


def own_directory(configfiles: list[str], config: dict) -> Path:
    """runs/benchmarks-<hash of the suite files and the --config sections>: the same
    selection of the same suite, started from the same directory, works in the same one."""
    from workflow.paths import RUNS

    key = json.dumps({"configfiles": configfiles, "config": config}, sort_keys=True)
    return Path(RUNS) / f"benchmarks-{hashlib.sha256(key.encode()).hexdigest()[:8]}"
