"""Timing slots: the units of a machine that measure at once without disturbing one
another. One slot per GPU the machine lists (nvidia-smi, rocm-smi), each with a
disjoint CPU set (NUMA-near where /sys says so) for its host-side work; on a machine
without a GPU one slot of every core, or as many slots of disjoint cores as a suite
asks for (`cpu_slots`). A timing job claims a concrete slot at run time (a file lock
per slot, released by the kernel when the job ends however it ends), pins itself to
it (CPU affinity, CUDA_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES by UUID, IREE's
--device=cuda://<uuid>) and says in its records which GPU and CPUs measured.

machine.py reads the machine (tools' answers come through a `capture` the caller
passes: only backends/proc.py starts processes); claim.py takes and applies a slot.
Imports: the standard library and workflow.errors only, so that backends (the IREE
device flag) and records (the case's provenance) may read the claimed slot.
"""
