"""Gating: whether a run passes. `gates`: `benchflow check` (a report against its
goldens or the history) and `benchflow ab`'s gate (a suite's A/B rows built and
assessed); `remeasure`: inconclusive cases measured again within a budget, and the
`gate` rule's job (results/gate.json).

Imports baselines, comparisons, jobs, planning and every layer below them; never
commands (its peer), bisect or cli.
"""
