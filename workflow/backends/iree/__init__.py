"""IREE: iree-compile / iree-benchmark-module command lines and output parsing
(`tools`), and the worker processes that export a model to MLIR (`export`) and run a
compiled module for verification (`verify`). Imports as its parent package does."""
