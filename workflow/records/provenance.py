"""Report-level provenance: code version, package versions, host. No torch import:
versions come from package metadata, so aggregation stays fast."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

PACKAGES = ("torch", "iree-base-compiler", "iree-base-runtime", "snakemake", "torchao",
            "transformers", "numpy")


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for pkg in PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def git_sha(repo: str | Path = ".") -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    dirty = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True, text=True, timeout=10,
    ).stdout.strip()
    return proc.stdout.strip() + ("-dirty" if dirty else "")


def host() -> dict:
    cpu_model = platform.processor() or None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        mem = None
    return {"name": platform.node(), "cpu_model": cpu_model, "cores": os.cpu_count(),
            "memory_bytes": mem, "os": platform.platform(), "machine": platform.machine(),
            "load_avg": list(os.getloadavg())}
