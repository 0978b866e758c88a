"""A Snakemake profile's values that make no sense for a run (profiles/slurm: `jobs: 0`,
`retries: -1`, `mem_mb: 0`, `runtime: forever`), each said in one line naming the
profile file and the key, before any job is scheduled.

Snakemake takes most of these without a word: `jobs: 0`, a negative `retries`, a
`mem_mb` of 0 reach the scheduler or sbatch as they are, and a runtime it cannot read is
only found while the first rule's resources are evaluated, and then blamed on the
Snakefile's `rule all`. The Snakefile calls profile_problems on the profiles this run reads
(profile_files) and refuses the run. A value that is not even of the option's type
(`jobs: many`) Snakemake refuses itself while it parses its arguments, before the
Snakefile; it is still judged here, for callers that read a profile file themselves.

Only literal values are judged: a resource given as a Python expression (`2048 * attempt`,
`'$VAR'`) is Snakemake's to evaluate per job. Whether a string is an expression is decided
as Snakemake decides it: a value whose evaluation fails with NameError or SyntaxError is
a plain string, and a plain runtime or size must parse as Snakemake's human-friendly
units (its own Resource.parse_human_friendly judges them).
"""

from __future__ import annotations

import ast
import builtins
import os
import re
from pathlib import Path

import yaml

from workflow.errors import ConfigError
from workflow.files import read_bytes
from workflow.render.text import printable

MAX_PROFILE_BYTES = 1 << 20
# The file names Snakemake reads in a profile directory (snakemake/cli.py,
# get_profile_dir): config.yaml, profile.yaml, or config.v8+.yaml for Snakemake 8 and on.
PROFILE_FILE = re.compile(r"(?:profile|config)(?:\.v(\d+)\+)?\.yaml")
# The names Snakemake's resource expressions may use (snakemake/resources.py,
# Resource.cli_evaluator): the job's attempt, input, threads, ... and snakemake.ioutils'.
EXPRESSION_NAMES = frozenset({"wildcards", "input", "attempt", "system_tmpdir", "shutil",
                              "async_run", "threads", "branch", "collect", "evaluate",
                              "exists", "lookup", "flatten", "params", "output", "resources"})
# Resources whose literal value must be a positive amount: megabytes (mem_mb: MB,
# mem_mib: MiB), minutes (runtime) and human-friendly sizes (mem: "4GB").
POSITIVE_MB = ("mem_mb", "mem_mib")
# The whole-number options, with their least sensible value and the word Snakemake also
# takes (jobs: unlimited, cores: all).
COUNTS = {"jobs": (1, "unlimited"), "cores": (1, "all"), "local-cores": (1, None),
          "retries": (0, None), "restart-times": (0, None), "latency-wait": (0, None),
          "output-wait": (0, None)}


def _got(value) -> str:
    return f"{type(value).__name__} {value!r}"


def _count_problem(key: str, value) -> str | None:
    least, word = COUNTS[key]
    if word is not None and value == word:
        return None
    number = value
    if isinstance(value, str) and value.strip().lstrip("-").isdecimal():
        number = int(value)
    if isinstance(number, int) and not isinstance(number, bool) and number >= least:
        return None
    expected = f"a whole number >= {least}" + (f" or {word!r}" if word else "")
    return f"{key}: expected {expected}, got {_got(value)}"


def _plain_string(text: str) -> bool:
    """Whether Snakemake takes a resource's string as text rather than as a Python
    expression: its eval would fail with SyntaxError or NameError."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return True
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return any(n not in EXPRESSION_NAMES and not hasattr(builtins, n) for n in names)


def _literal(value):
    """A resource value as Snakemake first reads it: a number, a plain string (quotes
    stripped), or None for an expression it evaluates per job."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return value
    if not isinstance(value, str):
        return value
    text = os.path.expandvars(value)
    if _plain_string(text):
        return text.strip("'\"")
    try:
        found = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None  # an expression: Snakemake's to evaluate for each job
    return found.strip("'\"") if isinstance(found, str) else found


def resource_problem(name: str, value) -> str | None:
    """What is wrong with one literal resource value, or None (expressions pass)."""
    from snakemake.exceptions import WorkflowError
    from snakemake.resources import Resource

    if name not in (*POSITIVE_MB, "runtime", "mem"):
        return None
    found = _literal(value)
    unit = {"runtime": "a positive number of minutes or a time span such as 90m or 2h",
            "mem": "a positive size such as 4GB or a number of MB"}.get(
        name, "a positive whole number of " + ("MiB" if name == "mem_mib" else "MB"))
    if found is None:
        return None
    if isinstance(found, str) and found.isdecimal():
        found = int(found)
    if isinstance(found, str) and name not in POSITIVE_MB:
        try:
            found = Resource.parse_human_friendly(name, found)
        except WorkflowError:
            return f"expected {unit}, got {value!r}"
    if isinstance(found, int | float) and not isinstance(found, bool) and found > 0:
        return None
    return f"expected {unit}, got {_got(value)}"


def _resource_items(value, where: str) -> tuple[list[tuple[str, str, object]], list[str]]:
    """(key path, resource name, value) of a default-resources list ("name=value") or
    mapping; the problems of its form."""
    if isinstance(value, dict):
        return [(f"{where}.{k}", str(k), v) for k, v in value.items()], []
    if isinstance(value, list):
        items, problems = [], []
        for i, entry in enumerate(value):
            if isinstance(entry, str) and "=" in entry:
                name, raw = entry.split("=", 1)
                items.append((f"{where}[{i}] ({name.strip()})", name.strip(), raw.strip()))
            else:
                problems.append(f"{where}[{i}]: expected name=value, got {_got(entry)}")
        return items, problems
    if value is None:
        return [], []
    return [], [f"{where}: expected a mapping of resource: value, got {_got(value)}"]


def _set_resources(value) -> tuple[list[tuple[str, str, object]], list[str]]:
    """The items of set-resources: a mapping rule -> resources, or "rule:name=value"."""
    if isinstance(value, dict):
        items, problems = [], []
        for rule, resources in value.items():
            found, wrong = _resource_items(resources, f"set-resources.{rule}")
            items += found
            problems += wrong
        return items, problems
    if isinstance(value, list):
        entries = [e.split(":", 1)[1] if isinstance(e, str) and ":" in e else e for e in value]
        return _resource_items(entries, "set-resources")
    return _resource_items(value, "set-resources")


def settings_problems(settings: dict) -> list[str]:
    """Every value of a profile's parsed settings that makes no sense, a line each
    (`key: expected ..., got ...`)."""
    problems = []
    for key, value in settings.items():
        option = str(key).replace("_", "-")
        if option in COUNTS:
            problem = _count_problem(option, value)
            problems += [problem] if problem else []
    items, wrong = _resource_items(settings.get("default-resources",
                                                settings.get("default_resources")),
                                   "default-resources")
    more, wrong_set = _set_resources(settings.get("set-resources",
                                                  settings.get("set_resources")))
    for where, name, value in [*items, *more]:
        problem = resource_problem(name, value)
        problems += [f"{where}: {problem}"] if problem else []
    return problems + wrong + wrong_set


def profile_problems(path: str | Path) -> list[str]:
    """Every value of the profile file at `path` that makes no sense for a run, a line
    each: `<path>: <key>: expected ..., got ...`. An unreadable file or one that is not
    a YAML mapping is one line too."""
    try:
        data = read_bytes(path, cap=MAX_PROFILE_BYTES, what="a Snakemake profile (YAML)")
    except ConfigError as exc:
        return exc.problems
    try:
        settings = yaml.safe_load(data.decode("utf-8", errors="replace"))
    except yaml.YAMLError as exc:
        return [f"{path}: not valid YAML: {' '.join(str(exc).split())}"]
    if not isinstance(settings, dict):
        return [f"{path}: expected a mapping of option: value, got {_got(settings)}"]
    return [f"{path}: {line}" for line in settings_problems(settings)]


def _flag_values(argv: list[str], flag: str) -> list[str]:
    """The values of an option given as `flag VALUE` or `flag=VALUE`, in order."""
    pairs = zip(argv, [*argv[1:], None], strict=True)
    return [value if word == flag else word.removeprefix(flag + "=")
            for word, value in pairs
            if (word == flag and value is not None) or word.startswith(flag + "=")]


def _yaml_of(path: Path) -> Path | None:
    """A profile path's YAML file: a file itself; for a directory, the file Snakemake reads
    there (config.yaml or profile.yaml, or the one for the newest Snakemake major version
    not above this one, config.v8+.yaml). Not Snakemake's own get_profile_dir, whose module
    (snakemake.cli) loads every executor plugin, and the SLURM one probes the cluster's
    commands as it loads."""
    from snakemake import __version__

    if path.is_file():
        return path
    major = int(__version__.split(".")[0].split("+")[0])
    versions = {}
    for child in path.iterdir() if path.is_dir() else []:
        found = PROFILE_FILE.fullmatch(child.name)
        if found and int(found.group(1) or 0) <= major:
            versions[child] = int(found.group(1) or 0)
    return max(versions, key=versions.get) if versions else None


def _profile_file(name: str, bases: list[Path], named: bool = False) -> Path | None:
    """A profile's YAML file as Snakemake finds it, from each of `bases` for a relative
    name, and for a --profile given by name (`named`) in the user's and the site's
    configuration directories too; None where it is not found from here."""
    candidates = [Path(name)] if os.path.isabs(name) else [base / name for base in bases]
    if named and os.sep not in name:
        from snakemake.common import get_appdirs

        dirs = get_appdirs()
        candidates += [Path(dirs.user_config_dir) / name, Path(dirs.site_config_dir) / name]
    for candidate in candidates:
        if candidate.exists():
            return _yaml_of(candidate)
    return None


def profile_files(argv: list[str], env: dict, bases: list[Path]) -> list[Path]:
    """The profile files a Snakemake command line reads, as far as they can be found from
    `bases` (the directories a relative name may be relative to: Snakemake has already
    changed to --directory when the Snakefile runs, so the Snakefile's own directory is
    one of them): each --profile (else $SNAKEMAKE_PROFILE), and the workflow profile
    (--workflow-profile, else profiles/default), unless given as `none`."""
    names = _flag_values(argv, "--profile") or ([env["SNAKEMAKE_PROFILE"]]
                                                if env.get("SNAKEMAKE_PROFILE") else [])
    found = [_profile_file(name, bases, named=True) for name in names if name != "none"]
    workflow = (_flag_values(argv, "--workflow-profile") or ["default"])[-1]
    if workflow != "none":
        # Snakemake reads the first of these that exists.
        found += [next(filter(None, (_profile_file(name, bases) for name in
                                     (workflow, str(Path("profiles") / workflow)))), None)]
    return list(dict.fromkeys(path.resolve() for path in found if path is not None))


def check_profiles(argv: list[str], env, bases) -> None:
    """Raises ConfigError with every problem of the profiles this command line reads."""
    problems = [line for path in profile_files(argv, env, [Path(b) for b in bases])
                for line in profile_problems(path)]
    if problems:
        raise ConfigError(problems)


def profile_refusal(argv: list[str], env, bases) -> list[str]:
    """For the Snakefile: the lines that refuse this run for its profiles' values, ready
    to print (control characters escaped: a profile is text from outside); none when
    they make sense."""
    try:
        check_profiles(argv, env, bases)
    except ConfigError as refusal:
        return [printable(problem) for problem in refusal.problems]
    return []
