"""What a model's forward must return: a tensor, or a tuple (list, dict) of them, nested as
deep as it likes, with at least one tensor. Anything else (None from a forgotten
`return`, a string, a dict of numbers, a tuple holding a None) is the model's failure,
said before any accuracy is judged: the outputs would otherwise be compared as no tensor
against no tensor, and two empty lists agree perfectly (PCC 1.0, ok).

Kept with the models (workflow/models/) on purpose: an error raised here is the model's,
not benchflow's (errors.raised_in_own_code), so it fails the case and not the job."""

from __future__ import annotations

from collections.abc import Mapping

EXPECTED = "expected a tensor or a tuple of tensors"


def _kind(value) -> str:
    return type(value).__name__


def output_problem(out) -> str | None:
    """Why `out` is not a model's output (`NoneType`, `a tuple holding str at [1]`,
    `an empty tuple`), or None when it is one."""
    import torch

    if isinstance(out, torch.Tensor):
        return None
    if not isinstance(out, tuple | list | Mapping):
        return _kind(out)
    leaves: list[tuple[str, object]] = []

    def walk(value, where: str) -> None:
        if isinstance(value, tuple | list):
            for i, item in enumerate(value):
                walk(item, f"{where}[{i}]")
        elif isinstance(value, Mapping):
            for key, item in value.items():
                walk(item, f"{where}[{key!r}]")
        else:
            leaves.append((where, value))

    walk(out, "")
    bad = next(((where, v) for where, v in leaves if not isinstance(v, torch.Tensor)), None)
    if bad is not None:
        return f"a {_kind(out)} holding {_kind(bad[1])} at {bad[0]}"
    if not leaves:
        return f"an empty {_kind(out)}"
    return None


def checked_outputs(out, what: str = "forward"):
    """`out` itself when it is a model's output (output_problem); else raises TypeError
    "forward returned NoneType; expected a tensor or a tuple of tensors", the case's
    failure."""
    problem = output_problem(out)
    if problem is not None:
        raise TypeError(f"{what} returned {problem}; {EXPECTED}")
    return out
