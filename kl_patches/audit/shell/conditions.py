"""``test``/``[ ]`` and ``[[ ]]`` evaluated on known values: string, integer, pattern and
``-z``/``-n`` tests with ``!``, ``-a``/``-o``, ``&&``/``||`` and parentheses. A test on an
unknown value (or a file test) is undecidable (:class:`Undecidable`): the interpreter then
reads every branch."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kl_patches.audit.shell.model import LIMITS, ShellLimitError
from kl_patches.audit.shell.patterns import glob_match
from kl_patches.audit.shell.state import World
from kl_patches.audit.shell.vocabulary import scheduler_variable

if TYPE_CHECKING:
    from kl_patches.audit.shell.interpreter import Interpreter


class Undecidable(Exception):
    pass


class CondEval:
    """``test``/``[``/``[[`` expressions over literal strings."""

    def __init__(self, tokens: list[str], interp: Interpreter, w: World, double: bool) -> None:
        self.toks = list(tokens)
        self.i = 0
        self.interp = interp
        self.w = w
        self.double = double
        self.depth = 0
        self.env = False
        self.scheduler = False
        self.positional: list[str] = []
        """Script arguments (``$1``) the test reads: the caller's choice, unknown here."""

    def value(self, raw: str, pattern: bool = False) -> str:
        if not self.double:
            return raw
        text, taint = self.interp.expand_string(raw, self.w)
        if taint.unknown:
            raise Undecidable
        if taint.unset or taint.args:
            self.env = True
        if any(scheduler_variable(n) for n in taint.unset):
            self.scheduler = True
        self.positional += [p for p in taint.positional if p not in self.positional]
        if pattern and not (raw.startswith(("'", '"')) and raw.endswith(("'", '"'))):
            return "\x00glob:" + text
        return text

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise Undecidable
        self.i += 1
        return tok

    def run(self) -> bool:
        if not self.toks:
            return False
        result = self.or_()
        if self.i != len(self.toks):
            raise Undecidable
        return result

    def or_(self) -> bool:
        left = self.and_()
        while self.peek() in ("||", "-o"):
            self.take()
            right = self.and_()
            left = left or right
        return left

    def and_(self) -> bool:
        left = self.not_()
        while self.peek() in ("&&", "-a") and not (self.peek() == "-a" and self.double):
            self.take()
            right = self.not_()
            left = left and right
        return left

    def not_(self) -> bool:
        if self.peek() == "!":
            self.take()
            return not self.not_()
        return self.primary()

    def primary(self) -> bool:
        self.depth += 1
        if self.depth > LIMITS["nesting"]:
            raise ShellLimitError("test expression nested too deeply")
        tok = self.take()
        if tok == "(":
            v = self.or_()
            if self.take() != ")":
                raise Undecidable
            return v
        nxt = self.peek()
        binary = ("=", "==", "!=", "<", ">", "=~", "-eq", "-ne", "-lt", "-le", "-gt", "-ge")
        if nxt in binary and self.i + 1 <= len(self.toks):
            op = self.take()
            right_raw = self.take()
            left = self.value(tok)
            if op == "=~":
                right = self.value(right_raw)
                try:
                    return re.search(right, left) is not None
                except re.error as err:
                    raise Undecidable from err
            right = self.value(right_raw, pattern=op in ("=", "==", "!="))
            if op in ("=", "==", "!="):
                if right.startswith("\x00glob:"):
                    same = glob_match(left, right[len("\x00glob:") :])
                else:
                    same = left == right
                return same if op != "!=" else not same
            if op in ("<", ">"):
                return left < right if op == "<" else left > right
            try:
                a = int(left.strip() or "0") if not self.double else self._int(left)
                b = int(right.strip() or "0") if not self.double else self._int(right)
            except ValueError as err:
                raise Undecidable from err
            return {
                "-eq": a == b,
                "-ne": a != b,
                "-lt": a < b,
                "-le": a <= b,
                "-gt": a > b,
                "-ge": a >= b,
            }[op]
        if tok in ("-z", "-n") and nxt is not None and nxt not in ("&&", "||", ")", "-a", "-o"):
            value = self.value(self.take())
            return (value == "") if tok == "-z" else (value != "")
        if tok == "-v" and nxt is not None:
            name = self.value(self.take())
            if self.w.is_set(name):
                return True
            raise Undecidable
        if re.fullmatch(r"-[a-zA-Z]", tok) and nxt is not None:
            self.take()
            raise Undecidable  # file tests depend on the machine
        return self.value(tok) != ""

    def _int(self, text: str) -> int:
        try:
            return int(text.strip() or "0")
        except ValueError:
            value = self.interp.arith_value(text, self.w, 0)
            if value is None:
                raise
            return value
