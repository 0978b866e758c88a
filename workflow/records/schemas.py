"""JSON schemas: the package's workflow/schemas/*.schema.json (`load`, from
workflow.schemas, the one loader, re-exported for the layers above records), schema
files by path (config/schema.yaml), one validator factory, and one wording of
their problems (`schema_problems`) for every reader of user files.

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
import difflib
import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema_rs
import regress
import yaml
from jsonschema.protocols import Validator

from workflow.errors import key_path
from workflow.files import read_bytes
from workflow.records.storage import MAX_JSON_BYTES
from workflow.schemas import load  # noqa: F401 - the package's schemas, read here too

# libyaml's safe loader where PyYAML was built with it (the same data as the pure-Python
# one, ten times faster): for schema files here and suite files (suite/schema.py).
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@cache
def read(path: str | Path) -> dict:
    """A schema file by path, YAML or (by its .json suffix) JSON (cached: do not modify)."""
    path = Path(path)
    data = read_bytes(path, cap=MAX_JSON_BYTES, what="a schema file")
    # (The pure-Python loader spent 0.1 s of every Snakemake start on config/schema.yaml.)
    return json.loads(data) if path.suffix == ".json" else yaml.load(data, Loader=YAML_LOADER)


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


@cache
def _ecma_regex(pattern: str) -> regress.Regex:
    """`pattern` compiled as JSON Schema defines it, an ECMA-262 regular expression (by
    `regress`, an ECMA-262 engine): its `$` is the end of the string. jsonschema's own
    check uses Python's re.search, whose `$` also matches before a final newline, so a
    name `"cpu\\n"` would pass `^[A-Za-z0-9_.-]+$` and fail later as a file name."""
    return regress.Regex(pattern)


def _pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, "string") and _ecma_regex(pattern).find(instance) is None:
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


_BASE = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": _pattern})
# YAML reads `16.0` as a float, which JSON Schema's "integer" accepts (a number with no
# fraction): suites take integers as written, so that a dimension or a count typed as a
# float is refused instead of becoming "16.0" in an id or a float where a tool wants an int.
_STRICT = jsonschema.validators.extend(_BASE, type_checker=_BASE.TYPE_CHECKER.redefine(
    "integer", lambda _, x: isinstance(x, int) and not isinstance(x, bool)))
_PROPERTIES = _BASE.VALIDATORS["properties"]
_FILLING = jsonschema.validators.extend(_BASE, {
    "properties": _fill_defaults,
    **{k: _on_a_copy(_BASE.VALIDATORS[k]) for k in ("anyOf", "oneOf", "not", "if", "contains")},
})


def validator(schema: dict, *, fill_defaults: bool = False,
              strict_integers: bool = False) -> Validator:
    """A 2020-12 validator of `schema`; with fill_defaults, validating an instance also
    fills its missing defaults in place (validate a copy of a valid instance); with
    strict_integers (checking only, it fills nothing), "integer" takes ints only (not
    16.0). `pattern` follows ECMA-262's
    `$` (end of string), as JSON Schema defines it."""
    if strict_integers:
        return _STRICT(schema)
    return (_FILLING if fill_defaults else _BASE)(schema)


# Problems as users read them, `file: key.path: what was expected`: for suites, golden
# files and benchmark files alike, so here below all of their readers.
def did_you_mean(words: Iterable, names: Iterable) -> str:
    """`; did you mean 'skus'?` for a misspelt name (or `...'skus' for 'skuss',
    'workloads' for 'workload'?` for several): the closest of `names` to each word that
    has one close enough (difflib's ratio 0.6 or more); "" when none has."""
    words, names = [w for w in words if isinstance(w, str)], [str(n) for n in names]
    found = [(w, difflib.get_close_matches(w, names, n=1)) for w in words]
    found = [(w, match[0]) for w, match in found if match]
    if not found:
        return ""
    if len(words) == 1:
        return f"; did you mean {found[0][1]!r}?"
    return "; did you mean " + ", ".join(f"{m!r} for {w!r}" for w, m in found) + "?"


def _expected(error: jsonschema.ValidationError) -> str:
    """Turns a jsonschema error into 'what was expected' wording."""
    v, schema, own = error.validator, error.validator_value, error.schema
    if v == "maxLength" and "x-too-long" in own:  # a length problem, said as one
        return f"expected at most {schema} characters ({own['x-too-long']}), got " \
               f"{error.instance!r}"
    if "x-expected" in own:  # a schema's own wording of what it expects
        text = f"expected {own['x-expected']}, got {error.instance!r}"
        if v == "pattern":  # a name outside a family of names: which, and the closest
            text += f": unknown {own['x-unknown']}" if "x-unknown" in own else ""
            text += did_you_mean([error.instance], own.get("x-names", ()))
        return text
    if v == "additionalProperties" and isinstance(error.instance, dict):
        known = sorted(own.get("properties", {}))
        # YAML keys need not be strings (`1: a`): sort by their text.
        extra = sorted(set(error.instance) - set(known), key=str)
        pattern = list(own.get("patternProperties", {}))
        if pattern:
            return f"keys matching {pattern[0]}, got {extra}"
        return f"unknown key(s) {extra}; expected one of {known}{did_you_mean(extra, known)}"
    if v == "type":
        return f"expected {schema}, got {type(error.instance).__name__} {error.instance!r}"
    if v == "enum":
        return (f"expected one of {schema}, got {error.instance!r}"
                f"{did_you_mean([error.instance], schema)}")
    if v == "required":
        return error.message
    if v in ("minItems", "maxItems") and isinstance(error.instance, list):
        return f"expected {schema} items ({v}), got {len(error.instance)}: {error.instance}"
    if v == "pattern":
        return f"expected a string matching {schema}, got {error.instance!r}"
    return f"expected {v} {schema!r}: {error.message}"


def _branch_errors(error: jsonschema.ValidationError) -> list[jsonschema.ValidationError]:
    """The errors to report for one error: for a failed oneOf/anyOf, those of the branch
    that best matches the instance (its type fits, then jsonschema's best_match, which
    prefers the deepest error below such keywords), expanded again where they are
    oneOf/anyOf themselves; the error itself otherwise, or when no branch's type fits."""
    if error.validator not in ("oneOf", "anyOf") or not error.context:
        return [error]
    branches: dict[int, list[jsonschema.ValidationError]] = {}
    for e in error.context:
        branches.setdefault(e.relative_schema_path[0], []).append(e)
    fitting = [errs for errs in branches.values()
               if not any(e.validator == "type" and not e.relative_path for e in errs)]
    if not fitting:
        return [error]
    best = jsonschema.exceptions.best_match(e for errs in fitting for e in errs)
    branch = next(errs for errs in fitting if any(e is best for e in errs))
    return [leaf for e in branch for leaf in _branch_errors(e)]


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _lines(error: jsonschema.ValidationError, source: str) -> list[tuple[list, str]]:
    """(key path, line) of one leaf error; an unknown key that a schema's `x-obsolete`
    table names gets a line of its own naming its current spelling."""
    path = list(error.absolute_path)
    if error.validator in ("oneOf", "anyOf") and error.context:
        # No branch's type fits the instance: name the types the branches take.
        types = [str(e.validator_value) for e in error.context
                 if e.validator == "type" and not e.relative_path]
        return [(path, f"{source}: {key_path(path)}: expected {' or '.join(types)}, got "
                       f"{type(error.instance).__name__} {_short(error.instance)}")]
    obsolete = error.schema.get("x-obsolete", {})
    if error.validator == "additionalProperties" and isinstance(error.instance, dict) and obsolete:
        known = set(error.schema.get("properties", {}))
        extra = [k for k in error.instance if k not in known]
        out = [(path + [k], f"{source}: {key_path(path + [k])}: obsolete torchao key {k!r} "
                            f"(no published torchao runner reads it); expected "
                            f"{obsolete[k]}") for k in extra if k in obsolete]
        rest = sorted((k for k in extra if k not in obsolete), key=str)
        if rest:
            out.append((path, f"{source}: {key_path(path)}: unknown key(s) {rest}; expected "
                              f"one of {sorted(known)}{did_you_mean(rest, known)}"))
        return out
    return [(path, f"{source}: {key_path(path)}: {_expected(error)}")]


def schema_problems(instance: Any, schema: dict, source: str, *,
                    strict_integers: bool = False) -> list[str]:
    """One line per problem, `file: key.path: what was expected`, sorted by key path."""
    check = validator(schema, strict_integers=strict_integers)
    lines = [line for error in check.iter_errors(instance)
             for leaf in _branch_errors(error) for line in _lines(leaf, source)]
    return [text for _, text in sorted(lines, key=lambda pl: list(map(str, pl[0])))]


def fast_valid(schema: dict, instance: Any) -> bool:
    """Whether `instance` is valid, by jsonschema-rs (the same 2020-12 rules, formats as
    annotations as here, `pattern` by Rust's regex whose `$` is the end of the string, as
    ECMA's): about 200x faster than jsonschema on a report (a 10,000-case report in
    0.07 s instead of about 15 s, which made `benchflow history ingest` miss its 5 s).
    Only a yes is taken from it: a no goes to `validator` for the problem's wording, and
    tests/test_malformed_reports.py feeds both every malformed report it has."""
    return jsonschema_rs.validator_for(schema, validate_formats=False).is_valid(instance)
