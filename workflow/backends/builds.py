"""Which build of a tool or package produced a result, as a short stable string.

Versions alone are names: a custom `iree.compile_tool` rebuilt in place, or a torch
reinstalled from another wheel of the same version, keeps its version. A pip-installed
distribution is identified by its version and a digest of its RECORD (the sha256 of
every file it installed), a tool outside any distribution by its resolved path, size
and mtime (a rebuild in place changes the mtime), and another Python interpreter by the
builds of the packages it imports. These strings go into the content keys of the stages
(workflow/planning/keys.py) and into Snakemake params, so a changed build reruns what it
made and `snakemake -n` shows which build changed. The one probe of another
interpreter (`_probe`) also gives the torch stage the versions its case records name
(`interpreter_versions`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from functools import cache
from pathlib import Path

from workflow.backends.proc import Timeout, capture, python_env
from workflow.records.provenance import distribution, package_version

# Asked of another interpreter: the builds of its torch and torchao, the same way
# package_build() makes them here, and their versions (for the case records).
_PROBE = """
import hashlib, json, sys, importlib.metadata as m
builds, versions = {}, {}
for d in sys.argv[1:]:
    try:
        dist = m.distribution(d)
        rec = (dist.read_text("RECORD") or "").encode()
        builds[d] = f"{d}=={dist.version} record:{hashlib.sha256(rec).hexdigest()[:12]}"
        versions[d] = dist.version
    except m.PackageNotFoundError:
        builds[d] = f"{d} not installed"
        versions[d] = None
print(json.dumps({"builds": builds, "versions": versions}))
"""
# The packages of a torch worker's interpreter that name its build (the probe's argv).
INTERPRETER_PACKAGES = ("torch", "torchao")


@cache
def package_build(name: str) -> str:
    """`name==version record:<digest>` of an installed distribution ("name not installed"
    when absent: a key, not an error; the stage that needs it fails on its own)."""
    dist = distribution(name)
    if dist is None:
        return f"{name} not installed"
    record = (dist.read_text("RECORD") or "").encode()
    return f"{name}=={dist.version} record:{hashlib.sha256(record).hexdigest()[:12]}"


def file_build(path: str) -> str:
    """A file outside any distribution (a SKU's own iree-compile): resolved path, size and
    mtime. Hashing a compiler binary of hundreds of megabytes at every plan would cost
    more than the rest of planning; a rebuild writes a new file and so a new mtime."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError as exc:
        return f"{real} unreadable ({exc.strerror or exc})"
    return f"{real} size:{st.st_size} mtime_ns:{st.st_mtime_ns}"


def tool_build(custom: str | None, package: str) -> str:
    """The build of an IREE tool a SKU uses: its own (iree.compile_tool, ...) when it names
    one, else the installed package's."""
    return file_build(custom) if custom else package_build(package)


@cache
def interpreter_build(python: str | None) -> dict[str, str]:
    """The torch and torchao builds a torch worker imports: ours, or those of a SKU's own
    `torch.python` (asked in a subprocess, with its path, size and mtime besides)."""
    if _ours(python):
        return {d: package_build(d) for d in INTERPRETER_PACKAGES}
    builds = {"python": file_build(python)}
    answer = _probe(python)
    if answer is None:
        # Unknown builds still make a key: the path's identity above; the torch stage
        # records the failure to start this interpreter as the cases' failure.
        builds["probe"] = "failed"
    else:
        builds.update(answer["builds"])
    return builds


def interpreter_versions(python: str | None) -> dict[str, str | None] | None:
    """The torch and torchao versions a torch worker imports (None: not installed there),
    from the same probe as interpreter_build; None when that interpreter cannot be asked."""
    if _ours(python):
        return {d: package_version(d) for d in INTERPRETER_PACKAGES}
    answer = _probe(python)
    return None if answer is None else answer["versions"]


def _ours(python: str | None) -> bool:
    return not python or os.path.realpath(python) == os.path.realpath(sys.executable)


@cache
def _probe(python: str) -> dict | None:
    """Another interpreter's answer to _PROBE ({"builds": ..., "versions": ...}), asked
    once per process; None when it cannot be started, fails or says nothing readable."""
    try:
        done = capture([python, "-c", _PROBE, *INTERPRETER_PACKAGES], timeout=120,
                       env=python_env(python))
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, Timeout, ValueError, IndexError):
        return None


def source_digest(*modules: str) -> str:
    """The digest of benchflow's own worker modules whose code shapes an artifact (the
    exporter writes the MLIR): a changed exporter is a changed export."""
    import importlib.util

    h = hashlib.sha256()
    for name in modules:
        origin = importlib.util.find_spec(name).origin
        h.update(Path(origin).read_bytes())
    return h.hexdigest()[:16]
