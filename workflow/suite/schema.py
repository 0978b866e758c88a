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

from workflow.errors import ConfigError, key_path
from workflow.files import file_problem, read_bytes
from workflow.paths import REPO_ROOT
from workflow.records import schemas
from workflow.records.schemas import YAML_LOADER, schema_problems
from workflow.suite.goldens_dir import goldens_dir_problems
from workflow.suite.torchao import override_problems, with_torchao_skus

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
            not_str = _yaml_key_kind(key_node)
            if not_str:
                text = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
                raise ConfigError([f"{source}: {key_path(path)}: "
                                   f"{_key_problem(text, not_str, line)}"])
            if isinstance(key_node, yaml.ScalarNode) and key in seen:
                raise ConfigError([f"{source}: {key_path(path + [key])}: duplicate key "
                                   f"{key!r} at lines {seen[key]} and {line}; expected each "
                                   "key once (YAML would keep only the last)"])
            seen[key] = line
            stack.append((key_node, path + [key], False))
            stack.append((value_node, path + [key], False))


# What YAML makes of an unquoted key that is no string (by the tag its resolver gives).
_KEY_KINDS = {"int": "an integer", "float": "a number", "bool": "a boolean", "null": "null",
              "timestamp": "a date", "binary": "binary data"}
_STR_TAG = "tag:yaml.org,2002:str"


def _yaml_key_kind(node: yaml.Node) -> str | None:
    """What a key node is when it is no string (`3090:`, `~:`, `true:`, `1.5:`, a list),
    else None. Names are looked up, compared and matched as strings (jsonschema's
    patterns raise TypeError on an int), so a key must be one."""
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if node.tag == _STR_TAG:
        return None
    return _KEY_KINDS.get(node.tag.rpartition(":")[2], f"tagged {node.tag}")


def _key_problem(text: str | None, kind: str, line: int | None = None) -> str:
    """The wording of a key that is no string, `text` as the file spells it (None: a list
    or a mapping, which no quoting makes a name)."""
    where = f", line {line}" if line else ""
    if text is None:
        return f"a key is {kind}; expected a string name{f' ({where[2:]})' if line else ''}"
    return (f"key {text or '(empty)'} is {kind}; expected a string name (quote it: "
            f"{json.dumps(text)}{where})")


def _python_key_kind(key: Any) -> tuple[str | None, str]:
    """(the key as YAML would spell it, what it is) for a key built in Python."""
    if key is None or isinstance(key, bool):
        return json.dumps(key), "null" if key is None else "a boolean"
    if isinstance(key, tuple | frozenset):
        return None, "a list"
    kinds = {int: "an integer", float: "a number"}
    kind = next((k for t, k in kinds.items() if isinstance(key, t)),
                "a date" if hasattr(key, "isoformat") else f"a {type(key).__name__}")
    return str(key), kind


def key_type_problems(data: Any, source: str) -> list[str]:
    """Keys that are no strings anywhere in a suite built in Python (--config overrides,
    `benchflow run`'s one-case suite); a file's are refused as it is read, naming the
    line. Iterative: no depth of nesting exhausts the stack."""
    problems, stack = [], [(data, [])]
    while stack:
        node, path = stack.pop()
        if isinstance(node, list):
            stack.extend((item, path + [i]) for i, item in enumerate(node))
        elif isinstance(node, dict):
            for key, value in node.items():
                if isinstance(key, str):
                    stack.append((value, path + [key]))
                else:
                    problems.append(f"{source}: {key_path(path)}: "
                                    f"{_key_problem(*_python_key_kind(key))}")
    return sorted(problems)


def _check_depth(text: str, source: str) -> None:
    """Refuses nesting deeper than MAX_NESTING from the parser's events, before composing:
    libyaml composes recursively in C, where a deep enough file overflows the stack."""
    depth = 0
    for event in yaml.parse(text, Loader=YAML_LOADER):
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
    loader = YAML_LOADER(text)
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
    unreadable file, one that is no regular file (a FIFO, a device, a directory, a link
    loop: files.read_bytes), one above MAX_SUITE_BYTES, bytes that are not UTF-8, a syntax error
    (with its line and column), duplicate keys, and alias bombs or deep nesting."""
    path = Path(path)
    # A FIFO, a device, a directory or a link loop is refused, never read (files.py).
    data = read_bytes(path, cap=MAX_SUITE_BYTES, what="a suite file",
                      hint=" (generate shapes with matrix_shapes)")
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
    # The registered names decide: a name outside them (`"linear\n"` too) fails the enum
    # alone, not the enum and the schema file's pattern twice over.
    workload["properties"]["model"]["enum"] = list(models)
    workload["properties"]["model"].pop("pattern", None)
    workload["properties"]["configs"]["items"].pop("pattern", None)
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
    from workflow.backends.torch.recipes import (
        ACCURACY_KEY_PATTERN,
        FAMILY_NAMES,
        FIXED,
        GROUP_SIZES,
        RECIPE_HELP,
        RECIPE_PATTERN,
    )

    # A name outside the pattern is an unknown recipe, said so with the closest known
    # one; a known one too long for a file name is a length problem.
    grouped = [f"int4wo-{g}" for g in GROUP_SIZES] + [f"int4wo-{g}-hqq" for g in GROUP_SIZES] \
        + [f"8da4w-{g}" for g in GROUP_SIZES]
    schema["$defs"]["recipe_name"].update({
        "pattern": RECIPE_PATTERN, "x-expected": RECIPE_HELP, "x-unknown": "recipe",
        "x-names": [*FIXED, *grouped], "x-too-long": "it names files"})
    rules = schema["properties"]["accuracy"]["properties"]["recipes"]["propertyNames"]
    # Not "unknown": baseline is a known recipe that this key may not name.
    rules.update({"pattern": ACCURACY_KEY_PATTERN,
                  "x-names": [*FAMILY_NAMES.values(), *FIXED[1:], *grouped]})
    return schema


def resolve_model_modules(raw: Any, base_dir: Path | None, source: str) -> list[str]:
    """Imports a suite's `model_modules` (before validation: they add model names) and
    returns their absolute paths; the export stage imports them again in its process."""
    from workflow.models.registry import RegistrationError, load_model_files

    if not isinstance(raw, dict) or not isinstance(raw.get("model_modules"), list):
        return []
    paths = []
    for i, entry in enumerate(raw["model_modules"]):
        if not isinstance(entry, str):
            continue  # the schema reports it
        path = Path(entry) if Path(entry).is_absolute() else (base_dir or Path.cwd()) / entry
        problem = file_problem(path)  # importing a FIFO would block, a loop raise
        if problem:
            raise ConfigError([f"{source}: model_modules[{i}]: {path} {problem}; expected a "
                               "Python file"])
        try:
            load_model_files([path])
        except RegistrationError as exc:  # a name its decorator refused, already worded
            raise ConfigError([f"{source}: model_modules[{i}]: {path}: {exc}"]) from None
        except Exception as exc:
            raise ConfigError([f"{source}: model_modules[{i}]: could not import {path}: "
                               f"{type(exc).__name__}: {exc}"]) from None
        paths.append(str(path.resolve()))
    return paths


CHIP_RE = re.compile(r"[A-Za-z0-9_.+-]+")  # fullmatch: no trailing newline


def iree_problems(raw: Any, source: str) -> list[str]:
    """What the schema cannot say about the SKUs' `iree` sections, checked on the raw suite
    (a key it omits takes the schema's default) so that it is reported with every schema
    problem: compile_flags are on the allow-list (backends.iree.allowed_flags, unless the
    SKU opts out), the runtime device runs the target backend's code, a GPU backend names a chip
    and llvm-cpu none, and the chip is one the installed iree-compile generates code for
    (asked, not listed; its answer is cached on disk per compiler, backend and chip:
    backends.iree.tools.check_target_chip), or `auto` for a backend whose chip can be
    chosen on the measuring machine (not asked here). Values of the wrong type are the
    schema's."""
    from workflow.backends.iree.allowed_flags import sku_flag_problems
    from workflow.backends.iree.tools import TARGETS

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
        problems += sku_flag_problems(given, source, name)
        backend, chip, device = given["target_backend"], given["target_chip"], given["device"]
        if not isinstance(backend, str) or backend not in TARGETS or not isinstance(device, str):
            continue
        target = TARGETS[backend]
        where = f"{source}: {key_path(['skus', name, 'iree'])}"
        if device not in target.devices:
            problems.append(f"{where}.device: {device!r} does not run {backend} code; "
                            f"expected {' or '.join(target.devices)} for target_backend "
                            f"{backend!r} (set iree.device)")
        problems += _chip_problems(where, backend, chip)
    return problems


def _chip_problems(where: str, backend: str, chip: Any) -> list[str]:
    """What is wrong with a SKU's `iree.target_chip` for its target backend (iree_problems)."""
    from workflow.backends.iree.gpu_chip import AUTO_BACKENDS, AUTO_CHIP
    from workflow.backends.iree.tools import TARGETS, check_target_chip

    target = TARGETS[backend]
    if target.chip_flag is None:
        if chip is None:
            return []
        return [f"{where}.target_chip: target_backend {backend!r} takes target_cpu, not a "
                f"chip; expected null, got {chip!r}"
                + (" (this machine's CPU is target_cpu: host)" if chip == AUTO_CHIP else "")]
    if chip is None:
        return [f"{where}.target_chip: required for target_backend {backend!r}; expected a "
                f"chip iree-compile knows, e.g. {target.example_chip}"]
    if not isinstance(chip, str) or not CHIP_RE.fullmatch(chip):
        return []  # the schema's pattern reports it
    if chip == AUTO_CHIP:
        # Chosen on the machine that measures (gpu_chip.resolve_auto_chip): nothing to ask
        # the compiler here, where the GPU may not be.
        if backend in AUTO_BACKENDS:
            return []
        return [f"{where}.target_chip: {AUTO_CHIP!r} is chosen from the device's compute "
                f"capability, for target_backend {' or '.join(AUTO_BACKENDS)} only; "
                f"{backend} chip names are not ordered, so name the chip, e.g. "
                f"{target.example_chip}"]
    answer = check_target_chip(backend, chip)
    if answer.accepted:
        return []
    return [f"{where}.target_chip: iree-compile {answer.compiler} does not compile for "
            f"{chip!r} ({target.chip_flag}={chip}: {answer.error}); expected a {backend} "
            f"chip it knows, e.g. {target.example_chip}"]


def validate_suite(raw: Any, source: str, base_dir: Path | None = None) -> dict:
    """Schema-checks a suite and returns it with defaults applied; raises ConfigError."""
    if raw is None:
        raw = {}
    # Before anything looks a name up: jsonschema's patterns raise TypeError on an int key.
    problems = key_type_problems(raw, source)
    if problems:
        raise ConfigError(problems)
    modules = resolve_model_modules(raw, base_dir, source)
    raw = with_torchao_skus(raw)
    schema = suite_schema()
    # A model whose optional extra is missing is a known name the suite cannot run yet.
    from workflow.models.registry import unavailable_problems

    problems = (schema_problems(raw, schema, source, strict_integers=True)
                + unavailable_problems(raw, source)
                + goldens_dir_problems(raw, source, load_schema()["properties"]["goldens"]
                                       ["properties"]["dir"]["default"])
                + override_problems(raw, source)
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
