"""Comparisons: interleaved A/B pairs (docs/ab.md), two sides measured round by round in
one job so that drift and load hit both alike.

- `ab`: two SKUs on one workload (the `ab_pair` rule), and results/ab.json (`ab`);
- `ab_torch`: two torch sides (the `ab_torch_pair` rule);
- `ab_modules`: two built IREE modules paired (a bisection step; a golden's baseline
  against today's module).

Imports jobs, planning and every layer below them; never baselines, gating, commands,
bisect or cli (bisect and baselines import it).
"""
