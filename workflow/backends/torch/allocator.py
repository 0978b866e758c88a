"""The torch workers' heap: glibc malloc with its thresholds fixed, so that where a
buffer comes from does not depend on what the worker did before.

glibc adjusts its mmap threshold at run time: once a block above the threshold is freed,
the threshold rises to that block's size (and the trim threshold to twice it). A
worker's forks inherit its heap, so every invocation of a case sat at the level set by
whatever the worker had allocated and freed before: a 4 MiB-output case ran at one of
two levels about 9 % apart, a level its forks agreed on and its interval knew nothing of
(DESIGN.md, "Process variance"). With the thresholds fixed, a block below
MMAP_THRESHOLD always comes from the heap, which keeps what is freed (TRIM_THRESHOLD)
and serves the next call's buffers without new page faults; a larger block is always a
fresh mapping. Either way, the same in every worker and run.

Set through GLIBC_TUNABLES in the worker's environment (read by the dynamic loader at
start: mallopt from Python would come after the interpreter's first allocations); a
tunable the user already sets there is left as the user set it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# glibc's largest mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX: 32 MiB); a larger
# value is ignored.
MMAP_THRESHOLD = 32 << 20
# Free memory kept at the heap's top before glibc returns it: a worker's cases together
# rarely free more at once, and returning it would make the next call fault it back in.
TRIM_THRESHOLD = 1 << 30
TUNABLES = (("glibc.malloc.mmap_threshold", MMAP_THRESHOLD),
            ("glibc.malloc.trim_threshold", TRIM_THRESHOLD))


def worker_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """GLIBC_TUNABLES for a torch worker: the user's, plus ours where the user sets none
    of the same name."""
    given = (os.environ if environ is None else environ).get("GLIBC_TUNABLES", "")
    named = {part.split("=", 1)[0] for part in given.split(":") if part}
    ours = [f"{name}={value}" for name, value in TUNABLES if name not in named]
    return {"GLIBC_TUNABLES": ":".join(filter(None, [given, *ours]))}
