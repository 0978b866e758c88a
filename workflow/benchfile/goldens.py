"""A benchmark file's own goldens: which of its fields hold them (per golden key), and
blessing them back into the user's file, atomically and keeping every other field."""

from __future__ import annotations

import json
from pathlib import Path

from workflow.errors import ConfigError
from workflow.records.storage import read_json_file, write_text

# The file's golden fields -> the names a golden has in benchflow (GoldenRef's).
GOLDEN_FIELDS = {"golden_time_ms": "median_ms", "golden_time_tolerance_multiplier": "tolerance",
                 "golden_dispatch": "dispatch_count", "golden_size": "binary_bytes"}


def of_key(data: dict, key: str) -> dict:
    """A file's goldens for one SKU key, in benchflow's names; only the fields it has."""
    return {ours: data[theirs][key] for theirs, ours in GOLDEN_FIELDS.items()
            if key in data.get(theirs, {})}


def read_for_update(path: str | Path, case_id: str) -> dict:
    """A benchmark file as it is (every field kept), to record goldens in; ConfigError
    naming the case whose goldens it was to take when it cannot be read."""
    try:
        return read_json_file(path, unique_keys=True)
    except ConfigError as exc:
        raise ConfigError([f"{p} (cannot update the goldens of this benchmark file, case "
                           f"{case_id})" for p in exc.problems]) from None


def set_goldens(data: dict, key: str, figures: dict) -> list[tuple[str, object, object]]:
    """Writes `figures` (benchflow's names; None: left as it is) into the file's golden
    fields under `key`; returns (field, old, new) of each field set."""
    changed = []
    for theirs, ours in GOLDEN_FIELDS.items():
        value = figures.get(ours)
        if value is None:
            continue
        old = data.setdefault(theirs, {}).get(key)
        data[theirs][key] = value
        changed.append((theirs, old, value))
    return changed


# A torch_models test's golden fields (one per test, no key): benchmark tests hold a
# time, compstat tests a dispatch count and a binary size (torch_plan.goldens_of).
TORCH_MODELS_FIELDS = {"benchmark": {"golden_time_ms": "median_ms"},
                       "compstat": {"golden_dispatch_count": "dispatch_count",
                                    "golden_binary_size": "binary_bytes"}}


def set_test_goldens(data: dict, kind: str, figures: dict) -> list[tuple[str, object, object]]:
    """set_goldens for a torch_models test file of type `kind`: only the fields its type
    has (a quality test has none), unkeyed, as the harness reads them."""
    changed = []
    for theirs, ours in TORCH_MODELS_FIELDS.get(kind, {}).items():
        if figures.get(ours) is not None:
            changed.append((theirs, data.get(theirs), figures[ours]))
            data[theirs] = figures[ours]
    return changed


def write_file(path: str | Path, data: dict) -> None:
    """Writes a benchmark file back atomically (records.storage.write_text): a crash or a
    full disk leaves the user's file whole, old or new."""
    # A file that is a link (into a checkout of iree-test-suites) is updated where it
    # points, as writing it in place did: write_text writes through links (files.py).
    # IREE's files are indented by 4; keep them diff-friendly for its reviewers.
    write_text(path, json.dumps(data, indent=4) + "\n")
