"""pytest's `-m` marker expressions, as iree-test-suites' torch_models harness selects its
tests with them (`-m "cpu and benchmark"`): `and`, `or`, `not` and parentheses over
marker names, `not` binding tightest and `and` before `or` (pytest's own grammar,
_pytest/mark/expression.py). A small parser of our own: an expression from a suite is
never given to eval(). pytest's keyword-argument matching (`mark(arg=1)`) is refused."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

# pytest's identifiers: anything but whitespace, parentheses and the keywords.
TOKEN_RE = re.compile(r"\s*(?:(\()|(\))|([^\s()]+))")
KEYWORDS = ("and", "or", "not")

Matcher = Callable[[frozenset], bool]


class MarkerError(ValueError):
    """A marker expression that cannot be parsed; its text says where and what."""


def _tokens(expr: str) -> list[str]:
    out, pos = [], 0
    while pos < len(expr):
        m = TOKEN_RE.match(expr, pos)
        if m is None or m.end() == pos:  # only trailing whitespace is left
            break
        out.append(m.group(m.lastindex))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, expr: str):
        self.expr, self.tokens, self.i = expr, _tokens(expr), 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> str | None:
        tok = self.peek()
        self.i += 1
        return tok

    def fail(self, what: str) -> MarkerError:
        got = self.peek()
        return MarkerError(f"marker expression {self.expr!r}: expected {what}, got "
                           f"{'the end' if got is None else repr(got)}")

    def expression(self) -> Matcher:
        left = self.conjunction()
        while self.peek() == "or":
            self.take()
            a, b = left, self.conjunction()
            left = lambda names, a=a, b=b: a(names) or b(names)  # noqa: E731
        return left

    def conjunction(self) -> Matcher:
        left = self.negation()
        while self.peek() == "and":
            self.take()
            a, b = left, self.negation()
            left = lambda names, a=a, b=b: a(names) and b(names)  # noqa: E731
        return left

    def negation(self) -> Matcher:
        tok = self.peek()
        if tok == "not":
            self.take()
            inner = self.negation()
            return lambda names: not inner(names)
        if tok == "(":
            self.take()
            inner = self.expression()
            if self.take() != ")":
                self.i -= 1
                raise self.fail("')'")
            return inner
        if tok is None or tok in KEYWORDS or tok == ")":
            raise self.fail("a marker name, 'not' or '('")
        if "=" in tok or "," in tok or (self.i + 1 < len(self.tokens)
                                        and self.tokens[self.i + 1] == "("):
            raise MarkerError(f"marker expression {self.expr!r}: {tok!r}: keyword "
                              "arguments of markers are not supported; expected marker "
                              "names joined by and, or, not")
        self.take()
        return lambda names: tok in names


def compile_expression(expr: str) -> Matcher:
    """A function of a set of marker names telling whether `expr` selects them; an
    empty expression selects everything (pytest without -m). MarkerError when it is
    not an expression."""
    parser = _Parser(expr)
    if parser.peek() is None:
        return lambda names: True
    matcher = parser.expression()
    if parser.peek() is not None:
        raise parser.fail("'and', 'or' or the end")
    return matcher


def matches(expr: str, names: Iterable[str]) -> bool:
    return compile_expression(expr)(frozenset(names))
