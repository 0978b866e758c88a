"""Regression tracking: the goldens store and blessing (`goldens`), the gate and the
one judge of a case against its goldens (`gate`), and report-to-report comparison
(`compare`). Imports suite (benchmark files' own goldens), render, backends, records,
models and stats; never stages or cli.
"""
