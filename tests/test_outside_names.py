"""Names and text from outside, and round 2's remainder (issue 37, families 5 and 6).

Names are checked where they enter (a model file's `@benchmark_model`, a suite's
goldens.dir), and text from outside (a tool's error, a dispatch name, a model's name) is
shown with its control characters escaped on a terminal and in Markdown
(render.text.printable). `benchflow run -o` refuses, before measuring, a file it
would silently change (a copy of a report) or a folder it cannot write, and a write that
fails later (a full disk) is one line and leaves the file as it was.

CASES is a table a docs generator reads (tests/malformed_table.py): (id, what the input
is, how it is made: a key of MAKE, a fragment of the message). Each MAKE entry makes the
input under the test's directory, runs the command in-process (workflow.cli.main.main, or
the one function it calls) and returns its exit status (None where the function returns
none) and what it printed or rendered.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
from pathlib import Path

import pytest

from tests.test_goldens import BASE, make_case, make_report
from workflow.cli.main import main
from workflow.records.results_file import ResultsFileError, append_records, new_document
from workflow.records.storage import write_json
from workflow.regression import explain
from workflow.render import markdown
from workflow.render.text import printable

CID = "host/iree/a-f32/baseline"
CLEAR = "\x1b[2J"            # clear the screen
TITLE = "\x1b]0;pwned\x07"   # set the terminal window's title
BIDI = "\u202e"              # right-to-left override: reorders what a reader sees

CASES = [
    # --- names where they enter: a model file's decorator -------------------------------
    ("name-config-space", "a model_modules file registering a config named `a b`",
     "name-config-space", "config name 'a b': expected 1 to 64 letters, digits, _ . -"),
    ("name-config-dotdot", "a model_modules file registering a config named `..`",
     "name-config-dotdot", "config name '..': expected 1 to 64 letters, digits, _ . -"),
    ("name-model-escape", "a model_modules file registering a model whose name holds "
     "a window-title escape sequence", "name-model-escape",
     "model name 'm\\x1b]0;pwned\\x07': expected 1 to 64 letters, digits or _"),
    ("name-builtin-again", "`benchflow validate` of a suite whose model_modules register "
     "the built-in name `linear` again", "name-builtin-again",
     "model 'linear' is registered twice (first by the built-in workflow.models.layers); "
     "expected a name of its own"),
    ("name-model-error-escape", "`benchflow validate` of a suite whose model file raises "
     "an error holding a clear-screen sequence", "name-model-error-escape",
     "RuntimeError: boom \\x1b[2J"),
    # --- text from outside, shown ------------------------------------------------------
    ("text-md-error", "report.md of a case whose error clears the screen",
     "text-md-error", "boom \\x1b[2J"),
    ("text-md-model-bidi", "report.md of a case whose model name holds a right-to-left "
     "override", "text-md-model-bidi", "a\\u202eb"),
    ("text-md-dispatch", "report.md's kernel code span of a dispatch name holding a "
     "window-title sequence", "text-md-dispatch", "`main$d\\x1b]0;pwned\\x07`"),
    ("text-compare-title", "`benchflow compare` (Markdown on the terminal), a case "
     "failed at a stage whose name holds a window-title sequence", "text-compare-title",
     "\\x1b]0;pwned\\x07"),
    ("text-explain-dispatch", "`check`'s explanation lines, a dispatch name holding a "
     "clear-screen sequence", "text-explain-dispatch", "d\\x1b[2J"),
    # --- round 2's remainder -----------------------------------------------------------
    ("goldens-dir-file", "a suite whose goldens.dir is a file (refused by validate, "
     "not after measuring)", "goldens-dir-file",
     "goldens.dir: gfile is a regular file, not a directory; expected a directory of "
     "golden files"),
    ("run-o-report-copy", "`benchflow run -o R`, R a copy of a results/report.json "
     "(it would become a results file)", "run-o-report-copy",
     "a benchflow report (no `kind`, as results/report.json), not a `benchflow run -o` "
     "results file"),
    ("run-o-other-kind", "`benchflow run -o G`, G a golden file (its own `cases`)",
     "run-o-other-kind", "a document of kind 'benchflow-goldens', not a `benchflow run -o` "
     "results file"),
    ("run-o-read-only", "`benchflow run -o DIR/out.json`, DIR on a read-only file system "
     "(refused before measuring)", "run-o-read-only",
     "(Read-only file system); expected a folder benchflow can write the results file"),
    ("run-o-full-disk", "appending to a results file on a full disk", "run-o-full-disk",
     "could not append (No space left on device); left as it was"),
]

# Exit status by the first word of a row's id; None: no command, a function's text.
EXIT = {"name": 1, "text": None, "goldens": 1, "run": 1}
EXIT_OF = {"text-compare-title": 0}


# --- tiny file systems (real ones: root mounts a tmpfs, as the fault tests want) -------

# dlopen(NULL): the C library this Python already uses (find_library would start
# /sbin/ldconfig, a program, when the malformed table imports this module).
_LIBC = ctypes.CDLL(None, use_errno=True)
MS_RDONLY = 1


def mount_tmpfs(where: Path, *, size: str = "16k", read_only: bool = False) -> Path:
    """A tmpfs of `size` at `where` (made), through mount(2) itself: no program started.
    Skips the test where this process may not mount (not root, no CAP_SYS_ADMIN)."""
    where.mkdir(parents=True, exist_ok=True)
    flags = MS_RDONLY if read_only else 0
    if _LIBC.mount(b"tmpfs", str(where).encode(), b"tmpfs", flags,
                   f"size={size}".encode()) != 0:
        pytest.skip(f"cannot mount a tmpfs here: {os.strerror(ctypes.get_errno())}")
    return where


def unmount(where: Path) -> None:
    _LIBC.umount2(str(where).encode(), 2)  # MNT_DETACH: gone even if a file is open


@pytest.fixture
def mounts():
    made: list[Path] = []
    yield made
    for where in reversed(made):
        unmount(where)


def fill(folder: Path) -> None:
    """Writes into `folder` until its file system is full."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)


# --- inputs -------------------------------------------------------------------------

def _run(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out + out.err


def _model_file(tmp: Path, decorator: str, body: str = "pass") -> Path:
    """A suite naming a model file whose one model is registered by `decorator`."""
    (tmp / "m.py").write_text(
        "from workflow.models.registry import benchmark_model\n"
        f"{decorator}\n"
        f"def {tmp.name.replace('-', '_')}(config, dtype, layers, shape):\n    {body}\n")
    suite = tmp / "suite.yaml"
    suite.write_text("model_modules: [m.py]\nworkloads: [{model: linear}]\n")
    return suite


def _validate(decorator: str, prelude: str = ""):
    def make(tmp, capsys, mp):
        suite = _model_file(tmp, decorator)
        if prelude:
            (tmp / "m.py").write_text(prelude + (tmp / "m.py").read_text())
        return _run(["validate", str(suite)], capsys)
    return make


SHAPE = "default_shape=(2,), shape_doc='n'"


def _failing_report(error: str, **fields) -> dict:
    return make_report(make_case(CID, BASE, status="failed", error=error, **fields))


def _md_dispatch(tmp, capsys, mp):
    return None, markdown.code(f"main$d{TITLE}")


def _compare(tmp, capsys, mp):
    base, new = tmp / "b.json", tmp / "n.json"
    write_json(base, make_report(make_case(CID, BASE)))
    write_json(new, _failing_report("boom", stage=f"compile{TITLE}"))
    return _run(["compare", str(base), str(new)], capsys)


def _explain(tmp, capsys, mp):
    e = {"lines": [f"+12 ms: d{CLEAR} took it"], "what_changed": f"flags: -O{BIDI}3"}
    return None, "\n".join(explain.text_lines(e))


def _goldens_file(tmp, capsys, mp):
    mp.chdir(tmp)  # goldens.dir is relative to the working directory, as the run's
    (tmp / "gfile").write_text("not a folder\n")
    suite = tmp / "suite.yaml"
    suite.write_text("goldens: {dir: gfile}\nworkloads: [{model: linear}]\n")
    return _run(["validate", str(suite)], capsys)


def _run_o(make_out):
    """`benchflow run -o OUT`, OUT made by `make_out(tmp, mounts)`; the file must be the
    same afterwards (its bytes, or still absent)."""
    def make(tmp, capsys, mp, mounts):
        out = make_out(tmp, mounts)
        before = out.read_bytes() if out.exists() else None
        code, text = _run(["run", "-m", "linear", "-o", str(out)], capsys)
        assert (out.read_bytes() if out.exists() else None) == before
        return code, text
    return make


def _report_copy(tmp, mounts) -> Path:
    out = tmp / "copy-of-report.json"
    write_json(out, make_report(make_case(CID, BASE)))
    return out


def _golden_file(tmp, mounts) -> Path:
    out = tmp / "cpu.json"
    write_json(out, {"kind": "benchflow-goldens", "schema_version": "1.0", "cases": []})
    return out


def _read_only(tmp, mounts) -> Path:
    mounts.append(mount_tmpfs(tmp / "ro", read_only=True))
    return tmp / "ro" / "sub" / "out.json"


def _full_disk(tmp, capsys, mp, mounts):
    mounts.append(mount_tmpfs(tmp / "full", size="64k"))
    out = tmp / "full" / "out.json"
    append_records(out, [make_case(CID, BASE)])
    before = out.read_bytes()
    fill(tmp / "full")
    with pytest.raises(ResultsFileError) as err:
        append_records(out, [make_case(CID, BASE)] * 20)
    assert out.read_bytes() == before  # whole, not truncated
    assert sorted(p.name for p in (tmp / "full").iterdir()) == \
        ["filler", "out.json"]  # no temporary file left, nor the lock file
    return 1, str(err.value)


MAKE = {
    "name-config-space": _validate(f"@benchmark_model(['a b'], {SHAPE})"),
    "name-config-dotdot": _validate(f"@benchmark_model(['..'], {SHAPE})"),
    "name-model-escape": _validate(f"@benchmark_model(name='m\\x1b]0;pwned\\x07', {SHAPE})"),
    "name-builtin-again": _validate(f"@benchmark_model(name='linear', {SHAPE})"),
    "name-model-error-escape": _validate(f"@benchmark_model({SHAPE})",
                                         "raise RuntimeError('boom \\x1b[2J')\n"),
    "text-md-error": lambda tmp, capsys, mp: (
        None, markdown.render(_failing_report(f"boom {CLEAR}"))),
    "text-md-model-bidi": lambda tmp, capsys, mp: (
        None, markdown.render(make_report(make_case(CID, BASE, model=f"a{BIDI}b")))),
    "text-md-dispatch": _md_dispatch,
    "text-compare-title": _compare,
    "text-explain-dispatch": _explain,
    "goldens-dir-file": _goldens_file,
    "run-o-report-copy": _run_o(_report_copy),
    "run-o-other-kind": _run_o(_golden_file),
    "run-o-read-only": _run_o(_read_only),
    "run-o-full-disk": _full_disk,
}
# Rows that mount a file system take the fixture that unmounts it.
MOUNTING = {"run-o-report-copy", "run-o-other-kind", "run-o-read-only", "run-o-full-disk"}


def test_the_table_is_well_formed():
    ids = [row[0] for row in CASES]
    assert len(ids) == len(set(ids)) and set(ids) == set(MAKE)
    assert all(len(row) == 4 and row[1] and row[3] for row in CASES)


@pytest.mark.parametrize("case_id, description, how, expected", CASES,
                         ids=[row[0] for row in CASES])
def test_outside_input(case_id, description, how, expected, tmp_path, capsys, monkeypatch,
                       mounts):
    args = (tmp_path, capsys, monkeypatch) + ((mounts,) if case_id in MOUNTING else ())
    code, text = MAKE[how](*args)
    assert expected in text, text
    assert code == EXIT_OF.get(case_id, EXIT[case_id.split("-", 1)[0]]), text
    assert "Traceback" not in text
    # Nothing a terminal or a viewer would obey: every control character shown escaped.
    assert printable(text) == text, text
    if code is not None and code != 0:
        assert len([line for line in text.splitlines() if line.strip()]) == 1, text


# --- render.text.printable -----------------------------------------------------------

@pytest.mark.parametrize(("text", "shown"), [
    ("plain text, é and → kept", "plain text, é and → kept"),
    ("line\nnext\tcell", "line\nnext\tcell"),  # newline and tab are layout, kept
    (CLEAR + "x", "\\x1b[2Jx"),
    (TITLE, "\\x1b]0;pwned\\x07"),
    ("a\rb\x00c\x7fd", "a\\rb\\x00c\\x7fd"),  # carriage return overwrites a line
    ("\x85\x9b", "\\x85\\x9b"),  # C1 controls (0x9b is a one-byte CSI)
    (f"x{BIDI}y\u2066z", "x\\u202ey\\u2066z"),
])
def test_printable_escapes_control_characters_only(text, shown):
    assert printable(text) == shown
    assert printable(shown) == shown  # shown once, stays so


def test_a_markdown_cell_escapes_control_characters_before_markup():
    # \x1c-\x1e split lines in Python: escaped first, a cell stays one line.
    assert markdown.cell(f"a\x1cb <i> | {CLEAR}") == "a\\x1cb &lt;i> \\| \\x1b[2J"


def test_a_model_file_may_register_long_and_dotted_names(tmp_path, capsys):
    """The allow-list is the suite's own: what a suite may name, a model file may register."""
    name = "x" * 64
    suite = _model_file(tmp_path, f"@benchmark_model(['v1.2-b_3', 'c' * 64], name='{name}', "
                        f"{SHAPE})")
    suite.write_text(f"model_modules: [m.py]\nworkloads: [{{model: {name}, "
                     "configs: [v1.2-b_3]}]\n")
    code, text = _run(["validate", str(suite)], capsys)
    assert code == 0 and "valid" in text, text


def test_a_results_file_is_still_appended_to(tmp_path):
    """The refusal is of a report, not of every file with `cases`: a results file is
    still appended to."""
    out = tmp_path / "out.json"
    write_json(out, new_document())
    assert append_records(out, [make_case(CID, BASE)]) == 1
    assert json.loads(out.read_text())["kind"] == "benchflow-results"
