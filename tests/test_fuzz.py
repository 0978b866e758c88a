"""Property-based tests (Hypothesis) of benchflow's file readers.

Five readers take files written by people or by other tools: the suite loader, the
torchao translator (the same loader on torchao's microbenchmark YAML), the sharktank
benchmark-file loader (alone and through a suite's `benchmark_files`), the goldens
loader and the report reader. The property of each: whatever the file holds (random
JSON-like values; a real document with keys deleted, values of other types, strings
with odd characters, huge numbers, NaN, deep nesting; random bytes; truncated text),
the reader gives a valid result or a ConfigError (ReportError is one) whose every
problem starts with the file's path, never another exception, and answers in time.

The documents start from the real files in tests/data (upstream torchao and sharktank
files, the report fixtures) and are mutated from there. The seed is fixed
(derandomize) and the example count bounded, so CI runs the same examples every time.
"""

from __future__ import annotations

import copy
import faulthandler
import json
import os
import re
import shutil
import signal
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.conftest import DATA, REPO, tiny_suite
from workflow.benchfile.attach import attach
from workflow.benchfile.parse import load_file
from workflow.errors import ConfigError
from workflow.records.report import read_report
from workflow.regression import goldens
from workflow.suite.load import load

# Per property: the whole file stays well under a minute on 2 cores; `make check` (the
# fast tier) tries fewer, `make test` this many.
EXAMPLES = int(os.environ.get("BENCHFLOW_FUZZ_EXAMPLES", "150"))
# Hypothesis' deadline (generous: a slow machine is no failure) and a hard guard that
# interrupts an example that never answers, where the deadline only judges afterwards.
DEADLINE_MS = 5000
HANG_GUARD_S = 20
# Past this, a reader stuck inside C code (where no signal handler runs) ends the test
# process with every thread's traceback on stderr: a hang never passes silently.
HARD_KILL_S = 120

FUZZ = settings(max_examples=EXAMPLES, deadline=DEADLINE_MS, derandomize=True,
                database=None, print_blob=False, suppress_health_check=list(HealthCheck))

# --- the real documents mutated ---------------------------------------------------------


def _yaml(path: Path):
    return yaml.safe_load(path.read_text())


def _json(path: Path):
    return json.loads(path.read_text())


def _goldens_base() -> dict:
    """A valid goldens file: the ok cases of SKU generic in the IREE report fixture."""
    report = _json(DATA / "report_iree.json")
    doc = goldens.empty("generic")
    for case in report["cases"]:
        if case["sku"] == "generic" and case["status"] == "ok" and case.get("timing"):
            doc["cases"][case["id"]] = goldens.entry_from_case(
                case, report, "report.json", goldens.DEFAULT_GRANULARITY,
                "2026-01-02T03:04:05+00:00")
    assert doc["cases"] and not goldens.problems_of(doc, "x")
    return doc


SUITE_BASES = [_yaml(REPO / "config" / "config.yaml"), tiny_suite()]
TORCHAO_FILES = sorted((DATA / "upstream" / "torchao").rglob("*.yml")) + [
    DATA / "torchao_microbenchmark.yml"]
TORCHAO_BASES = [_yaml(p) for p in TORCHAO_FILES]
SHARKTANK_FILES = sorted((DATA / "upstream" / "sharktank").rglob("*.json"))
SHARKTANK_BASES = [(p.name, _json(p)) for p in SHARKTANK_FILES]
REPORT_BASES = [_json(DATA / "report_iree.json"), _json(DATA / "report_torch.json")]
GOLDENS_BASES = [_goldens_base()]

# Stand-ins replaced in the serialized text: values that no serializer writes itself.
HUGE = "@@HUGE@@"  # an integer of 5000 digits (past Python's int/str conversion limit)
DEEP = "@@DEEP@@"  # lists nested far past any recursion limit
_STAND_IN = re.compile(r"""(["']?)(@@HUGE@@|@@DEEP@@)\1""")
DEPTH = 3_000

ODD_STRINGS = [
    "", " ", "\x00", "\t\n", "\r\n", "\u2028", "\ufeff", "\U0001f600", "é", "İ", "ß",
    "../../../etc/passwd", "/", ".", "..", "*", "?", "[", "{", "}", "%s", "${HOME}",
    "~", ": ", "- x", "&a", "*a", "!!python/object:os.system", "null", "true", "NaN",
    "-Infinity", "1e999", "0x10", "١٢٣", "²", "x" * 10_000, "a\nb: c",
    "--iree-hal-target-backends=", "--benchmark_repetitions=abc",
    "--benchmark_min_warmup_time=", "--benchmark_repetitions=" + "9" * 400,
    "--benchmark_min_warmup_time=" + "9" * 400, "1x2x3xf32=@../x.bin", "@/dev/zero",
    "1x" * 300 + "f32",
    "9" * 5000 + "xf32", "²x3xf32", "torch.bfloat16", "custom", "llama", "pow2",
    "host/iree/x/baseline", "generic/iree/linear-f32/baseline",
]
HUGE_NUMBERS = [10**30, -(10**30), 2**63, 2**64 + 1, -(2**63) - 1, 1e308, -1e308, 5e-324,
                -0.0, 0, -1, 2**31, 10**18, HUGE]
NON_FINITE = [float("nan"), float("inf"), float("-inf")]

odd_text = st.one_of(st.sampled_from(ODD_STRINGS), st.text(max_size=20))
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.sampled_from(HUGE_NUMBERS),
    st.floats(allow_nan=True, allow_infinity=True), odd_text)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(odd_text, inner, max_size=4)),
    max_leaves=12)
nested_junk = st.one_of(
    st.just(DEEP),
    st.integers(2, 40).map(lambda n: [[]] if n < 3 else _nest(n)),
    st.dictionaries(odd_text, json_values, min_size=1, max_size=3))


def _nest(n: int):
    value: object = "x"
    for i in range(n):
        value = [value] if i % 2 else {"k": value}
    return value


def _paths(doc, here: tuple = ()):
    yield here
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*here, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*here, i))


def _at(doc, path: tuple):
    for p in path:
        doc = doc[p]
    return doc


@st.composite
def mutated(draw, bases: list):
    """One of `bases`, changed in 1 to 4 places (most often 1: closer to valid)."""
    doc = copy.deepcopy(draw(st.sampled_from(bases)))
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3, 4]))):
        path = draw(st.sampled_from(list(_paths(doc))))
        op = draw(st.sampled_from(["delete", "other", "odd", "huge", "nan", "junk", "add"]))
        if op == "add" or not path:
            target = _at(doc, path)
            if isinstance(target, dict):
                target[draw(st.one_of(odd_text, st.integers(-3, 3)))] = draw(json_values)
                continue
            if isinstance(target, list):
                target.insert(draw(st.integers(0, len(target))), draw(json_values))
                continue
            if not path:
                doc = draw(json_values)
                continue
        parent, key = _at(doc, path[:-1]), path[-1]
        if op == "delete":
            del parent[key]
        else:
            parent[key] = draw({"other": json_values, "odd": odd_text,
                                "huge": st.sampled_from(HUGE_NUMBERS),
                                "nan": st.sampled_from(NON_FINITE), "junk": nested_junk,
                                "add": json_values}[op])
    return doc


def _stand_ins(text: str) -> str:
    def real(m: re.Match) -> str:
        return "9" * 5000 if m.group(2) == HUGE else "[" * DEPTH + "]" * DEPTH
    return _STAND_IN.sub(real, text)


def _serialize(doc, fmt: str, flag: bool) -> str:
    if fmt == "json":
        return json.dumps(doc, allow_nan=True, ensure_ascii=flag, indent=1 if flag else None)
    return yaml.safe_dump(doc, allow_unicode=flag, sort_keys=False,
                          default_flow_style=None if flag else False)


@st.composite
def documents(draw, bases: list, fmt: str) -> bytes:
    """The bytes of a file: a mutated real document, often damaged as text too, or junk."""
    kind = draw(st.sampled_from(
        ["mutated"] * 6 + ["intact", "truncated", "spliced", "random value", "random bytes",
                          "random text", "utf16"]))
    if kind == "random bytes":
        return draw(st.binary(max_size=300))
    if kind == "random text":
        return draw(st.text(max_size=300)).encode("utf-8", "surrogatepass")
    if kind == "intact":
        doc = draw(st.sampled_from(bases))
    else:
        doc = draw(json_values) if kind == "random value" else draw(mutated(bases))
    text = _stand_ins(_serialize(doc, fmt, draw(st.booleans())))
    data = text.encode("utf-8", "surrogatepass")
    if kind == "utf16":
        return text.encode("utf-16", "surrogatepass")
    if kind == "truncated" and data:
        return data[:draw(st.integers(0, len(data) - 1))]
    if kind == "spliced" and data:
        at = draw(st.integers(0, len(data)))
        end = draw(st.integers(at, min(len(data), at + 20)))
        return data[:at] + draw(st.binary(min_size=1, max_size=20)) + data[end:]
    return data


# --- the property -----------------------------------------------------------------------


class Hang(BaseException):
    """A reader that did not answer within HANG_GUARD_S (no `except Exception` eats it)."""


@contextmanager
def _hang_guard():
    def fire(signum, frame):
        raise Hang(f"no answer within {HANG_GUARD_S} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, HANG_GUARD_S)
    faulthandler.dump_traceback_later(HARD_KILL_S, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def valid_or_named(read, *paths: Path):
    """read()'s result, or None after a ConfigError whose every line, as the user sees
    it (the problems one a line), starts with one of `paths` ("path: ..."); any other
    exception fails the property."""
    prefixes = tuple(f"{p}:" for p in paths)
    try:
        with _hang_guard():
            return read()
    except ConfigError as exc:
        assert exc.problems, "a ConfigError naming no problem"
        assert all(isinstance(problem, str) for problem in exc.problems), exc.problems
        for line in str(exc).split("\n"):
            assert line.startswith(prefixes), \
                f"a problem line that does not start with the file's path: {line!r}"
        return None


@contextmanager
def _without_torch():
    """The suite loader reads suites without importing torch (planning stays light)."""
    had = "torch" in sys.modules
    yield
    assert had or "torch" not in sys.modules, "the suite loader imported torch"


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


# Each reader's crashes found so far, pinned as explicit examples: CI runs them first,
# whatever the generated examples happen to reach.
HUGE_INT = b"9" * 5000  # past Python's int/str conversion limit (4300 digits)
DEEP_LIST = b"[" * DEPTH  # past the recursion limit of json's decoder
CLIP = "clip_cpu.json"
CLIP_DOC = dict(SHARKTANK_BASES)[CLIP]


@FUZZ
@example(data=b"suite_name: " + HUGE_INT + b"\n")
@example(data=b"\x00")  # PyYAML's message has a second line
@example(data=b"1: a\nzz: b\n")  # unknown keys of two types
@example(data=b"workloads: [{model: linear, 1: a, zz: b}]\n")
@given(data=documents(SUITE_BASES, "yaml"))
@pytest.mark.slow
def test_suite_loader(fuzz_dir, data):
    path = fuzz_dir / "suite.yaml"
    path.write_bytes(data)
    with _without_torch():
        valid_or_named(lambda: load([path]), path)


@FUZZ
@example(data=b"benchmark_mode: " + HUGE_INT + b"\n")
@example(data=b"benchmark_mode: inference\n\x7f")
@example(data=b"model_params: [{name: a, 1: x, zz: y}]\n")
@given(data=documents(TORCHAO_BASES, "yaml"))
@pytest.mark.slow
def test_torchao_translator(fuzz_dir, data):
    path = fuzz_dir / "benchmark_config.yml"
    path.write_bytes(data)
    with _without_torch():
        valid_or_named(lambda: load([path]), path)


def _use_benchmark_file(f):
    """What planning reads of a loaded file: it must not fail on a file that passed."""
    return (f.id, f.backend, f.dtype(), f.shape(), f.repetitions, f.warmup_s,
            f.input_args(), f.extra_benchmark_flags(), f.not_runnable(), f.goldens("cpu"))


# (file name, its bytes): a real sharktank file, mutated.
sharktank_files = st.sampled_from(SHARKTANK_BASES).flatmap(
    lambda base: st.tuples(st.just(base[0]), documents([base[1]], "json")))


@FUZZ
@example(case=(CLIP, b"\x80"))
@example(case=(CLIP, DEEP_LIST))
@example(case=(CLIP, HUGE_INT))
@example(case=(CLIP, json.dumps({**CLIP_DOC, "golden_time_ms": {"a\nb": "x"}}).encode()))
@example(case=(CLIP, json.dumps({**CLIP_DOC, "benchmark_flags": [
    "--benchmark_repetitions=" + "9" * 400, "--benchmark_min_warmup_time=3.0"]}).encode()))
@given(case=sharktank_files)
@pytest.mark.slow
def test_sharktank_benchmark_file(fuzz_dir, case):
    name, data = case
    path = fuzz_dir / "bench" / "sdxl" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    f = valid_or_named(lambda: load_file(path), path)
    if f is not None:
        valid_or_named(lambda: _use_benchmark_file(f), path)


@FUZZ
@example(case=(CLIP, b"\x80"))
@example(case=(CLIP, DEEP_LIST))
@given(case=sharktank_files)
@pytest.mark.slow
def test_suite_with_benchmark_files(fuzz_dir, case):
    """A suite selecting the mutated file (and an intact neighbour) by benchmark_files:
    problems start with the suite's path or a benchmark file's."""
    name, data = case
    root = fuzz_dir / "benchmarks"
    shutil.rmtree(root, ignore_errors=True)
    (root / "sdxl").mkdir(parents=True)
    (root / "sdxl" / name).write_bytes(data)
    other = SHARKTANK_FILES[0]
    if other.name != name:
        shutil.copy(other, root / "sdxl" / other.name)
    suite = fuzz_dir / "suite_bf.yaml"
    suite.write_text(yaml.safe_dump(tiny_suite(benchmark_files={
        "dir": str(root), "models": ["*"]})))

    def read():
        return attach(load([suite]))

    with _without_torch():
        valid_or_named(read, suite, *(root / "sdxl").iterdir())


@FUZZ
@example(data=DEEP_LIST)
@example(data=HUGE_INT)
@example(data=json.dumps({**goldens.empty("generic"), "cases": {"a\nb": 1}}).encode())
@given(data=documents(GOLDENS_BASES, "json"))
@pytest.mark.slow
def test_goldens_loader(fuzz_dir, data):
    path = fuzz_dir / "generic.json"
    path.write_bytes(data)
    valid_or_named(lambda: goldens.read(path), path)


@FUZZ
@example(data=DEEP_LIST, results_files=False)
@example(data=HUGE_INT, results_files=True)
@example(data=b"[NaN, ", results_files=True)
# A key holding a tab and a newline, on a value of the wrong type (CI at d48cdd7): the
# problem's path must not break its line.
@example(data=json.dumps({**_json(DATA / "report_iree.json"), "cases": [
    {**case, "graph": {"op_histogram": {"\t\n": None}}}
    for case in _json(DATA / "report_iree.json")["cases"]]}).encode(), results_files=False)
@given(data=documents(REPORT_BASES, "json"), results_files=st.booleans())
@pytest.mark.slow
def test_report_reader(fuzz_dir, data, results_files):
    path = fuzz_dir / "report.json"
    path.write_bytes(data)
    valid_or_named(lambda: read_report(path, results_files=results_files), path)


# --- a tool's output: iree-benchmark-module's JSON, iree-compile's statistics file ------
# Read as the stages read them: the bytes decoded with replacement, then parsed. The
# property: a result, or a ValueError (the stage records it as the tool's failure),
# never another exception. Documents are built from the keys and values the parsers
# look for, so that their every branch meets the wrong type, then serialized, cut short
# or given random bytes.

_TOOL_WORDS = ["benchmarks", "context", "caches", "run_type", "aggregate", "iteration",
               "aggregate_unit", "percentage", "aggregate_name", "cv", "mean", "real_time",
               "time_unit", "ns", "us", "ms", "s", "error_occurred", "name", "error_message",
               "execution", "dispatch-count", "executable", "executable-count"]
_TOOL_LEAVES = (st.none() | st.booleans() | st.integers() | st.floats()
                | st.sampled_from(_TOOL_WORDS) | st.text(max_size=6))
_TOOL_DOCS = st.recursive(
    _TOOL_LEAVES,
    lambda kids: st.lists(kids, max_size=4)
    | st.dictionaries(st.sampled_from(_TOOL_WORDS) | st.text(max_size=6), kids, max_size=6),
    max_leaves=24)


@st.composite
def tool_outputs(draw) -> bytes:
    if draw(st.booleans()):
        return draw(st.binary(max_size=200))
    raw = json.dumps(draw(_TOOL_DOCS)).encode()
    cut = draw(st.integers(0, len(raw)))
    return raw[:cut] + draw(st.binary(max_size=8)) if draw(st.booleans()) else raw


@FUZZ
@example(raw=b"caf\xe9 \xff")
@example(raw=DEEP_LIST)
@example(raw=b'{"benchmarks": [{"real_time": 1' + b"0" * 400 + b', "time_unit": "ms"}]}')
@example(raw=b'{"benchmarks": [{"real_time": 1e308, "time_unit": []}]}')
@example(raw=b'{"a": {"execution": {"dispatch-count": "x"}}}')
@given(raw=tool_outputs())
@pytest.mark.slow
def test_a_tools_output_parses_or_raises_value_error(raw):
    from workflow.backends.iree.profile import compile_statistics
    from workflow.backends.iree.tools import parse_benchmark_json

    text = raw.decode("utf-8", errors="replace")
    for parse in (parse_benchmark_json, compile_statistics):
        try:
            with _hang_guard():
                parse(text)
        except ValueError:
            pass


# --- keys and names (issue 23): a key is a string, a name is matched whole ----------------
# Keys YAML reads as no string when unquoted: integers, null, booleans, floats (inf, nan).
non_string_keys = st.one_of(st.integers(-10**6, 10**6), st.none(), st.booleans(),
                            st.floats(allow_nan=True, allow_infinity=True))


def _mappings(doc) -> list[tuple]:
    """The paths of every mapping in a document (where a key can be added)."""
    return [p for p in _paths(doc) if isinstance(_at(doc, p), dict)]


@FUZZ
@example(key=3090, where=("skus",), override=False)
@example(key=None, where=("skus", "host", "measurement"), override=True)
@given(key=non_string_keys, where=st.sampled_from(_mappings(tiny_suite())),
       override=st.booleans())
def test_a_key_that_is_no_string_is_refused_at_its_mapping(fuzz_dir, key, where, override):
    """Wherever a suite gets a key that is no string, in its file (YAML writes it
    unquoted) or in --config overrides, the one problem names the mapping and the key,
    before any name is matched (jsonschema's patterns raised TypeError on an int)."""
    from workflow.errors import key_path

    doc = tiny_suite()
    _at(doc, where)[key] = "x"
    path = fuzz_dir / "keys.yaml"
    path.write_text(yaml.safe_dump(tiny_suite() if override else doc, sort_keys=False))
    with pytest.raises(ConfigError) as err:
        with _hang_guard():
            load([path], doc if override else None)
    (problem,) = err.value.problems
    assert problem.startswith(f"{path}: {key_path(list(where))}: key "), problem
    assert "; expected a string name (quote it: " in problem and "\n" not in problem


NAME_RE = re.compile(r"(?!\.\.?\Z)[A-Za-z0-9_.-]{1,64}")
# Characters of names, those that end a line among them (\n is the one Python's `$`
# lets through before the end).
name_text = st.text(alphabet=st.sampled_from(
    "ab.-_09Z\n\r\x0b\x0c\x85\u2028 /\x00é"), max_size=70)


@FUZZ
@example(name="cpu\n")
@example(name="cpu\r\n")
@example(name="c" * 64)
@example(name="c" * 65)
@example(name="..")
@example(name="")
@given(name=name_text)
@pytest.mark.slow
def test_a_sku_name_is_taken_exactly_when_it_matches_whole(fuzz_dir, name):
    """A SKU name loads when the whole of it is 1 to 64 of [A-Za-z0-9_.-] (not . or ..),
    else the suite is refused naming `skus`: a trailing newline is no part of a name."""
    path = fuzz_dir / "names.yaml"
    path.write_text(yaml.safe_dump({"skus": {name: {}}, "workloads": [{"model": "linear"}]}))
    suite = valid_or_named(lambda: load([path]), path)
    if NAME_RE.fullmatch(name):
        assert suite is not None and [c.sku for c in suite.cases] == [name]
    else:
        assert suite is None


# Where a suite names something that becomes part of a path or an id.
NAMED = {
    "suite_name": lambda d, end: d.update(suite_name="tiny" + end),
    "skus": lambda d, end: d.update(skus={f"{k}{end}" if k == "host" else k: v
                                          for k, v in d["skus"].items()}),
    "workloads[0].model": lambda d, end: d["workloads"][0].update(model="linear" + end),
    "workloads[0].group": lambda d, end: d["workloads"][0].update(group="g" + end),
    "workloads[0].configs[0]": lambda d, end: d["workloads"][0].update(
        configs=["default" + end]),
    "recipes[0]": lambda d, end: d.update(recipes=["baseline" + end]),
    "backends[0]": lambda d, end: d.update(backends=["iree" + end]),
    "torch_backends": lambda d, end: d.update(torch_backends={"torch-e" + end: {}}),
}


@FUZZ
@given(where=st.sampled_from(sorted(NAMED)), end=st.sampled_from(["\n", "\r\n", "\n\n"]),
       block=st.booleans())
@pytest.mark.slow
def test_a_name_ending_in_a_newline_is_refused_where_it_is(fuzz_dir, where, end, block):
    """A name with a trailing newline (a quoted "x\\n", or a block scalar `|`, which keeps
    it) is refused at its key, whichever name it is."""
    doc = tiny_suite()
    NAMED[where](doc, end)
    text = yaml.safe_dump(doc, sort_keys=False)
    if block and where == "suite_name":  # as people write it: `suite_name: |`
        text = re.sub(r"^suite_name: .*$", "suite_name: |\n  tiny", text, flags=re.M)
    path = fuzz_dir / "newline.yaml"
    path.write_text(text)
    assert valid_or_named(lambda: load([path]), path) is None
    with pytest.raises(ConfigError) as err:
        load([path])
    assert any(p.startswith(f"{path}: {where}") for p in err.value.problems), err.value.problems
