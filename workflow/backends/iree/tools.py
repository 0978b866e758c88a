"""IREE command lines and output parsing: iree-compile and iree-benchmark-module.

Pure functions build argument lists and parse outputs; the stage functions in
stages.py run them. Two questions are answered by asking the installed tools:
whether iree-compile knows a SKU's target chip (`check_target_chip`, cached on disk,
asked when a suite loads) and whether a runtime device exists on this machine
(`device_absent_reason`, asked on the measuring machine).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workflow.backends.proc import Timeout, capture, exit_reason, tool_path
from workflow.errors import ConfigError, StageError, capped
from workflow.files import read_bytes
from workflow.records.provenance import package_version
from workflow.records.storage import MAX_JSON_BYTES, WriteError, write_json
from workflow.slots.claim import iree_device as slot_device

# numpy dtype name (or torch's, for bf16) -> IREE element type of --input.
IREE_ELEMENT_TYPES = {
    "float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64",
    "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "ui8", "bool": "i1",
}
TIME_UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def compiler_version() -> str | None:
    """The version of the iree-compile benchflow runs: the installed iree-base-compiler's,
    or, where none is installed, what the iree-compile found says of itself (a source
    build on PATH, as an IREE developer's is; an unpacked wheel). None: no compiler."""
    version = package_version("iree-base-compiler")
    if version is not None:
        return version
    try:
        return tool_version(tool_path("iree-compile"))
    except StageError:
        return None


@functools.lru_cache(maxsize=8)
def tool_version(tool: str) -> str | None:
    """What an IREE tool says of itself (`--version`): "3.13.0 @ <commit, 12 digits>"
    from IREE's "IREE compiler version 3.13.0 @ <commit>" line, else its first line
    (another build's wording); None when it does not answer."""
    try:
        proc = capture([tool, "--version"], timeout=60)
    except (Timeout, OSError):
        return None
    text = proc.stdout or proc.stderr or ""
    found = re.search(r"IREE compiler version\s+(\S+)(?:\s+@\s+([0-9a-f]{7,40}))?", text)
    if found:
        return found[1] + (f" @ {found[2][:12]}" if found[2] else "")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return capped(lines[0], 200) if lines else None


def runtime_version() -> str | None:
    return package_version("iree-base-runtime")


def benchmark_tool() -> str:
    """iree-benchmark-module itself: the installed runtime package's binary rather than
    its console script, a Python trampoline that starts an interpreter and then the
    binary as a second process, on every invocation (40 ms idle, 0.1-0.3 s on a loaded
    2-core machine); the console tool where the package has no binary."""
    try:
        from iree._runtime import libs
    except ImportError:
        return tool_path("iree-benchmark-module")
    binary = Path(libs.library_path) / "iree-benchmark-module"
    return str(binary) if binary.is_file() else tool_path("iree-benchmark-module")


@dataclass(frozen=True)
class Target:
    """What one `iree.target_backend` of a SKU means to iree-compile and to the runtime."""

    hal_device: str              # --iree-hal-target-device
    devices: tuple[str, ...]     # runtime devices (--device, iree.runtime drivers) that run it
    chip_flag: str | None        # the flag naming the target chip (GPU backends); None: CPU
    example_chip: str | None     # for messages


# The SKU's target backend -> its flags and devices (flag names as iree-compile 3.x spells
# them: `iree-compile --help-list-hidden`). llvm-cpu keeps `target_cpu`; GPU backends name
# a chip (`target_chip`), which the suite loader asks the installed compiler about.
TARGETS = {
    "llvm-cpu": Target("local", ("local-task", "local-sync"), None, None),
    "cuda": Target("cuda", ("cuda",), "--iree-cuda-target", "sm_80"),
    "rocm": Target("hip", ("hip",), "--iree-rocm-target", "gfx942"),
    "vulkan-spirv": Target("vulkan", ("vulkan",), "--iree-vulkan-target", "ampere"),
}
LOCAL_DEVICES = ("local-task", "local-sync")


def target_flags(iree: dict) -> list[str]:
    """The target flags of a SKU's `iree` section: the HAL device and the CPU or chip."""
    backend = iree["target_backend"]
    target = TARGETS[backend]
    if target.chip_flag is None:
        return ["--iree-hal-target-device=local",
                f"--iree-hal-local-target-device-backends={backend}",
                f"--iree-llvmcpu-target-cpu={iree['target_cpu']}"]
    return [f"--iree-hal-target-device={target.hal_device}",
            f"{target.chip_flag}={iree['target_chip']}"]


def compile_flags(sku: dict, input_type: str = "torch") -> list[str]:
    """iree-compile flags of a SKU (its `iree` section), the input type included
    (torch for exported models; benchmark files' MLIR may be of any dialect: auto)."""
    iree = sku["iree"]
    return [f"--iree-input-type={input_type}", *target_flags(iree), *iree["compile_flags"]]


# --- is a target chip known to the installed compiler? ------------------------------------

# One elementwise dispatch: compiling it runs the chip's code generation, so a name the
# compiler resolves but cannot generate code for (cuda sm_20) is refused too (~0.3 s).
CHIP_PROBE_MLIR = """\
func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>,
                                        affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%a, %b : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""
CHIP_PROBE_TIMEOUT_S = 120
CACHE_ENV = "BENCHFLOW_CACHE_DIR"


def cache_dir() -> Path:
    """benchflow's cache: $BENCHFLOW_CACHE_DIR, else $XDG_CACHE_HOME/benchflow, else
    ~/.cache/benchflow."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "benchflow"


def _compiler_identity(tool: str) -> str:
    """The installed compiler as a cache key: the build of iree-base-compiler (version and
    RECORD digest) plus the tool's own path, size and mtime (an iree-compile on PATH from
    another build is another compiler), as the stages' content keys name builds."""
    from workflow.backends.builds import file_build, package_build

    return f"{package_build('iree-base-compiler')}|{file_build(tool)}"


def _first_error(stderr: str) -> str:
    """The compiler's first `error:` line, without its location prefix."""
    for line in stderr.splitlines():
        if "error:" in line:
            return capped(line.split("error:", 1)[1].strip())
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    return capped(lines[0]) if lines else "no diagnostic"


@dataclass(frozen=True)
class ChipCheck:
    """The installed compiler's answer about one (backend, chip)."""

    accepted: bool
    error: str | None          # why it was refused, or why the compiler could not be asked
    compiler: str              # the compiler's version
    cached: bool = False       # read from the cache (no compile ran)


def check_target_chip(backend: str, chip: str, *, cache: Path | None = None,
                      timeout: float = CHIP_PROBE_TIMEOUT_S) -> ChipCheck:
    """Asks the installed iree-compile whether it can generate code for `chip` on a GPU
    `backend` (compiling CHIP_PROBE_MLIR with the SKU's target flags), and caches its
    answer on disk keyed by the compiler (version, path, size, mtime), backend and chip,
    so that a suite load pays the compile once (`cache`: default cache_dir()). A compiler
    that cannot be found or does not answer in time is no answer: accepted False with the
    reason, and nothing is cached."""
    if TARGETS[backend].chip_flag is None:
        raise ValueError(f"target backend {backend!r} takes no chip")
    version = compiler_version() or "unknown"
    try:
        tool = tool_path("iree-compile")
    except StageError as exc:
        return ChipCheck(False, f"could not ask iree-compile: {exc.message}", version)
    ident = _compiler_identity(tool)
    key = hashlib.sha256(json.dumps([ident, backend, chip]).encode()).hexdigest()[:24]
    path = (cache or cache_dir()) / "iree-target-chips" / f"{key}.json"
    try:
        # A cache entry is ours, but a FIFO or a device put there must not block us.
        data = json.loads(read_bytes(path, cap=MAX_JSON_BYTES, what="a JSON file",
                                     os_errors=True))
        if data.get("compiler") == ident and (data.get("backend"), data.get("chip")) == (
                backend, chip):
            return ChipCheck(bool(data["accepted"]), data.get("error"), version, cached=True)
    except (OSError, ConfigError, ValueError, KeyError, AttributeError):
        pass
    flags = target_flags({"target_backend": backend, "target_chip": chip})
    with tempfile.TemporaryDirectory() as tmp:
        mlir = Path(tmp) / "probe.mlir"
        mlir.write_text(CHIP_PROBE_MLIR)
        argv = [tool, str(mlir), "--iree-input-type=auto", *flags, "-o",
                str(Path(tmp) / "probe.vmfb")]
        try:
            proc = capture(argv, timeout=timeout)
        except Timeout:
            return ChipCheck(False, f"iree-compile did not answer within {timeout:g} s", version)
        except OSError as exc:
            return ChipCheck(False, f"could not run iree-compile: {exc}", version)
    accepted = proc.returncode == 0
    error = None if accepted else _first_error(proc.stderr or proc.stdout or "")
    try:
        write_json(path, {"compiler": ident, "compiler_version": version, "backend": backend,
                          "chip": chip, "accepted": accepted, "error": error,
                          "flags": flags})
    except OSError:
        pass  # an unwritable cache only costs the next load the same compile
    return ChipCheck(accepted, error, version)


# --- is a runtime device present on this machine? -----------------------------------------

DEVICE_PROBE_TIMEOUT_S = 60
# Run in a fresh interpreter: a driver that crashes or hangs while probing cannot take the
# caller with it. Prints one JSON object: {"devices": [...]} or {"error": "..."}.
_DEVICE_PROBE = """\
import json, sys
try:
    import iree.runtime as rt
    drivers = rt.query_available_drivers()
    if sys.argv[1] not in drivers:
        print(json.dumps({"error": "no driver %r in this iree-base-runtime (it has %s)"
                                   % (sys.argv[1], ", ".join(drivers))}))
    else:
        found = rt.get_driver(sys.argv[1]).query_available_devices()
        print(json.dumps({"devices": [str(d.get("name") or d.get("path") or d)
                                      for d in found]}))
except Exception as exc:
    print(json.dumps({"error": " ".join(str(exc).split())}))
"""


def device_absent_reason(device: str, *, timeout: float = DEVICE_PROBE_TIMEOUT_S) -> str | None:
    """None when the IREE runtime device `device` exists on this machine, else why not, in
    words for a case record ("no cuda device here: ..."). The local CPU devices always
    exist; a GPU device exists when iree.runtime's driver of that name loads and lists at
    least one device. The driver is asked in a subprocess with a timeout, so a crash or a
    hang of the driver becomes a reason, never the caller's crash or hang."""
    if device in LOCAL_DEVICES:
        return None
    where = f"no {device} device here"
    try:
        proc = capture([sys.executable, "-c", _DEVICE_PROBE, device], timeout=timeout)
    except Timeout:
        return f"{where}: probing iree.runtime's {device} driver took over {timeout:g} s"
    except OSError as exc:
        return f"{where}: could not start the probe of iree.runtime's {device} driver: {exc}"
    try:
        answer = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return (f"{where}: the probe of iree.runtime's {device} driver "
                f"{exit_reason(proc.returncode)}")
    if answer.get("error"):
        text = answer["error"]
        return f"{where}: iree.runtime's {device} driver is unavailable ({capped(text)})"
    if not answer.get("devices"):
        return f"{where}: iree.runtime's {device} driver lists no device"
    return None


def statistics_flags(path: str) -> list[str]:
    """iree-compile flags that write its statistics to `path` in the CSV format, which
    profile.compile_statistics reads: the compiler writes one format per run, and only
    the CSV one names the dispatch functions (the JSON one has the counts alone)."""
    return ["--iree-scheduling-dump-statistics-format=csv",
            f"--iree-scheduling-dump-statistics-file={path}"]


def compile_argv(tool: str, mlir: str, vmfb: str, flags: list[str], stats_file: str) -> list[str]:
    return [tool, mlir, *flags, *statistics_flags(stats_file), "-o", vmfb]


@contextlib.contextmanager
def tool_output(what: str):
    """Reading a tool's output: any way it is not what the tool writes (a list where an
    object belongs, a string where a number does, an integer past a float, nesting
    deeper than the parser goes)
    is one ValueError naming it. Only for the parsers below, whose every lookup is into
    the tool's data: there a KeyError, TypeError or AttributeError is the data's shape."""
    try:
        yield
    except ValueError:
        raise
    except (KeyError, TypeError, AttributeError, RecursionError, OverflowError) as exc:
        raise ValueError(f"not {what}: {type(exc).__name__}: {exc}") from None


def device_flags(sku: dict) -> list[str]:
    iree = sku["iree"]
    # A claimed GPU slot names its GPU by UUID (workflow/slots); the SKU keeps `cuda`.
    flags = [f"--device={slot_device(iree['device'])}"]
    if iree["device"] == "local-task" and iree["task_topology_max_group_count"]:
        flags.append(f"--task_topology_max_group_count={iree['task_topology_max_group_count']}")
    return flags


def benchmark_argv(
    tool: str, vmfb: str, function: str, inputs: list[str], sku: dict, *,
    repetitions: int, warmup_s: float, min_time: str,
    modules: list[str] = (), extra_flags: list[str] = (),
) -> list[str]:
    """`modules` are loaded before `vmfb` (pipelines calling into them); `extra_flags`
    (--parameters, a benchmark file's own flags) come after benchflow's timing flags, so
    that a file's --benchmark_min_time wins, but never after --benchmark_format=json."""
    return [
        tool, *(f"--module={m}" for m in modules), f"--module={vmfb}", f"--function={function}",
        *device_flags(sku),
        *(f"--input={i}" for i in inputs),
        f"--benchmark_repetitions={repetitions}",
        f"--benchmark_min_warmup_time={warmup_s:g}",
        f"--benchmark_min_time={min_time}",
        *extra_flags,
        "--benchmark_format=json",
    ]


@dataclass
class BenchmarkRun:
    """One iree-benchmark-module invocation."""

    repetition_ms: list[float]   # real time per iteration of each repetition
    aggregates_ms: dict           # mean / median / stddev in ms as Google Benchmark computed them
    cv: float | None              # the `cv` aggregate: a fraction (aggregate_unit "percentage")
    context: dict                 # load_avg, cpu scaling, num_cpus, ...

    @property
    def median_ms(self) -> float:
        return float(statistics.median(self.repetition_ms))


def parse_benchmark_json(text: str) -> BenchmarkRun:
    """Parses `--benchmark_format=json` output of iree-benchmark-module.

    Repetition entries have run_type "iteration"; aggregates have run_type "aggregate".
    Times are per iteration in `time_unit`. The `cv` aggregate has aggregate_unit
    "percentage" and its real_time holds a fraction (0.05 = 5 %), not a time: it must
    not be unit-converted like the others.
    """
    with tool_output("iree-benchmark-module's JSON"):
        data = json.loads(text)
        reps: list[float] = []
        aggs: dict[str, float] = {}
        cv = None
        for b in data.get("benchmarks", []):
            if b.get("error_occurred"):
                raise ValueError(f"benchmark {b.get('name')} failed: {b.get('error_message')}")
            if b.get("run_type") == "aggregate":
                if b.get("aggregate_unit") == "percentage":
                    if b.get("aggregate_name") == "cv":
                        cv = float(b["real_time"])
                    continue
                aggs[b["aggregate_name"]] = float(b["real_time"]) * TIME_UNIT_MS[b["time_unit"]]
            else:
                reps.append(float(b["real_time"]) * TIME_UNIT_MS[b["time_unit"]])
        if not reps:
            raise ValueError("no repetition entries in iree-benchmark-module output")
        # Recorded as the tool gave them (provenance): its strings capped, saying so.
        ctx = {k: capped(v) if isinstance(v, str) else v
               for k, v in data.get("context", {}).items() if k != "caches"}
    return BenchmarkRun(repetition_ms=reps, aggregates_ms=aggs, cv=cv, context=ctx)


def write_input_files(npz_path: str, dtypes: list[str], out_dir: Path) -> list[str]:
    """Writes each saved input as raw bytes and returns `--input` values (SHAPExTYPE=@file).

    Raw files with an explicit type handle bf16, which .npy cannot hold.
    """
    out = []
    with np.load(npz_path) as npz:
        for i, dtype in enumerate(dtypes):
            arr = npz[f"arg{i}"]
            if dtype == "bfloat16":
                # Stored widened to f32 (exact); bf16 is the upper half of the f32 bits.
                arr = (np.ascontiguousarray(arr, dtype=np.float32).view(np.uint32) >> 16)
                arr = arr.astype(np.uint16)
            path = out_dir / f"arg{i}.bin"
            # Not ndarray.tofile: its short write on a full disk is an OSError without
            # the errno ("65536 requested and 16384 written"), which no caller can tell
            # from our own bug; a file's write keeps ENOSPC, named with the file.
            try:
                with open(path, "wb") as fh:
                    fh.write(np.ascontiguousarray(arr).data)
            except OSError as exc:
                raise WriteError(path, exc) from None
            dims = "x".join(str(d) for d in arr.shape)
            etype = IREE_ELEMENT_TYPES[dtype]
            out.append(f"{dims}x{etype}=@{path}" if dims else f"{etype}=@{path}")
    return out

