"""Bash arithmetic (``$((...))``, ``((...))``, ``let``, array indices) in 64-bit wrapping
integers, operator precedence and assignment operators as bash has them. An expression bash
refuses raises :class:`ArithAbort` (bash abandons the command); an undecidable value raises
:class:`ArithError`. Nesting is bounded (``LIMITS["arith_depth"]``)."""

from __future__ import annotations

import re
from collections.abc import Callable

from kl_patches.audit.shell.model import LIMITS, ShellLimitError, short

_M64 = (1 << 64) - 1


class ArithError(ValueError):
    pass


class ArithAbort(Exception):
    """An arithmetic expansion bash refuses (``$((1/0))``): bash abandons the command it is in
    and everything up to the end of the top-level command."""


def wrap(v: int) -> int:
    v &= _M64
    return v - (1 << 64) if v >> 63 else v


_ARITH_TOKEN = re.compile(
    r"\s*(?:(?P<num>0[xX][0-9a-fA-F]+|\d+#[0-9A-Za-z@_]+|\d+)"
    r"|(?P<name>[A-Za-z_]\w*(?:\[[^\]]*\])?)"
    r"|(?P<op>\*\*=|<<=|>>=|\+\+|--|\*\*|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&^|]=|[-+*/%<>=!~&^|?:,()]))"
)

_BINARY = {
    "||": 3,
    "&&": 4,
    "|": 5,
    "^": 6,
    "&": 7,
    "==": 8,
    "!=": 8,
    "<": 9,
    "<=": 9,
    ">": 9,
    ">=": 9,
    "<<": 10,
    ">>": 10,
    "+": 11,
    "-": 11,
    "*": 12,
    "/": 12,
    "%": 12,
    "**": 13,
}


def parse_number(text: str) -> int:
    """A numeric constant as bash reads it: digit by digit, wrapping at 64 bits (a number of
    any length is instant, and never meets Python's int-string limit)."""
    if text.lower().startswith("0x"):
        return int(text, 16) & _M64
    if "#" in text:
        base_s, digits = text.split("#", 1)
        base = int(base_s[-4:]) if len(base_s) < 5 else 65
        if not 2 <= base <= 64:
            raise ArithError(f"invalid arithmetic base {short(base_s)}")
        alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ@_"
        value = 0
        for ch in digits:
            d = alphabet.index(ch) if base > 36 else alphabet.index(ch.lower())
            if d >= base:
                raise ArithError(f"digit {ch!r} out of range for base {base}")
            value = (value * base + d) & _M64
        return value
    if len(text) > 1 and text.startswith("0"):
        return int(text, 8) & _M64
    value = 0
    for k in range(0, len(text), 1000):
        chunk = text[k : k + 1000]
        value = (value * 10 ** len(chunk) + int(chunk)) & _M64
    return value


def _binop(op: str, a: int, b: int) -> int:
    if op == "+":
        return wrap(a + b)
    if op == "-":
        return wrap(a - b)
    if op == "*":
        return wrap(a * b)
    if op in ("/", "%"):
        if b == 0:
            raise ArithError("division by 0")
        q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # C truncation
        return wrap(q) if op == "/" else wrap(a - q * b)
    if op == "**":
        if b < 0:
            raise ArithError("exponent less than 0")
        return wrap(pow(a, b, 1 << 64))
    if op == "<<":
        return wrap(a << (b & 63))
    if op == ">>":
        return a >> (b & 63)
    if op == "&":
        return a & b
    if op == "|":
        return a | b
    if op == "^":
        return a ^ b
    if op in ("==", "!=", "<", "<=", ">", ">="):
        return int(
            {
                "==": a == b,
                "!=": a != b,
                "<": a < b,
                "<=": a <= b,
                ">": a > b,
                ">=": a >= b,
            }[op]
        )
    if op == "&&":
        return int(bool(a) and bool(b))
    if op == "||":
        return int(bool(a) or bool(b))
    raise ArithError(f"unknown operator {op}")


class Arith:
    """Bash arithmetic (``$((...))``, ``((...))``, ``let``) on 64-bit wrapping integers."""

    def __init__(
        self,
        text: str,
        get: Callable[[str], str | None],
        put: Callable[[str, int], None] | None,
        depth: int = 0,
    ) -> None:
        self.toks: list[tuple[str, str]] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            m = _ARITH_TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise ArithError(f"syntax error in expression (near {text[pos : pos + 10]!r})")
            pos = m.end()
            kind = m.lastgroup or "op"
            self.toks.append((kind, m.group(kind)))
            if not text[pos:].strip():
                break
        self.i = 0
        self.get = get
        self.put = put
        self.depth = depth
        self.nest = 0

    def peek(self) -> tuple[str, str]:
        return self.toks[self.i] if self.i < len(self.toks) else ("end", "")

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        self.i += 1
        return tok

    def run(self) -> int:
        if not self.toks:
            return 0
        value = self.comma()
        if self.i < len(self.toks):
            raise ArithError(f"syntax error in expression (near {self.peek()[1]!r})")
        return value

    def _enter(self) -> None:
        self.nest += 1
        if self.nest > LIMITS["arith_depth"]:
            raise ShellLimitError(
                f"arithmetic nested too deeply (more than {LIMITS['arith_depth']} levels)"
            )

    def comma(self) -> int:
        value = self.assign()
        while self.peek() == ("op", ","):
            self.take()
            value = self.assign()
        return value

    def var(self, name: str) -> int:
        text = self.get(name)
        if text is None or not text.strip():
            return 0
        if self.depth > 16:
            raise ArithError(f"{name}: expression recursion level exceeded")
        return Arith(text, self.get, self.put, self.depth + 1).run()

    def assign(self) -> int:
        kind, text = self.peek()
        nxt = self.toks[self.i + 1] if self.i + 1 < len(self.toks) else ("end", "")
        if (
            kind == "name"
            and nxt[0] == "op"
            and nxt[1].endswith("=")
            and nxt[1]
            not in (
                "==",
                "!=",
                "<=",
                ">=",
            )
        ):
            self.take()
            op = self.take()[1]
            self._enter()
            rhs = self.assign()
            self.nest -= 1
            value = rhs if op == "=" else _binop(op[:-1], self.var(text), rhs)
            if self.put is not None:
                self.put(text, value)
            return value
        return self.ternary()

    def ternary(self) -> int:
        cond = self.binary(3)
        if self.peek() == ("op", "?"):
            self.take()
            self._enter()
            a = self.assign()
            if self.take() != ("op", ":"):
                raise ArithError("`:' expected for conditional expression")
            b = self.assign()
            self.nest -= 1
            return a if cond else b
        return cond

    def binary(self, level: int) -> int:
        left = self.unary()
        while True:
            kind, op = self.peek()
            prec = _BINARY.get(op) if kind == "op" else None
            if prec is None or prec < level:
                return left
            self.take()
            self._enter()
            right = self.binary(prec if op == "**" else prec + 1)
            self.nest -= 1
            left = _binop(op, left, right)

    def unary(self) -> int:
        kind, text = self.take()
        if kind == "op" and text in ("-", "+", "!", "~"):
            self._enter()
            v = self.unary()
            self.nest -= 1
            return {"-": wrap(-v), "+": v, "!": int(not v), "~": wrap(~v)}[text]
        if kind == "op" and text in ("++", "--"):
            name_kind, name = self.take()
            if name_kind != "name":
                raise ArithError(f"{text}: a variable is expected")
            v = wrap(self.var(name) + (1 if text == "++" else -1))
            if self.put is not None:
                self.put(name, v)
            return v
        if kind == "op" and text == "(":
            self._enter()
            v = self.comma()
            self.nest -= 1
            if self.take() != ("op", ")"):
                raise ArithError("missing `)'")
            return v
        if kind == "num":
            try:
                return wrap(parse_number(text))
            except ValueError as err:
                raise ArithError(f"value too great for base ({short(text)})") from err
        if kind == "name":
            if self.peek() in (("op", "++"), ("op", "--")):
                op = self.take()[1]
                v = self.var(text)
                if self.put is not None:
                    self.put(text, wrap(v + (1 if op == "++" else -1)))
                return v
            return self.var(text)
        raise ArithError(f"syntax error: operand expected (near {text!r})")


def arith(text: str, variables: dict[str, str] | None = None) -> int:
    """``$((text))`` as bash computes it (64-bit wrapping), with ``variables``; ValueError if
    bash would refuse it (division by 0, syntax error). Used by the tests and the reader."""
    values = dict(variables or {})

    def put(name: str, value: int) -> None:
        values[name] = str(value)

    return Arith(text, values.get, put).run()
