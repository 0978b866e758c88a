"""Options shared by subcommands: the gate's thresholds (`compare`, `check`)."""

from __future__ import annotations

import argparse


def add_gate_options(p: argparse.ArgumentParser) -> None:
    from workflow.stats.verdict import Settings

    d = Settings()
    p.add_argument("--tolerance", type=float, default=d.tolerance,
                   help=f"time ratio beyond which a case may regress (default {d.tolerance})")
    p.add_argument("--size-tolerance", type=float, default=d.size_tolerance,
                   help=f"binary size ratio that regresses (default {d.size_tolerance})")
    p.add_argument("--p-value", type=float, default=d.p_value,
                   help=f"significance threshold (default {d.p_value})")


def gate_settings(args: argparse.Namespace):
    """The workflow.stats.verdict.Settings that add_gate_options' options give."""
    from workflow.stats.verdict import Settings

    return Settings(tolerance=args.tolerance, size_tolerance=args.size_tolerance,
                    p_value=args.p_value)
