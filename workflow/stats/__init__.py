"""Pure statistics: summaries and intervals of invocation medians (`summary`), the
golden verdict tests (`verdict`), accuracy metrics (`accuracy`) and speedups
(`speedup`). No I/O. Imports nothing of benchflow but errors and paths.
"""
