"""Helpers that make tests start fewer Python interpreters.

`WarmCommands`: a test that runs many cheap `benchflow` or `snakemake` command lines
pays, per line, the interpreter's start and its imports (scipy, pandas, Snakemake's
own: 1.5 to 2.5 s of CPU) for a command whose own work is a fraction of that. One
server process imports the command modules once; each command line then runs in a
fork of it: a process of its own (its own cwd, environment, argv, stdout and stderr,
exit status; nothing it registers or caches reaches the next one), started with the
imports already done. The child runs the console script's own `sys.exit(main())` and
ends as the interpreter ends (atexit handlers, flushes, an uncaught exception's
traceback and status 1), so what it prints and returns is what the installed
`benchflow` or `snakemake` script prints and returns.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

# The server: imports `preload`, then per request line (JSON: argv, cwd, env, timeout,
# and the files for the command's stdout and stderr) forks; the child becomes the
# command, the server waits for it and answers with a line (JSON: its exit status and
# CPU seconds). Requests on stdin, answers on the pipe whose fd is argv[1]: a child's
# stdout is never mixed into an answer.
SERVER = r'''
import gc, importlib, json, os, signal, sys, time
answers = os.fdopen(int(sys.argv[1]), "w", buffering=1)
for name in json.loads(sys.argv[2]):
    module, _, call = name.partition(":")
    loaded = importlib.import_module(module)
    if call:
        getattr(loaded, call)()
# The preloaded objects out of the collector's reach: a child's collections would
# otherwise touch, and so copy, every page of them.
gc.freeze()
ENTRY = {"benchflow": ("workflow.cli.main", "main"), "snakemake": ("snakemake.cli", "main")}


def serve():
    for line in sys.stdin:
        req = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            return req  # the child: becomes the command below
        deadline, timed_out = time.monotonic() + req["timeout"], False
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                break
            timed_out = time.monotonic() > deadline
            if timed_out:
                os.kill(pid, signal.SIGKILL)
                _, status, usage = os.wait4(pid, 0)
                break
            time.sleep(0.01)
        answers.write(json.dumps({"rc": os.waitstatus_to_exitcode(status),
                                  "timed_out": timed_out,
                                  "cpu_s": usage.ru_utime + usage.ru_stime}) + "\n")
    sys.exit(0)


req = serve()
answers.close()
os.chdir(req["cwd"])
os.environ.clear()
os.environ.update(req["env"])
for fd, path, mode in ((0, os.devnull, os.O_RDONLY),
                       (1, req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                       (2, req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
    opened = os.open(path, mode, 0o600)
    os.dup2(opened, fd)
    os.close(opened)
sys.argv = [req["script"], *req["argv"][1:]]
module, func = ENTRY[req["argv"][0]]
sys.exit(getattr(importlib.import_module(module), func)())
'''

# What a command line's first word imports (scipy.stats is most of it: the CLI's
# statistics import it on first use), so that a child imports only what its own command
# needs beyond them; "module:function" also calls the function, here the parser every
# `benchflow` command builds first, which reads (and caches) the repository's schema
# files, the same bytes for every command.
PRELOAD = {"benchflow": ("workflow.cli.main", "workflow.commands.validate",
                         "workflow.planning.plan", "scipy.stats",
                         "workflow.cli.main:build_parser"),
           "snakemake": ("snakemake.cli", "workflow.planning.plan", "scipy.stats", "pandas")}


class WarmCommands:
    """Runs `benchflow ...` and `snakemake ...` argv lists each in a fork of one warm
    interpreter; `run` answers as subprocess.run(capture_output=True, text=True) does."""

    def __init__(self, scratch: Path, programs=("benchflow", "snakemake")):
        self.scratch = scratch
        self.count = 0
        self.cpu_s = 0.0  # the commands' CPU time (user and system), all together
        preload = list(dict.fromkeys(m for p in programs for m in PRELOAD[p]))
        read, write = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(write), json.dumps(preload)],
            stdin=subprocess.PIPE, pass_fds=(write,), text=True)
        os.close(write)
        self.answers = os.fdopen(read)

    def run(self, argv: list[str], cwd: Path, env: dict, timeout: float = 300,
            script: str | None = None) -> subprocess.CompletedProcess:
        """`script`: the program's path as its argv[0] (`python -m snakemake`, which needs
        no PATH); by default the console script on the env's PATH, as a shell finds it:
        none there fails as subprocess.run would."""
        assert argv[0] in PRELOAD, argv
        script = script or shutil.which(argv[0], path=env.get("PATH"))
        if script is None:
            raise FileNotFoundError(f"{argv[0]}: not on PATH")
        self.count += 1
        out, err = (self.scratch / f"{self.count}.{n}" for n in ("out", "err"))
        self.proc.stdin.write(json.dumps({
            "argv": argv, "cwd": str(cwd), "env": env, "timeout": timeout,
            "script": script, "stdout": str(out), "stderr": str(err)}) + "\n")
        self.proc.stdin.flush()
        line = self.answers.readline()
        assert line, f"the command server ended (status {self.proc.poll()})"
        answer = json.loads(line)
        self.cpu_s += answer["cpu_s"]
        if answer["timed_out"]:  # killed, as subprocess.run kills and raises
            raise subprocess.TimeoutExpired(argv, timeout, out.read_text(), err.read_text())
        return subprocess.CompletedProcess(argv, answer["rc"], out.read_text(),
                                           err.read_text())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self.answers.close()
