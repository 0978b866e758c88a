"""The model registry (`registry`) and the built-in models, registered lazily by
module name so that the registry and the model files do not import each other.
Imports only stats, errors and paths (and torch, lazily, inside builders).
"""
