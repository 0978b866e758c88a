"""`target_chip: auto`: the CUDA target a SKU compiles for, chosen on the machine that
measures from its GPU's compute capability (nvidia-smi) and the installed compiler's
answers (tools.check_target_chip), and recorded with why (issue 35)."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass

from workflow.backends.iree.tools import check_target_chip, compiler_version
from workflow.backends.proc import Timeout, capture, exit_reason
from workflow.errors import capped

AUTO_CHIP = "auto"
# The backends whose `auto` chip can be chosen. CUDA's sm_XY names are ordered by compute
# capability, and iree-compile's CUDA target is PTX, which the driver compiles for the
# device at load: code for sm_XY runs on any device of capability X.Y or newer (an H100
# ran sm_80 code on 2026-11-27, /work/shared/gpu). ROCm's gfx names are not ordered (gfx90a
# code does not run on a gfx942) and vulkan-spirv targets are families, so for them no
# "best target below the device" exists: they name their chip.
AUTO_BACKENDS = ("cuda",)
# The sm_XY targets `auto` may choose, newest first; each is asked of the installed
# compiler (check_target_chip, cached) before it is chosen, so a name this list has and
# the compiler lacks (sm_90 in iree-compile 3.13) is passed over, never assumed. The `a`
# and `f` variants (sm_90a) are left out: their code runs on that one capability only.
CUDA_CANDIDATES = ("sm_120", "sm_100", "sm_90", "sm_89", "sm_87", "sm_86", "sm_80", "sm_75",
                   "sm_72", "sm_70", "sm_62", "sm_61", "sm_60", "sm_53", "sm_52", "sm_50")
# For tests only: text that stands for the output of NVIDIA_SMI_QUERY (one GPU a line,
# "name, compute_cap"; empty: no GPU), so that `auto` can be tested without a GPU.
FAKE_GPUS_ENV = "BENCHFLOW_TEST_NVIDIA_SMI"
# The compute capability comes from nvidia-smi rather than torch.cuda: the IREE job's
# interpreter may have a CPU-only torch (or a torch built for another CUDA), while
# nvidia-smi ships with the driver that runs IREE's CUDA HAL and answers in a fraction
# of a second without creating a CUDA context.
NVIDIA_SMI_QUERY = ("--query-gpu=name,compute_cap", "--format=csv,noheader")
NVIDIA_SMI_TIMEOUT_S = 60
# The most of one nvidia-smi line a reason quotes (errors.capped says it was cut): the
# reason enters every case record of the SKU and every report made from them.
LINE_CHARS = 200


@dataclass(frozen=True)
class Gpu:
    """One GPU as nvidia-smi lists it."""

    name: str
    capability: tuple[int, int]

    @property
    def capability_text(self) -> str:
        return f"{self.capability[0]}.{self.capability[1]}"


# A line nvidia-smi writes about the machine rather than a GPU's row, seen on stdout
# before the rows of a working GPU ("WARNING: infoROM is corrupted at gpu 0000:00:04.0"):
# skipped, never read as a GPU nor as "no GPU here".
_WARNING = re.compile(r"\s*warning\b", re.IGNORECASE)
# A data row of NVIDIA_SMI_QUERY in nvidia-smi's documented `csv,noheader` format: the
# queried fields in order, comma-separated, unquoted: a name (NVML's names fit in 96
# bytes: NVML_DEVICE_NAME_V2_BUFFER_SIZE) and a compute capability "major.minor".
_DATA_ROW = re.compile(r"([^,\x00-\x1f]{1,96}), (\d{1,3})\.(\d{1,3})")


def parse_nvidia_smi(text: str) -> list[Gpu]:
    """The GPUs of `nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader` output
    (one "NVIDIA H100 80GB HBM3, 9.0" a line, warning lines skipped); ValueError naming,
    capped, the first line that is neither a data row nor a warning."""
    gpus = []
    for line in text.splitlines():
        if not line.strip() or _WARNING.match(line):
            continue
        row = _DATA_ROW.fullmatch(line.strip())
        if row is None or not row[1].strip():
            raise ValueError(f"not a 'name, compute_cap' line of nvidia-smi: "
                             f"{capped(repr(line), LINE_CHARS)}")
        gpus.append(Gpu(row[1].strip(), (int(row[2]), int(row[3]))))
    return gpus


def _warnings(text: str) -> str:
    """nvidia-smi's warning lines, for a reason that says there was no data row."""
    found = [line.strip() for line in text.splitlines() if _WARNING.match(line)]
    return f" (it warned: {capped('; '.join(found), LINE_CHARS)})" if found else ""


def cuda_gpus(*, timeout: float = NVIDIA_SMI_TIMEOUT_S) -> tuple[list[Gpu], str | None]:
    """This machine's NVIDIA GPUs as nvidia-smi lists them, and why none where it lists
    none (nvidia-smi absent, failing, silent or unreadable): a reason for a case record,
    never an exception. FAKE_GPUS_ENV, when set, stands for nvidia-smi's answer."""
    if FAKE_GPUS_ENV in os.environ:
        text, where = os.environ[FAKE_GPUS_ENV], f"${FAKE_GPUS_ENV}"
    else:
        tool = shutil.which("nvidia-smi")
        if tool is None:
            return [], "no NVIDIA GPU here: nvidia-smi is not on PATH"
        try:
            proc = capture([tool, *NVIDIA_SMI_QUERY], timeout=timeout)
        except Timeout:
            return [], f"no NVIDIA GPU here: nvidia-smi did not answer within {timeout:g} s"
        except OSError as exc:
            return [], f"no NVIDIA GPU here: could not run nvidia-smi: {exc}"
        if proc.returncode != 0:
            said = capped(" ".join((proc.stdout + proc.stderr).split()), LINE_CHARS)
            return [], (f"no NVIDIA GPU here: nvidia-smi {exit_reason(proc.returncode)}"
                        + (f" ({said})" if said else ""))
        text, where = proc.stdout, "nvidia-smi"
    try:
        gpus = parse_nvidia_smi(text)
    except ValueError as exc:
        return [], f"no NVIDIA GPU here: {where} answered unreadably: {exc}"
    return gpus, None if gpus else f"no NVIDIA GPU here: {where} lists no GPU{_warnings(text)}"


def sm_capability(chip: str) -> tuple[int, int]:
    """The compute capability an sm_XY name is for: sm_80 -> (8, 0), sm_120 -> (12, 0)."""
    digits = chip.removeprefix("sm_")
    return int(digits[:-1]), int(digits[-1])


@dataclass(frozen=True)
class ChipChoice:
    """What `target_chip: auto` became on this machine: the chip (None: none could be
    chosen), the GPU it was chosen for, and why, in words for the case record."""

    chip: str | None
    reason: str
    compiler: str
    gpu: Gpu | None = None

    def key(self) -> dict:
        """What the cases' content keys hold of it: the chip and the GPU it runs on, not
        the wording of the reason. Two GPUs may get one chip (iree-compile 3.13 gives
        sm_89 to an L40 and to an H100), and must not reuse one another's timings."""
        return {"chip": self.chip, "gpu": self.gpu.name if self.gpu else None,
                "capability": self.gpu.capability_text if self.gpu else None}

    def provenance(self) -> dict:
        """The case record's provenance.target_chip."""
        return {"requested": AUTO_CHIP, **self.key(), "compiler": self.compiler,
                "reason": self.reason}


def choose_auto_chip(backend: str, gpus: list[Gpu], *, check=check_target_chip) -> ChipChoice:
    """The chip `target_chip: auto` means for `gpus` (cuda_gpus' list): the newest
    CUDA_CANDIDATES target at or below the lowest compute capability among them that
    `check` (the installed compiler, asked and cached) accepts. The lowest, because the
    runtime's `cuda` device may be any of them. No GPU, or one older than every target
    the compiler accepts, is a choice of None with the reason."""
    compiler = compiler_version() or "unknown"
    if backend not in AUTO_BACKENDS:
        raise ValueError(f"target_chip auto is for {', '.join(AUTO_BACKENDS)}, not {backend}")
    if not gpus:
        return ChipChoice(None, "no NVIDIA GPU here", compiler)
    gpu = min(gpus, key=lambda g: g.capability)
    passed = []
    for chip in CUDA_CANDIDATES:
        if sm_capability(chip) > gpu.capability:
            continue
        answer = check(backend, chip)
        compiler = answer.compiler
        if answer.accepted:
            why = (f"{chip}: the newest CUDA target of iree-compile {compiler} at or below "
                   f"compute capability {gpu.capability_text} ({gpu.name}, nvidia-smi)")
            if len(gpus) > 1:
                why += f", the lowest of this machine's {len(gpus)} GPUs"
            if passed:
                why += "; not " + "; not ".join(passed)
            return ChipChoice(chip, why, compiler, gpu)
        passed.append(f"{chip} ({answer.error})")
    return ChipChoice(None, (f"iree-compile {compiler} accepts no CUDA target at or below "
                             f"compute capability {gpu.capability_text} ({gpu.name}); "
                             f"tried {', '.join(passed) or 'none'}"), compiler, gpu)


def resolve_auto_chip(sku: dict) -> tuple[dict, ChipChoice | None]:
    """A SKU whose `iree.target_chip` is `auto`, with the chip chosen for this machine's
    GPU (choose_auto_chip, cuda_gpus), and the choice; a SKU naming its chip unchanged,
    and None. Called where the SKU's cases are compiled and measured, since the machine
    that plans a suite (a login node) need not be the one with the GPU. Where no chip can
    be chosen the SKU keeps `auto`: its cases are recorded with the choice's reason."""
    if sku["iree"].get("target_chip") != AUTO_CHIP:
        return sku, None
    gpus, why = cuda_gpus()
    choice = choose_auto_chip(sku["iree"]["target_backend"], gpus)
    if why and choice.chip is None:
        choice = ChipChoice(None, why, choice.compiler)
    if choice.chip is None:
        return sku, choice
    return {**sku, "iree": {**sku["iree"], "target_chip": choice.chip}}, choice
