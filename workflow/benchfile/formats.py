"""Which of the formats benchflow reads a JSON document is, told by its keys, never its
name: a sharktank-format benchmark file (parse.py), an iree-test-suites torch_models
test file or module file (torch_models.py). `other_format` names the format a file
that failed as one looks like instead, so its problem says where to give it.

Its own module because both readers need it of each other: parse.py names a torch_models
file given as a benchmark file, torch_models.py a benchmark file given as a test.
Imports nothing of benchflow.
"""

from __future__ import annotations

# Keys only a benchmark file has: a JSON document with one of them is read as one.
MARKERS = ("function_run", "inputs", "golden_time_ms", "golden_dispatch", "golden_size",
           "benchmark_flags")
# The `type`s of a torch_models test file (the harness's).
KINDS = ("benchmark", "quality", "compstat")


def looks_like_file(data) -> bool:
    """Whether a JSON document is meant as a benchmark file (by its keys, not its name)."""
    return isinstance(data, dict) and any(k in data for k in MARKERS)


def looks_like_test(data) -> bool:
    """A torch_models test file, by its keys: a `type` of the harness's and `markers`."""
    return isinstance(data, dict) and data.get("type") in KINDS and "markers" in data


def looks_like_module(data) -> bool:
    """A torch_models module file: `mlir` and `compiler_flags`, nothing of a test."""
    return (isinstance(data, dict) and {"mlir", "compiler_flags"} <= set(data)
            and "type" not in data)


def other_format(data, source: str, read_as: str) -> list[str]:
    """One line saying which other format a file that failed as `read_as` (sharktank,
    torch_models test, torch_models module) looks like; [] when none."""
    for name, looks in (("an iree-test-suites torch_models test file", looks_like_test),
                        ("an iree-test-suites torch_models module file", looks_like_module),
                        ("a sharktank-format benchmark file", looks_like_file)):
        # `markers` is the harness's own key: such a file is a torch_models one gone wrong.
        if read_as in name or (looks is looks_like_file and isinstance(data, dict)
                               and "markers" in data):
            continue
        if looks(data):
            return [f"{source}: it looks like {name} (docs/benchmark-files.md): give it "
                    "where that format is read"]
    return []
