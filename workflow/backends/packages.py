"""Released versions of the tools benchflow measures, each installed once into a cached
environment of its own, for `benchflow bisect --package` (issue 38).

The index is asked through pip (`pip index versions --pre --json`), the same client and
configuration (index URL, find-links, a CPU index for torch) as the install, so that a
bisection only steps through releases pip can install on this interpreter and platform.
Which of them lie between two versions is a pure function (`between`) of that list.

An environment is a venv made from the interpreter benchflow runs in, holding
`package==version` and its dependencies (pinned by the project's constraints.txt less
the package's own pin), with the project's own site-packages layered behind it through
a `.pth` file: its `python` is benchflow's environment with that one package swapped,
so it runs a torch worker (a SKU's `torch.python`) or an export as ours does, and its
console scripts (iree-compile, iree-benchmark-module) are the release's. The package is
installed before the layering, so pip never sees, let alone uninstalls, the project's
copy. A marker file written last says the install finished: a directory without it is
an interrupted install, removed and done again, never trusted. A file lock per version
lets two bisections share one cache.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from workflow.backends.output import MACHINE_ERRNOS, machine_fault
from workflow.backends.proc import Timeout, capture
from workflow.errors import ConfigError
from workflow.files import read_bytes
from workflow.paths import REPO_ROOT

PACKAGES: tuple[str, ...] = ("iree-base-compiler", "iree-base-runtime", "torchao", "torch")
# The executables of each package that a SKU can point at (iree.compile_tool,
# iree.benchmark_tool); torch and torchao have none: a SKU's torch.python is `python`.
TOOLS: dict[str, tuple[str, ...]] = {
    "iree-base-compiler": ("iree-compile",),
    "iree-base-runtime": ("iree-benchmark-module", "iree-run-module"),
    "torchao": (),
    "torch": (),
}
# Installed beside the package at the same version. IREE releases its compiler and
# runtime together, and a module one release compiles need not load in another's runtime
# (3.11.0's fail in 3.13.0's iree-benchmark-module: "hal.command_buffer.dispatch signature
# mismatch"), so a compiler release is timed with its own runtime.
COMPANIONS: dict[str, tuple[str, ...]] = {"iree-base-compiler": ("iree-base-runtime",)}
CONSTRAINTS = REPO_ROOT / "constraints.txt"
MARKER = ".benchflow-env.json"
LAYER_PTH = "zz-benchflow-project.pth"  # read after the env's own .pth files
INSTALL_LOG = "install.log"
# An index that accepts the connection and never answers must not cost minutes of
# silence: each of pip's requests waits at most this long for a byte (pip's `--timeout`,
# $BENCHFLOW_PIP_TIMEOUT_S to change it) and is tried RETRIES times more. At least one
# retry: pip reports a read timeout only in the warning of its retry (with none, an
# index that timed out reads as `No matching distribution found`).
PIP_TIMEOUT_S = 15.0
RETRIES = 2
# The whole `pip index versions`: a request to each index and find-links location.
INDEX_TIMEOUT_S = 300
# A torch release from PyPI with its CUDA wheels is several GB.
INSTALL_TIMEOUT_S = 3600
VENV_TIMEOUT_S = 120
CONFIG_TIMEOUT_S = 30
# pip's (urllib3's) warning when a request timed out: the host and the path it waited on.
_TIMED_OUT = re.compile(r"(?:ReadTimeoutError|ConnectTimeoutError)\(\S*?\(host='([^']*)', "
                        r"port=(\d+)\).*?\)'\)?:?\s*(\S*)")


@dataclass(frozen=True)
class PackageEnv:
    """One release's environment: `prefix` the venv, `python` its interpreter (the
    project's environment with `package` at `version`), `tools` the package's
    executables by name."""
    package: str
    version: str
    prefix: Path
    python: Path
    tools: dict[str, Path]


def _known(package: str) -> None:
    if package not in PACKAGES:
        raise ConfigError([f"--package {package!r}: not a package benchflow bisects; "
                           f"expected one of {', '.join(PACKAGES)}"])


def _version(package: str, role: str, text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise ConfigError([f"{package} {role} {text!r}: not a version; expected a release "
                           "number such as 3.10.0 (PEP 440)"]) from None


def _nearest(known: list[Version], shown: dict[Version, str], end: Version) -> str:
    """The index's releases just below and above `end`, in words."""
    below = [v for v in known if v < end]
    above = [v for v in known if v > end]
    if not known:
        return "the index lists none"
    if not below:
        return f"the oldest is {shown[above[0]]}"
    if not above:
        return f"the newest is {shown[below[-1]]}"
    return f"nearest: {shown[below[-1]]} and {shown[above[0]]}"


def between(available: Iterable[str], package: str, good: str, bad: str) -> list[str]:
    """Every release of `available` (the index's version strings) from `good` to `bad`
    inclusive, oldest first, as the index spells them.

    Pre- and dev releases are left out unless an end is one itself (a bisection between
    two finals steps through finals, as pip would choose); post-releases are finals. A
    local build label (`2.13.0+cpu`) is a different build, not a later release: only
    versions with the ends' label are kept, so `2.12.0` to `2.14.0` skips `2.13.0+cpu`
    and `2.12.0+cpu` to `2.14.0+cpu` keeps only CPU builds. Raises a one-line
    ConfigError for an end that is no version or not on the index (naming the nearest),
    ends of different builds, or a good end not older than the bad one."""
    g, b = _version(package, "good", good), _version(package, "bad", bad)
    shown: dict[Version, str] = {}
    for text in available:
        try:
            shown.setdefault(Version(text), text)
        except InvalidVersion:
            continue  # a name that is no PEP 440 version cannot be pinned by pip
    known = sorted(shown)
    for role, end, text in (("good", g, good), ("bad", b, bad)):
        if end not in shown:
            raise ConfigError([f"{package} {role} {text}: not a release on the package "
                               f"index; {_nearest(known, shown, end)}"])
    if g.local != b.local:
        raise ConfigError([f"{package}: good {good} and bad {bad} are different builds "
                           "(local labels); expected two releases of one build"])
    if not g < b:
        raise ConfigError([f"{package}: good {good} is not older than bad {bad}; expected "
                           "the older release as good"])
    pre = g.is_prerelease or b.is_prerelease
    return [shown[v] for v in known
            if g <= v <= b and v.local == g.local and (pre or not v.is_prerelease)]


def pip_timeout_s() -> float:
    """Each pip request's timeout: $BENCHFLOW_PIP_TIMEOUT_S (seconds) else PIP_TIMEOUT_S."""
    text = os.environ.get("BENCHFLOW_PIP_TIMEOUT_S", "")
    try:
        value = float(text) if text else PIP_TIMEOUT_S
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ConfigError([f"BENCHFLOW_PIP_TIMEOUT_S={text!r}: expected a number of seconds "
                           "above 0 (each package index request's timeout)"])
    return value


def _pip(*args: str) -> list[str]:
    return [sys.executable, "-m", "pip", "--disable-pip-version-check",
            "--timeout", f"{pip_timeout_s():g}", "--retries", str(RETRIES), *args]


def indexes() -> str:
    """The package indexes and find-links locations pip asks, as pip's configuration
    (files and PIP_* variables) gives them, for the line that says what is waited on."""
    try:
        done = capture([sys.executable, "-m", "pip", "config", "list"],
                       timeout=CONFIG_TIMEOUT_S)
    except (Timeout, OSError):
        return "pip's configured index"
    def last(key: str) -> list[str]:  # the last one wins: the environment's over files'
        values = re.findall(rf"^\S*\.{key}='([^']*)'", done.stdout, re.MULTILINE)
        return values[-1].split() if values else []

    # no-index (PIP_NO_INDEX=1): pip asks no index at all, only the find-links.
    no_index = [v.lower() for v in last("no-index")] in (["1"], ["true"], ["yes"], ["on"])
    keys = ("find-links",) if no_index else ("index-url", "extra-index-url", "find-links")
    found: dict[str, None] = {}
    for key in keys:
        found.update(dict.fromkeys(last(key)))
    if not no_index and not re.search(r"\.index-url=", done.stdout):
        found = {"https://pypi.org/simple": None, **found}
    if no_index:
        return ("no index (pip's no-index is set), only the find-links "
                + (", ".join(found) if found else "(none set)"))
    return ", ".join(found)


def waiting_line(what: str, whole_s: float) -> str:
    """What a pip call waits on and for how long at most, said before it starts."""
    t = pip_timeout_s()
    return (f"{what}: asking {indexes()} (each request at most {t:g} s, {RETRIES} "
            f"retries; at most {whole_s:g} s in all) ...")


def timed_out(output: str) -> str | None:
    """Which index request pip gave up on for a timeout (`host:port/path`), if any."""
    found = _TIMED_OUT.search(output)
    if found:
        return f"{found[1]}:{found[2]}{found[3]}"
    return "a request" if "TimeoutError(" in output else None


def _no_answer(where: str) -> str:
    return (f"the package index did not answer: {where} timed out after "
            f"{pip_timeout_s():g} s, {RETRIES + 1} tries (pip --timeout; "
            "$BENCHFLOW_PIP_TIMEOUT_S sets it); check the network, or pip's index-url "
            "and find-links (`pip config list`)")


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"


def index_versions(package: str) -> list[str]:
    """The versions of `package` that pip finds on its configured index for this
    interpreter and platform, pre-releases included (`between` decides)."""
    print(waiting_line(f"{package}'s releases", INDEX_TIMEOUT_S), file=sys.stderr)
    try:
        done = capture(_pip("index", "versions", package, "--pre", "--json"),
                       timeout=INDEX_TIMEOUT_S)
    except Timeout:
        raise ConfigError([f"{package}: the package index did not answer: pip index "
                           f"versions did not end within {INDEX_TIMEOUT_S} s asking "
                           f"{indexes()}"]) from None
    except OSError as exc:
        raise ConfigError([f"{package}: the package index could not be read: {exc}"]) from None
    where = timed_out(done.stderr or "")
    if done.returncode != 0 and where:
        raise ConfigError([f"{package}: {_no_answer(where)}"])
    if done.returncode != 0:
        raise ConfigError([f"{package}: the package index could not be read: pip says "
                           f"{_last_line(done.stderr or done.stdout)!r}"])
    try:
        versions = json.loads(done.stdout)["versions"]
    except (ValueError, KeyError, TypeError):
        versions = None
    if not isinstance(versions, list) or not all(isinstance(v, str) for v in versions):
        raise ConfigError([f"{package}: pip index versions gave no version list; expected "
                           "its JSON answer (a pip whose `index versions` takes --json)"])
    return versions


def releases(package: str, good: str, bad: str) -> list[str]:
    """Every release of `package` from `good` to `bad` inclusive, oldest first, as
    `between` chooses them from the index's versions."""
    _known(package)
    _version(package, "good", good)  # a typo fails before the index is asked
    _version(package, "bad", bad)
    return between(index_versions(package), package, good, bad)


def constraints_without(package: str, text: str) -> str:
    """The project's constraints less every line that pins `package` itself (its other
    lines, comments included, unchanged)."""
    own = canonicalize_name(package)
    kept = []
    for line in text.splitlines():
        body = line.split("#", 1)[0].strip()
        try:
            pins_it = bool(body) and canonicalize_name(Requirement(body).name) == own
        except InvalidRequirement:
            pins_it = False  # an option line (-c other.txt) or one pip will judge itself
        if not pins_it:
            kept.append(line)
    return "\n".join(kept) + "\n"


def _env(package: str, version: str, prefix: Path) -> PackageEnv:
    bin_dir = prefix / "bin"
    return PackageEnv(package=package, version=version, prefix=prefix,
                      python=bin_dir / "python",
                      tools={name: bin_dir / name for installed in _installed(package)
                             for name in TOOLS[installed]})


def _installed(package: str) -> tuple[str, ...]:
    """The package and its companions, each at the bisected version."""
    return (package, *COMPANIONS.get(package, ()))


def _finished(env: PackageEnv) -> bool:
    """Whether the marker says this environment's install finished, and its interpreter
    and tools are still there."""
    try:
        marker = json.loads(read_bytes(env.prefix / MARKER, cap=1 << 16, what="a marker",
                                       os_errors=True).decode("utf-8", errors="replace"))
    except (OSError, ConfigError, ValueError):
        return False
    if not isinstance(marker, dict) or [marker.get("package"), marker.get("version"),
                                         marker.get("python")] != \
            [env.package, env.version, _python_version()]:
        return False  # another release, or made by another interpreter than ours
    return all(p.is_file() for p in (env.python, *env.tools.values()))


def _python_version() -> str:
    return ".".join(map(str, sys.version_info[:3]))


# A write the cache's disk refused (full, over quota, read-only): the machine's fault.
MACHINE_HINT = ("; a fault of this machine, not of the release: the package cache's disk "
                "refused a write (free space there, or name another --cache)")


def _machine_hint(output: str) -> str:
    return MACHINE_HINT if machine_fault(output) else ""


def _fail(env: PackageEnv, what: str) -> ConfigError:
    return ConfigError([f"{env.package}=={env.version}: {what} (log: "
                        f"{env.prefix / INSTALL_LOG})"])


def _clear(env: PackageEnv) -> None:
    """Removes an interrupted install; refuses a directory that is no venv of ours."""
    if not env.prefix.exists() and not env.prefix.is_symlink():
        return
    if not (env.prefix / "pyvenv.cfg").is_file() or env.prefix.is_symlink():
        raise ConfigError([f"{env.prefix}: exists and is not a package environment; "
                           "expected a venv benchflow made, or nothing (remove it or "
                           "name another cache)"])
    shutil.rmtree(env.prefix)


def _run_logged(env: PackageEnv, argv: list[str], timeout: float, what: str) -> None:
    try:
        done = capture(argv, timeout=timeout)
    except Timeout:
        raise _fail(env, f"{what} did not end within {timeout:g} s") from None
    except OSError as exc:
        raise _fail(env, f"{what}: {exc}") from None
    with open(env.prefix / INSTALL_LOG, "a", encoding="utf-8") as log:
        log.write(f"$ {' '.join(map(str, argv))}\n{done.stdout}{done.stderr}"
                  f"exit {done.returncode}\n")
    where = timed_out(done.stderr or "")
    if done.returncode != 0 and where:
        raise _fail(env, f"{what}: {_no_answer(where)}")
    if done.returncode != 0:
        raise _fail(env, f"{what} failed: {_last_line(done.stderr or done.stdout)}"
                         f"{_machine_hint(done.stderr or done.stdout)}")


def _layer_file(env: PackageEnv) -> Path:
    site_dir = sysconfig.get_path("purelib", vars={"base": str(env.prefix),
                                                   "platbase": str(env.prefix)})
    return Path(site_dir) / LAYER_PTH


def _layer_text() -> str:
    """The project's site-packages behind the environment's own: `site.addsitedir`
    also reads their .pth files (the editable install of benchflow among them)."""
    ours = sysconfig.get_paths()
    dirs = dict.fromkeys([ours["purelib"], ours["platlib"]])
    return "".join(f"import site; site.addsitedir({d!r})\n" for d in dirs)


def _layered(env: PackageEnv) -> bool:
    try:
        return _layer_file(env).read_text(encoding="utf-8", errors="replace") == _layer_text()
    except OSError:
        return False


def _layer(env: PackageEnv) -> None:
    _layer_file(env).write_text(_layer_text(), encoding="utf-8")


def _install(env: PackageEnv) -> None:
    """Makes the venv, installs the release into it, layers the project behind it,
    checks the tools and writes the marker, in that order."""
    _clear(env)
    # --copies: a venv's python symlinks to the same base interpreter as ours, which
    # would make it look like benchflow's own interpreter to a realpath comparison.
    made = capture([sys.executable, "-m", "venv", "--without-pip", "--copies",
                    str(env.prefix)], timeout=VENV_TIMEOUT_S)
    if made.returncode != 0:
        raise ConfigError([f"{env.prefix}: could not make a venv: "
                           f"{_last_line(made.stderr or made.stdout)}"
                           f"{_machine_hint(made.stderr or made.stdout)}"])
    installed = _installed(env.package)
    argv = _pip("--python", str(env.python), "install", "--no-input",
                "--only-binary", ",".join(installed),
                *(f"{name}=={env.version}" for name in installed))
    if CONSTRAINTS.is_file():
        pins = env.prefix / "constraints.txt"
        text = CONSTRAINTS.read_text(encoding="utf-8", errors="replace")
        for name in installed:
            text = constraints_without(name, text)
        pins.write_text(text)
        argv += ["-c", str(pins)]
    print(waiting_line(f"installing {', '.join(f'{n}=={env.version}' for n in installed)}",
                       INSTALL_TIMEOUT_S), file=sys.stderr)
    _run_logged(env, argv, INSTALL_TIMEOUT_S, "pip install")
    _layer(env)
    missing = [name for name, path in env.tools.items() if not path.is_file()]
    if missing:
        raise _fail(env, f"installed no {', '.join(missing)}")
    tmp = env.prefix / (MARKER + ".tmp")
    tmp.write_text(json.dumps({"package": env.package, "version": env.version,
                               "python": _python_version()}), encoding="utf-8")
    os.replace(tmp, env.prefix / MARKER)


def environment(package: str, version: str, cache: Path) -> PackageEnv:
    """The environment of `package==version` under `cache/<package>-<version>/`,
    installed on first use (under a lock shared with other bisections) and reused
    after. Raises a one-line ConfigError naming the package, version and pip's last
    line when the release cannot be installed here."""
    _known(package)
    version = str(_version(package, "version", version))  # also keeps the path plain
    cache = Path(cache)
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError([f"{cache}: {exc.strerror or exc}; expected a directory for "
                           "package environments"]) from None
    env = _env(package, version, (cache / f"{package}-{version}").absolute())
    if _finished(env) and _layered(env):
        return env
    with FileLock(str(cache / f"{package}-{version}.lock")):
        if not _finished(env):  # another bisection may have installed it meanwhile
            try:
                _install(env)
            except OSError as exc:  # our own writes there: the constraints, layer, marker
                if exc.errno not in MACHINE_ERRNOS:
                    raise
                raise ConfigError([f"{env.package}=={env.version}: could not write "
                                   f"{exc.filename or env.prefix}: {exc.strerror}"
                                   f"{MACHINE_HINT}"]) from None
        elif not _layered(env):
            _layer(env)  # a cache shared with another checkout: layer over ours, no reinstall
    return env
