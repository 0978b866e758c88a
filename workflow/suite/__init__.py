"""What a user asks for: suite files in, validated cases out.

Loading and schema validation with defaults (`schema`), expansion into workloads and
cases (`load`), torchao's shape generators (`shapes`), and the input formats users
bring: torchao microbenchmark YAML (`torchao`) and IREE sharktank benchmark JSON
(`sharktank`). Imports only lower layers: backends (recipe names, IREE flags), records,
models, stats, errors, paths; never stages, regression or cli.
"""
