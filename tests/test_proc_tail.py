"""backends/proc.log_tail: the end of a worker's log for an error message, read as
bytes (only the tail, however large the log) and decoded with replacement."""

from __future__ import annotations

from workflow.backends.proc import log_tail


def test_the_tail_is_the_last_bytes_decoded_with_replacement(tmp_path):
    log = tmp_path / "w.log"
    log.write_bytes(b"x" * 100_000 + b"caf\xe9 crashed\n")
    assert log_tail(log, 13) == "caf\ufffd crashed\n"
    assert log_tail(log, 10**9).endswith("crashed\n") and len(log_tail(log, 10**9)) > 100_000


def test_no_log_is_no_tail():
    assert log_tail(None, 100) == ""
