"""`target_cpu: host`: which CPU `host` is to the installed iree-compile's LLVM on this
machine (issue 47).

`host` is resolved by the compiler on the machine that compiles, so one suite compiled on
a Rocket Lake (AVX-512) and then on a Zen 2 is two different modules under one SKU
setting. The case keys (planning/keys.py) hold this machine's CPU model, not the word
`host`, so that a results directory taken to another machine measures again there
instead of reusing another CPU's modules and timings.

What LLVM resolves `host` to (its CPU name and features) is a function of the compiler
build, which the keys hold already, and of what the CPU answers to cpuid, which Linux
shows in /proc/cpuinfo (vendor, family, model, stepping, flags): `host_key` reads those,
in microseconds and without starting a process, where the suite is planned and where its
batches run. Where there is no /proc/cpuinfo, the compiler itself is asked (`host_cpu`:
one dispatch compiled to the flow level, whose executable target names the `cpu` and
`cpu_features` LLVM resolved, about 0.3 s, cached on disk and per process).
"""

from __future__ import annotations

import functools
import hashlib
import re
import tempfile
from pathlib import Path

from workflow.backends.iree.tools import CHIP_PROBE_MLIR, CHIP_PROBE_TIMEOUT_S, _first_error
from workflow.backends.proc import Timeout, capture, exit_reason, tool_path
from workflow.errors import ConfigError, StageError, capped
from workflow.files import read_bytes

HOST = "host"
CPUINFO = Path("/proc/cpuinfo")
# The /proc/cpuinfo fields that tell one CPU model from another (x86, then Arm): what a
# CPU's host answer is cached by. Clock speeds, core ids and bogomips are left out:
# they differ between the cores of one CPU and from one second to the next.
_CPU_FIELDS = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags",
               "CPU implementer", "CPU architecture", "CPU variant", "CPU part",
               "CPU revision", "Features")
_CPU = re.compile(r'\bcpu = "([^"]*)"')
_FEATURES = re.compile(r'\bcpu_features = "([^"]*)"')
_CPUINFO_BYTES = 16 << 20


def cpu_model(cpuinfo: str) -> dict | None:
    """The first processor's model fields of /proc/cpuinfo text, its flags as a digest (a
    thousand characters that `snakemake -n` would print whole); None when it has none
    (another system, an unreadable file)."""
    first = cpuinfo.split("\n\n", 1)[0]
    fields = {}
    for line in first.splitlines():
        name, sep, value = line.partition(":")
        key, value = name.strip(), value.strip()
        if not sep or key not in _CPU_FIELDS:
            continue
        # The flags digested whole (AVX-512 and AMX come late in a long line), the rest
        # capped as any text from outside that enters a record.
        fields[key] = ("sha256:" + hashlib.sha256(value.encode()).hexdigest()[:16]
                       if key in ("flags", "Features") else capped(value))
    return fields or None


@functools.lru_cache(maxsize=4)
def _read_cpuinfo(path: Path) -> dict | None:
    """Once per process and file: keying reads it for every case of every batch."""
    try:
        text = read_bytes(path, cap=_CPUINFO_BYTES, what="/proc/cpuinfo",
                          os_errors=True).decode("utf-8", errors="replace")
    except (OSError, ConfigError):
        return None
    return cpu_model(text)


def host_key(compile_tool: str | None = None) -> dict:
    """What a case key holds of `target_cpu: host` on this machine: the CPU model LLVM's
    host detection reads ({"cpu model": {...}}, module docstring), else, without
    /proc/cpuinfo, the compiler's own answer ({"llvm": host_cpu(...)})."""
    model = _read_cpuinfo(CPUINFO)
    return {"cpu model": model} if model else {"llvm": host_cpu(compile_tool)}


def parse_host_target(text: str) -> dict:
    """{"cpu", "features"} of iree-compile's flow-level output: the first executable
    target's `cpu` and `cpu_features`; ValueError where it names no cpu."""
    cpu, features = _CPU.search(text), _FEATURES.search(text)
    if cpu is None or not cpu[1]:
        raise ValueError("iree-compile's output names no `cpu = \"...\"` target")
    return {"cpu": capped(cpu[1]), "features": capped(features[1], 4000) if features else ""}


def _ask(tool: str) -> dict:
    """iree-compile's own answer (module docstring), or {"error": why not}."""
    flags = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
             f"--iree-llvmcpu-target-cpu={HOST}", "--compile-to=flow"]
    with tempfile.TemporaryDirectory() as tmp:
        mlir = Path(tmp) / "probe.mlir"
        mlir.write_text(CHIP_PROBE_MLIR)
        try:
            proc = capture([tool, str(mlir), "--iree-input-type=auto", *flags],
                           timeout=CHIP_PROBE_TIMEOUT_S)
        except (Timeout, OSError) as exc:
            return {"error": f"could not ask iree-compile what host is: {exc}"}
    if proc.returncode != 0:
        return {"error": f"iree-compile {exit_reason(proc.returncode)} resolving host: "
                         f"{_first_error(proc.stderr or '')}"}
    try:
        return parse_host_target(proc.stdout or "")
    except ValueError as exc:
        return {"error": str(exc)}


@functools.lru_cache(maxsize=8)
def host_cpu(compile_tool: str | None = None) -> dict:
    """What `target_cpu: host` is to the SKU's compiler (`compile_tool`, else the
    installed iree-compile) on this machine, asked once per process: {"cpu":
    "rocketlake", "features": "+adx,+aes,..."}, or {"error": why it could not be asked}
    (a key then holds that; the compile stage reports the compiler's failure itself)."""
    try:
        return _ask(compile_tool or tool_path("iree-compile"))
    except StageError as exc:
        return {"error": exc.message}
