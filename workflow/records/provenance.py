"""Report-level provenance: package versions and host (the code's git commit is asked by
workflow/backends/git.py, above this layer, and passed in). No torch import: versions
come from package metadata, so aggregation stays fast. `distribution` and
`package_version` are benchflow's one reader of what is installed in this interpreter
(another interpreter is asked by workflow/backends/builds.py)."""

from __future__ import annotations

import os
import platform
from importlib import metadata
from pathlib import Path

PACKAGES = ("torch", "iree-base-compiler", "iree-base-runtime", "snakemake", "torchao",
            "transformers", "numpy")


def distribution(name: str) -> metadata.Distribution | None:
    """The installed distribution `name`, None when it is not installed."""
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None


def package_version(name: str) -> str | None:
    """The installed version of distribution `name`, None when it is not installed."""
    dist = distribution(name)
    return None if dist is None else dist.version


def versions() -> dict[str, str | None]:
    return {"python": platform.python_version(), **{p: package_version(p) for p in PACKAGES}}


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
