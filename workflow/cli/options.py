"""Options shared by subcommands: the gate's thresholds (`compare`, `check`), and the
exit codes of the gates (`check`, `ab`)."""

from __future__ import annotations

import argparse
import difflib
import functools
import re
import sys

from workflow.errors import ConfigError
from workflow.regression.gate import BAD_INPUT, PASSED, REGRESSED, UNJUDGED

# The exit codes of `benchflow check` and `benchflow ab` (docs/goldens.md, "Exit codes of the
# gates"), one per gate outcome (workflow/regression/gate.py). main() maps a ConfigError
# to 1 for every other command; for a gate 1 means a regression, so a gate's bad input
# (its ConfigError) exits 2 through gate_command.
EXIT_CODES = {PASSED: 0, REGRESSED: 1, BAD_INPUT: 2, UNJUDGED: 3}


class Parser(argparse.ArgumentParser):
    """benchflow's parsers, the subcommands' too (add_subparsers makes them of the class
    of the parser it is called on): an option is matched whole, never by a prefix, so
    that `--config` is never taken for `--configfile`; an unknown option is said to be
    unknown even where a required option is also missing; a misspelt choice (a
    subcommand) gets the nearest ones."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str):
        unknown = self.unknown_options(getattr(self, "_given", []))
        if unknown and message.startswith("the following arguments are required"):
            # argparse checks for missing options before it reports the unknown ones: a
            # misspelt required option (`check --reprot`) is then said to be missing.
            message = "; ".join(self.unknown_line(o) for o in unknown)
        super().error(message)

    def unknown_options(self, given: list[str]) -> list[str]:
        """The options among `given` this parser has not (up to `--`, after which all is
        an operand); a negative number is a value, not an option."""
        out = []
        for token in given:
            if token == "--":
                break
            if not token.startswith("-") or token == "-" or _NUMBER.match(token):
                continue
            name = token.partition("=")[0]
            short_cluster = not token.startswith("--") and token[:2] in self._option_string_actions
            if name not in self._option_string_actions and not short_cluster:
                out.append(name)
        return out

    def unknown_line(self, option: str) -> str:
        near = difflib.get_close_matches(option, list(self._option_string_actions), n=3)
        return (f"unknown option {option}"
                + (f" (did you mean {' or '.join(near)}?)" if near else ""))

    def _check_value(self, action, value):
        # argparse's own message lists every choice; a near one is named first.
        if action.choices is not None and value not in action.choices:
            near = difflib.get_close_matches(str(value), [str(c) for c in action.choices])
            if near:
                raise argparse.ArgumentError(
                    action, f"invalid choice: {value!r} (did you mean "
                            f"{' or '.join(map(repr, near))}? choose from "
                            f"{', '.join(map(repr, action.choices))})")
        super()._check_value(action, value)


# A value such as -1 or -0.5: argparse's own test for a negative number.
_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def add_config_overrides(p: argparse.ArgumentParser) -> None:
    """--config KEY=VALUE ...: the suite's keys set as `snakemake --config` sets them
    for a run (config_overrides reads them)."""
    p.add_argument("--config", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                   help="set suite keys over the files', as snakemake --config does for a "
                        "run (e.g. --config torchao_device=cpu)")


def config_overrides(entries: list[str]) -> dict:
    """--config's KEY=VALUE entries as a run reads them (suite/overrides.parse_entries)."""
    from workflow.suite.overrides import parse_entries

    return parse_entries(entries or [])


def print_problems(exc: ConfigError) -> None:
    """Every problem of a refusal, one per line on stderr. A problem quotes the user's
    text (a path, a key, a value): its control characters are shown, not obeyed by the
    terminal, whichever command it was."""
    from workflow.render.text import printable

    for problem in exc.problems:
        print(printable(problem), file=sys.stderr)


def gate_command(run):
    """A gate's run(args): bad input (a ConfigError) prints every problem and exits 2."""
    @functools.wraps(run)
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except ConfigError as exc:
            print_problems(exc)
            return EXIT_CODES[BAD_INPUT]
    return wrapped


def add_allow_inconclusive(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--allow-inconclusive", action="store_true",
                   help=f"count {what} as ok (exit 0) instead of exit 3; a failed "
                        "one, one measured at another configuration than its golden, and "
                        "one whose run's level moved past the tolerance still exit 3")


def add_accept_config(p: argparse.ArgumentParser, what: str) -> None:
    """--accept-config KEY[,KEY]: measurement configuration keys (records/
    measurement_config.KEYS) two measurements may differ in and still be judged."""
    from workflow.records.measurement_config import KEYS

    p.add_argument("--accept-config", type=config_keys, default=(), metavar="KEY[,KEY]",
                   help=f"{what}, these keys accepted as different (of: {', '.join(KEYS)}); "
                        "without it such a case is not judged. Rebless (or re-measure) to "
                        "compare like with like")


def config_keys(text: str) -> tuple[str, ...]:
    """--accept-config's keys: measurement configuration keys, comma-separated."""
    from workflow.records.measurement_config import KEYS

    keys = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in keys if k not in KEYS]
    if unknown or not keys:
        raise argparse.ArgumentTypeError(
            f"unknown measurement configuration key(s) {', '.join(map(repr, unknown))}; "
            f"expected one or more of {', '.join(KEYS)}, comma-separated")
    return keys


def add_gate_options(p: argparse.ArgumentParser) -> None:
    from workflow.suite.defaults import gate_settings

    d = gate_settings()  # the suite schema's goldens defaults
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
