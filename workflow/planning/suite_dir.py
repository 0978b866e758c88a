"""Which working directory a suite's results go to, so that two suites never overwrite
each other's results (their SKUs, workloads and report share names and paths).

A working directory belongs to one suite: the one named by its marker
(`results/.suite.json`, paths.SUITE_MARKER), written when that suite first runs a job
there. A directory of results from before markers belongs to the suite its report names
(report.json's provenance), and the repository's own directory to the default suite, so
that `make report` always writes results/ there. A suite is identified by the resolved
paths of its suite files and the suite_name they give: `--config` overrides tune a run of
a suite and do not make another one; editing a suite file keeps it the same suite (only
what changed reruns), a copy of it under another name or path is another suite.

snakemake started without --directory in a directory of another suite works in
`runs/<suite name>/` there instead (`runs/<name>-<hash>/` when that one belongs to yet
another suite): the Snakefile switches to it with Snakemake's `workdir:` directive, and
targets on the command line are relative to it. With --directory (Snakemake then ignores
`workdir:`) a directory of another suite is refused before any job.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from workflow.errors import ConfigError
from workflow.paths import REPO_ROOT, REPORT, RUNS, SUITE_MARKER
from workflow.planning.plan import Refused
from workflow.records.storage import read_json_file, write_json
from workflow.suite.schema import DEFAULT_CONFIG, load_schema, read_yaml

MARKER_KIND = "benchflow-suite-dir"
# The keys of a suite that name paths relative to the working directory: made absolute
# when the suite moves to a directory of its own, so that they name what they named where
# snakemake was started.
CWD_RELATIVE = (("benchmark_files", "dir"), ("benchmark_files", "artifacts_dir"),
                ("benchmark_files", "external_files_dir"), ("goldens", "dir"),
                *(("torch_models", k) for k in ("test_files", "modules", "external_files",
                                                 "artifacts", "random_weights_dir")))


@dataclass(frozen=True)
class SuiteIdentity:
    name: str | None         # suite_name as the suite's files give it; None: they give none
    files: tuple[str, ...]   # the suite files, resolved, in --configfile order

    def to_dict(self) -> dict:
        return {"suite_name": self.name, "configfiles": list(self.files)}

    def describe(self) -> str:
        return f"{self.name or '(unnamed)'} ({', '.join(self.files)})"

    def label(self) -> str:
        """The name of its directory under runs/: its suite_name, else its last file's
        stem (a torchao file names no suite)."""
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(self.files[-1]).stem).lstrip(".")
        return self.name or stem or "suite"

    def report_name(self, configured: str) -> str:
        """The suite's name in its reports (report.json's provenance, the pages' titles):
        `configured`, the suite_name its files or --config give, unless that is only the
        schema's default for a suite that names none; then its last file's stem, as
        `label`. Two unnamed suites are not both 'default', and a page says which file."""
        if self.name is None and configured == load_schema()["properties"]["suite_name"][
                "default"]:
            return self.label()
        return configured

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict()).encode()).hexdigest()[:8]


def suite_identity(configfiles) -> SuiteIdentity:
    """The identity of the suite of these --configfile files (none: the default suite).
    The files were read and validated by the suite loader already."""
    files = [Path(p).resolve() for p in configfiles] or [DEFAULT_CONFIG.resolve()]
    name = None
    for path in files:  # later files win, as they do when the suite is merged
        data = read_yaml(path)
        if isinstance(data, dict) and isinstance(data.get("suite_name"), str):
            name = data["suite_name"]
    return SuiteIdentity(name, tuple(str(f) for f in files))


def _from_marker(marker: Path) -> SuiteIdentity | str:
    try:
        doc = read_json_file(marker)
    except ConfigError as exc:
        return f"{exc.problems[0]} (remove it to give the directory to the next suite run there)"
    files = doc.get("configfiles") if isinstance(doc, dict) else None
    name = doc.get("suite_name") if isinstance(doc, dict) else None
    if (doc.get("kind") if isinstance(doc, dict) else None) != MARKER_KIND \
            or not isinstance(files, list) or not files \
            or not all(isinstance(f, str) for f in files) or not isinstance(name, str | None):
        return (f"{marker}: expected {{\"kind\": \"{MARKER_KIND}\", \"suite_name\": name or "
                "null, \"configfiles\": [path, ...]} (remove it to give the directory to the "
                "next suite run there)")
    return SuiteIdentity(name, tuple(files))


def _from_report(report: Path) -> SuiteIdentity | None:
    """The suite a report written before markers names, when it names one."""
    try:
        prov = read_json_file(report).get("provenance", {})
        files = tuple(str(Path(p).resolve()) for p in prov["config_source"].split(", "))
        return SuiteIdentity(prov["suite_name"], files)
    except (ConfigError, AttributeError, KeyError, TypeError, OSError):
        return None


def owner(directory: Path) -> SuiteIdentity | str | None:
    """The suite `directory` belongs to; a str says why its marker cannot be read (then
    it belongs to no suite that runs now); None: to no suite yet."""
    marker = directory / SUITE_MARKER
    if marker.exists():
        return _from_marker(marker)
    if (directory / REPORT).is_file():
        found = _from_report(directory / REPORT)
        if found is not None:
            return found
    if directory.resolve() == REPO_ROOT:
        return suite_identity([])
    return None


def _describe(found: SuiteIdentity | str) -> str:
    return f"suite {found.describe()}" if isinstance(found, SuiteIdentity) else found


@dataclass(frozen=True)
class SuiteDir:
    identity: SuiteIdentity
    path: Path                 # the suite's working directory, absolute
    moved: bool = False        # whether it is not the directory snakemake started in
    notice: str = ""           # the line that says so

    def claim(self) -> None:
        """Marks the directory as this suite's, when it runs a job there for the first
        time (the Snakefile's onstart: never for a dry run, in the main process only).
        Another suite that claimed it since this run was planned refuses it."""
        marker = self.path / SUITE_MARKER
        if not marker.exists():
            write_json(marker, {"kind": MARKER_KIND, **self.identity.to_dict()})
        found = _from_marker(marker)
        if found != self.identity:
            raise Refused("working directory of another suite",
                          [f"{self.path}: now belongs to {_describe(found)}"])


def suite_dir(suite, configfiles, *, directory_given: bool) -> SuiteDir:
    """Where `suite` (loaded from --configfile `configfiles`) works, deciding it from the
    directory snakemake runs in (the current one). A nested snakemake (a job's, on SLURM
    started in that directory too) decides the same, as it sees the same markers.
    Raises Refused for a --directory that belongs to another suite."""
    ident = suite_identity(configfiles)
    home = Path.cwd()
    here = owner(home)
    if here is None or here == ident:
        return SuiteDir(ident, home)
    if directory_given:
        raise Refused("working directory of another suite", [
            f"{home}: belongs to {_describe(here)}; this run's suite is "
            f"{ident.describe()}",
            "its results and reports would overwrite that suite's: pass --directory a "
            "directory of this suite's own, or run without --directory (it then works in "
            f"{RUNS}/{ident.label()}/ of the directory snakemake is started in)"])
    candidates = [home / RUNS / ident.label(), home / RUNS / f"{ident.label()}-{ident.digest()}"]
    owners = [owner(c) for c in candidates]
    # Its own directory first, so a suite stays where its results are.
    chosen = next((c for c, o in zip(candidates, owners, strict=True) if o == ident), None) \
        or next((c for c, o in zip(candidates, owners, strict=True) if o is None), None)
    if chosen is None:
        raise Refused("working directory of another suite", [
            f"{c}: belongs to {_describe(o)}" for c, o in zip(candidates, owners, strict=True)
        ] + [f"run suite {ident.describe()} with --directory DIR, a directory of its own"])
    anchor_paths(suite.config, home)
    where = chosen.relative_to(home)
    return SuiteDir(ident, chosen, moved=True, notice=(
        f"benchflow: {home} holds the results of {_describe(here)}; suite "
        f"{ident.describe()} works in {where}/ (its reports: {where}/results/)"))


def anchor_paths(config: dict, home: Path) -> None:
    """Makes the suite's paths relative to the working directory (CWD_RELATIVE) absolute,
    from `home`, before the suite moves to a directory of its own."""
    for section, key in CWD_RELATIVE:
        value = config.get(section, {}).get(key)
        if isinstance(value, str) and value and not Path(value).is_absolute():
            config[section][key] = str(home / value)
