"""Issue 43: a torch worker's heap does not depend on what the worker did before
(backends/torch/allocator.py). glibc's dynamic mmap threshold gave a 4 MiB block a fresh
mapping in a fresh process and a heap block after a larger one had been freed: every
fork of a worker inherited one of two levels."""

from __future__ import annotations

import subprocess
import sys

import pytest

from workflow.backends.torch import allocator

# Whether a 4 MiB malloc is a mapping of its own, fresh and after an 8 MiB block was freed
# (glibc's mallinfo2: hblks counts the blocks mmapped).
PROBE = """
import ctypes
libc = ctypes.CDLL(None)
class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
def mapped(n):
    before = libc.mallinfo2().hblks
    p = libc.malloc(n)
    after = libc.mallinfo2().hblks
    libc.free(p)
    return after > before
fresh = mapped(4 << 20)
libc.free(libc.malloc(8 << 20))
print(fresh, mapped(4 << 20))
"""


def probe(env: dict[str, str]) -> str:
    return subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                          text=True, check=True).stdout.strip()


@pytest.mark.tool
def test_the_workers_heap_does_not_depend_on_what_was_freed_before():
    plain = {"PATH": "/usr/bin:/bin"}
    assert probe(plain) == "True False", "glibc's own threshold moves (the history matters)"
    assert probe({**plain, **allocator.worker_env({})}) == "False False"


def test_the_users_tunables_are_kept_and_win():
    assert allocator.worker_env({})["GLIBC_TUNABLES"] == (
        "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824")
    mine = "glibc.malloc.trim_threshold=0:glibc.cpu.hwcaps=-AVX2"
    assert allocator.worker_env({"GLIBC_TUNABLES": mine})["GLIBC_TUNABLES"] == (
        f"{mine}:glibc.malloc.mmap_threshold=33554432")
