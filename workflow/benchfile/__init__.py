"""IREE sharktank-format benchmark files: the only package that knows their format.

A file `<benchmarks root>/<model>/<name>_<backend>.json` is a benchmark of its own: an
MLIR file compiled with the SKU's target flags plus the file's `compile_flags`, then
timed by iree-benchmark-module on the file's `function_run` with its `inputs` (and its
`--parameters` weights), with goldens per SKU. Each (file, SKU) pair the suite's
`benchmark_files` selects becomes the case `{sku}/iree/{model}.{name}/baseline`, which
runs or is skipped with its reason; none is left out.

A file's `device` chooses the SKUs that run it: local-task/local-sync files run on
llvm-cpu SKUs, `hip` files on rocm SKUs, `cuda` files on cuda SKUs (vulkan on
vulkan-spirv); on any other SKU the pair is skipped. A GPU file is compiled on any
machine with the SKU's chip; where its device is absent (decided on the measuring
machine, jobs/sharktank.py) the case is `compile-only`: its dispatch count and binary
size are judged against the file's golden_dispatch / golden_size of the SKU's golden
key, its time is not measured and says why.

Nothing from a file reaches a shell: every value becomes one argument of an argument
list. Nothing a file names is read from outside the benchmarks root, the artifact
directory and the external test files directory; a flag that is not on the allow-list
of `workflow.backends.iree.allowed_flags` (codegen, input and execution-tuning flags of
the installed tools) is refused at validation.

The steps, each a module, in the order a file goes through them:

- `formats`: which format a JSON document is by its keys (a benchmark file, a
  torch_models test or module file) and the one a file that failed as another looks like;
- `parse`: the schema, `file_problems`, `load_file` and `BenchmarkFile`;
- `resolve`: `Locations`, finding its MLIR, weights and @file inputs as upstream's
  runner does, and confinement (`confinement_problems`, `not_runnable`);
- `select`: `Selection`, `select` (a suite's files, SKUs and skips), `sku_reason`,
  `Availability` (the files `modules` name);
- `flags`: `flag_paths` (whether a flag is allowed, and which files it reads),
  `compile_flags`, `run_spec`, `data_files` (what the compile and run stages are given);
- `plan`: its cases as the workflow plans them (identity, record paths, modules,
  provenance, skipped pairs, report entries) and a case's file goldens;
- `goldens`: the file's golden fields, and blessing them back atomically.

iree-test-suites' torch_models test files (a pytest harness's JSON) become such records:
`torch_models` (their format, the harness's URL manifest), `markers` (pytest's -m),
`torch_plan` (a suite's tests as `TorchFile`s, cases and skips of the same Selection),
`random_weights` (`type: random` weights as an .irpa, cached by content). `attach`
keeps both formats' Selection on the suite.

Imports only lower layers: backends (IREE target flags and devices), records (schemas,
atomic storage), errors and paths; never suite (its peer), regression, the stage rooms or cli,
which import this package.
"""
