"""What differs between the two sides of a comparison that could explain a change (issue
25, "What changed"): compile flags, tool versions and builds, host, torch threads, the
model's sources, the SKU's device. A diff, one line per difference, never two dumps.

Read from a case record (workflow/schemas/report.schema.json, $defs/case): `compile.flags`
and `compile.compiler_version`; its `provenance` (records/case.py's case_provenance and
torch_provenance, jobs/torch.py's interpreter_provenance): host, torch_threads,
iree_device, task_topology_max_group_count, iree_runtime_version, torch_version,
torchao_version, gpu_name, and, where a record has them, `builds` ({tool: build string},
backends/builds.py's) and `model_sources` ({file: digest}, models/registry.py's
model_sources). The report-level provenance (`versions`, `host.cpu_model`, `git_sha`) is
passed beside a record, as cases of one report share it.
"""

from __future__ import annotations

# Per-run facts of a case's provenance, different between any two runs and explaining
# nothing about the code measured (load is judged by the measurement protocol itself).
TRANSIENT = frozenset({"started_at", "load_avg", "slurm_job_id", "job_key", "contexts"})

# (case provenance key, what a line calls it), in the order lines are given.
_CASE_KEYS = (("host", "host"), ("benchmark_host", "benchmark host"),
              ("cpu_scaling_enabled", "cpu scaling enabled"),
              ("torch_threads", "torch threads"), ("iree_device", "iree device"),
              ("task_topology_max_group_count", "iree task topology max group count"),
              ("gpu_name", "gpu"), ("gpu_count", "gpu count"),
              ("torch_python", "torch python"))

# Tool versions: (name in a line, where the case record has it, the report's `versions`
# key). The case's own value wins: a SKU may use its own iree-compile or interpreter,
# whose version the report's (this interpreter's packages) does not give.
_TOOLS = (("iree-compile", ("compile", "compiler_version"), "iree-base-compiler"),
          ("iree-runtime", ("provenance", "iree_runtime_version"), "iree-base-runtime"),
          ("torch", ("provenance", "torch_version"), "torch"),
          ("torchao", ("provenance", "torchao_version"), "torchao"))
# Report versions that shape a measurement besides the tools above (snakemake only
# schedules jobs and is left out).
_OTHER_PACKAGES = ("python", "numpy", "transformers")


def parse_flags(flags: list[str]) -> dict[str, list[str | None]]:
    """{flag name: its values in order} of a command line's flags: `--x=1` is (--x, 1),
    a bare `--x` is (--x, None); a repeated flag keeps each value."""
    out: dict[str, list[str | None]] = {}
    for flag in flags:
        name, eq, value = flag.partition("=")
        out.setdefault(name, []).append(value if eq else None)
    return out


def _flag_text(name: str, values: list[str | None]) -> str:
    return ", ".join(name if v is None else f"{name}={v}" for v in values)


def flags_diff(base: list[str], new: list[str]) -> str | None:
    """`compile flags: + --a=1; - --b; --x=1 -> 2` (added, removed, changed values), None
    when the two sets agree (their order aside: IREE reads flags by name)."""
    a, b = parse_flags(base), parse_flags(new)
    parts = [f"+ {_flag_text(n, b[n])}" for n in b if n not in a]
    parts += [f"- {_flag_text(n, a[n])}" for n in a if n not in b]
    for name in (n for n in b if n in a and sorted(map(str, a[n])) != sorted(map(str, b[n]))):
        parts.append(f"{_flag_text(name, a[name])} -> "
                     f"{', '.join('(bare)' if v is None else v for v in b[name])}")
    return f"compile flags: {'; '.join(parts)}" if parts else None


def _get(record: dict, path: tuple[str, str]) -> object:
    return (record.get(path[0]) or {}).get(path[1])


def _changed(what: str, a: object, b: object) -> str | None:
    if a == b:
        return None
    return f"{what} {'none' if a is None else a} -> {'none' if b is None else b}"


def _tool_lines(base: dict, new: dict, base_report: dict, new_report: dict) -> list[str]:
    va, vb = base_report.get("versions") or {}, new_report.get("versions") or {}
    # IREE's tools measure nothing of a torch case; torch is in every case (IREE's export).
    iree = "iree" in (base.get("backend", "iree"), new.get("backend", "iree"))
    lines = []
    for name, path, package in _TOOLS[0 if iree else 2:]:
        # A case that names no version of its own ran with its report's interpreter's.
        lines.append(_changed(name, _get(base, path) or va.get(package),
                              _get(new, path) or vb.get(package)))
    lines += [_changed(p, va.get(p), vb.get(p)) for p in _OTHER_PACKAGES]
    return [line for line in lines if line]


def _dict_lines(what: str, a: dict | None, b: dict | None) -> list[str]:
    """One line per key of two {name: build or digest} maps that differs."""
    a, b = a or {}, b or {}
    return [f"{what} {k}: {a.get(k) or 'absent'} -> {b.get(k) or 'absent'}"
            for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def _host_lines(base_report: dict, new_report: dict) -> list[str]:
    ha, hb = base_report.get("host") or {}, new_report.get("host") or {}
    lines = [_changed("cpu", ha.get("cpu_model"), hb.get("cpu_model")),
             _changed("cores", ha.get("cores"), hb.get("cores")),
             _changed("benchflow commit", base_report.get("git_sha"),
                      new_report.get("git_sha"))]
    return [line for line in lines if line]


def _case_lines(base: dict, new: dict) -> list[str]:
    pa, pb = base.get("provenance") or {}, new.get("provenance") or {}
    lines = [_changed(what, pa.get(key), pb.get(key)) for key, what in _CASE_KEYS]
    # backend and recipe: what a torch A/B pair of two sides of one workload differs by.
    lines += [_changed(k, base.get(k), new.get(k))
              for k in ("sku", "device", "backend", "recipe")]
    lines += _dict_lines("build", pa.get("builds"), pb.get("builds"))
    lines += _dict_lines("model source", pa.get("model_sources"), pb.get("model_sources"))
    # A key this module does not know yet still shows, by its name.
    known = {k for k, _ in _CASE_KEYS} | TRANSIENT | {
        "builds", "model_sources", "iree_runtime_version", "torch_version", "torchao_version"}
    lines += [_changed(f"provenance.{k}", pa.get(k), pb.get(k))
              for k in sorted((set(pa) | set(pb)) - known)]
    return [line for line in lines if line]


def provenance_diff(base: dict, new: dict, *, base_report: dict | None = None,
                    new_report: dict | None = None) -> list[str]:
    """What differs between two case records (and their reports' `provenance`, when
    given), one line each: the compile flags as a flag-level diff, then tool versions
    (`iree-compile 3.13.0 -> 3.14.0`) and builds, the host and the case's settings, the
    model's source files. Empty when nothing differs; `NOTHING` says so in words."""
    lines = []
    fa, fb = (base.get("compile") or {}).get("flags"), (new.get("compile") or {}).get("flags")
    if fa is not None or fb is not None:
        flags = flags_diff(fa or [], fb or [])
        lines += [flags] if flags else []
    lines += _tool_lines(base, new, base_report or {}, new_report or {})
    lines += _host_lines(base_report or {}, new_report or {})
    lines += _case_lines(base, new)
    return lines


NOTHING = "same flags, tools, host and model source"
