"""`benchflow benchmarks`: list (or run) the sharktank-format benchmark files a suite
selects, with the options of sharktank's run_benchmarks.py."""

from __future__ import annotations

import argparse

from workflow.backends.proc import run_attached


def add_parser(sub) -> None:
    p = sub.add_parser("benchmarks", help="list or run the sharktank-format benchmark files a "
                                          "suite selects (run_benchmarks.py's options)")
    p.add_argument("--configfile", nargs="*", default=None, help="suite files (default suite)")
    p.add_argument("--dir", help="directory of benchmark files")
    p.add_argument("--model", nargs="+", help="model directories (globs)")
    p.add_argument("--filename", help="glob on file names without .json")
    p.add_argument("--sku", nargs="+", help="suite SKUs that run them")
    p.add_argument("--backend", nargs="+", help="file-name backend suffixes (e.g. cpu)")
    p.add_argument("--artifacts-dir", help="where <model>_<submodel>/ hold downloaded MLIR "
                                           "and weights (default $IREE_TEST_FILES/artifacts)")
    p.add_argument("--external-file-directory", help="the external test files directory "
                                                     "(mlir_file_name; sharktank's option)")
    p.add_argument("--run", action="store_true", help="run them: snakemake TARGET")
    p.add_argument("--target", default="results/report.json")
    p.add_argument("--cores", default="all")
    p.add_argument("-n", "--dry-run", action="store_true", help="with --run: snakemake -n")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Lists (or runs) the benchmark files a suite selects, with sharktank's options
    (stages/sharktank.py selects them and builds the snakemake command)."""
    from workflow.stages.sharktank import run_files_argv, select_files

    # The options as the suite's benchmark_files keys, those given only.
    override = {k: v for k, v in {
        "dir": args.dir, "models": args.model, "filename": args.filename, "skus": args.sku,
        "backends": args.backend, "artifacts_dir": args.artifacts_dir,
        "external_files_dir": args.external_file_directory}.items() if v is not None}
    sel = select_files(args.configfile, override)
    for case in sel.cases:
        print(f"  {case.id}  ({case.file.path})")
    for fid, sku, why in sel.skipped:
        print(f"  skipped {fid} on {sku}: {why}")
    print(f"{len(sel.cases)} benchmark case(s) selected")
    if not args.run:
        return 0
    cmd = run_files_argv(args.configfile, override, cores=args.cores, target=args.target,
                         dry_run=args.dry_run)
    print("$ " + " ".join(cmd), flush=True)
    return run_attached(cmd)
