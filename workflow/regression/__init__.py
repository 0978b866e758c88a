"""Regression tracking: the goldens store and blessing (`goldens`), the gate and the
one judge of a case against its goldens (`gate`), and report-to-report comparison
(`compare`). Imports benchfile (benchmark files' own goldens, read and blessed), and
may import suite, render, backends, records, models and stats; never a stage room or cli.
"""
