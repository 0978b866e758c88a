"""What a user asks for: suite files in, validated cases out.

Loading and schema validation with defaults (`schema`), expansion into workloads and
cases (`load`), torchao's shape generators (`shapes`), and torchao microbenchmark YAML
(`torchao`). IREE sharktank benchmark JSON is its peer package's, workflow/benchfile.
Imports only lower layers: backends (recipe names, IREE flags), records, models, stats,
errors, paths; never benchfile, the stage rooms, regression or cli.
"""
