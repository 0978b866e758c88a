"""tests/shared_tools.py's WarmCommands: a command run in a fork of the warm
interpreter answers as the installed script does, and leaves nothing behind for the
next command (a model one suite's model_modules registered is unknown to the next)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import tiny_suite, write_suite
from tests.shared_tools import WarmCommands

PROBE = '''
from workflow.models.common import finish, seeded
from workflow.models.registry import benchmark_model


@benchmark_model(default_shape=(4, 8), shape_doc="[rows, width]")
def warm_probe(config, dtype, layers, shape):
    """Registered only by the suite that names this file."""
    import torch

    return finish(torch.nn.Linear(shape[1], shape[1]),
                  (torch.randn(*shape, generator=seeded()),), dtype)
'''


@pytest.mark.tool
def test_a_warm_command_answers_as_the_script_and_leaves_nothing_behind(tmp_path):
    (tmp_path / "probe.py").write_text(PROBE)
    workloads = [{"model": "warm_probe", "shapes": [[4, 8]]}]
    write_suite(tmp_path / "with.yaml", tiny_suite(model_modules=["probe.py"],
                                                   workloads=workloads))
    write_suite(tmp_path / "without.yaml", tiny_suite(workloads=workloads))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
                                 f"{os.environ.get('PATH', '')}"}
    (tmp_path / "outputs").mkdir()
    warm = WarmCommands(tmp_path / "outputs", programs=("benchflow",))
    try:
        registered = warm.run(["benchflow", "validate", "with.yaml"], tmp_path, env)
        assert registered.returncode == 0, registered.stderr
        # The model the first command registered is unknown here (exit 1), as in a
        # process of its own; an unknown command is argparse's exit 2.
        for argv, code, says in ((["benchflow", "validate", "without.yaml"], 1, "warm_probe"),
                                 (["benchflow", "frobnicate"], 2, "frobnicate")):
            forked = warm.run(argv, tmp_path, env)
            real = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True,
                                  text=True, timeout=300)
            assert real.returncode == code and says in real.stderr, real.stderr
            assert (forked.returncode, forked.stdout, forked.stderr) == \
                (real.returncode, real.stdout, real.stderr)
        with pytest.raises(FileNotFoundError):
            warm.run(["benchflow", "--list"], tmp_path, {**env, "PATH": str(tmp_path)})
        # Past its timeout a command is killed and TimeoutExpired raised, as
        # subprocess.run does (a hung run is never a plain failed exit); the server
        # goes on serving.
        (tmp_path / "hang.py").write_text("import time\ntime.sleep(600)\n")
        write_suite(tmp_path / "hang.yaml", tiny_suite(model_modules=["hang.py"]))
        with pytest.raises(subprocess.TimeoutExpired):
            warm.run(["benchflow", "validate", "hang.yaml"], tmp_path, env, timeout=3)
        assert warm.run(["benchflow", "validate", "with.yaml"], tmp_path, env).returncode == 0
    finally:
        warm.close()
