"""Loading and validating suite files against config/schema.yaml.

Validation happens before any job runs: every problem is reported with the file,
the key path and what was expected, and defaults from the schema are filled in so
that the rest of the code never guesses a default of its own.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import yaml

from workflow.errors import ConfigError
from workflow.paths import REPO_ROOT
from workflow.records import schemas
from workflow.records.schemas import key_path, schema_problems

CONFIG_SCHEMA = REPO_ROOT / "config" / "schema.yaml"
DEFAULT_CONFIG = REPO_ROOT / "config" / "config.yaml"


def load_schema(path: str | Path = CONFIG_SCHEMA) -> dict:
    """The suite schema (or another schema file); cached, so do not modify it."""
    return schemas.read(path)


# Limits of a suite file, so that no input can hang the loader or exhaust memory: its
# size, and its YAML nodes counting every use of an alias (a "billion laughs" file is a
# few hundred bytes that expand to 10^9 nodes) and its nesting depth. 200,000 nodes is
# 50,000 explicit [M, K, N] shapes, five times the default max_cases.
MAX_SUITE_BYTES = 4 * 1024 * 1024
MAX_YAML_NODES = 200_000
MAX_NESTING = 64
_MERGE_TAG = "tag:yaml.org,2002:merge"
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _yaml_problem(exc: Exception) -> str:
    """A PyYAML error on one line: its problem and where (line and column, 1-based)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    # PyYAML's own text may span lines (`in "<unicode string>", position 0`): one line.
    return " ".join(f"{context + ': ' if context else ''}{problem}{where}".split())


def _check_nodes(root: yaml.Node, source: str) -> None:
    """Walks a composed YAML document as its data will be built (an alias's node once per
    use) and refuses, naming the key path: more than MAX_YAML_NODES nodes, nesting deeper
    than MAX_NESTING, an alias inside its own anchor, and duplicate keys (PyYAML keeps the
    last silently). Iterative, so no input can exhaust Python's stack."""
    count = 0
    on_path: set[int] = set()
    stack: list = [(root, [], False)]
    while stack:
        node, path, leaving = stack.pop()
        if leaving:
            on_path.discard(id(node))
            continue
        count += 1
        if count > MAX_YAML_NODES:
            raise ConfigError([f"{source}: {key_path(path)}: the document expands to more "
                               f"than {MAX_YAML_NODES:,} YAML nodes (each use of an alias "
                               "counts; an alias bomb?); expected a suite below that"])
        if isinstance(node, yaml.ScalarNode):
            continue
        if id(node) in on_path:
            raise ConfigError([f"{source}: {key_path(path)}: an alias refers to its own "
                               f"anchor (line {node.start_mark.line + 1}); expected data "
                               "without cycles"])
        if len(path) >= MAX_NESTING:
            raise ConfigError([f"{source}: {key_path(path)}: nested deeper than "
                               f"{MAX_NESTING} levels; expected a suite's keys and lists"])
        on_path.add(id(node))
        stack.append((node, path, True))
        if isinstance(node, yaml.SequenceNode):
            stack.extend((item, path + [i], False) for i, item in enumerate(node.value))
            continue
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:  # `<<: *base`: its keys may be overridden
                stack.append((value_node, path, False))
                continue
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else "<complex key>"
            line = key_node.start_mark.line + 1
            if isinstance(key_node, yaml.ScalarNode) and key in seen:
                raise ConfigError([f"{source}: {key_path(path + [key])}: duplicate key "
                                   f"{key!r} at lines {seen[key]} and {line}; expected each "
                                   "key once (YAML would keep only the last)"])
            seen[key] = line
            stack.append((key_node, path + [key], False))
            stack.append((value_node, path + [key], False))


def _check_depth(text: str, source: str) -> None:
    """Refuses nesting deeper than MAX_NESTING from the parser's events, before composing:
    libyaml composes recursively in C, where a deep enough file overflows the stack."""
    depth = 0
    for event in yaml.parse(text, Loader=_YAML_LOADER):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_NESTING:
                raise ConfigError([f"{source}: line {event.start_mark.line + 1}: nested "
                                   f"deeper than {MAX_NESTING} levels; expected a suite's "
                                   "keys and lists"])
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _load_yaml_text(text: str, source: str) -> Any:
    _check_depth(text, source)
    loader = _YAML_LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_nodes(node, source)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _json_pairs(pairs: list) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateJsonKey(key)
        out[key] = value
    return out


class _DuplicateJsonKey(Exception):
    pass


def _load_json_text(text: str, source: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_json_pairs)
    except _DuplicateJsonKey as exc:
        try:  # the YAML composer knows the lines of both (JSON is YAML, nearly always)
            _load_yaml_text(text, source)
        except (yaml.YAMLError, RecursionError):
            pass
        raise ConfigError([f"{source}: duplicate key {exc.args[0]!r}; expected each key "
                           "once (JSON would keep only the last)"]) from None


def read_yaml(path: str | Path) -> Any:
    """Reads a suite file, YAML or JSON (a .json file, or a document that opens with { or [
    and is no valid YAML), refusing with `file: ...: what was expected`: a missing or
    unreadable file, one above MAX_SUITE_BYTES, bytes that are not UTF-8, a syntax error
    (with its line and column), duplicate keys, and alias bombs or deep nesting."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_SUITE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError([f"{path}: file not found"]) from None
    except OSError as exc:
        raise ConfigError([f"{path}: cannot be read ({exc.strerror or exc}); expected a "
                           "readable suite file"]) from None
    if len(data) > MAX_SUITE_BYTES:
        raise ConfigError([f"{path}: larger than {MAX_SUITE_BYTES // 2**20} MiB; expected a "
                           "suite file below that (generate shapes with matrix_shapes)"])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                           f"{exc.start}); expected a UTF-8 YAML or JSON file"]) from None
    text = text.removeprefix("\ufeff")
    as_json = path.suffix.lower() == ".json"
    try:
        if as_json:
            return _load_json_text(text, str(path))
        try:
            return _load_yaml_text(text, str(path))
        except yaml.YAMLError as yaml_exc:
            if not text.lstrip().startswith(("{", "[")):
                raise ConfigError([f"{path}: not valid YAML: {_yaml_problem(yaml_exc)}"]
                                  ) from None
            return _load_json_text(text, str(path))
    except json.JSONDecodeError as exc:
        raise ConfigError([f"{path}: not valid JSON: {exc.msg} at line {exc.lineno}, "
                           f"column {exc.colno}"]) from None
    except RecursionError:
        raise ConfigError([f"{path}: nested too deeply; expected a suite's keys and "
                           "lists"]) from None
    except ValueError as exc:  # a value Python will not build, e.g. a 5,000-digit integer
        raise ConfigError([f"{path}: a value benchflow cannot read: "
                           f"{' '.join(str(exc).split())}"]) from None


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


CHIP_RE = re.compile(r"^[A-Za-z0-9_.+-]+$")


def iree_problems(raw: Any, source: str) -> list[str]:
    """What the schema cannot say about the SKUs' `iree` sections, checked on the raw suite
    (a key it omits takes the schema's default) so that it is reported with every schema
    problem: the runtime device runs the target backend's code, a GPU backend names a chip
    and llvm-cpu none, and the chip is one the installed iree-compile generates code for
    (asked, not listed; its answer is cached on disk per compiler, backend and chip:
    backends.iree.tools.check_target_chip). Values of the wrong type are the schema's."""
    from workflow.backends.iree.tools import TARGETS, check_target_chip

    skus = raw.get("skus", load_schema()["properties"]["skus"]["default"])
    if not isinstance(skus, dict):
        return []
    defaults = {k: v.get("default") for k, v in
                load_schema()["$defs"]["sku"]["properties"]["iree"]["properties"].items()}
    problems = []
    for name, sku in skus.items():
        iree = (sku or {}).get("iree", {}) if isinstance(sku, dict | None) else None
        if not isinstance(iree, dict | None):
            continue
        given = {**defaults, **(iree or {})}
        backend, chip, device = given["target_backend"], given["target_chip"], given["device"]
        if not isinstance(backend, str) or backend not in TARGETS or not isinstance(device, str):
            continue
        target = TARGETS[backend]
        where = f"{source}: {key_path(['skus', name, 'iree'])}"
        if device not in target.devices:
            problems.append(f"{where}.device: {device!r} does not run {backend} code; "
                            f"expected {' or '.join(target.devices)} for target_backend "
                            f"{backend!r} (set iree.device)")
        if target.chip_flag is None:
            if chip is not None:
                problems.append(f"{where}.target_chip: target_backend {backend!r} takes "
                                f"target_cpu, not a chip; expected null, got {chip!r}")
            continue
        if chip is None:
            problems.append(f"{where}.target_chip: required for target_backend {backend!r}; "
                            f"expected a chip iree-compile knows, e.g. {target.example_chip}")
            continue
        if not isinstance(chip, str) or not CHIP_RE.match(chip):
            continue  # the schema's pattern reports it
        answer = check_target_chip(backend, chip)
        if not answer.accepted:
            problems.append(f"{where}.target_chip: iree-compile {answer.compiler} does not "
                            f"compile for {chip!r} ({target.chip_flag}={chip}: "
                            f"{answer.error}); expected a {backend} chip it knows, e.g. "
                            f"{target.example_chip}")
    return problems


def validate_suite(raw: Any, source: str, base_dir: Path | None = None) -> dict:
    """Schema-checks a suite and returns it with defaults applied; raises ConfigError."""
    if raw is None:
        raw = {}
    modules = resolve_model_modules(raw, base_dir, source)
    schema = suite_schema()
    # A model whose optional extra is missing is a known name the suite cannot run yet.
    from workflow.models.registry import unavailable_problems

    problems = (schema_problems(raw, schema, source) + unavailable_problems(raw, source)
                + (iree_problems(raw, source) if isinstance(raw, dict) else []))
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
