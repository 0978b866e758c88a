"""Loading and validating suite files against config/schema.yaml.

Validation happens before any job runs: every problem is reported with the file,
the key path and what was expected, and defaults from the schema are filled in so
that the rest of the code never guesses a default of its own.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from workflow.errors import ConfigError
from workflow.paths import REPO_ROOT
from workflow.records import schemas

CONFIG_SCHEMA = REPO_ROOT / "config" / "schema.yaml"
DEFAULT_CONFIG = REPO_ROOT / "config" / "config.yaml"


def load_schema(path: str | Path = CONFIG_SCHEMA) -> dict:
    """The suite schema (or another schema file); cached, so do not modify it."""
    return schemas.read(path)


def read_yaml(path: str | Path) -> Any:
    """Reads a YAML (or JSON) file; a syntax error names the file and line."""
    path = Path(path)
    try:
        with path.open() as fh:
            return yaml.safe_load(fh)
    except FileNotFoundError:
        raise ConfigError([f"{path}: file not found"]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([f"{path}: not valid YAML: {exc}"]) from None


def key_path(parts) -> str:
    """`skus.cpu-host.measurement.invocations`, `workloads[2].model`; `<top>` for the root."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top>"


def _expected(error: jsonschema.ValidationError) -> str:
    """Turns a jsonschema error into 'what was expected' wording."""
    v, schema = error.validator, error.validator_value
    if "x-expected" in error.schema:  # a schema's own wording of what it expects
        return f"expected {error.schema['x-expected']}, got {error.instance!r}"
    if v == "additionalProperties" and isinstance(error.instance, dict):
        known = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(known))
        pattern = list(error.schema.get("patternProperties", {}))
        if pattern:
            return f"keys matching {pattern[0]}, got {extra}"
        return f"unknown key(s) {extra}; expected one of {known}"
    if v == "type":
        return f"expected {schema}, got {type(error.instance).__name__} {error.instance!r}"
    if v == "enum":
        return f"expected one of {schema}, got {error.instance!r}"
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
        rest = sorted(k for k in extra if k not in obsolete)
        if rest:
            out.append((path, f"{source}: {key_path(path)}: unknown key(s) {rest}; expected "
                              f"one of {sorted(known)}"))
        return out
    return [(path, f"{source}: {key_path(path)}: {_expected(error)}")]


def schema_problems(instance: Any, schema: dict, source: str) -> list[str]:
    """One line per problem, `file: key.path: what was expected`, sorted by key path."""
    validator = schemas.validator(schema)
    lines = [line for error in validator.iter_errors(instance)
             for leaf in _branch_errors(error) for line in _lines(leaf, source)]
    return [text for _, text in sorted(lines, key=lambda pl: list(map(str, pl[0])))]


def suite_schema() -> dict:
    """config/schema.yaml plus what only the model registry knows: model names, each
    model's configs, whether it has layers, its shape rank. Checking these in the schema
    reports them together with every other problem in one pass."""
    from workflow.models.registry import all_models

    schema = copy.deepcopy(load_schema())
    workload = schema["$defs"]["workload"]
    models = all_models()
    workload["properties"]["model"]["enum"] = list(models)
    rules = []
    for name, spec in models.items():
        then: dict = {"properties": {
            "configs": {"items": {"enum": list(spec.configs)}},
            "shapes": {"items": {"minItems": len(spec.default_shape),
                                 "maxItems": len(spec.default_shape)}},
        }}
        if not spec.supports_layers:
            then["properties"]["layers"] = {"type": "null"}
        rules.append({"if": {"properties": {"model": {"const": name}}, "required": ["model"]},
                      "then": then})
    workload["allOf"] = rules
    from workflow.backends.torch.recipes import RECIPE_HELP, RECIPE_PATTERN

    schema["$defs"]["recipe_name"].update({"pattern": RECIPE_PATTERN, "x-expected": RECIPE_HELP})
    return schema


def resolve_model_modules(raw: Any, base_dir: Path | None, source: str) -> list[str]:
    """Imports a suite's `model_modules` (before validation: they add model names) and
    returns their absolute paths; the export stage imports them again in its process."""
    from workflow.models.registry import load_model_files

    if not isinstance(raw, dict) or not isinstance(raw.get("model_modules"), list):
        return []
    paths = []
    for i, entry in enumerate(raw["model_modules"]):
        if not isinstance(entry, str):
            continue  # the schema reports it
        path = Path(entry) if Path(entry).is_absolute() else (base_dir or Path.cwd()) / entry
        try:
            load_model_files([path])
        except Exception as exc:
            raise ConfigError([f"{source}: model_modules[{i}]: could not import {path}: "
                               f"{type(exc).__name__}: {exc}"]) from None
        paths.append(str(path.resolve()))
    return paths


def validate_suite(raw: Any, source: str, base_dir: Path | None = None) -> dict:
    """Schema-checks a suite and returns it with defaults applied; raises ConfigError."""
    if raw is None:
        raw = {}
    modules = resolve_model_modules(raw, base_dir, source)
    schema = suite_schema()
    # A model whose optional extra is missing is a known name the suite cannot run yet.
    from workflow.models.registry import unavailable_problems

    problems = schema_problems(raw, schema, source) + unavailable_problems(raw, source)
    if problems:
        raise ConfigError(problems)
    suite = copy.deepcopy(raw)
    schemas.validator(schema, fill_defaults=True).validate(suite)
    suite["model_modules"] = modules
    return suite


def deep_merge(base: dict, override: dict) -> dict:
    """Snakemake's --config semantics: nested dicts merge, everything else replaces."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
