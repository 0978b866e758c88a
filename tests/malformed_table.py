"""The docs' table of malformed inputs and their messages (docs/malformed-inputs.md),
rendered from the CASES tables of the tests that check each row, so that the table
cannot claim a message no test checks.

    python -m tests.malformed_table > docs/malformed-inputs.md
"""

from __future__ import annotations

import importlib

# The test modules whose CASES rows are (id, description, input, ..., expected fragment).
SOURCES = (
    ("suite files", "tests.test_malformed_suites"),
    ("reports and golden files", "tests.test_malformed_reports"),
    ("benchmark files (confinement)", "tests.test_benchfile_confinement"),
    ("benchmark files (names and ids)", "tests.test_benchfiles"),
    ("torch_models test files", "tests.test_torch_models"),
    ("special files", "tests.test_special_files"),
    ("command line", "tests.test_cli_edges"),
    ("faults while running", "tests.test_faults"),
    ("faults of the machine and the network", "tests.test_faults_caches"),
    ("history inputs", "tests.test_malformed_history"),
    ("profiles (implausible)", "tests.test_kernels_plausible"),
    ("tools' output (nvidia-smi, nsys, iree-compile)", "tests.test_gpu_tools_lie"),
    ("A/B results read back", "tests.test_ab_file"),
    ("misbehaving user models", "tests.test_misbehaving_models"),
    ("bisect", "tests.test_bisect"),
    ("two revisions (ab --base --new)", "tests.test_ab_revisions"),
    ("a plan's time (environment)", "tests.test_plan_time"),
    ("package bisection", "tests.test_packages"),
    ("names and text from outside", "tests.test_outside_names"),
    ("snakemake --config overrides", "tests.test_malformed_config_args"),
    ("SLURM profile values", "tests.test_malformed_profiles"),
    ("goldens directory and the gate", "tests.test_gate_goldens_dir"),
    ("tools' failure reasons", "tests.test_failure_reason"),
    ("two runs in one directory", "tests.test_other_run"),
    ("command-line flags", "tests.test_cli_flags"),
)


def _cell(value) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(text.split())
    if len(text) > 160:
        text = text[:157] + "..."
    return text.replace("|", "\\|")


def rows() -> list[tuple[str, str, str, str, str]]:
    out = []
    for title, module in SOURCES:
        for case in importlib.import_module(module).CASES:
            out.append((title, case[0], case[1], case[-1], module.removeprefix("tests.")))
    return out


def render() -> str:
    table = rows()
    lines = ["# Malformed inputs and their messages", "",
             "Every row is a test: the input is made as the test says and the message must",
             "contain the fragment shown (a user sees the whole line, which also names the",
             "file). Regenerate with `python -m tests.malformed_table > "
             "docs/malformed-inputs.md`;",
             "`tests/test_docs_tables.py` fails while this file is out of date.", "",
             f"{len(table)} inputs: 0 tracebacks, 0 hangs.", "",
             "| # | kind | id | input | message contains | test file |",
             "|---|---|---|---|---|---|"]
    for i, (title, cid, desc, expected, module) in enumerate(table, 1):
        lines.append(f"| {i} | {title} | `{cid}` | {_cell(desc)} | {_cell(expected)} | "
                     f"`tests/{module}.py` |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
