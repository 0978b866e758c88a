"""The rules' software environment (envs/benchflow.yaml) says what constraints.txt pins."""

from __future__ import annotations

import re

import yaml

from tests.conftest import REPO


def _pins(lines) -> dict[str, str]:
    out = {}
    for line in lines:
        m = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)==([^\s#]+)\s*(#.*)?", line)
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


def test_env_file_pins_equal_constraints():
    env = yaml.safe_load((REPO / "envs/benchflow.yaml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    env_pins = _pins(pip)
    constraints = _pins((REPO / "constraints.txt").read_text().splitlines())
    assert env_pins["torch"] == "2.13.0"
    assert env_pins, "no pins in envs/benchflow.yaml"
    differ = {k: (v, constraints.get(k)) for k, v in env_pins.items() if constraints.get(k) != v}
    assert not differ, f"envs/benchflow.yaml vs constraints.txt: {differ}"
