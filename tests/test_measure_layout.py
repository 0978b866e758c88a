"""workflow/measure/layout.py: a fresh copy of the module and a random environment
padding per invocation (the layout-bias randomization of issue 22)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from workflow.errors import StageError
from workflow.measure import layout


@pytest.fixture
def vmfb(tmp_path):
    path = tmp_path / "model.vmfb"
    path.write_bytes(bytes(range(256)) * 17)
    return path


def test_fresh_module_is_an_identical_copy_under_a_new_random_name(vmfb, tmp_path):
    out = tmp_path / "copies"
    out.mkdir()
    rng = random.Random(1)
    paths = [layout.fresh_module(str(vmfb), out, rng) for _ in range(20)]
    assert len(set(paths)) == 20
    for p in map(Path, paths):
        assert p.parent == out and p.suffix == ".vmfb"
        assert p.read_bytes() == vmfb.read_bytes()
        assert p.stat().st_ino != vmfb.stat().st_ino  # new pages, not a link
    lengths = {len(p) for p in paths}
    assert len(lengths) > 3, "the name's length (argv's) should vary too"


def test_fresh_module_repeats_for_a_seed(vmfb, tmp_path):
    a = layout.fresh_module(vmfb, tmp_path, random.Random(7))
    Path(a).unlink()
    assert layout.fresh_module(vmfb, tmp_path, random.Random(7)) == a
    assert layout.env_padding(random.Random(7)) == layout.env_padding(random.Random(7))


def test_fresh_module_of_a_missing_file_names_it(tmp_path):
    missing = tmp_path / "gone.vmfb"
    with pytest.raises(StageError) as exc:
        layout.fresh_module(missing, tmp_path, random.Random(0))
    assert str(missing) in exc.value.message


def test_env_padding_spans_zero_to_a_page():
    rng = random.Random(3)
    lengths = []
    for _ in range(2000):
        env = layout.env_padding(rng)
        assert list(env) == [layout.PADDING_VAR]
        assert set(env[layout.PADDING_VAR]) <= {"x"}
        lengths.append(len(env[layout.PADDING_VAR]))
    assert min(lengths) >= 0 and max(lengths) <= layout.MAX_PADDING == 4095
    # Spread over the whole page, not a few values: every 16-byte stack alignment.
    assert min(lengths) < 100 and max(lengths) > 4000
    assert len({n % 4096 // 16 for n in lengths}) > 200


def test_randomized_removes_the_copy_even_on_error(vmfb, tmp_path):
    out = tmp_path / "copies"
    out.mkdir()
    with layout.randomized(vmfb, out, random.Random(5)) as (path, env):
        assert open(path, "rb").read() == vmfb.read_bytes()
        assert layout.PADDING_VAR in env
    assert not list(out.iterdir())
    with pytest.raises(RuntimeError), layout.randomized(vmfb, out, random.Random(6)) as _:
        raise RuntimeError("the invocation failed")
    assert not list(out.iterdir())


def test_a_module_above_the_copy_limit_is_used_in_place(vmfb, tmp_path):
    out = tmp_path / "copies"
    out.mkdir()
    size = Path(vmfb).stat().st_size
    assert layout.fresh_module(vmfb, out, random.Random(1), limit=size - 1) == str(vmfb)
    assert not list(out.iterdir())
    assert layout.fresh_module(vmfb, out, random.Random(1), limit=size) != str(vmfb)
