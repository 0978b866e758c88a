"""Verify stage's runner (a child process): runs a compiled module once on
iree.runtime with the saved inputs and saves its outputs.

    python -m workflow.backends.iree.verify VMFB INPUTS_NPZ DEVICE OUTPUTS_NPZ
"""

from __future__ import annotations

import time

import numpy as np

from workflow.backends.iree.export import save_arrays
from workflow.backends.worker_side import worker_main


def run_module(vmfb: str, inputs_npz: str, device: str) -> tuple[list[np.ndarray], float]:
    import iree.runtime as rt

    with np.load(inputs_npz) as npz:
        args = [npz[f"arg{i}"] for i in range(len(npz.files))]
    config = rt.Config(device)
    ctx = rt.SystemContext(config=config)
    ctx.add_vm_module(rt.VmModule.mmap(ctx.instance, vmfb))
    fn = ctx.modules.module["main"]
    t0 = time.perf_counter()
    result = fn(*args)
    first_call_ms = (time.perf_counter() - t0) * 1e3
    outs = result if isinstance(result, (list, tuple)) else [result]
    return [np.asarray(o.to_host() if hasattr(o, "to_host") else o) for o in outs], first_call_ms


def main(argv: list[str]) -> None:
    vmfb, inputs_npz, device, out_npz = argv
    outs, first_call_ms = run_module(vmfb, inputs_npz, device)
    save_arrays(out_npz, "out", outs, first_call_ms=np.float64(first_call_ms))


if __name__ == "__main__":
    worker_main(main)
