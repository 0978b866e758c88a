"""A case's measurement configuration: what decides the level a measurement lands at
without being what is under test (DESIGN.md, "Like with like").

Two measurements of unchanged code at different configurations differ for reasons of
their own: a torch case at 2 threads against 1 (x0.58 to x1.7 on this 2-core machine),
a forked child against an in-process block, a longer warm-up. So a judgement across runs
(a golden, a rolling history, a compare) compares only cases measured alike, and says
which keys differ where they do not, instead of calling the difference a regression.

The configuration is the device the case ran on, its thread count (torch's, or IREE's
task topology), what one invocation was, and the SKU's measurement settings that
change what one invocation measures. What is under test is not in it: code, compiler
and library versions, compile flags (target_cpu included), recipes; a change there is
judged. Nor are the settings that change only how many invocations are taken or how
they are judged (invocations, max_invocations, target_rel_width, budget_s, alpha, the
retake and noise rules): they widen or narrow an interval, not move its level.

Read from the record itself (provenance, timing), so that a golden blessed before this
module existed is compared on the keys its provenance kept (threads, device).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# The SKU measurement settings that change what one invocation measures, by backend kind.
IREE_SETTINGS = ("repetitions", "min_time_s", "min_warmup_time_s", "randomize_layout")
TORCH_SETTINGS = ("torch_warmup_calls", "torch_warmup_s", "torch_min_run_time_s")
# Every key a configuration may hold, in the order differences are named; the names
# `--accept-config` and goldens.accept_config take.
KEYS = ("device", "gpu", "threads", "invocation_kind", *IREE_SETTINGS, *TORCH_SETTINGS)


def _is_iree(case: Mapping) -> bool:
    return (case.get("backend") or "iree") == "iree"


def settings_of_sku(sku: Mapping, backend: str) -> dict:
    """The SKU's measurement settings a case of `backend` is measured with (its record's
    provenance.measurement)."""
    m = sku.get("measurement") or {}
    names = IREE_SETTINGS if (backend or "iree") == "iree" else TORCH_SETTINGS
    return {k: m[k] for k in names if k in m}


def of_case(case: Mapping) -> dict:
    """{key: value} of a case record's configuration; a key its record does not say (an
    old record, a case that did not run) is left out, and so never compared."""
    prov = case.get("provenance") or {}
    timing = case.get("timing") or {}
    out: dict = {}
    if _is_iree(case):
        device = prov.get("iree_device")
        out["device"] = device
        if device == "local-sync":
            out["threads"] = 1
        elif device == "local-task":
            out["threads"] = prov.get("task_topology_max_group_count")
    else:
        out["device"] = case.get("device")
        out["threads"] = prov.get("torch_threads")
    out["gpu"] = prov.get("gpu_name")
    out["invocation_kind"] = timing.get("invocation_kind")
    out.update(prov.get("measurement") or {})
    return {k: out[k] for k in KEYS if out.get(k) is not None}


def as_text(config: Mapping) -> str:
    """`device=local-sync,threads=1,...`: a configuration as one string, keys in KEYS'
    order (the history's series key, benchmark.extra_info['measurement_config'])."""
    return ",".join(f"{k}={config[k]}" for k in KEYS if k in config)


# What a series, a line or a page calls the configuration of rows stored before it was
# recorded (an empty as_text).
NOT_RECORDED = "configuration not recorded"


def label(text: str) -> str:
    """A configuration's text as lines name it."""
    return text or NOT_RECORDED


def differences(measured: Mapping, golden: Mapping, accepted: Iterable[str] = ()
                ) -> list[dict]:
    """[{key, measured, golden}] of each key both configurations hold with different
    values, the `accepted` ones left out."""
    skip = set(accepted)
    return [{"key": k, "measured": measured[k], "golden": golden[k]} for k in KEYS
            if k in measured and k in golden and k not in skip and measured[k] != golden[k]]


def describe(diff: Mapping, against: str = "golden") -> str:
    """One difference in words: `measured at 1 thread(s), golden at 2`."""
    k, a, b = diff["key"], diff["measured"], diff["golden"]
    if k == "threads":
        return f"measured at {a} thread(s), {against} at {b}"
    return f"{k}: measured {a}, {against} {b}"


def describe_all(diffs: Iterable[Mapping], against: str = "golden") -> str:
    return "; ".join(describe(d, against) for d in diffs)
