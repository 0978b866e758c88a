"""backends/proc.run_group: a tool that hangs is killed with its whole process group at its
timeout (a profiler or a compiler driver that forks the real tool, which forks again),
so that no process of it survives and the stage's failure comes back in time; run_tool
and capture, which use it, say so as before."""

from __future__ import annotations

import os
import time

import pytest

from workflow.backends.proc import Timeout, capture, run_tool
from workflow.errors import StageError

# A "profiler" that starts the "tool" (a subshell), which starts a grandchild that sleeps;
# each writes its process id first, and every one of them keeps the output pipes open.
HANGING = """#!/bin/sh
echo "parent $$"
sh -c 'echo "child $$"; sleep 300 & echo "grandchild $!"; wait' &
wait
"""


def pids(text: str) -> list[int]:
    return [int(line.split()[1]) for line in text.splitlines() if line.split()[:1]
            and line.split()[0] in ("parent", "child", "grandchild")]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead: it waits for its parent (the test runner's init) to reap it.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def hanging_tool(tmp_path):
    script = tmp_path / "profiler.sh"
    script.write_text(HANGING)
    script.chmod(0o755)
    return script


def wait_gone(found: list[int], seconds: float = 5.0) -> list[int]:
    """The processes still alive after up to `seconds` (a killed one may take a moment
    to be reaped by init)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        left = [p for p in found if alive(p)]
        if not left:
            return []
        time.sleep(0.05)
    return [p for p in found if alive(p)]


@pytest.mark.tool
def test_a_hanging_tools_children_and_grandchildren_die_at_its_timeout(tmp_path):
    log = tmp_path / "profile.log"
    start = time.monotonic()
    with pytest.raises(StageError) as err:
        run_tool([hanging_tool(tmp_path)], stage="profile", timeout=1.0, log=log)
    assert time.monotonic() - start < 10  # not the grandchild's 300 s
    assert err.value.message == "timeout after 1 s: profiler.sh"
    found = pids(log.read_text())
    assert len(found) == 3, log.read_text()  # what they wrote before the kill is logged
    assert wait_gone(found) == []


@pytest.mark.tool
def test_a_hanging_probe_is_killed_with_its_group_too(tmp_path):
    with pytest.raises(Timeout, match="profiler.sh did not end within 1 s"):
        capture([hanging_tool(tmp_path)], timeout=1.0)


@pytest.mark.tool
def test_a_tool_that_ends_in_time_is_read_as_before(tmp_path):
    script = tmp_path / "ok.sh"
    script.write_text("#!/bin/sh\necho out; echo err >&2; exit 3\n")
    script.chmod(0o755)
    proc = capture([script], timeout=30)
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "out\n", "err\n")


@pytest.mark.tool
def test_an_interrupt_kills_the_tools_of_every_thread_at_once():
    """A job interrupted (Ctrl-C, SIGTERM: jobs/job.py) kills the tools its threads run
    too (an IREE batch's exports ahead), in sessions of their own that no terminal signal
    reaches: the job stopped when they ended (45 s), not at the interrupt. None starts
    after it."""
    import threading

    from workflow.backends import proc

    codes: list[int] = []
    thread = threading.Thread(
        target=lambda: codes.append(proc.run_group(["sleep", "60"], timeout=120).returncode))
    thread.start()
    deadline = time.monotonic() + 30
    while not proc._LIVE and time.monotonic() < deadline:
        time.sleep(0.05)
    start = time.monotonic()
    try:
        proc.kill_live_groups()
        thread.join(timeout=30)
        assert codes == [-9] and time.monotonic() - start < 10, codes
        start = time.monotonic()
        assert proc.run_group(["sleep", "60"], timeout=120).returncode == -9
        assert time.monotonic() - start < 10
    finally:
        proc._STOPPING.clear()


@pytest.mark.tool
def test_a_python_worker_dies_with_the_process_that_started_it(tmp_path):
    """`kill -9` of a command (benchflow bisect) that waits for a worker of run_python (its
    prepare process): the worker, in a session of its own, ran on for seconds without a
    parent. It is killed with it."""
    import signal
    import subprocess
    import sys

    from tests.conftest import REPO

    (tmp_path / "sleeper.py").write_text(
        "import os, sys, time\nfrom workflow.backends.worker_side import worker_main\n"
        "def main(argv):\n    open(argv[0], 'w').write(str(os.getpid()))\n"
        "    time.sleep(60)\nworker_main(main)\n")
    pid_file = tmp_path / "worker.pid"
    parent = subprocess.Popen(
        [sys.executable, "-c", "import sys; from workflow.backends.proc import run_python; "
         f"run_python('sleeper', [{str(pid_file)!r}], stage='s', timeout=120)"],
        env={**os.environ, "PYTHONPATH": f"{REPO}:{tmp_path}"})
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text()):
            assert parent.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        worker = int(pid_file.read_text())
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 5
        while alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(worker), "the worker outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        if pid_file.exists() and pid_file.read_text() and alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
