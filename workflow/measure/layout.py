"""Memory layout, randomized per invocation (issue 22; DESIGN.md "Measurement protocol").

Identical code placed at different addresses can run a percent or two apart, and stay
so for hours: which cache sets, TLB entries and branch-predictor slots the hot code and
data fall into depends on where they lie, and the size of the environment alone moves
the initial stack enough to change a program's speed (Mytkowicz, Diwan, Hauswirth &
Sweeney, "Producing wrong data without doing anything obviously wrong!", ASPLOS 2009;
Curtsinger & Berger, "STABILIZER: statistically sound performance evaluation", ASPLOS
2013). An A/B of two byte-identical modules then finds a "difference" that is the
layout's, not the code's, and more rounds only narrow the interval around that bias.

Linux's address-space randomization (randomize_va_space=2) already moves the virtual
addresses of the stack, heap and mappings of each fresh process. What it leaves fixed:

- the physical pages behind a file that stays in the page cache: a module file that is
  mapped (or read) again by every invocation keeps the same physical pages, so the
  physically indexed caches see the same set conflicts for its constants every time,
  and the two sides of an A/B each keep their own conflicts. `fresh_module` gives every
  invocation a new copy of the file, hence new pages, so that this is sampled across
  invocations rather than fixed per side;
- the bytes above the stack (the environment and argument strings) whose length shifts
  every stack address within its page. `env_padding` adds a variable of random length;
  the copy's random name varies the argument strings' length as well.

The helpers are pure (the caller's random.Random decides, so a seeded run repeats) and
start nothing; the runner passes the copy's path and the extra variables to the one
invocation and removes the copy afterwards (`randomized` does both).
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from workflow.errors import StageError

# Up to one page of environment: shifts the stack through every 16-byte alignment of
# a 4 KiB page (Mytkowicz et al. varied it over 0..4095 bytes).
MAX_PADDING = 4095
PADDING_VAR = "BENCHFLOW_LAYOUT_PADDING"
# Modules above this are not copied per invocation (fresh_module).
COPY_LIMIT = 64 * 1024 * 1024
# The copy's name: 8 to 40 hex digits, so its length (in argv) varies too.
NAME_DIGITS = (8, 40)


def fresh_module(vmfb: str | Path, tmpdir: Path, rng: random.Random,
                 limit: int = COPY_LIMIT) -> str:
    """A new copy of the module file `vmfb` under a randomly named path in `tmpdir`
    (new inode, new page-cache pages); the caller removes it after the invocation.
    A module larger than `limit` bytes is used in place: copying hundreds of MB before
    every invocation (a benchmark file's model with its weights inlined) would cost
    more than the percent of bias it guards against, and the environment padding still
    varies. A missing or unreadable module raises StageError naming the file."""
    try:
        if os.path.getsize(vmfb) > limit:
            return str(vmfb)
    except OSError:
        pass  # the copy below names the file and why it cannot be read
    digits = rng.randint(*NAME_DIGITS)
    name = f"m-{rng.getrandbits(4 * digits):0{digits}x}{Path(vmfb).suffix}"
    target = Path(tmpdir) / name
    try:
        shutil.copyfile(vmfb, target)
    except OSError as exc:
        raise StageError("run", f"{vmfb}: could not copy the module for a fresh layout "
                         f"into {tmpdir}: {exc.strerror or exc}") from None
    return str(target)


def env_padding(rng: random.Random) -> dict[str, str]:
    """One environment variable of random length 0..MAX_PADDING bytes (value 'x' * n),
    to be added to the invocation's environment: it moves the initial stack."""
    return {PADDING_VAR: "x" * rng.randint(0, MAX_PADDING)}


@contextmanager
def randomized(vmfb: str | Path, tmpdir: Path, rng: random.Random
               ) -> Iterator[tuple[str, dict[str, str]]]:
    """(path of a fresh copy of vmfb, extra environment) for one invocation; the copy
    is removed when the block ends, whatever happened in it."""
    path = fresh_module(vmfb, tmpdir, rng)
    try:
        yield path, env_padding(rng)
    finally:
        # The invocation's own clean-up, or the tmpdir's, may have come first.
        with suppress(FileNotFoundError):
            os.unlink(path)
