"""backends/proc.log_tail: the end of a worker's log for an error message, read as
bytes (only the tail, however large the log) and decoded with replacement; a tool's or a
worker's output that is not UTF-8, read with replacement wherever it is read (run_tool,
Streaming, the parsers of iree-compile's and iree-benchmark-module's output)."""

from __future__ import annotations

import sys

import pytest

from workflow.backends.iree.profile import compile_statistics
from workflow.backends.iree.tools import parse_benchmark_json
from workflow.backends.proc import Streaming, log_tail, run_tool
from workflow.errors import StageError


def test_the_tail_is_the_last_bytes_decoded_with_replacement(tmp_path):
    log = tmp_path / "w.log"
    log.write_bytes(b"x" * 100_000 + b"caf\xe9 crashed\n")
    assert log_tail(log, 13) == "caf\ufffd crashed\n"
    assert log_tail(log, 10**9).endswith("crashed\n") and len(log_tail(log, 10**9)) > 100_000


def test_no_log_is_no_tail():
    assert log_tail(None, 100) == ""


# --- a tool's bytes that are not UTF-8 ------------------------------------------------------
# What iree-compile's --mlir-print-ir-after-all, a locale's message or a model's print can
# write: Latin-1 bytes, a lone continuation byte, an invalid start byte.
NOT_UTF8 = b"caf\xe9 \xff\xfe \x80"
FAKE_TOOL = ("import os, sys; os.write(1, b'out ' + bytes.fromhex(sys.argv[2]) + b'\\n'); "
             "os.write(2, b'error: ' + bytes.fromhex(sys.argv[2]) + b'\\n'); "
             "sys.exit(int(sys.argv[1]))")


@pytest.mark.tool
@pytest.mark.parametrize("code", [0, 1])
def test_a_tools_non_utf8_output_is_read_with_replacement(tmp_path, code):
    log = tmp_path / "tool.log"
    argv = [sys.executable, "-c", FAKE_TOOL, str(code), NOT_UTF8.hex()]
    replaced = NOT_UTF8.decode("utf-8", errors="replace")
    if code:
        with pytest.raises(StageError) as err:
            run_tool(argv, stage="compile", timeout=60, log=log)
        assert err.value.message.endswith(f"exited with 1: error: {replaced}\nerror: {replaced}")
    else:
        assert run_tool(argv, stage="compile", timeout=60, log=log).stdout == f"out {replaced}\n"
    text = log.read_text(encoding="utf-8")
    assert f"out {replaced}\nerror: {replaced}\n[exit {code} after" in text


@pytest.mark.tool
def test_a_streamed_workers_non_utf8_output_is_read_with_replacement(tmp_path):
    """stdout line by line, decoded with replacement; stderr into the log as its bytes."""
    log = tmp_path / "worker.log"
    log.write_bytes(b"earlier \xe9\n")
    argv = [sys.executable, "-c", FAKE_TOOL, "0", NOT_UTF8.hex()]
    with Streaming(argv, log=str(log)) as worker:
        lines = []
        while (line := worker.readline(60)) != "":
            lines.append(line)
        assert worker.wait() == 0
    assert lines == [f"out {NOT_UTF8.decode('utf-8', errors='replace')}\n"]
    assert log.read_bytes() == b"earlier \xe9\nerror: " + NOT_UTF8 + b"\n"


@pytest.mark.parametrize("parse", [parse_benchmark_json, compile_statistics])
@pytest.mark.parametrize("text", [NOT_UTF8.decode("utf-8", errors="replace"), "[1, 2]",
                                  '{"a": []}', '{"benchmarks": [1]}', "[" * 100_000,
                                  '{"benchmarks": [{"real_time": 1' + "0" * 400 + ', '
                                  '"time_unit": "ms"}]}'])
def test_the_parsers_of_a_tools_output_raise_value_error_only(parse, text):
    with pytest.raises(ValueError):
        parse(text)
