"""Pure statistics: summaries and intervals of invocation medians (`summary`), the
golden verdict tests (`verdict`), accuracy metrics (`accuracy`), speedups
(`speedup`), the paired A/B comparison and minimum detectable effects (`paired`) and
optional stopping under a group-sequential plan (`sequential`). No I/O. Imports
nothing of benchflow but errors and paths.
"""
