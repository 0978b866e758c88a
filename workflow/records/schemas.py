"""JSON schemas: one loader for the package's workflow/schemas/*.schema.json and for
schema files by path (config/schema.yaml), and one validator factory.

Every schema is JSON Schema 2020-12. A validator made with `fill_defaults=True` also
writes each missing property's `default` into the instance it validates: jsonschema's
documented "extend_with_default" pattern, so `$ref`, `patternProperties` and `items`
are followed by jsonschema itself. A default is read from the property's own subschema
(a property that is a `$ref` carries its default beside it), and none is filled inside
a branch that may fail (anyOf, oneOf, not, if/then/else, contains): those are checked
on a copy, so that a branch that does not apply leaves nothing behind.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from pathlib import Path

import jsonschema
import yaml
from jsonschema.protocols import Validator


@cache
def load(name: str) -> dict:
    """The package's schema `workflow/schemas/<name>.schema.json` (cached: do not modify)."""
    return json.loads(resources.files("workflow").joinpath(f"schemas/{name}.schema.json")
                      .read_text())


@cache
def read(path: str | Path) -> dict:
    """A schema file by path, YAML or (by its .json suffix) JSON (cached: do not modify)."""
    path = Path(path)
    with path.open() as fh:
        return json.load(fh) if path.suffix == ".json" else yaml.safe_load(fh)


def _on_a_copy(check):
    def run(validator, value, instance, schema):
        return check(validator, value, copy.deepcopy(instance), schema)
    return run


def _fill_defaults(validator, properties, instance, schema):
    if validator.is_type(instance, "object"):
        for name, sub in properties.items():
            if name not in instance and "default" in sub:
                instance[name] = copy.deepcopy(sub["default"])
    yield from _PROPERTIES(validator, properties, instance, schema)


_BASE = jsonschema.Draft202012Validator
_PROPERTIES = _BASE.VALIDATORS["properties"]
_FILLING = jsonschema.validators.extend(_BASE, {
    "properties": _fill_defaults,
    **{k: _on_a_copy(_BASE.VALIDATORS[k]) for k in ("anyOf", "oneOf", "not", "if", "contains")},
})


def validator(schema: dict, *, fill_defaults: bool = False) -> Validator:
    """A 2020-12 validator of `schema`; with fill_defaults, validating an instance also
    fills its missing defaults in place (validate a copy of a valid instance)."""
    return (_FILLING if fill_defaults else _BASE)(schema)
