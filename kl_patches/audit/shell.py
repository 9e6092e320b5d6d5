"""A bash-faithful reader of launch scripts, for the audit: it parses and interprets, never runs.

A script is tokenised and parsed the way bash does (quotes, ``\\``-newline continuations,
comments, ``;``/``&&``/``||``/``|``/``&``, redirections, here-documents, ``if``/``case``/
``for``/``while``/``until``/``select``, ``{ }`` and ``( )`` groups, function definitions, array
literals ``A=(...)`` with quotes, comments and blank lines inside), one complete command at a
time, and each command is interpreted on a model of the shell's state: variables, indexed and
associative arrays, exported names, functions, positional parameters, the working directory.
The result is every simple command the script would run, with its words after expansion and
quote removal (:class:`Command`). Nothing is ever executed: not a command, not a command
substitution, not a sourced file.

Bash semantics that are modelled: every parameter expansion form (``$V``, ``${V:-w}``,
``${V-w}``, ``${V:=w}``, ``${V=w}``, ``${V:+w}``, ``${V+w}``, ``${V:?w}``, ``${#V}``,
``${V#p}``/``##``/``%``/``%%``, ``${V/p/r}``/``//``/``/#``/``/%``, ``${V:o:l}``, ``${V^^}``/
``,,``, ``${!V}``), ``"${A[@]}"``/``${A[*]}``/``${#A[@]}``/``${A[i]}``/``${!A[@]}``, word
splitting of unquoted expansions, brace expansion, ``$((...))`` in 64-bit wrapping integers
(as bash computes it: ``$((9**9**9))`` is instant), ``export``/``declare``/``local``/
``readonly``/``typeset``/``unset``/``shift``/``set --``, ``VAR=x cmd`` (for that command only),
functions with their own positional parameters and ``local``, ``cd``/``pushd``/``popd``,
``source``/``.`` of a file found beside the script (read, never run), ``eval``, ``bash -c``,
``bash FILE``, ``bash <<EOF``, ``read -d '' V <<EOF``, ``cat > FILE <<EOF`` (the file is kept
for later reads), ``exit``/``return``/``break``/``continue``.

What is not knowable is marked, never guessed:

* the environment is not read (``env -i``): a variable the script never sets expands to
  empty, as in bash, and is listed in :attr:`Command.unresolved` (``--var NAME=VALUE`` sets it);
* command substitutions (``$(...)``, backticks) are not run: their value is unknown, kept as
  their literal text and listed in :attr:`Command.unknown` (pure idioms such as
  ``$(dirname "$0")``, ``$(cat <<EOF ...)`` and ``$(echo WORDS)`` are evaluated);
* script arguments (``$1``, ``$@``) are empty, as in a run without arguments (noted);
* an ``if``/``case``/``&&``/``||`` test decided only by literals and variables the script set
  takes its branch; otherwise every branch is read, each in its own copy of the state, and the
  commands that differ between branches carry :attr:`Command.branch`;
* ``for NAME in WORDS`` loops and decidable ``for ((...))`` loops are unrolled
  (:attr:`Command.loop`); ``while``/``until`` bodies are read once.

A comment inside a ``\\``-continued command ends that command, as in bash: the lines after it
are separate commands, recorded as :attr:`Command.dropped` when they look like arguments.

Every resource is bounded (:data:`LIMITS`): nesting depth, simple commands interpreted (loops
unrolled, functions called), branch combinations, string sizes, brace expansions, call depth.
A bound that is hit raises :class:`ShellLimitError` with a message that says which.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "LIMITS",
    "Command",
    "ShellLimitError",
    "ShellParseError",
    "ShellScript",
    "arith",
    "parse_script",
]

LIMITS: dict[str, int] = {
    "nesting": 100,
    "commands": 20_000,
    "worlds": 16,
    "call_depth": 48,
    "string": 1_000_000,
    "brace": 2_000,
    "loop_iterations": 1_000,
    "arith_depth": 200,
    "array": 100_000,
}
"""Bounds of the reader: parser nesting, simple commands interpreted, branch combinations
followed at once, function/source/``bash -c`` call depth, characters of any value, words of a
brace expansion, iterations of a ``for ((...))`` loop, arithmetic nesting, array elements."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_SCHEDULER = re.compile(
    r"(SKYPILOT|SLURM|PBS|LSB|OMPI_COMM_WORLD|PMI|PMIX|KUBERNETES|PET|TORCHELASTIC)_\w+|"
    r"NODE_RANK|GROUP_RANK|LOCAL_RANK|RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT"
)
"""Variables a cluster scheduler or launcher sets on each node (SkyPilot, SLURM, PBS, LSF, Open
MPI, PMI, Kubernetes, torchrun/torchelastic): a test on one of them, when the script does not
set it, depends on the node the script runs on, so every branch is read (not the clean
environment's)."""


def scheduler_variable(name: str) -> bool:
    """True when ``name`` is set per node by a cluster scheduler or launcher."""
    return _SCHEDULER.fullmatch(name) is not None


_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?(\+?=)(.*)$", re.S)
_ORPHAN = re.compile(r"^(-|\+{0,2}[A-Za-z_][\w.]*\.[\w.]*=)")
"""A command that is really arguments: a flag, or a dotted ``key.sub=value`` override."""
_CUT_NEXT = re.compile(r"^(--|\+{0,2}[A-Za-z_][\w.]*=)")
_RESERVED = {
    "if",
    "then",
    "else",
    "elif",
    "fi",
    "do",
    "done",
    "case",
    "esac",
    "while",
    "until",
    "for",
    "select",
    "function",
    "{",
    "}",
    "!",
    "in",
    "time",
    "[[",
}
_DECLARE = {"export", "declare", "local", "readonly", "typeset"}
_BUILTINS = {
    "true",
    ":",
    "false",
    "[",
    "test",
    "exit",
    "return",
    "break",
    "continue",
    "unset",
    "shift",
    "set",
    "let",
    "cd",
    "pushd",
    "popd",
    "source",
    ".",
    "eval",
    "read",
    "mapfile",
    "readarray",
    "shopt",
    "alias",
    "unalias",
    "trap",
    "umask",
    "wait",
    "hash",
    "ulimit",
}
_SHELLS = {"bash", "sh", "zsh", "dash", "ksh"}
_NOT_FOLLOWED = {"echo", "printf", "cat", "grep", "sed", "awk", "tee", "ls", "test", "["}
_UNKNOWN_SPECIAL = {"$", "!", "RANDOM", "SECONDS", "EPOCHSECONDS", "EPOCHREALTIME", "BASHPID"}
_M64 = (1 << 64) - 1


class ShellParseError(ValueError):
    """A script line the reader cannot split into words (unbalanced quote, bad here-doc)."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


class ShellLimitError(ValueError):
    """The script exceeds one of the reader's bounds (:data:`LIMITS`)."""


@dataclass
class Command:
    """One simple command of a script, after expansion and quote removal."""

    words: list[str]
    """The command's words (assignments and redirections removed)."""
    line: int
    """1-based line where the command starts (in :attr:`file` when it was followed)."""
    assignments: dict[str, str] = field(default_factory=dict)
    """``NAME=value`` words in front of the command (its environment only)."""
    unresolved: list[str] = field(default_factory=list)
    """Variables the command used that the script never set (expanded to empty)."""
    notes: list[str] = field(default_factory=list)
    """What the reader could not follow exactly (command substitution, ``$@``...)."""
    warnings: list[str] = field(default_factory=list)
    """Script mistakes that change what runs (a comment that cuts a continued command)."""
    dropped: list[str] = field(default_factory=list)
    """Arguments on the lines after such a comment: bash runs them as a separate command."""
    heredoc: str | None = None
    """Body of a here-document fed to this command, if any (expanded unless quoted)."""
    keyword: str = ""
    """Kept for compatibility; always empty (loops are interpreted, not flattened)."""
    loop: tuple[str, ...] = ()
    """``NAME=value`` of each enclosing unrolled loop in this iteration (outermost first)."""
    unknown: dict[int, list[str]] = field(default_factory=dict)
    """Word index -> the command substitutions (never run) whose unknown value is in it."""
    unset_in: dict[int, list[str]] = field(default_factory=dict)
    """Word index -> the never-set variables that expanded to empty inside it."""
    branch: tuple[str, ...] = ()
    """``if@L=then``-style labels of undecidable branches this command depends on."""
    file: str | None = None
    """The followed file (``source``, ``bash FILE``) the command is in; None: the script."""
    cwd: str | None = None
    """The working directory after ``cd`` when the script set it; None when unknown."""
    python: str | None = None
    """Python source fed to ``python -c`` or ``python - <<EOF`` (read by the AST reader)."""
    args_forwarded: bool = False
    """True when the command forwards the script's own arguments (``$@``, ``$*``, ``$1``)."""
    vanished: list[str] = field(default_factory=list)
    """Never-set variables whose whole word expanded to nothing (bash drops the word)."""
    calls: tuple[str, ...] = ()
    """``NAME@LINE`` of each enclosing function call (outermost first)."""
    via: tuple[str, ...] = ()
    """``FILE:LINE`` (or ``:LINE`` in the script itself) of each ``source``/``bash FILE`` that
    led to the followed file this command is in (outermost first)."""


@dataclass
class ShellScript:
    """Every simple command a script runs, in order, and the state it ends with."""

    commands: list[Command]
    """The simple commands, deduplicated across branches."""
    variables: dict[str, str]
    """Scalar variables at the end of the script (first surviving branch)."""
    notes: list[str]
    """Script-level notes (bounds, a parse error after which bash stops too)."""
    files: dict[str, str] = field(default_factory=dict)
    """Files the script writes with a here-document (``cat > PATH <<EOF``): path -> text."""
    error: str = ""
    """The parse error that stopped the reading (bash stops there too); empty when none."""


# ============================================================================ printf
_PRINTF_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "r": "\r",
    "v": "\v",
    "e": "\x1b",
    "E": "\x1b",
}
_PRINTF_SPEC = re.compile(r"%([-+ #0]*)(\d*)(?:\.(\d*))?([sbdiouxXcfeEgG%])")


def _printf_escapes(text: str) -> str:
    """Backslash escapes of a printf format (or a ``%b`` argument)."""

    def one(m: re.Match[str]) -> str:
        body = m.group(1)
        if body in _PRINTF_ESCAPES:
            return _PRINTF_ESCAPES[body]
        if body.startswith("x"):
            return chr(int(body[1:], 16))
        if body[0] in "01234567":
            return chr(int(body, 8) & 0xFF)
        return "\\" + body

    return re.sub(r"\\(x[0-9A-Fa-f]{1,2}|[0-7]{1,3}|.)", one, text, flags=re.S)


def printf(fmt: str, args: list[str]) -> str | None:
    """What bash's ``printf FMT ARGS...`` prints, None when the format has a conversion this
    reader does not model (``%q``, ``%(...)T``) or a numeric one given a non-number. The
    format is reused while arguments remain, as bash does."""
    out: list[str] = []
    rest = list(args)
    for _ in range(LIMITS["brace"]):
        used = 0
        pos = 0
        for m in _PRINTF_SPEC.finditer(fmt):
            out.append(_printf_escapes(fmt[pos : m.start()]))
            pos = m.end()
            flags, width, precision, conv = m.groups()
            if conv == "%":
                out.append("%")
                continue
            value = rest.pop(0) if rest else None
            used += value is not None
            spec = "%" + flags + width + ("." + precision if precision is not None else "")
            if conv in "sb":
                text = "" if value is None else value
                out.append((spec + "s") % (_printf_escapes(text) if conv == "b" else text))
            elif conv == "c":
                out.append((spec + "s") % (value or "")[:1])
            else:
                number = (value or "0").strip()
                try:
                    num: float = (
                        float(number) if conv in "feEgG" else _wrap(_number(number.lstrip("+")))
                    )
                except (ValueError, _ArithError):
                    return None
                out.append((spec + ("d" if conv in "iu" else conv)) % num)
        if "%" in fmt[pos:] and re.search(r"%[^%]", fmt[pos:]):
            return None  # a conversion not modelled (%q, %(fmt)T, ...)
        out.append(_printf_escapes(fmt[pos:]))
        if not rest or not used:
            return "".join(out)
        if sum(len(o) for o in out) > LIMITS["string"]:
            raise ShellLimitError(f"printf output grows beyond {LIMITS['string']} characters")
    return None


# ============================================================================ arithmetic
class _ArithError(ValueError):
    pass


class _ArithAbort(Exception):
    """An arithmetic expansion bash refuses (``$((1/0))``): bash abandons the command it is in
    and everything up to the end of the top-level command."""


def _wrap(v: int) -> int:
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


def _number(text: str) -> int:
    """A numeric constant as bash reads it: digit by digit, wrapping at 64 bits (a number of
    any length is instant, and never meets Python's int-string limit)."""
    if text.lower().startswith("0x"):
        return int(text, 16) & _M64
    if "#" in text:
        base_s, digits = text.split("#", 1)
        base = int(base_s[-4:]) if len(base_s) < 5 else 65
        if not 2 <= base <= 64:
            raise _ArithError(f"invalid arithmetic base {_short(base_s)}")
        alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ@_"
        value = 0
        for ch in digits:
            d = alphabet.index(ch) if base > 36 else alphabet.index(ch.lower())
            if d >= base:
                raise _ArithError(f"digit {ch!r} out of range for base {base}")
            value = (value * base + d) & _M64
        return value
    if len(text) > 1 and text.startswith("0"):
        return int(text, 8) & _M64
    value = 0
    for k in range(0, len(text), 1000):
        chunk = text[k : k + 1000]
        value = (value * 10 ** len(chunk) + int(chunk)) & _M64
    return value


def _short(text: str, width: int = 60) -> str:
    """``text`` cut to ``width`` characters (with ``...``) for a note."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _binop(op: str, a: int, b: int) -> int:
    if op == "+":
        return _wrap(a + b)
    if op == "-":
        return _wrap(a - b)
    if op == "*":
        return _wrap(a * b)
    if op in ("/", "%"):
        if b == 0:
            raise _ArithError("division by 0")
        q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # C truncation
        return _wrap(q) if op == "/" else _wrap(a - q * b)
    if op == "**":
        if b < 0:
            raise _ArithError("exponent less than 0")
        return _wrap(pow(a, b, 1 << 64))
    if op == "<<":
        return _wrap(a << (b & 63))
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
    raise _ArithError(f"unknown operator {op}")


class _Arith:
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
                raise _ArithError(f"syntax error in expression (near {text[pos : pos + 10]!r})")
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
            raise _ArithError(f"syntax error in expression (near {self.peek()[1]!r})")
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
            raise _ArithError(f"{name}: expression recursion level exceeded")
        return _Arith(text, self.get, self.put, self.depth + 1).run()

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
                raise _ArithError("`:' expected for conditional expression")
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
            return {"-": _wrap(-v), "+": v, "!": int(not v), "~": _wrap(~v)}[text]
        if kind == "op" and text in ("++", "--"):
            name_kind, name = self.take()
            if name_kind != "name":
                raise _ArithError(f"{text}: a variable is expected")
            v = _wrap(self.var(name) + (1 if text == "++" else -1))
            if self.put is not None:
                self.put(name, v)
            return v
        if kind == "op" and text == "(":
            self._enter()
            v = self.comma()
            self.nest -= 1
            if self.take() != ("op", ")"):
                raise _ArithError("missing `)'")
            return v
        if kind == "num":
            try:
                return _wrap(_number(text))
            except ValueError as err:
                raise _ArithError(f"value too great for base ({_short(text)})") from err
        if kind == "name":
            if self.peek() in (("op", "++"), ("op", "--")):
                op = self.take()[1]
                v = self.var(text)
                if self.put is not None:
                    self.put(text, _wrap(v + (1 if op == "++" else -1)))
                return v
            return self.var(text)
        raise _ArithError(f"syntax error: operand expected (near {text!r})")


def arith(text: str, variables: dict[str, str] | None = None) -> int:
    """``$((text))`` as bash computes it (64-bit wrapping), with ``variables``; ValueError if
    bash would refuse it (division by 0, syntax error). Used by the tests and the reader."""
    values = dict(variables or {})

    def put(name: str, value: int) -> None:
        values[name] = str(value)

    return _Arith(text, values.get, put).run()


# ============================================================================ tokens
@dataclass
class _HereDoc:
    delim: str
    quoted: bool
    strip_tabs: bool
    line: int
    body: str | None = None


@dataclass
class _Tok:
    kind: str  # WORD ARRAY OP NL REDIR ARITH COND EOF
    text: str
    line: int
    extra: Any = None
    cut: int = 0  # NL only: line of a comment that cut a continued command


@dataclass
class _ArrayLit:
    name: str
    append: bool
    elements: list[str]
    line: int


@dataclass
class _Redir:
    op: str
    target: str  # raw word ("" for a here-document)
    heredoc: _HereDoc | None = None
    fd: str = ""


_OPERATORS = (
    ";;&",
    ";;",
    ";&",
    "&&",
    "||",
    "|&",
    ";",
    "&",
    "|",
    "(",
    ")",
)
_REDIRS = ("<<<", "<<-", "<<", "<>", "<&", ">>", ">&", ">|", "&>>", "&>", "<", ">")
_META = set(" \t\n;&|()<>")
_WORD_PLAIN = re.compile(r"[^\s;&|()<>'\"\\`$]+")
_COMMAND_START_WORDS = {"then", "do", "else", "elif", "if", "while", "until", "{", "!", "time"}


class _Lexer:
    """Bash tokens from script text, produced lazily (here-document bodies are read at the
    newline that ends their command, as bash does)."""

    def __init__(self, text: str) -> None:
        self.s = text.replace("\r\n", "\n")
        self.i = 0
        self.line = 1
        self.pending: list[_HereDoc] = []
        self.buf: list[_Tok] = []
        self.command_start = True
        self.continued = False  # a backslash-newline since the command started
        self.words_in_command = 0
        self.last_word = ""

    # ---------------------------------------------------------------- characters
    def peekc(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def adv(self, n: int = 1) -> str:
        out = self.s[self.i : self.i + n]
        self.line += out.count("\n")
        self.i += n
        return out

    # ---------------------------------------------------------------- tokens
    def peek(self, k: int = 0) -> _Tok:
        while len(self.buf) <= k:
            self.buf.append(self._next())
        return self.buf[k]

    def take(self) -> _Tok:
        tok = self.peek()
        self.buf.pop(0)
        return tok

    def _skip_blank(self) -> None:
        while True:
            c = self.peekc()
            if c in (" ", "\t"):
                self.adv()
            elif c == "\\" and self.peekc(1) == "\n":
                self.adv(2)
                self.continued = True
            else:
                return

    def _reset_command(self) -> None:
        self.command_start = True
        self.continued = False
        self.words_in_command = 0

    def _next(self) -> _Tok:
        self._skip_blank()
        c = self.peekc()
        line = self.line
        if not c:
            if self.pending:
                raise ShellParseError(
                    f"here-document ends before its delimiter {self.pending[0].delim!r}",
                    self.pending[0].line,
                )
            return _Tok("EOF", "", line)
        if c == "#":
            cut = 0
            comment_line = self.line
            while self.peekc() and self.peekc() != "\n":
                self.adv()
            if self.continued and self.words_in_command and self.peekc() == "\n":
                rest = self.s[self.i + 1 :].lstrip(" \t")
                if _CUT_NEXT.match(rest):
                    cut = comment_line
            if self.peekc() == "\n":
                tok = self._newline()
                tok.cut = cut
                return tok
            return self._next()
        if c == "\n":
            return self._newline()
        for op in _REDIRS:
            if self.s.startswith(op, self.i) and not (op in ("<", ">") and self.peekc(1) == "("):
                return self._redirection(op, "")
        if c.isdigit():
            m = re.match(r"\d+(?=[<>])", self.s[self.i :])
            if m and not self.s.startswith("<(", self.i + m.end()):
                fd = self.adv(m.end())
                for op in _REDIRS:
                    if self.s.startswith(op, self.i):
                        return self._redirection(op, fd)
        if self.command_start and self.s.startswith("((", self.i):
            self.adv(2)
            body = self._until_double_paren(line)
            self.command_start = False
            self.words_in_command += 1
            return _Tok("ARITH", body, line)
        if self.last_word == "for" and self.s.startswith("((", self.i):
            self.adv(2)
            body = self._until_double_paren(line)
            self.last_word = ""
            return _Tok("ARITH", body, line)
        for op in _OPERATORS:
            if self.s.startswith(op, self.i):
                self.adv(len(op))
                self.last_word = ""
                if op in (";;", ";&", ";;&", ";", "&&", "||", "|", "|&", "&", "(", ")"):
                    self._reset_command()
                return _Tok("OP", op, line)
        raw, array = self._word(line)
        if array is not None:
            self.words_in_command += 1
            self.command_start = False
            return _Tok("ARRAY", raw, line, array)
        if raw == "[[" and self.command_start:
            parts = self._until_cond_end(line)
            self.command_start = False
            self.words_in_command += 1
            return _Tok("COND", " ".join(parts), line, parts)
        was_start = self.command_start
        self.command_start = was_start and (raw in _COMMAND_START_WORDS or bool(_ASSIGN.match(raw)))
        if raw in ("then", "do", "else", "elif", "{", "if", "while", "until", "!", "time"):
            self.command_start = True
        self.words_in_command += 1
        self.last_word = raw
        return _Tok("WORD", raw, line)

    def _newline(self) -> _Tok:
        line = self.line
        self.adv()
        self.last_word = ""
        if self.pending:
            self._read_heredocs()
        self._reset_command()
        return _Tok("NL", "\n", line)

    def _read_heredocs(self) -> None:
        for doc in self.pending:
            lines = []
            while True:
                if self.i >= len(self.s):
                    raise ShellParseError(
                        f"here-document ends before its delimiter {doc.delim!r}", doc.line
                    )
                end = self.s.find("\n", self.i)
                end = len(self.s) if end < 0 else end
                raw = self.s[self.i : end]
                self.adv(end - self.i + (1 if end < len(self.s) else 0))
                check = raw.lstrip("\t") if doc.strip_tabs else raw
                if check == doc.delim:
                    break
                lines.append(check)
            doc.body = "\n".join(lines) + ("\n" if lines else "")
        self.pending = []

    def _redirection(self, op: str, fd: str) -> _Tok:
        line = self.line
        self.adv(len(op))
        self.last_word = ""
        self._skip_blank()
        if op in ("<<", "<<-"):
            raw, _ = self._word(line)
            if not raw:
                raise ShellParseError("here-document without a delimiter", line)
            quoted = any(q in raw for q in "'\"\\")
            delim = raw.replace("'", "").replace('"', "").replace("\\", "")
            doc = _HereDoc(delim, quoted, op == "<<-", line)
            self.pending.append(doc)
            return _Tok("REDIR", op, line, _Redir(op, "", doc, fd))
        if op in (">&", "<&") and re.match(r"[0-9-]", self.peekc() or " "):
            target = ""
            while self.peekc().isdigit() or self.peekc() == "-":
                target += self.adv()
            return _Tok("REDIR", op, line, _Redir(op, target, None, fd))
        if not self.peekc() or self.peekc() in "\n;|&":
            raise ShellParseError(f"syntax error near unexpected token after {op!r}", line)
        raw, _ = self._word(line)
        return _Tok("REDIR", op, line, _Redir(op, raw, None, fd))

    def _until_double_paren(self, line: int) -> str:
        depth = 0
        start = self.i
        while True:
            c = self.peekc()
            if not c:
                raise ShellParseError("unbalanced '(('", line)
            if c == "(":
                depth += 1
            elif c == ")":
                if depth == 0 and self.peekc(1) == ")":
                    body = self.s[start : self.i]
                    self.adv(2)
                    return body
                depth -= 1
            self.adv()

    def _until_cond_end(self, line: int) -> list[str]:
        parts: list[str] = []
        while True:
            self._skip_blank()
            c = self.peekc()
            if not c:
                raise ShellParseError("unbalanced '[['", line)
            if c == "\n":
                self.adv()
                continue
            if self.s.startswith("]]", self.i) and (
                self.i + 2 >= len(self.s) or self.s[self.i + 2] in " \t\n;&|)"
            ):
                self.adv(2)
                return parts
            if self.s.startswith("&&", self.i) or self.s.startswith("||", self.i):
                parts.append(self.adv(2))
                continue
            if c in "()":
                parts.append(self.adv())
                continue
            if c in "<>":
                parts.append(self.adv())
                continue
            raw, _ = self._word(line, cond=True)
            if raw:
                parts.append(raw)
            else:
                parts.append(self.adv())

    # ---------------------------------------------------------------- words
    def _word(self, line: int, cond: bool = False) -> tuple[str, _ArrayLit | None]:
        """The raw text of one word (quotes kept); an array literal when ``NAME=(`` starts."""
        out: list[str] = []
        while True:
            m = _WORD_PLAIN.match(self.s, self.i)
            if m and m.end() > self.i:
                self.i = m.end()
                out.append(m.group(0))
                continue
            c = self.peekc()
            if not c:
                break
            if c in _META and not (cond and c in "<>"):
                if c == "(" and out:
                    m = _ASSIGN.match("".join(out))
                    if m and m.group(4) == "" and m.group(2) is None:
                        self.adv()
                        elements = self._array_elements(line)
                        return "".join(out), _ArrayLit(
                            m.group(1), m.group(3) == "+=", elements, line
                        )
                if c in "<>" and self.peekc(1) == "(":  # process substitution
                    out.append(self.adv())
                    self.adv()
                    out.append("(" + self._balanced("(", ")", line) + ")")
                    continue
                break
            if cond and c in "()":
                break
            if c == "\\":
                if self.peekc(1) == "\n":
                    self.adv(2)
                    self.continued = True
                    continue
                out.append(self.adv(2))
                continue
            if c == "'":
                end = self.s.find("'", self.i + 1)
                if end < 0:
                    raise ShellParseError("unbalanced single quote (')", line)
                out.append(self.adv(end - self.i + 1))
                continue
            if c == '"':
                out.append(self._double_quoted(line))
                continue
            if c == "`":
                out.append(self._backtick(line))
                continue
            if c == "$":
                out.append(self._dollar(line))
                continue
            out.append(self.adv())
        return "".join(out), None

    def _double_quoted(self, line: int) -> str:
        out = [self.adv()]
        while True:
            c = self.peekc()
            if not c:
                raise ShellParseError('unbalanced double quote (")', line)
            if c == '"':
                out.append(self.adv())
                return "".join(out)
            if c == "\\":
                out.append(self.adv(2))
                continue
            if c == "$":
                out.append(self._dollar(line))
                continue
            if c == "`":
                out.append(self._backtick(line))
                continue
            out.append(self.adv())

    def _backtick(self, line: int) -> str:
        out = [self.adv()]
        while True:
            c = self.peekc()
            if not c:
                raise ShellParseError("unbalanced backtick (`)", line)
            if c == "\\":
                out.append(self.adv(2))
                continue
            out.append(self.adv())
            if c == "`":
                return "".join(out)

    def _dollar(self, line: int) -> str:
        start = self.i
        self.adv()
        c = self.peekc()
        if c == "(" and self.peekc(1) == "(":
            self.adv(2)
            self._balanced("(", ")", line, depth_start=1)
            return self.s[start : self.i]
        if c == "(":
            self.adv()
            self._balanced("(", ")", line)
            return self.s[start : self.i]
        if c == "{":
            self.adv()
            self._balanced("{", "}", line)
            return self.s[start : self.i]
        if c == "'":
            j = self.i + 1
            while j < len(self.s) and self.s[j] != "'":
                j += 2 if self.s[j] == "\\" else 1
            if j >= len(self.s):
                raise ShellParseError("unbalanced $'", line)
            self.adv(j - self.i + 1)
            return self.s[start : self.i]
        return "$"

    def _balanced(self, open_: str, close: str, line: int, depth_start: int = 0) -> str:
        """From after an opening ``open_``: text up to the matching ``close`` (consumed)."""
        depth = 1 + depth_start
        begin = self.i
        nest = 0
        while True:
            c = self.peekc()
            if not c:
                raise ShellParseError(f"unbalanced {open_!r}", line)
            if c == "\\":
                self.adv(2)
                continue
            if c == "'" and open_ == "(":
                end = self.s.find("'", self.i + 1)
                if end < 0:
                    raise ShellParseError("unbalanced single quote (')", line)
                self.adv(end - self.i + 1)
                continue
            if c == '"':
                nest += 1
                if nest > LIMITS["nesting"]:
                    raise ShellLimitError(
                        f"line {line}: substitutions nested too deeply "
                        f"(more than {LIMITS['nesting']} levels)"
                    )
                self._double_quoted(line)
                continue
            if c == "`":
                self._backtick(line)
                continue
            if c == "#" and open_ == "(" and (self.i == 0 or self.s[self.i - 1] in " \t\n;"):
                while self.peekc() and self.peekc() != "\n":
                    self.adv()
                continue
            if c == open_:
                depth += 1
                if depth > LIMITS["nesting"]:
                    raise ShellLimitError(
                        f"line {line}: substitutions nested too deeply "
                        f"(more than {LIMITS['nesting']} levels)"
                    )
            elif c == close:
                depth -= 1
                if depth == 0:
                    text = self.s[begin : self.i]
                    self.adv()
                    return text
            self.adv()

    def _array_elements(self, line: int) -> list[str]:
        elements: list[str] = []
        while True:
            c = self.peekc()
            if not c:
                raise ShellParseError("unbalanced '(' in an array assignment", line)
            if c in " \t\n":
                self.adv()
                continue
            if c == "\\" and self.peekc(1) == "\n":
                self.adv(2)
                continue
            if c == "#":
                while self.peekc() and self.peekc() != "\n":
                    self.adv()
                continue
            if c == ")":
                self.adv()
                return elements
            raw, _ = self._word(line)
            if not raw:
                raise ShellParseError(f"syntax error in an array assignment near {c!r}", line)
            elements.append(raw)
            if len(elements) > LIMITS["array"]:
                raise ShellLimitError(f"line {line}: an array of more than {LIMITS['array']} words")


# ============================================================================ parser
@dataclass
class _Node:
    line: int


@dataclass
class _Simple(_Node):
    items: list[Any]  # raw word str | _ArrayLit
    redirs: list[_Redir]
    cut: int = 0


@dataclass
class _Pipeline(_Node):
    commands: list[_Node]
    negated: bool = False


@dataclass
class _AndOr(_Node):
    first: _Node
    rest: list[tuple[str, _Node]]


@dataclass
class _List(_Node):
    items: list[_Node]


@dataclass
class _If(_Node):
    clauses: list[tuple[_List, _List]]
    otherwise: _List | None


@dataclass
class _Loop(_Node):
    cond: _List
    body: _List
    until: bool


@dataclass
class _For(_Node):
    name: str
    words: list[str] | None
    body: _List
    select: bool = False


@dataclass
class _ArithFor(_Node):
    init: str
    cond: str
    step: str
    body: _List


@dataclass
class _Case(_Node):
    word: str
    items: list[tuple[list[str], _List]]


@dataclass
class _Group(_Node):
    body: _List
    subshell: bool
    redirs: list[_Redir] = field(default_factory=list)


@dataclass
class _FuncDef(_Node):
    name: str
    body: _Node


@dataclass
class _ArithCmd(_Node):
    expr: str


@dataclass
class _CondCmd(_Node):
    raw: list[str]


class _Parser:
    """Recursive descent over :class:`_Lexer` tokens, one complete command at a time."""

    def __init__(self, lexer: _Lexer) -> None:
        self.lx = lexer
        self.depth = 0

    def _enter(self, line: int) -> None:
        self.depth += 1
        if self.depth > LIMITS["nesting"]:
            raise ShellLimitError(
                f"line {line}: commands nested too deeply (more than {LIMITS['nesting']} levels)"
            )

    def _leave(self) -> None:
        self.depth -= 1

    def _is_word(self, text: str, k: int = 0) -> bool:
        tok = self.lx.peek(k)
        return tok.kind == "WORD" and tok.text == text

    def _skip_newlines(self) -> None:
        while self.lx.peek().kind == "NL":
            self.lx.take()

    def complete_command(self) -> _Node | None:
        """The next top-level command (an and-or list up to a newline), None at the end."""
        while True:
            tok = self.lx.peek()
            if tok.kind == "EOF":
                return None
            if tok.kind == "NL" or (tok.kind == "OP" and tok.text in (";", "&")):
                self.lx.take()
                continue
            break
        node = self._and_or()
        tok = self.lx.peek()
        if tok.kind == "OP" and tok.text in (";", "&"):
            self.lx.take()
        elif tok.kind == "NL":
            self.lx.take()
            if tok.cut:
                self._mark_cut(node, tok.cut)
        elif tok.kind != "EOF":
            raise ShellParseError(f"syntax error near unexpected token {tok.text!r}", tok.line)
        return node

    @staticmethod
    def _mark_cut(node: _Node, line: int) -> None:
        last: _Node = node
        while True:
            if isinstance(last, _AndOr):
                last = last.rest[-1][1] if last.rest else last.first
            elif isinstance(last, _Pipeline):
                last = last.commands[-1]
            else:
                break
        if isinstance(last, _Simple):
            last.cut = line

    def _list(self, stops: set[str]) -> _List:
        """Commands up to one of the reserved words ``stops`` (not consumed)."""
        line = self.lx.peek().line
        items: list[_Node] = []
        while True:
            self._skip_newlines()
            tok = self.lx.peek()
            if tok.kind == "EOF":
                return _List(line, items)
            if tok.kind == "WORD" and tok.text in stops:
                return _List(line, items)
            if tok.kind == "OP" and tok.text in (")", ";;", ";&", ";;&") and tok.text in stops:
                return _List(line, items)
            if tok.kind == "OP" and tok.text in (";", "&"):
                self.lx.take()
                continue
            node = self._and_or()
            items.append(node)
            tok = self.lx.peek()
            if tok.kind == "OP" and tok.text in (";", "&"):
                self.lx.take()
            elif tok.kind == "NL":
                self.lx.take()
                if tok.cut:
                    self._mark_cut(node, tok.cut)

    def _and_or(self) -> _Node:
        first = self._pipeline()
        rest: list[tuple[str, _Node]] = []
        while self.lx.peek().kind == "OP" and self.lx.peek().text in ("&&", "||"):
            op = self.lx.take().text
            self._skip_newlines()
            rest.append((op, self._pipeline()))
        return _AndOr(first.line, first, rest) if rest else first

    def _pipeline(self) -> _Node:
        line = self.lx.peek().line
        negated = False
        while self._is_word("!") or self._is_word("time"):
            negated ^= self.lx.take().text == "!"
        commands = [self._command()]
        while self.lx.peek().kind == "OP" and self.lx.peek().text in ("|", "|&"):
            self.lx.take()
            self._skip_newlines()
            commands.append(self._command())
        if len(commands) == 1 and not negated:
            return commands[0]
        return _Pipeline(line, commands, negated)

    def _expect_word(self, text: str, opened: int) -> None:
        tok = self.lx.take()
        if tok.kind != "WORD" or tok.text != text:
            found = "end of file" if tok.kind == "EOF" else repr(tok.text)
            raise ShellParseError(f"expected {text!r}, found {found}", opened)

    def _command(self) -> _Node:
        tok = self.lx.peek()
        line = tok.line
        self._enter(line)
        try:
            if tok.kind == "WORD":
                if tok.text == "if":
                    return self._if()
                if tok.text in ("while", "until"):
                    self.lx.take()
                    cond = self._list({"do"})
                    self._expect_word("do", line)
                    body = self._list({"done"})
                    self._expect_word("done", line)
                    self._redirects()
                    return _Loop(line, cond, body, tok.text == "until")
                if tok.text in ("for", "select"):
                    return self._for()
                if tok.text == "case":
                    return self._case()
                if tok.text == "{":
                    self.lx.take()
                    body = self._list({"}"})
                    self._expect_word("}", line)
                    return _Group(line, body, False, self._redirects())
                if tok.text == "function":
                    self.lx.take()
                    name = self.lx.take().text
                    if self.lx.peek().kind == "OP" and self.lx.peek().text == "(":
                        self.lx.take()
                        if self.lx.take().text != ")":
                            raise ShellParseError("expected ')' after '('", line)
                    self._skip_newlines()
                    return _FuncDef(line, name, self._command())
                nxt = self.lx.peek(1)
                if (
                    nxt.kind == "OP"
                    and nxt.text == "("
                    and self.lx.peek(2).kind == "OP"
                    and self.lx.peek(2).text == ")"
                    and re.fullmatch(r"[^\s$`'\"=]+", tok.text)
                ):
                    self.lx.take()
                    self.lx.take()
                    self.lx.take()
                    self._skip_newlines()
                    return _FuncDef(line, tok.text, self._command())
            if tok.kind == "OP" and tok.text == "(":
                self.lx.take()
                body = self._list({")"})
                if self.lx.take().text != ")":
                    raise ShellParseError("unbalanced '(' (subshell)", line)
                return _Group(line, body, True, self._redirects())
            if tok.kind == "ARITH":
                self.lx.take()
                return _ArithCmd(line, tok.text)
            if tok.kind == "COND":
                self.lx.take()
                return _CondCmd(line, tok.extra)
            return self._simple()
        finally:
            self._leave()

    def _redirects(self) -> list[_Redir]:
        out = []
        while self.lx.peek().kind == "REDIR":
            out.append(self.lx.take().extra)
        return out

    def _simple(self) -> _Simple:
        line = self.lx.peek().line
        items: list[Any] = []
        redirs: list[_Redir] = []
        while True:
            tok = self.lx.peek()
            if tok.kind == "WORD":
                if not items and tok.text in ("then", "do", "done", "fi", "esac", "elif", "else"):
                    raise ShellParseError(f"syntax error near unexpected token {tok.text!r}", line)
                items.append(self.lx.take().text)
            elif tok.kind == "ARRAY":
                items.append(self.lx.take().extra)
            elif tok.kind == "REDIR":
                redirs.append(self.lx.take().extra)
            else:
                break
        if not items and not redirs:
            found = "end of file" if tok.kind == "EOF" else repr(tok.text)
            raise ShellParseError(f"syntax error near unexpected token {found}", tok.line)
        return _Simple(line, items, redirs)

    def _if(self) -> _If:
        line = self.lx.take().line
        clauses = []
        cond = self._list({"then"})
        self._expect_word("then", line)
        body = self._list({"elif", "else", "fi"})
        clauses.append((cond, body))
        otherwise = None
        while True:
            tok = self.lx.take()
            if tok.kind == "WORD" and tok.text == "elif":
                cond = self._list({"then"})
                self._expect_word("then", line)
                clauses.append((cond, self._list({"elif", "else", "fi"})))
                continue
            if tok.kind == "WORD" and tok.text == "else":
                otherwise = self._list({"fi"})
                self._expect_word("fi", line)
                break
            if tok.kind == "WORD" and tok.text == "fi":
                break
            raise ShellParseError("'if' without a matching 'fi'", line)
        self._redirects()
        return _If(line, clauses, otherwise)

    def _for(self) -> _Node:
        tok = self.lx.take()
        line = tok.line
        if self.lx.peek().kind == "ARITH":
            parts = self.lx.take().text.split(";")
            if len(parts) != 3:
                raise ShellParseError("for ((...)) needs three expressions", line)
            self._loop_separator()
            self._expect_word("do", line)
            body = self._list({"done"})
            self._expect_word("done", line)
            return _ArithFor(line, parts[0], parts[1], parts[2], body)
        name = self.lx.take().text
        words: list[str] | None = None
        self._skip_newlines()
        if self._is_word("in"):
            self.lx.take()
            words = []
            while self.lx.peek().kind == "WORD":
                words.append(self.lx.take().text)
        self._loop_separator()
        if self._is_word("{"):
            self.lx.take()
            body = self._list({"}"})
            self._expect_word("}", line)
        else:
            self._expect_word("do", line)
            body = self._list({"done"})
            self._expect_word("done", line)
        self._redirects()
        return _For(line, name, words, body, tok.text == "select")

    def _loop_separator(self) -> None:
        while (self.lx.peek().kind == "OP" and self.lx.peek().text == ";") or (
            self.lx.peek().kind == "NL"
        ):
            self.lx.take()

    def _case(self) -> _Case:
        line = self.lx.take().line
        word = self.lx.take().text
        self._skip_newlines()
        self._expect_word("in", line)
        items: list[tuple[list[str], _List]] = []
        while True:
            self._skip_newlines()
            if self._is_word("esac"):
                self.lx.take()
                break
            if self.lx.peek().kind == "EOF":
                raise ShellParseError("'case' without a matching 'esac'", line)
            if self.lx.peek().kind == "OP" and self.lx.peek().text == "(":
                self.lx.take()
            patterns: list[str] = []
            while True:
                tok = self.lx.take()
                if tok.kind not in ("WORD", "ARRAY"):
                    raise ShellParseError(f"syntax error in a case pattern near {tok.text!r}", line)
                patterns.append(tok.text)
                nxt = self.lx.take()
                if nxt.kind == "OP" and nxt.text == "|":
                    continue
                if nxt.kind == "OP" and nxt.text == ")":
                    break
                raise ShellParseError("expected ')' after a case pattern", line)
            body = self._list({"esac", ";;", ";&", ";;&"})
            items.append((patterns, body))
            tok = self.lx.peek()
            if tok.kind == "OP" and tok.text in (";;", ";&", ";;&"):
                self.lx.take()
        self._redirects()
        return _Case(line, word, items)


# ============================================================================ expansion
@dataclass
class _Taint:
    unknown: list[str] = field(default_factory=list)
    unset: list[str] = field(default_factory=list)
    args: bool = False

    def add(self, other: _Taint) -> None:
        for u in other.unknown:
            if u not in self.unknown:
                self.unknown.append(u)
        for u in other.unset:
            if u not in self.unset:
                self.unset.append(u)
        self.args = self.args or other.args

    @property
    def undecidable(self) -> bool:
        return bool(self.unknown or self.unset or self.args)


@dataclass
class _Field:
    text: str
    taint: _Taint


class _World:
    """One possible state of the shell (a branch combination)."""

    def __init__(self) -> None:
        self.vars: dict[str, str] = {}
        self.arrays: dict[str, dict[int, str]] = {}
        self.assoc: dict[str, dict[str, str]] = {}
        self.taint: dict[str, _Taint] = {}
        self.exported: set[str] = set()
        self.funcs: dict[str, _Node] = {}
        self.pos: list[str] = []
        self.pos_known = False
        self.cwd: str | None = None
        self.dirstack: list[str | None] = []
        self.labels: tuple[tuple[int, str], ...] = ()
        self.loop: tuple[str, ...] = ()
        self.done = False
        self.aborted = False
        self.returning = False
        self.breaking = 0
        self.continuing = 0
        self.pending_cut: Command | None = None
        self.locals: list[dict[str, tuple[str | None, _Taint | None]]] = []
        self.file: str | None = None
        self.script: str = ""
        self.calls: tuple[str, ...] = ()
        self.via: tuple[str, ...] = ()
        self.line_offset = 0
        self.refs: dict[str, str] = {}
        """Namerefs (``declare -n NAME=TARGET``): NAME -> TARGET."""
        self.ref_frames: list[dict[str, str | None]] = []
        """Per function call: the namerefs ``local -n`` shadowed (None: none before)."""

    def copy(self) -> _World:
        w = _World()
        w.vars = dict(self.vars)
        w.arrays = {k: dict(v) for k, v in self.arrays.items()}
        w.assoc = {k: dict(v) for k, v in self.assoc.items()}
        w.taint = dict(self.taint)
        w.exported = set(self.exported)
        w.funcs = dict(self.funcs)
        w.pos = list(self.pos)
        w.pos_known = self.pos_known
        w.cwd = self.cwd
        w.dirstack = list(self.dirstack)
        w.labels = self.labels
        w.loop = self.loop
        w.done = self.done
        w.aborted = self.aborted
        w.returning = self.returning
        w.breaking = self.breaking
        w.continuing = self.continuing
        w.pending_cut = self.pending_cut
        w.locals = [dict(x) for x in self.locals]
        w.file = self.file
        w.script = self.script
        w.calls = self.calls
        w.via = self.via
        w.line_offset = self.line_offset
        w.refs = dict(self.refs)
        w.ref_frames = [dict(x) for x in self.ref_frames]
        return w

    @property
    def stopped(self) -> bool:
        return (
            self.done
            or self.aborted
            or self.returning
            or bool(self.breaking)
            or bool(self.continuing)
        )

    def deref(self, name: str) -> str:
        """The variable ``name`` stands for: its nameref target (followed, at most 8 hops, as
        far as the target is a plain name), else ``name`` itself."""
        for _ in range(8):
            target = self.refs.get(name)
            if target is None or not _NAME.fullmatch(target):
                return name
            name = target
        return name

    def is_set(self, name: str) -> bool:
        name = self.deref(name) if self.refs else name
        return name in self.vars or name in self.arrays or name in self.assoc

    def get(self, name: str) -> str | None:
        name = self.deref(name) if self.refs else name
        if name in self.vars:
            return self.vars[name]
        if name in self.arrays:
            return self.arrays[name].get(0)
        if name in self.assoc:
            return self.assoc[name].get("0")
        return None

    def set(self, name: str, value: str, taint: _Taint | None = None) -> None:
        name = self.deref(name) if self.refs else name
        if len(value) > LIMITS["string"]:
            raise ShellLimitError(
                f"the value of ${name} grows beyond {LIMITS['string']} characters"
            )
        if name in self.arrays:
            self.arrays[name][0] = value
        elif name in self.assoc:
            self.assoc[name]["0"] = value
        else:
            self.vars[name] = value
        if taint is not None and (taint.unknown or taint.unset or taint.args):
            self.taint[name] = taint
        else:
            self.taint.pop(name, None)

    def unset(self, name: str) -> None:
        name = self.deref(name) if self.refs else name
        self.vars.pop(name, None)
        self.arrays.pop(name, None)
        self.assoc.pop(name, None)
        self.taint.pop(name, None)


_SCRIPT_DIR_IDIOM = re.compile(
    r"^\s*(?:dirname\s+(?:--\s+)?(?P<a>\S+)"
    r"|cd\s+(?:--\s+)?\"?\$\(\s*dirname\s+(?:--\s+)?(?P<b>\S+?)\s*\)\"?"
    r"(?:\s*&>\s*/dev/null|\s*>\s*/dev/null(?:\s*2>&1)?)?\s*(?:&&|;)\s*pwd(?:\s+-P)?)\s*$"
)
_SELF = re.compile(r'^"?\$(?:0|\{0\}|\{BASH_SOURCE(?:\[0\])?\}|BASH_SOURCE)"?$')


class _Interp:
    """Interprets parsed commands on worlds, emitting :class:`Command` records."""

    def __init__(
        self,
        variables: dict[str, str],
        script_dir: str | None,
        script_path: str | None,
        reader: Callable[[str], str | None] | None,
    ) -> None:
        self.script_dir = script_dir
        self.script_path = script_path or ""
        self.reader = reader
        self.emitted: list[tuple[Command, tuple[tuple[int, str], ...]]] = []
        self.notes: list[str] = []
        self.files: dict[str, str] = {}
        self.steps = 0
        self.construct = 0
        self.outcomes: dict[int, int] = {}
        self.call_depth = 0
        self.initial = dict(variables)
        self.at = 0
        """Line of the node being interpreted (for notes raised inside expansions)."""

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    @staticmethod
    def _where(w: _World, line: int) -> str:
        """``line N`` in the script, ``FILE:N`` in a followed file."""
        return f"{w.file}:{line}" if w.file else f"line {line}"

    def _step(self, line: int) -> None:
        self.steps += 1
        if self.steps > LIMITS["commands"]:
            raise ShellLimitError(
                f"line {line}: the script unrolls into more than {LIMITS['commands']} commands "
                "(loops nested too deeply, or a function calling itself); the audit stops"
            )

    # ---------------------------------------------------------------- lists
    def run_list(self, nodes: list[_Node], worlds: list[_World]) -> list[_World]:
        for node in nodes:
            out: list[_World] = []
            for w in worlds:
                if w.stopped:
                    out.append(w)
                else:
                    out.extend(self.run(node, w)[0])
            worlds = self._cap(out, node.line)
        return worlds

    def _cap(self, worlds: list[_World], line: int) -> list[_World]:
        if len(worlds) > 1:
            worlds = _collapse(worlds)
        if len(worlds) > LIMITS["worlds"]:
            self.note(
                f"line {line}: more than {LIMITS['worlds']} combinations of undecidable branches; "
                f"only the first {LIMITS['worlds']} are followed"
            )
            return worlds[: LIMITS["worlds"]]
        return worlds

    def run(self, node: _Node, w: _World) -> tuple[list[_World], list[Any]]:
        """Interpret ``node`` in ``w``: the resulting worlds and their exit statuses.

        A status is 0 (true), 1 (false), ``"test"`` (an undecidable test) or ``"ext"`` (an
        external command: unknown, assumed to succeed outside conditions). An arithmetic
        expansion bash refuses abandons the rest of the top-level command, as bash does."""
        line = node.line + w.line_offset
        self.at = line
        try:
            return self._run_node(node, w)
        except _ArithAbort as err:
            self.note(
                f"{self._where(w, line)}: arithmetic expansion {err} fails in bash, which "
                "abandons this command and the rest of the top-level command it is in"
            )
            w.aborted = True
            return [w], [1]

    def _run_node(self, node: _Node, w: _World) -> tuple[list[_World], list[Any]]:
        if self.call_depth > LIMITS["call_depth"]:
            raise ShellLimitError(
                f"line {node.line}: calls nested too deeply (more than "
                f"{LIMITS['call_depth']} functions, sourced files or bash -c levels)"
            )
        if isinstance(node, _Simple):
            return self._simple(node, w)
        if isinstance(node, _AndOr):
            return self._and_or(node, w)
        if isinstance(node, _Pipeline):
            results: list[Any] = []
            worlds = [w]
            for cmd in node.commands:
                nxt: list[_World] = []
                results = []
                for x in worlds:
                    ws, sts = self.run(cmd, x)
                    nxt.extend(ws)
                    results.extend(sts)
                worlds = nxt
            if node.negated:
                results = [1 - s if isinstance(s, int) else s for s in results]
            return worlds, results
        if isinstance(node, _List):
            worlds = self.run_list(node.items, [w])
            return worlds, ["ext"] * len(worlds)
        if isinstance(node, _If):
            return self._if(node, w)
        if isinstance(node, _Case):
            return self._case(node, w)
        if isinstance(node, _For):
            return self._for(node, w)
        if isinstance(node, _ArithFor):
            return self._arith_for(node, w)
        if isinstance(node, _Loop):
            return self._loop(node, w)
        if isinstance(node, _Group):
            if node.subshell:
                inner = self.run_list(node.body.items, [w.copy()])
                for x in inner:
                    x.done = False
                return [w], ["ext"]
            worlds = self.run_list(node.body.items, [w])
            return worlds, ["ext"] * len(worlds)
        if isinstance(node, _FuncDef):
            w.funcs[node.name] = node.body
            return [w], [0]
        if isinstance(node, _ArithCmd):
            return [w], [self._arith_status(node.expr, w, node.line)]
        if isinstance(node, _CondCmd):
            return [w], [self._cond(node.raw, w, node.line)]
        raise TypeError(f"unknown node {type(node).__name__}")

    # ---------------------------------------------------------------- branches
    def _label(self, worlds: list[_World], cid: int, text: str) -> None:
        for x in worlds:
            x.labels = (*x.labels, (cid, text))

    def _finish_construct(self, cid: int, groups: list[list[_World]]) -> None:
        alive = sum(1 for g in groups if any(not x.done for x in g))
        self.outcomes[cid] = alive

    def _decide(
        self,
        line: int,
        labels: tuple[str, str],
        status: Any,
        yes: Callable[[_World], list[tuple[_World, Any]]],
        no: Callable[[_World], list[tuple[_World, Any]]],
        w: _World,
    ) -> list[tuple[_World, Any]]:
        """Take the branch a test decides, or read both branches when it is undecidable.

        A test decided only in a clean environment (``("env", 0|1)``: it looks at a variable
        the script never sets, or at a script argument) is taken as bash would take it, except
        when that branch only prints a message and exits: a guard that asks for the variable,
        read as if the check passed (noted)."""
        if status == 0:
            return yes(w)
        if status == 1:
            return no(w)
        if isinstance(status, tuple):
            primary, secondary = (yes, no) if status[1] == 0 else (no, yes)
            mark = len(self.emitted)
            trial = primary(w.copy())
            if trial and all(x.done for x, _ in trial) and self._only_messages(mark):
                del self.emitted[mark:]
                self.note(
                    f"line {line}: in a clean environment the script exits here (it checks a "
                    "variable or argument it never sets); read as if the check passed"
                )
                return secondary(w)
            self.note(
                f"line {line}: a test on a variable or script argument the script never sets is "
                "read as in a clean environment (unset, no arguments); --var NAME=VALUE sets it"
            )
            return trial
        cid = self._new_construct()
        other = w.copy()
        self._label([w], cid, labels[0])
        self._label([other], cid, labels[1])
        a = yes(w)
        b = no(other)
        self._finish_construct(cid, [[x for x, _ in a], [x for x, _ in b]])
        return a + b

    def _only_messages(self, mark: int) -> bool:
        quiet = _BUILTINS | {"echo", "printf", "cat", "logger"}
        return all(os.path.basename(c.words[0]) in quiet for c, _ in self.emitted[mark:])

    def _and_or(self, node: _AndOr, w: _World) -> tuple[list[_World], list[Any]]:
        worlds, statuses = self.run(node.first, w)
        pairs = list(zip(worlds, statuses, strict=True))
        for op, part in node.rest:
            nxt: list[tuple[_World, Any]] = []
            for x, st in pairs:
                if x.stopped:
                    nxt.append((x, st))
                    continue
                if st == "ext":
                    st = 0  # an external command: assumed to succeed

                def run_part(y: _World, part: _Node = part) -> list[tuple[_World, Any]]:
                    ws, sts = self.run(part, y)
                    return list(zip(ws, sts, strict=True))

                def skip(y: _World, value: int) -> list[tuple[_World, Any]]:
                    return [(y, value)]

                def skip_false(y: _World) -> list[tuple[_World, Any]]:
                    return skip(y, 1)

                def skip_true(y: _World) -> list[tuple[_World, Any]]:
                    return skip(y, 0)

                yes: Callable[[_World], list[tuple[_World, Any]]]
                no: Callable[[_World], list[tuple[_World, Any]]]
                if op == "&&":
                    yes, no = run_part, skip_false
                else:
                    yes, no = skip_true, run_part
                labels = (f"test@{node.line}=true", f"test@{node.line}=false")
                nxt.extend(self._decide(node.line, labels, st, yes, no, x))
            pairs = nxt
        return [p[0] for p in pairs], [p[1] for p in pairs]

    def _new_construct(self) -> int:
        self.construct += 1
        return self.construct

    def _if(self, node: _If, w: _World) -> tuple[list[_World], list[Any]]:
        worlds = [x for x, _ in self._if_from(node, 0, w)]
        return worlds, ["ext"] * len(worlds)

    def _if_from(self, node: _If, k: int, w: _World) -> list[tuple[_World, Any]]:
        if k == len(node.clauses):
            rest = self.run_list(node.otherwise.items, [w]) if node.otherwise else [w]
            return [(x, "ext") for x in rest]
        cond, body = node.clauses[k]
        out: list[tuple[_World, Any]] = []
        ws = self.run_list(cond.items[:-1], [w]) if len(cond.items) > 1 else [w]
        name = "then" if k == 0 else f"elif{k}"
        last = k == len(node.clauses) - 1
        labels = (
            f"if@{node.line}={name}",
            f"if@{node.line}=" + ("else" if last else f"not-{name}"),
        )

        def yes(x: _World) -> list[tuple[_World, Any]]:
            return [(y, "ext") for y in self.run_list(body.items, [x])]

        def no(x: _World) -> list[tuple[_World, Any]]:
            return self._if_from(node, k + 1, x)

        for y in ws:
            if y.stopped:
                out.append((y, "ext"))
                continue
            zs, sts = self.run(cond.items[-1], y) if cond.items else ([y], [0])
            for z, st in zip(zs, sts, strict=True):
                if z.stopped:
                    out.append((z, "ext"))
                    continue
                out.extend(self._decide(node.line, labels, st, yes, no, z))
        return out

    def _case(self, node: _Case, w: _World) -> tuple[list[_World], list[Any]]:
        fields = self.expand(node.word, w, split=False)
        word = fields[0] if fields else _Field("", _Taint())
        taint = word.taint
        chosen: int | None = None
        decidable = not taint.unknown and not any(scheduler_variable(n) for n in taint.unset)
        if decidable:
            for idx, (patterns, _) in enumerate(node.items):
                for pat in patterns:
                    p, pt = self._expand_string(pat, w)
                    if pt.unknown:
                        decidable = False
                        break
                    if _glob_match(word.text, p):
                        chosen = idx
                        break
                if chosen is not None or not decidable:
                    break
        if decidable and not (taint.unset or taint.args):
            if chosen is None:
                return [w], [0]
            ws = self.run_list(node.items[chosen][1].items, [w])
            return ws, ["ext"] * len(ws)
        skip: set[int] = set()
        if decidable:  # decided in a clean environment only
            mark = len(self.emitted)
            if chosen is None:
                return [w], [0]
            trial = self.run_list(node.items[chosen][1].items, [w.copy()])
            if not (all(x.done for x in trial) and self._only_messages(mark)):
                return trial, ["ext"] * len(trial)
            del self.emitted[mark:]
            self.note(
                f"line {node.line}: in a clean environment the script exits here (its case word "
                "is a variable or argument it never sets); every other branch is read"
            )
            skip.add(chosen)
        cid = self._new_construct()
        out: list[_World] = []
        groups: list[list[_World]] = []
        for idx, (patterns, body) in enumerate(node.items):
            if idx in skip:
                continue
            x = w.copy()
            self._label([x], cid, f"case@{node.line}={'|'.join(patterns)}")
            taken = self.run_list(body.items, [x])
            out.extend(taken)
            groups.append(taken)
        if not skip and not any(p == "*" for patterns, _ in node.items for p in patterns):
            x = w.copy()
            self._label([x], cid, f"case@{node.line}=no-match")
            out.append(x)
            groups.append([x])
        self._finish_construct(cid, groups)
        return self._cap(out, node.line), ["ext"] * len(out)

    def _for(self, node: _For, w: _World) -> tuple[list[_World], list[Any]]:
        if node.words is None:
            values = list(w.pos)
        else:
            values = [f.text for raw in node.words for f in self.expand(raw, w)]
        if node.select:
            values = values[:1]
        worlds = [w]
        outer = w.loop
        for value in values:
            nxt: list[_World] = []
            for x in worlds:
                if x.done or x.returning:
                    nxt.append(x)
                    continue
                x.set(node.name, value)
                x.loop = (*outer, f"{node.name}={value}")
                nxt.extend(self.run_list(node.body.items, [x]))
            worlds = []
            stop = False
            for x in nxt:
                x.continuing = max(0, x.continuing - 1)
                if x.breaking:
                    x.breaking -= 1
                    stop = True
                worlds.append(x)
            if stop and all(not x.stopped for x in worlds):
                break
        for x in worlds:
            x.loop = outer
        return worlds, [0] * len(worlds)

    def _arith_for(self, node: _ArithFor, w: _World) -> tuple[list[_World], list[Any]]:
        try:
            self._arith_value(node.init, w, node.line)
            count = 0
            worlds = [w]
            outer = w.loop
            while True:
                cond = self._arith_value(node.cond, w, node.line) if node.cond.strip() else 1
                if cond is None:
                    raise _ArithError("undecidable")
                if not cond:
                    break
                count += 1
                if count > LIMITS["loop_iterations"]:
                    raise ShellLimitError(
                        f"line {node.line}: a for ((...)) loop of more than "
                        f"{LIMITS['loop_iterations']} iterations"
                    )
                label = ", ".join(
                    f"{n}={w.get(n)}"
                    for n in dict.fromkeys(_NAME.findall(node.init))
                    if w.get(n) is not None
                )
                w.loop = (*outer, label) if label else outer
                worlds = self.run_list(node.body.items, [w])
                if len(worlds) != 1 or worlds[0].stopped:
                    break
                w = worlds[0]
                self._arith_value(node.step, w, node.line)
            for x in worlds:
                x.loop = outer
                x.breaking = x.continuing = 0
            return worlds, [0] * len(worlds)
        except _ArithError:
            self.note(f"line {node.line}: for ((...)) loop not decidable; its body is read once")
            worlds = self.run_list(node.body.items, [w])
            for x in worlds:
                x.breaking = x.continuing = 0
            return worlds, [0] * len(worlds)

    def _loop(self, node: _Loop, w: _World) -> tuple[list[_World], list[Any]]:
        worlds = self.run_list(node.cond.items[:-1], [w]) if node.cond.items else [w]
        out: list[_World] = []
        for x in worlds:
            if x.stopped:
                out.append(x)
                continue
            zs, sts = self.run(node.cond.items[-1], x) if node.cond.items else ([x], [0])
            for z, st in zip(zs, sts, strict=True):
                if z.stopped:
                    out.append(z)
                    continue
                first = (1 - st) if node.until and isinstance(st, int) else st
                if first == 1:
                    out.append(z)
                    continue
                kind = "until" if node.until else "while"
                if isinstance(first, tuple) and first[0] == "env":
                    clean = (1 - first[1]) if node.until else first[1]
                    if clean == 1:  # e.g. while [[ $# -gt 0 ]]: no arguments in a clean run
                        self.note(
                            f"line {node.line}: the {kind} loop's test is false in a clean "
                            "environment (it looks at script arguments or variables the script "
                            "never sets), so its body does not run, as in bash; --var sets them"
                        )
                        out.append(z)
                        continue
                self.note(f"line {node.line}: {kind} loop body read once")
                for y in self.run_list(node.body.items, [z]):
                    y.breaking = y.continuing = 0
                    out.append(y)
        return out, [0] * len(out)

    # ---------------------------------------------------------------- conditions
    def _arith_value(self, expr: str, w: _World, line: int, expansion: bool = False) -> int | None:
        """The value of arithmetic ``expr`` (None when unknown); an error bash reports is a
        note, or with ``expansion`` (``$((...))``) an :class:`_ArithAbort`."""
        line = line or self.at
        text, taint = self._expand_string(expr, w, in_arith=True)
        if taint.unknown:
            return None
        names = [n for n in _NAME.findall(text) if not w.is_set(n)]

        def get(name: str) -> str | None:
            base = name.split("[", 1)[0]
            if "[" in name:
                sub = name[len(base) + 1 : -1]
                if base in w.assoc:
                    return w.assoc[base].get(sub)
                idx = self._arith_value(sub, w, line) or 0
                return w.arrays.get(base, {}).get(idx)
            value = w.get(base)
            if base in w.taint and w.taint[base].unknown:
                raise _ArithError("unknown")
            return value

        def put(name: str, value: int) -> None:
            w.set(name.split("[", 1)[0], str(value))

        try:
            value = _Arith(text, get, put).run()
        except _ArithError as err:
            if str(err) != "unknown":
                if expansion:
                    raise _ArithAbort(f"$(({_short(expr.strip())})): {err}") from err
                self.note(
                    f"{self._where(w, line)}: arithmetic {_short(expr.strip())} fails in bash "
                    f"({err})"
                )
            return None
        if names and any(n not in self.initial for n in names):
            return value
        return value

    def _arith_status(self, expr: str, w: _World, line: int) -> Any:
        value = self._arith_value(expr, w, line)
        if value is None:
            return "test"
        unset = [n for n in _NAME.findall(expr) if not w.is_set(n)]
        status = 0 if value else 1
        if any(scheduler_variable(n) for n in unset):
            return "test"
        return ("env", status) if unset else status

    def _cond(self, raw: list[str], w: _World, line: int) -> Any:
        """``[[ ... ]]``: 0/1 when decidable, ``("env", 0|1)`` in a clean environment only,
        else ``"test"``."""
        ev = _CondEval(raw, self, w, double=True)
        try:
            result = ev.run()
        except _Undecidable:
            return "test"
        status = 0 if result else 1
        if ev.scheduler:
            return "test"
        return ("env", status) if ev.env else status

    def _test(self, fields: list[_Field], w: _World) -> Any:
        if any(f.taint.unknown for f in fields):
            return "test"
        ev = _CondEval([f.text for f in fields], self, w, double=False)
        try:
            result = ev.run()
        except _Undecidable:
            return "test"
        status = 0 if result else 1
        if any(scheduler_variable(n) for f in fields for n in f.taint.unset):
            return "test"
        env = any(f.taint.unset or f.taint.args for f in fields)
        return ("env", status) if env else status

    # ---------------------------------------------------------------- simple commands
    def _simple(self, node: _Simple, w: _World) -> tuple[list[_World], list[Any]]:
        self._step(node.line)
        items = node.items
        if w.pending_cut is not None:
            first = items[0] if items else None
            if isinstance(first, str) and _ORPHAN.match(first.lstrip("\"'")):
                cut = w.pending_cut
                for raw in items:
                    if isinstance(raw, str):
                        cut.dropped.extend(f.text for f in self.expand(raw, w))
                return [w], [0]
        w.pending_cut = None
        # split leading assignments from the words
        assigns: list[Any] = []
        k = 0
        while k < len(items):
            item = items[k]
            if isinstance(item, _ArrayLit) or (isinstance(item, str) and _ASSIGN.match(item)):
                assigns.append(item)
                k += 1
            else:
                break
        words: list[_Field] = []
        vanished: list[str] = []
        rest = items[k:]
        for item in rest:
            if isinstance(item, _ArrayLit):
                words.append(_Field(item.name + ("+=" if item.append else "="), _Taint()))
                words[-1].array = item  # type: ignore[attr-defined]
                continue
            words.extend(self.expand(item, w, vanished=vanished))
        if not words:
            status: Any = 0
            for a in assigns:
                st = self._assign(a, w, node.line)
                if st is not None:
                    status = st
            return [w], [status]
        name = words[0].text
        if name in _DECLARE and not getattr(words[0], "array", None):
            return self._declare(name, rest[1:], w, node.line)
        prefix: dict[str, str] = {}
        for a in assigns:
            if isinstance(a, str):
                m = _ASSIGN.match(a)
                assert m is not None
                prefix[m.group(1)] = self._expand_string(m.group(4), w)[0]
        if name == "printf" and len(words) > 1 and words[1].text.startswith("-v"):
            return self._printf_v(words, node, w)
        if name in w.funcs and not getattr(words[0], "array", None):
            return self._call(
                w.funcs[name], [f.text for f in words[1:]], w, node.line + w.line_offset, name
            )
        if name in _BUILTINS:
            self._emit(words, prefix, node, w)
            builtin = self._builtin(name, words, prefix, node, w)
            if builtin is not None:
                return builtin
        cmd = self._emit(words, prefix, node, w, vanished)
        worlds = self._follow(cmd, words, prefix, node, w)
        return worlds, ["ext"] * len(worlds)

    def _emit(
        self,
        words: list[_Field],
        prefix: dict[str, str],
        node: _Simple,
        w: _World,
        vanished: list[str] | None = None,
    ) -> Command:
        cmd = Command(
            words=[f.text for f in words], line=node.line + w.line_offset, assignments=prefix
        )
        cmd.calls = w.calls
        cmd.via = w.via
        for v in vanished or ():
            cmd.vanished.append(v)
            if v not in cmd.unresolved:
                cmd.unresolved.append(v)
        cmd.loop = w.loop
        cmd.file = w.file
        cmd.cwd = w.cwd
        for i, f in enumerate(words):
            if f.taint.unknown:
                cmd.unknown[i] = list(f.taint.unknown)
                for u in f.taint.unknown:
                    if u.startswith(("$(", "`", "<(")):
                        text = f"command substitution {u} is not run; its value is unknown"
                    else:
                        text = f"{u}: its value is unknown to the audit"
                    self._note_cmd(cmd, text)
            if f.taint.unset:
                cmd.unset_in[i] = list(f.taint.unset)
                for u in f.taint.unset:
                    if u not in cmd.unresolved:
                        cmd.unresolved.append(u)
            if f.taint.args:
                cmd.args_forwarded = True
        for raw in node.items:
            if (
                not w.pos_known
                and isinstance(raw, str)
                and re.search(r"\$(?:@|\*|\{[@*]\}|\d|\{\d+\})", raw)
            ):
                cmd.args_forwarded = True
                self._note_cmd(
                    cmd, "script arguments ($1, $@, ...) are unknown to the audit; read as empty"
                )
        for r in node.redirs:
            if r.heredoc is not None:
                body = r.heredoc.body or ""
                if not r.heredoc.quoted:
                    body = self._expand_heredoc(body, w)
                if cmd.heredoc is None:
                    cmd.heredoc = body
        if node.cut:
            cmd.warnings.append(
                f"line {node.cut}: a comment inside the continued command ends it "
                "(bash ignores the '\\' inside a comment); the lines after it are separate "
                "commands, not arguments"
            )
            w.pending_cut = cmd
        self.emitted.append((cmd, w.labels))
        return cmd

    def _printf_v(
        self, words: list[_Field], node: _Simple, w: _World
    ) -> tuple[list[_World], list[Any]]:
        """``printf -v VAR FORMAT ARGS...``: VAR gets the formatted text (unknown when a word
        is, or when the format has a conversion the reader does not model)."""
        rest = list(words[1:])
        flag = rest.pop(0).text
        if flag == "-v":
            if not rest:
                return [w], [2]
            target = rest.pop(0).text
        else:
            target = flag[2:]
        if rest and rest[0].text == "--":
            rest.pop(0)
        if not rest or not re.fullmatch(r"[A-Za-z_]\w*(\[[^\]]*\])?", target):
            return [w], [2]  # bash: usage error (or an invalid name), nothing is set
        taint = _Taint()
        for f in rest:
            taint.add(f.taint)
        value = None if taint.unknown else printf(rest[0].text, [f.text for f in rest[1:]])
        if value is None:
            text = " ".join(f.text for f in words)
            label = f"printf -v {target} ... ({_short(text)})"
            taint = _Taint(unknown=[*taint.unknown, label] if taint.unknown else [label])
            value = text
        base, _, sub = target.partition("[")
        if sub:
            key = sub[:-1]
            if base in w.assoc:
                w.assoc[base][self._expand_string(key, w)[0]] = value
            else:
                idx = self._arith_value(key, w, node.line + w.line_offset)
                if idx is None:
                    self.note(f"line {node.line}: printf -v {target}: index not decidable")
                    return [w], [0]
                w.arrays.setdefault(base, {})[idx] = value
            if taint.undecidable:
                w.taint[base] = taint
            return [w], [0]
        w.set(target, value, taint)
        return [w], [0]

    @staticmethod
    def _note_cmd(cmd: Command, text: str) -> None:
        if text not in cmd.notes:
            cmd.notes.append(text)

    def _assign(self, item: Any, w: _World, line: int) -> Any:
        if isinstance(item, _ArrayLit) and w.refs:
            item = _ArrayLit(w.deref(item.name), item.append, item.elements, item.line)
        if isinstance(item, _ArrayLit):
            values: list[str] = []
            taint = _Taint()
            assoc: dict[str, str] = {}
            for raw in item.elements:
                m = re.match(r"^\[([^\]]*)\]=(.*)$", raw, re.S)
                if m:
                    key = self._expand_string(m.group(1), w)[0]
                    val, t = self._expand_string(m.group(2), w)
                    assoc[key] = val
                    taint.add(t)
                    continue
                for f in self.expand(raw, w):
                    values.append(f.text)
                    taint.add(f.taint)
            if len(values) > LIMITS["array"]:
                raise ShellLimitError(f"line {line}: an array of more than {LIMITS['array']} words")
            if assoc and (item.name in w.assoc or not values):
                target = w.assoc.setdefault(item.name, {}) if item.append else {}
                target.update(assoc)
                w.assoc[item.name] = target
                w.vars.pop(item.name, None)
            else:
                old = w.arrays.get(item.name, {}) if item.append else {}
                if item.append and item.name in w.vars and item.name not in w.arrays:
                    old = {0: w.vars[item.name]}
                start = max(old) + 1 if old else 0
                new = dict(old)
                for j, v in enumerate(values):
                    new[start + j] = v
                w.arrays[item.name] = new
                w.vars.pop(item.name, None)
            if taint.undecidable:
                w.taint[item.name] = taint
            return None
        m = _ASSIGN.match(item)
        assert m is not None
        name, sub, op, raw = m.group(1), m.group(2), m.group(3), m.group(4)
        value, taint = self._expand_string(raw, w, assignment=True)
        if w.refs.get(name) == "" and sub is None:  # declare -n REF; REF=TARGET
            w.refs[name] = value
            return None
        name = w.deref(name) if w.refs else name
        if sub is not None:
            key_raw = sub[1:-1]
            if name in w.assoc:
                key = self._expand_string(key_raw, w)[0]
                prev = w.assoc[name].get(key, "") if op == "+=" else ""
                w.assoc[name][key] = prev + value
            else:
                idx = self._arith_value(key_raw, w, line)
                if idx is None:
                    self.note(f"line {line}: array index [{key_raw}] not decidable; ignored")
                    return None
                arr = w.arrays.setdefault(name, {})
                if name in w.vars:
                    arr[0] = w.vars.pop(name)
                prev = arr.get(idx, "") if op == "+=" else ""
                arr[idx] = prev + value
            return None
        if op == "+=":
            old_taint = w.taint.get(name)
            if old_taint is not None:
                taint.add(old_taint)
            value = (w.get(name) or "") + value
        w.set(name, value, taint)
        return "ext" if taint.unknown else None

    def _declare(
        self, name: str, rest: list[Any], w: _World, line: int
    ) -> tuple[list[_World], list[Any]]:
        flags = ""
        for item in rest:
            if isinstance(item, _ArrayLit):
                if name == "local" and w.locals:
                    self._save_local(item.name, w)
                self._assign(item, w, line)
                if name == "export" or "x" in flags:
                    w.exported.add(item.name)
                continue
            fields = self.expand(item, w, split=not _ASSIGN.match(item))
            for f in fields:
                text = f.text
                if text.startswith(("-", "+")) and not _ASSIGN.match(text):
                    flags += text
                    continue
                if "n" in flags.lstrip("+") and not flags.startswith("+"):
                    self._nameref(name, text, f.taint, w, line)
                    break
                m = _ASSIGN.match(item) if _ASSIGN.match(item) else None
                target = m.group(1) if m else text
                if name == "local" and w.locals:
                    self._save_local(target, w)
                if m:
                    self._assign(item, w, line)
                elif "a" in flags and target not in w.arrays:
                    w.arrays[target] = {}
                elif "A" in flags and target not in w.assoc:
                    w.assoc[target] = {}
                elif name == "local" and not w.is_set(target):
                    w.set(target, "")
                if name == "export" or "x" in flags:
                    w.exported.add(target)
                if "f" in flags:
                    pass
                break
        return [w], [0]

    def _nameref(self, name: str, text: str, taint: _Taint, w: _World, line: int) -> None:
        """``declare -n REF=TARGET`` (``local -n``, ``typeset -n``): REF stands for TARGET."""
        ref, eq, target = text.partition("=")
        if not _NAME.fullmatch(ref):
            return
        if name == "local" and w.locals and w.ref_frames:
            w.ref_frames[-1].setdefault(ref, w.refs.get(ref))
        if not eq:
            w.refs.pop(ref, None)  # a nameref without a target yet: REF=NAME later sets it
            w.refs[ref] = ""
            return
        if taint.unknown or not (_NAME.fullmatch(target) or re.fullmatch(r"\w+\[[^\]]*\]", target)):
            self.note(
                f"{self._where(w, line)}: nameref {ref} -> {_short(target)} cannot be followed; "
                f"${ref} is unknown"
            )
            w.refs.pop(ref, None)
            w.set(ref, text, _Taint(unknown=[f"${ref} (a nameref to {_short(target)})"]))
            return
        w.refs[ref] = target

    def _save_local(self, name: str, w: _World) -> None:
        frame = w.locals[-1]
        if name not in frame:
            frame[name] = (w.get(name) if w.is_set(name) else None, w.taint.get(name))

    def _call(
        self, body: _Node, args: list[str], w: _World, line: int, name: str = ""
    ) -> tuple[list[_World], list[Any]]:
        saved = (w.pos, w.pos_known)
        saved_calls = w.calls
        w.pos, w.pos_known = list(args), True
        w.calls = (*w.calls, f"{name}@{line}")
        w.locals.append({})
        w.ref_frames.append({})
        self.call_depth += 1
        try:
            worlds, statuses = self.run(body, w)
        finally:
            self.call_depth -= 1
        for x in worlds:
            refs = x.ref_frames.pop() if x.ref_frames else {}
            for n, old_ref in refs.items():
                if old_ref is None:
                    x.refs.pop(n, None)
                else:
                    x.refs[n] = old_ref
            frame = x.locals.pop() if x.locals else {}
            for n, (old, taint) in frame.items():
                if old is None:
                    x.unset(n)
                else:
                    x.set(n, old, taint)
            x.pos, x.pos_known = saved
            x.calls = saved_calls
            x.returning = False
        return worlds, statuses

    # ---------------------------------------------------------------- builtins
    def _builtin(
        self,
        name: str,
        words: list[_Field],
        prefix: dict[str, str],
        node: _Simple,
        w: _World,
    ) -> tuple[list[_World], list[Any]] | None:
        args = [f.text for f in words[1:]]
        if name in ("true", ":"):
            return [w], [0]
        if name == "false":
            return [w], [1]
        if name in ("[", "test"):
            fields = words[1:]
            if name == "[":
                if not fields or fields[-1].text != "]":
                    return [w], [1]
                fields = fields[:-1]
            return [w], [self._test(fields, w)]
        if name == "exit":
            w.done = True
            return [w], [0]
        if name == "return":
            w.returning = True
            return [w], [0]
        if name in ("break", "continue"):
            n = int(args[0]) if args and args[0].isdigit() else 1
            if name == "break":
                w.breaking = n
            else:
                w.continuing = n
            return [w], [0]
        if name == "unset":
            for a in args:
                if a.startswith("-"):
                    continue
                if "-f" in args:
                    w.funcs.pop(a, None)
                elif "-n" in args:
                    w.refs.pop(a, None)
                else:
                    w.unset(a)
            return [w], [0]
        if name == "shift":
            n = int(args[0]) if args and args[0].isdigit() else 1
            w.pos = w.pos[n:]
            return [w], [0]
        if name == "set":
            if "--" in args:
                w.pos = args[args.index("--") + 1 :]
                w.pos_known = True
            return [w], [0]
        if name == "let":
            status: Any = 0
            for a in args:
                status = self._arith_status(a, w, node.line)
            return [w], [status]
        if name in ("cd", "pushd", "popd"):
            return self._cd(name, args, w)
        if name in ("source", "."):
            return self._source(args, w, node)
        if name == "eval":
            text = " ".join(args)
            return self._run_text(text, w, node.line + w.line_offset, None, keep_state=True)
        if name in ("read", "mapfile", "readarray"):
            return self._read(name, words, node, w)
        if name in ("shopt", "alias", "unalias", "trap", "umask", "wait", "hash", "ulimit"):
            return [w], [0]
        return None

    def _cd(self, name: str, args: list[str], w: _World) -> tuple[list[_World], list[Any]]:
        target = next((a for a in args if not a.startswith("-") or a == "-"), None)
        if name == "popd":
            w.cwd = w.dirstack.pop() if w.dirstack else None
            return [w], [0]
        if name == "pushd":
            w.dirstack.append(w.cwd)
        if target is None or target.startswith("~") or target == "-" or "$(" in target:
            w.cwd = None
            return [w], ["ext"]
        base = w.cwd or self.script_dir
        if os.path.isabs(target):
            w.cwd = os.path.normpath(target)
        elif base is not None:
            w.cwd = os.path.normpath(os.path.join(base, target))
        else:
            w.cwd = None
        return [w], ["ext"]

    def resolve(self, path: str, w: _World) -> str | None:
        """A path the script names, as the reader can find it: known virtual files first, then
        the working directory, the script's directory and its parents. None if not found."""
        if not path or "$(" in path or path.startswith("~"):
            return None
        candidates: list[str] = []
        if os.path.isabs(path):
            candidates.append(os.path.normpath(path))
        else:
            bases = [b for b in (w.cwd, self.script_dir) if b]
            d = self.script_dir
            while d:
                parent = os.path.dirname(d)
                if parent == d:
                    break
                bases.append(parent)
                d = parent
            candidates += [os.path.normpath(os.path.join(b, path)) for b in dict.fromkeys(bases)]
        for c in candidates:
            if c in self.files:
                return c
        for c in candidates:
            if os.path.isfile(c):
                return c
        return None

    def read_file(self, path: str) -> str | None:
        if path in self.files:
            return self.files[path]
        if self.reader is None:
            return None
        return self.reader(path)

    def _source(self, args: list[str], w: _World, node: _Simple) -> tuple[list[_World], list[Any]]:
        if not args:
            return [w], [1]
        found = self.resolve(args[0], w)
        text = self.read_file(found) if found else None
        if text is None:
            self.note(
                f"line {node.line}: source {args[0]}: not found beside the script, not followed "
                "(variables it would set are unset here)"
            )
            return [w], ["ext"]
        saved = (w.pos, w.pos_known)
        if len(args) > 1:
            w.pos, w.pos_known = args[1:], True
        worlds, sts = self._run_text(text, w, node.line + w.line_offset, found, keep_state=True)
        for x in worlds:
            if len(args) > 1:
                x.pos, x.pos_known = saved
            x.returning = False
        return worlds, sts

    def _run_text(
        self, text: str, w: _World, line: int, file: str | None, keep_state: bool
    ) -> tuple[list[_World], list[Any]]:
        """Read ``text`` as shell in ``w`` (``source``, ``eval``, ``bash -c`` with a copy)."""
        self.call_depth += 1
        saved = (w.file, w.via, w.line_offset)
        if file is not None:
            here = f"{w.file}:{line}" if w.file else f":{line}"
            w.via = (*w.via, here)
            w.file = file
            w.line_offset = 0
        else:
            w.line_offset = line - 1
        try:
            lexer = _Lexer(text)
            parser = _Parser(lexer)
            worlds = [w]
            while True:
                try:
                    node = parser.complete_command()
                except ShellParseError as err:
                    where = file or f"{self.script_path or 'script'}:{line}"
                    self.note(f"{where}: cannot parse: {err}; not read further")
                    break
                if node is None:
                    break
                out: list[_World] = []
                for x in worlds:
                    out.extend([x] if x.stopped else self.run(node, x)[0])
                worlds = self._cap(out, line)
        finally:
            self.call_depth -= 1
        for x in worlds:
            x.file, x.via, x.line_offset = saved
        return worlds, ["ext"] * len(worlds)

    _READ_VALUED = frozenset(("-a", "-d", "-i", "-n", "-N", "-p", "-t", "-u"))
    """``read`` options that take a value (``-a NAME`` names the array)."""
    _MAPFILE_VALUED = frozenset(("-d", "-n", "-O", "-s", "-u", "-C", "-c"))
    """``mapfile``/``readarray`` options that take a value (``-t`` takes none)."""

    def _input_of(self, node: _Simple, w: _World) -> tuple[str | None, str]:
        """The text a builtin reads on its standard input, when the script says it: a
        here-document, a here-string, a process substitution of known output (``< <(echo
        ...)``), or a file beside the script (as it is now); else (None, what it reads)."""
        for r in node.redirs:
            if r.fd not in ("", "0"):
                continue
            if r.heredoc is not None:
                body = r.heredoc.body or ""
                return (body if r.heredoc.quoted else self._expand_heredoc(body, w)), ""
            if r.op == "<<<":
                text, taint = self._expand_string(r.target, w)
                return (
                    (None, "a here-string of unknown value")
                    if taint.unknown
                    else (
                        text + "\n",
                        "",
                    )
                )
            if r.op == "<" and r.target.startswith("<(") and r.target.endswith(")"):
                value, taint = self.substitution(r.target[2:-1], w, r.target)
                if value is None or taint.unknown:
                    return None, f"the output of {_short(r.target)}, which is not run"
                return value + "\n" if value else "", ""
            if r.op == "<":
                target, taint = self._expand_string(r.target, w)
                path = None if taint.unknown else self.resolve(target, w)
                found = self.read_file(path) if path else None
                if found is None:
                    return None, f"the file {_short(r.target)}, which the audit cannot read"
                return found, ""
        return None, "standard input"

    def _read(
        self, name: str, words: list[_Field], node: _Simple, w: _World
    ) -> tuple[list[_World], list[Any]]:
        """``read`` and ``mapfile``/``readarray`` (its options as bash parses them): the
        variables get the lines of a known input; otherwise their value is unknown (never
        silently empty)."""
        args = [f.text for f in words[1:]]
        array = name in ("mapfile", "readarray")
        valued = self._MAPFILE_VALUED if array else self._READ_VALUED
        options: dict[str, str] = {}
        targets: list[str] = []
        k = 0
        while k < len(args):
            a = args[k]
            if a == "--":
                targets += args[k + 1 :]
                break
            if a.startswith("-") and len(a) > 1 and not targets:
                for j, c in enumerate(a[1:]):
                    flag = "-" + c
                    if flag in valued:
                        value = a[j + 2 :] or (args[k + 1] if k + 1 < len(args) else "")
                        if not a[j + 2 :]:
                            k += 1
                        options[flag] = value
                        break
                    options[flag] = ""
                k += 1
                continue
            targets.append(a)
            k += 1
        if "-a" in options:
            targets = [options["-a"]]
        if not targets:
            targets = ["MAPFILE" if array else "REPLY"]
        targets = [w.deref(t) if w.refs else t for t in targets]
        body, source = self._input_of(node, w)
        if body is None:
            label = f"`{_short(' '.join([name, *args]))}` reading {source}"
            taint = _Taint(unknown=[label])
            self.note(
                f"{self._where(w, node.line + w.line_offset)}: {label}: the value of "
                f"{', '.join('$' + t for t in targets)} is unknown to the audit"
            )
            for t in targets:
                if array or "-a" in options:
                    w.arrays[t] = {0: f"${{{t}[@]}}"}
                    w.vars.pop(t, None)
                    w.taint[t] = taint
                else:
                    w.set(t, f"${t}", taint)
            return [w], ["ext"]
        if array:
            delim = options.get("-d", "\n")[:1] or "\0"
            pieces = body.split(delim)
            lines = [p + delim for p in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
            if "-t" in options:
                lines = [x[:-1] if x.endswith(delim) else x for x in lines]
            skip = int(options["-s"]) if options.get("-s", "").isdigit() else 0
            count = int(options["-n"]) if options.get("-n", "").isdigit() else 0
            lines = lines[skip:]
            if count:
                lines = lines[:count]
            if len(lines) > LIMITS["array"]:
                raise ShellLimitError(
                    f"line {node.line}: {name} reads more than {LIMITS['array']} lines"
                )
            origin = int(options["-O"]) if options.get("-O", "").isdigit() else 0
            old = w.arrays.get(targets[-1], {}) if "-O" in options else {}
            w.arrays[targets[-1]] = {**old, **{origin + i: x for i, x in enumerate(lines)}}
            w.vars.pop(targets[-1], None)
            w.taint.pop(targets[-1], None)
            return [w], [0]
        delim_all = "-d" in options
        text = body if delim_all else body.split("\n", 1)[0]
        text = text.strip("\n") if delim_all else text
        if "-r" not in options:
            text = text.replace("\\\n", "")
        if "-a" in options:
            w.arrays[targets[-1]] = dict(enumerate(text.split()))
            w.vars.pop(targets[-1], None)
            return [w], [0]
        parts = text.split(None, len(targets) - 1) if len(targets) > 1 else [text.strip()]
        for t, v in zip(targets, parts + [""] * len(targets), strict=False):
            w.set(t, v)
        return [w], [0]

    # ---------------------------------------------------------------- following
    def _follow(
        self,
        cmd: Command,
        words: list[_Field],
        prefix: dict[str, str],
        node: _Simple,
        w: _World,
    ) -> list[_World]:
        """Commands that run shell text: ``bash -c``, ``bash FILE``, ``bash <<EOF``, here-docs
        written to files, Python fed on stdin or with ``-c``."""
        texts = [f.text for f in words]
        for r in node.redirs:
            if r.op in (">", ">|") and cmd.heredoc is not None and texts[0] in ("cat", "tee"):
                target = self._expand_string(r.target, w)[0]
                path = self._path_for_write(target, w)
                if path:
                    self.files[path] = cmd.heredoc
        if texts[0] == "tee" and cmd.heredoc is not None and len(texts) > 1:
            path = self._path_for_write(texts[-1], w)
            if path:
                self.files[path] = cmd.heredoc
        if os.path.basename(texts[0]) in _NOT_FOLLOWED:
            return [w]
        for i, t in enumerate(texts):
            base = os.path.basename(t)
            if base.startswith("python") and re.fullmatch(r"python[\d.]*", base):
                rest = texts[i + 1 :]
                if "-c" in rest and rest.index("-c") + 1 < len(rest):
                    cmd.python = rest[rest.index("-c") + 1]
                elif (not rest or rest[0] == "-") and cmd.heredoc is not None:
                    cmd.python = cmd.heredoc
                return [w]
            if base not in _SHELLS:
                continue
            rest = texts[i + 1 :]
            opts = []
            while rest and rest[0].startswith("-") and rest[0] not in ("-", "--"):
                opts.append(rest.pop(0))
            if rest and rest[0] == "--":
                rest.pop(0)
            child = self._child(w, prefix)
            if any("c" in o.lstrip("-") for o in opts if not o.startswith("--")):
                if not rest:
                    return [w]
                child.pos = rest[2:]
                child.pos_known = True
                self._run_text(rest[0], child, node.line + w.line_offset, None, keep_state=False)
                return [w]
            if rest:
                found = self.resolve(rest[0], w)
                text = self.read_file(found) if found else None
                if text is None:
                    self.note(
                        f"line {node.line}: {base} {rest[0]}: not found beside the script, "
                        "not followed"
                    )
                    return [w]
                child.pos = rest[1:]
                child.pos_known = True
                self._run_text(text, child, node.line + w.line_offset, found, keep_state=False)
                return [w]
            if cmd.heredoc is not None:
                self._run_text(
                    cmd.heredoc, child, node.line + w.line_offset + 1, None, keep_state=False
                )
            return [w]
        return [w]

    def _child(self, w: _World, prefix: dict[str, str]) -> _World:
        """A new shell's state: exported variables (and the command's own assignments)."""
        child = _World()
        for n in w.exported:
            if n in w.vars:
                child.vars[n] = w.vars[n]
                if n in w.taint:
                    child.taint[n] = w.taint[n]
        child.vars.update(prefix)
        child.exported = set(child.vars)
        child.cwd = w.cwd
        child.labels = w.labels
        child.loop = w.loop
        child.file = w.file
        child.calls = w.calls
        child.via = w.via
        child.line_offset = w.line_offset
        return child

    def _path_for_write(self, target: str, w: _World) -> str | None:
        if not target or "$(" in target or target.startswith("~"):
            return None
        if os.path.isabs(target):
            return os.path.normpath(target)
        base = w.cwd or self.script_dir
        return os.path.normpath(os.path.join(base, target)) if base else None

    # ---------------------------------------------------------------- expansion
    def expand(
        self, raw: str, w: _World, split: bool = True, vanished: list[str] | None = None
    ) -> list[_Field]:
        """The fields of one raw word: brace expansion, parameter/arithmetic expansion, word
        splitting of unquoted results (when ``split``) and quote removal. Never-set variables
        whose word expanded to nothing are appended to ``vanished``."""
        out: list[_Field] = []
        for word in _brace_expand(raw):
            exp = _Expander(self, w, word, split)
            out.extend(exp.fields())
            if vanished is not None:
                vanished.extend(v for v in exp.vanished if v not in vanished)
        return out

    def _expand_string(
        self, raw: str, w: _World, in_arith: bool = False, assignment: bool = False
    ) -> tuple[str, _Taint]:
        """One word expanded without splitting (assignments, patterns, ``$((...))``)."""
        exp = _Expander(self, w, raw, False, in_arith=in_arith, assignment=assignment)
        fields = exp.fields()
        taint = _Taint()
        for f in fields:
            taint.add(f.taint)
        return " ".join(f.text for f in fields), taint

    def _expand_heredoc(self, body: str, w: _World) -> str:
        exp = _Expander(self, w, body, False, heredoc=True)
        return "".join(f.text for f in exp.fields())

    def substitution(self, inner: str, w: _World, literal: str) -> tuple[str | None, _Taint]:
        """The value of ``$(inner)`` when it is a pure idiom, else None (never run)."""
        text = inner.strip()
        m = _SCRIPT_DIR_IDIOM.match(text)
        if m:
            target = (m.group("a") or m.group("b") or "").strip()
            if _SELF.match(target) and self.script_dir is not None:
                return self.script_dir, _Taint()
            value, taint = self._expand_string(target, w)
            if not taint.undecidable and value and "$(" not in value:
                return os.path.dirname(value) or ".", _Taint()
            return None, taint
        m = re.fullmatch(r"(basename|realpath|readlink\s+-f)\s+(?:--\s+)?(\S+)", text)
        if m and _SELF.match(m.group(2)) and self.script_path:
            path = self.script_path
            if m.group(1) == "basename":
                return os.path.basename(path), _Taint()
            return path, _Taint()
        if text == "pwd" and w.cwd is not None:
            return w.cwd, _Taint()
        try:
            lexer = _Lexer(text)
            parser = _Parser(lexer)
            node = parser.complete_command()
            extra = parser.complete_command()
        except (ShellParseError, ShellLimitError):
            return None, _Taint()
        if extra is not None or not isinstance(node, _Simple):
            return None, _Taint()
        if not node.items or not isinstance(node.items[0], str):
            return None, _Taint()
        head = node.items[0]
        if head == "cat" and len(node.items) == 1 and node.redirs and node.redirs[0].heredoc:
            doc = node.redirs[0].heredoc
            body = doc.body or ""
            if not doc.quoted:
                body = self._expand_heredoc(body, w)
            return body.rstrip("\n"), _Taint()
        if head == "seq" and not node.redirs:
            nums: list[int] = []
            for raw in node.items[1:]:
                if not isinstance(raw, str):
                    return None, _Taint()
                value, taint = self._expand_string(raw, w)
                if taint.undecidable or not re.fullmatch(r"-?\d+", value):
                    return None, _Taint()
                nums.append(int(value))
            if not 1 <= len(nums) <= 3:
                return None, _Taint()
            first, step, last = (
                (1, 1, nums[0])
                if len(nums) == 1
                else (nums[0], 1, nums[1])
                if len(nums) == 2
                else (nums[0], nums[1], nums[2])
            )
            if step == 0 or abs(last - first) // abs(step) > LIMITS["brace"]:
                return None, _Taint()
            seq = range(first, last + (1 if step > 0 else -1), step)
            return "\n".join(str(x) for x in seq), _Taint()
        if head in ("echo", "printf") and not node.redirs:
            taint = _Taint()
            parts: list[str] = []
            for raw in node.items[1:]:
                if not isinstance(raw, str):
                    return None, _Taint()
                for f in self.expand(raw, w):
                    parts.append(f.text)
                    taint.add(f.taint)
            if head == "echo":
                parts = [p for p in parts if p not in ("-n", "-e", "-E")] if parts else parts
                return " ".join(parts), taint
            if parts and not parts[0].startswith("-") and not taint.unknown:
                printed = printf(parts[0], parts[1:])
                if printed is not None:
                    return printed.rstrip("\n"), taint
            return None, _Taint()
        return None, _Taint()


class _Undecidable(Exception):
    pass


def _state_key(w: _World) -> tuple[Any, ...]:
    return (
        tuple(sorted(w.vars.items())),
        tuple(sorted((k, tuple(sorted(v.items()))) for k, v in w.arrays.items())),
        tuple(sorted((k, tuple(sorted(v.items()))) for k, v in w.assoc.items())),
        tuple(sorted(w.exported)),
        tuple(sorted((k, id(v)) for k, v in w.funcs.items())),
        tuple(w.pos),
        w.pos_known,
        w.cwd,
        w.loop,
        w.done,
        w.aborted,
        w.returning,
        w.breaking,
        w.continuing,
        id(w.pending_cut),
        w.file,
        len(w.locals),
        tuple(sorted(w.refs.items())),
    )


def _collapse(worlds: list[_World]) -> list[_World]:
    """Worlds in the same state are one: the branch labels they do not share are dropped."""
    groups: dict[tuple[Any, ...], list[_World]] = {}
    for w in worlds:
        groups.setdefault(_state_key(w), []).append(w)
    out = []
    for members in groups.values():
        first = members[0]
        if len(members) > 1:
            first.labels = tuple(
                lab for lab in first.labels if all(lab in m.labels for m in members[1:])
            )
        out.append(first)
    return out


class _CondEval:
    """``test``/``[``/``[[`` expressions over literal strings."""

    def __init__(self, tokens: list[str], interp: _Interp, w: _World, double: bool) -> None:
        self.toks = list(tokens)
        self.i = 0
        self.interp = interp
        self.w = w
        self.double = double
        self.depth = 0
        self.env = False
        self.scheduler = False

    def value(self, raw: str, pattern: bool = False) -> str:
        if not self.double:
            return raw
        text, taint = self.interp._expand_string(raw, self.w)
        if taint.unknown:
            raise _Undecidable
        if taint.unset or taint.args:
            self.env = True
        if any(scheduler_variable(n) for n in taint.unset):
            self.scheduler = True
        if pattern and not (raw.startswith(("'", '"')) and raw.endswith(("'", '"'))):
            return "\x00glob:" + text
        return text

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise _Undecidable
        self.i += 1
        return tok

    def run(self) -> bool:
        if not self.toks:
            return False
        result = self.or_()
        if self.i != len(self.toks):
            raise _Undecidable
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
                raise _Undecidable
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
                    raise _Undecidable from err
            right = self.value(right_raw, pattern=op in ("=", "==", "!="))
            if op in ("=", "==", "!="):
                if right.startswith("\x00glob:"):
                    same = _glob_match(left, right[len("\x00glob:") :])
                else:
                    same = left == right
                return same if op != "!=" else not same
            if op in ("<", ">"):
                return left < right if op == "<" else left > right
            try:
                a = int(left.strip() or "0") if not self.double else self._int(left)
                b = int(right.strip() or "0") if not self.double else self._int(right)
            except ValueError as err:
                raise _Undecidable from err
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
            raise _Undecidable
        if re.fullmatch(r"-[a-zA-Z]", tok) and nxt is not None:
            self.take()
            raise _Undecidable  # file tests depend on the machine
        return self.value(tok) != ""

    def _int(self, text: str) -> int:
        try:
            return int(text.strip() or "0")
        except ValueError:
            value = self.interp._arith_value(text, self.w, 0)
            if value is None:
                raise
            return value


def _glob_match(text: str, pattern: str) -> bool:
    """Bash pattern matching of a whole string (``case``, ``[[ == ]]``)."""
    return re.fullmatch("(?s:" + _glob_to_regex(pattern, lazy=False) + ")", text) is not None


def _brace_expand(raw: str) -> list[str]:
    """Bash brace expansion of one raw word (``{a,b}``, ``{1..5}``), quotes respected."""
    if "{" not in raw:
        return [raw]
    out = _brace_once(raw)
    if len(out) > LIMITS["brace"]:
        raise ShellLimitError(f"a brace expansion of more than {LIMITS['brace']} words")
    return out


def _brace_once(raw: str) -> list[str]:
    i = 0
    quote = ""
    while i < len(raw):
        c = raw[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 2
                continue
            if c == quote:
                quote = ""
            i += 1
            continue
        if c == "\\":
            i += 2
            continue
        if c in "'\"":
            quote = c
            i += 1
            continue
        if c == "$" and i + 1 < len(raw) and raw[i + 1] in "{(":
            depth = 0
            j = i + 1
            while j < len(raw):
                if raw[j] in "{(":
                    depth += 1
                elif raw[j] in "})":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            i = j + 1
            continue
        if c == "{":
            depth = 0
            j = i
            commas: list[int] = []
            q = ""
            while j < len(raw):
                d = raw[j]
                if q:
                    if d == q:
                        q = ""
                elif d in "'\"":
                    q = d
                elif d == "\\":
                    j += 1
                elif d == "{":
                    depth += 1
                elif d == "}":
                    depth -= 1
                    if depth == 0:
                        break
                elif d == "," and depth == 1:
                    commas.append(j)
                j += 1
            if j >= len(raw):
                return [raw]
            inner = raw[i + 1 : j]
            head, tail = raw[:i], raw[j + 1 :]
            alternatives: list[str] | None = None
            if commas:
                cuts = [i, *commas, j]
                alternatives = [raw[a + 1 : b] for a, b in itertools.pairwise(cuts)]
            else:
                m = re.fullmatch(r"(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?", inner)
                if m:
                    a, b = int(m.group(1)), int(m.group(2))
                    step = abs(int(m.group(3) or 1)) or 1
                    if abs(b - a) // step > LIMITS["brace"]:
                        raise ShellLimitError(
                            f"a brace expansion of more than {LIMITS['brace']} words"
                        )
                    rng = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
                    alternatives = [str(x) for x in rng]
                else:
                    m = re.fullmatch(r"([a-zA-Z])\.\.([a-zA-Z])", inner)
                    if m:
                        a, b = ord(m.group(1)), ord(m.group(2))
                        rng = range(a, b + 1) if a <= b else range(a, b - 1, -1)
                        alternatives = [chr(x) for x in rng]
            if alternatives is None:
                rest = _brace_once(tail)
                return [raw[: j + 1] + r for r in rest]
            out: list[str] = []
            for alt in alternatives:
                for expanded in _brace_once(head + alt + tail):
                    out.append(expanded)
                    if len(out) > LIMITS["brace"]:
                        raise ShellLimitError(
                            f"a brace expansion of more than {LIMITS['brace']} words"
                        )
            return out
        i += 1
    return [raw]


_PLAIN = re.compile(r"[^'\"\\$`]+")
_PLAIN_DQ = re.compile(r"[^\"\\$`]+")
_PLAIN_HEREDOC = re.compile(r"[^\\$`]+")


class _Expander:
    """Expands one raw word into fields (see :meth:`_Interp.expand`)."""

    def __init__(
        self,
        interp: _Interp,
        w: _World,
        raw: str,
        split: bool,
        in_arith: bool = False,
        assignment: bool = False,
        heredoc: bool = False,
    ) -> None:
        self.interp = interp
        self.w = w
        self.s = raw
        self.i = 0
        self.split = split
        self.in_arith = in_arith
        self.assignment = assignment
        self.heredoc = heredoc
        self.out: list[_Field] = []
        self.cur: list[str] = []
        self.cur_taint = _Taint()
        self.cur_quoted = False
        self.cur_open = False
        self.size = 0
        self.vanished: list[str] = []

    # ---------------------------------------------------------------- fields
    def _add(self, text: str, taint: _Taint | None = None, quoted: bool = False) -> None:
        self.cur.append(text)
        self.cur_open = True
        if quoted:
            self.cur_quoted = True
        if taint is not None:
            self.cur_taint.add(taint)
        self.size += len(text)
        if self.size > LIMITS["string"]:
            raise ShellLimitError(f"a word grows beyond {LIMITS['string']} characters")

    def _break(self) -> None:
        text = "".join(self.cur)
        if text or self.cur_quoted:
            self.out.append(_Field(text, self.cur_taint))
        elif self.cur_taint.unset:
            self.vanished.extend(u for u in self.cur_taint.unset if u not in self.vanished)
        self.cur = []
        self.cur_taint = _Taint()
        self.cur_quoted = False
        self.cur_open = False

    def _add_split(self, value: str, taint: _Taint) -> None:
        if not self.split or taint.unknown:  # an unknown value stays one word
            self._add(value, taint)
            return
        if not value:
            self.cur_taint.add(taint)
            return
        pieces = re.split(r"[ \t\n]+", value)
        if pieces[0] == "":
            self._break()
            pieces = pieces[1:]
        for k, p in enumerate(pieces):
            if k:
                self._break()
            if p:
                self._add(p, taint)
            else:
                self.cur_taint.add(taint)

    def fields(self) -> list[_Field]:
        self._scan(quoted=False)
        self._break()
        if not self.split and not self.out:
            return [_Field("", self.cur_taint)]
        if not self.split and len(self.out) > 1:  # "${A[@]}" in a scalar context: joined
            taint = _Taint()
            for f in self.out:
                taint.add(f.taint)
            return [_Field(" ".join(f.text for f in self.out), taint)]
        return self.out

    # ---------------------------------------------------------------- scanning
    def _scan(self, quoted: bool) -> None:
        s = self.s
        plain = _PLAIN_HEREDOC if self.heredoc else _PLAIN_DQ if quoted else _PLAIN
        while self.i < len(s):
            m = plain.match(s, self.i)
            if m:
                self._add(m.group(0), quoted=quoted or self.heredoc)
                self.i = m.end()
                continue
            c = s[self.i]
            if self.heredoc:
                if c == "\\" and self.i + 1 < len(s) and s[self.i + 1] in "$`\\\n":
                    if s[self.i + 1] != "\n":
                        self._add(s[self.i + 1], quoted=True)
                    self.i += 2
                    continue
                if c == "$":
                    self._dollar(quoted=True)
                    continue
                if c == "`":
                    self._backtick(quoted=True)
                    continue
                self._add(c, quoted=True)
                self.i += 1
                continue
            if quoted:
                if c == '"':
                    self.i += 1
                    return
                if c == "\\" and self.i + 1 < len(s) and s[self.i + 1] in '$`"\\\n':
                    if s[self.i + 1] != "\n":
                        self._add(s[self.i + 1], quoted=True)
                    self.i += 2
                    continue
                if c == "$":
                    self._dollar(quoted=True)
                    continue
                if c == "`":
                    self._backtick(quoted=True)
                    continue
                self._add(c, quoted=True)
                self.i += 1
                continue
            if c == "'":
                end = s.find("'", self.i + 1)
                end = len(s) if end < 0 else end
                self._add(s[self.i + 1 : end], quoted=True)
                self.i = end + 1
                continue
            if c == '"':
                self.i += 1
                self.cur_quoted = True
                self.cur_open = True
                self._scan(quoted=True)
                continue
            if c == "\\":
                if self.i + 1 < len(s):
                    self._add(s[self.i + 1], quoted=True)
                self.i += 2
                continue
            if c == "$":
                self._dollar(quoted=False)
                continue
            if c == "`":
                self._backtick(quoted=False)
                continue
            self._add(c)
            self.i += 1

    def _backtick(self, quoted: bool) -> None:
        start = self.i
        j = self.i + 1
        while j < len(self.s) and self.s[j] != "`":
            j += 2 if self.s[j] == "\\" else 1
        self.i = min(j + 1, len(self.s))
        literal = self.s[start : self.i]
        inner = literal[1:-1].replace("\\`", "`").replace("\\$", "$").replace("\\\\", "\\")
        self._substitution(inner, literal, quoted)

    def _substitution(self, inner: str, literal: str, quoted: bool) -> None:
        value, taint = self.interp.substitution(inner, self.w, literal)
        if value is None:
            t = _Taint(unknown=[literal])
            t.add(taint)
            self._add(literal, t, quoted)
            return
        if quoted:
            self._add(value, taint, True)
        else:
            self._add_split(value, taint)

    def _matching(self, open_: str, close: str, start: int) -> int:
        depth = 0
        j = start
        q = ""
        while j < len(self.s):
            c = self.s[j]
            if q:
                if c == "\\" and q == '"':
                    j += 2
                    continue
                if c == q:
                    q = ""
            elif c == "\\":
                j += 2
                continue
            elif c in "'\"" and not (c == "'" and open_ == "{"):
                q = c
            elif c == "'" and open_ == "{":
                end = self.s.find("'", j + 1)
                j = len(self.s) if end < 0 else end + 1
                continue
            elif c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    return j
            j += 1
        return len(self.s) - 1

    def _dollar(self, quoted: bool) -> None:
        s = self.s
        start = self.i
        nxt = s[self.i + 1] if self.i + 1 < len(s) else ""
        if nxt == "(" and s.startswith("((", self.i + 1):
            end = self._matching("(", ")", self.i + 1)
            self.i = end + 1
            literal = s[start : self.i]
            inner = literal[3:-2]
            value = self.interp._arith_value(inner, self.w, 0, expansion=True)
            if value is None:
                self._add(literal, _Taint(unknown=[literal]), quoted)
                return
            self._add(str(value), None, quoted)
            return
        if nxt == "(":
            end = self._matching("(", ")", self.i + 1)
            self.i = end + 1
            literal = s[start : self.i]
            self._substitution(literal[2:-1], literal, quoted)
            return
        if nxt == "{":
            end = self._matching("{", "}", self.i + 1)
            self.i = end + 1
            self._brace(s[start + 2 : end], s[start : self.i], quoted)
            return
        if nxt == "'" and not quoted:
            j = self.i + 2
            buf = []
            while j < len(s) and s[j] != "'":
                if s[j] == "\\" and j + 1 < len(s):
                    esc = s[j + 1]
                    buf.append({"n": "\n", "t": "\t", "'": "'", "\\": "\\", '"': '"'}.get(esc, esc))
                    j += 2
                    continue
                buf.append(s[j])
                j += 1
            self.i = j + 1
            self._add("".join(buf), quoted=True)
            return
        if nxt == '"' and not quoted:  # $"..." locale translation: a double-quoted string
            self.i += 1
            return
        if nxt and (nxt.isdigit() or nxt in "@*#?$!-0"):
            self.i += 2
            self._special(nxt, quoted, s[start : self.i])
            return
        m = _NAME.match(s, self.i + 1)
        if not m:
            self._add("$", quoted=quoted)
            self.i += 1
            return
        name = m.group(0)
        self.i = m.end()
        text, taint = self._lookup(name)
        if quoted:
            self._add(text, taint, True)
        else:
            self._add_split(text, taint)

    def _lookup(self, name: str) -> tuple[str, _Taint]:
        w = self.w
        name = w.deref(name) if w.refs else name
        if w.is_set(name):
            return w.get(name) or "", w.taint.get(name, _Taint())
        if name == "PWD":  # bash sets it to the directory the script is started from
            if w.cwd is not None:
                return w.cwd, _Taint()
            return "$PWD", _Taint(unknown=["$PWD"])
        if name == "BASH_SOURCE" and self.interp.script_path:
            return self.interp.script_path, _Taint()
        if name in _UNKNOWN_SPECIAL:
            return f"${name}", _Taint(unknown=[f"${name}"])
        return "", _Taint(unset=[name])

    def _special(self, c: str, quoted: bool, literal: str) -> None:
        w = self.w
        if c == "0":
            if self.interp.script_path:
                self._add(self.interp.script_path, None, quoted)
            else:
                self._add("$0", _Taint(unknown=["$0"]), quoted)
            return
        if c.isdigit():
            k = int(c)
            if k <= len(w.pos):
                self._emit_value(w.pos[k - 1], _Taint(), quoted)
            else:
                t = _Taint(args=not w.pos_known)
                self.cur_taint.add(t)
                if quoted:
                    self.cur_quoted = True
            return
        if c in "@*":
            self._positional_all(c, quoted)
            return
        if c == "#":
            self._add(str(len(w.pos)), _Taint(args=not w.pos_known), quoted)
            return
        if c == "?":
            self._add("0", None, quoted)
            return
        if c == "-":
            self._add("hB", None, quoted)
            return
        self._add(literal, _Taint(unknown=[literal]), quoted)

    def _positional_all(self, c: str, quoted: bool) -> None:
        w = self.w
        taint = _Taint(args=not w.pos_known)
        self._list(list(w.pos), quoted, joined=(c == "*"), taint=taint)

    def _list(self, values: list[str], quoted: bool, joined: bool, taint: _Taint) -> None:
        """``"$@"``/``"${A[@]}"`` (a field per element), ``$*``/``${A[*]}`` (joined)."""
        if joined:
            text = " ".join(values)
            if quoted:
                self._add(text, taint, True)
            else:
                self._add_split(text, taint)
            return
        if not values:
            self.cur_taint.add(taint)
            if quoted and not self.cur:
                self.cur_quoted = self.cur_quoted and False
            return
        for k, v in enumerate(values):
            if k:
                self._break()
            if quoted:
                self._add(v, taint, True)
            else:
                self._add_split(v, taint)

    def _brace(self, inner: str, literal: str, quoted: bool) -> None:
        w = self.w
        interp = self.interp
        # ${#NAME}, ${#A[@]}
        m = re.fullmatch(r"#([A-Za-z_]\w*|[@*]|\d+)(\[([@*])\])?", inner)
        if m:
            name = w.deref(m.group(1)) if w.refs else m.group(1)
            if m.group(2):
                if name in w.assoc:
                    n = len(w.assoc[name])
                else:
                    n = len(w.arrays.get(name, {})) or (1 if name in w.vars else 0)
                self._add(str(n), None, quoted)
                return
            if name in "@*":
                self._add(str(len(w.pos)), _Taint(args=not w.pos_known), quoted)
                return
            value, taint = self._value_of(name, None)
            self._add(str(len(value or "")), taint, quoted)
            return
        # ${!A[@]} keys, ${!NAME} indirection
        m = re.fullmatch(r"!([A-Za-z_]\w*)(\[([@*])\])?", inner)
        if m:
            if not m.group(2) and w.refs.get(m.group(1)):  # ${!REF}: the name it refers to
                self._emit_value(w.refs[m.group(1)], _Taint(), quoted)
                return
            name = w.deref(m.group(1)) if w.refs else m.group(1)
            if m.group(2):
                keys = (
                    list(w.assoc[name])
                    if name in w.assoc
                    else [str(k) for k in sorted(w.arrays.get(name, {}))]
                )
                self._list(keys, quoted, joined=m.group(3) == "*", taint=_Taint())
                return
            target, taint = self._value_of(name, None)
            if target and _NAME.fullmatch(target):
                value, t2 = self._lookup(target)
                taint.add(t2)
                self._emit_value(value, taint, quoted)
                return
            self._emit_value("", taint, quoted)
            return
        m = re.match(r"([A-Za-z_]\w*|\d+|[@*#?$!-])(\[([^\]]*)\])?", inner)
        if not m:
            interp.note(f"parameter expansion {literal} is not supported; kept as text")
            self._add(literal, _Taint(unknown=[literal]), quoted)
            return
        name, sub = m.group(1), m.group(3)
        name = w.deref(name) if w.refs else name
        rest = inner[m.end() :]
        # whole-array forms
        if sub in ("@", "*") and not rest:
            if name in w.assoc:
                values = list(w.assoc[name].values())
            elif name in w.arrays:
                values = [w.arrays[name][k] for k in sorted(w.arrays[name])]
            elif name in w.vars:
                values = [w.vars[name]]
            else:
                values = []
            taint = w.taint.get(name, _Taint()) if w.is_set(name) else _Taint(unset=[name])
            self._list(values, quoted, joined=sub == "*", taint=taint)
            return
        if name in "@*" and not rest:
            self._positional_all(name, quoted)
            return
        sliced = re.fullmatch(r":\s*([^:]*?)\s*(?::\s*(.*?)\s*)?", rest) if name in "@*" else None
        if sliced is not None and sub is None:  # "${@:2}", "${@:1:3}": a slice of the arguments
            off = interp._arith_value(sliced.group(1), w, 0) if sliced.group(1) else 0
            count = interp._arith_value(sliced.group(2), w, 0) if sliced.group(2) else None
            if off is None or (sliced.group(2) and count is None):
                self._add(literal, _Taint(unknown=[literal]), quoted)
                return
            args = [interp.script_path or "", *w.pos]
            start = off if off >= 0 else max(0, len(args) + off)
            values = args[start:]
            if count is not None:
                values = values[:count] if count >= 0 else values[: max(0, len(values) + count)]
            self._list(values, quoted, joined=name == "*", taint=_Taint(args=not w.pos_known))
            return
        value, taint, is_set = self._param(name, sub)
        if not rest:
            if name.isdigit() and value is None:
                self._special(name, quoted, literal) if len(name) == 1 else self.cur_taint.add(
                    _Taint(args=not w.pos_known)
                )
                return
            self._emit_value(value or "", taint, quoted)
            return
        op_m = re.match(r"(:?[-=+?])|(##|#|%%|%)|(//|/#|/%|/)|(\^\^|\^|,,|,)|(:)|(@[QEPAa])", rest)
        if not op_m:
            interp.note(f"parameter expansion {literal} is not supported; kept as text")
            self._add(literal, _Taint(unknown=[literal]), quoted)
            return
        word = rest[op_m.end() :]
        if op_m.group(1):
            op = op_m.group(1)
            empty = not is_set or (op.startswith(":") and value == "")
            kind = op[-1]
            if kind in "-=":
                if empty:
                    text, t = interp._expand_string(word, w)
                    if kind == "=" and not name.isdigit():
                        w.set(name, text, t)
                    self._emit_value(text, t, quoted)
                    return
                self._emit_value(value or "", taint, quoted)
                return
            if kind == "+":
                if empty:
                    return
                text, t = interp._expand_string(word, w)
                self._emit_value(text, t, quoted)
                return
            if empty:
                interp.note(f"{literal}: the variable is unset, bash would stop here")
                t = _Taint(unset=[name] if not name.isdigit() else [])
                t.args = name.isdigit() and not w.pos_known
                self._emit_value("", t, quoted)
                return
            self._emit_value(value or "", taint, quoted)
            return
        base = value or ""
        if op_m.group(2):
            pattern, t = interp._expand_string(word, w)
            taint.add(t)
            self._emit_value(_trim(base, op_m.group(2), pattern), taint, quoted)
            return
        if op_m.group(3):
            op = op_m.group(3)
            pat_raw, _, rep_raw = _split_unescaped(word, "/")
            pattern, t1 = interp._expand_string(pat_raw, w)
            replacement, t2 = interp._expand_string(rep_raw, w)
            taint.add(t1)
            taint.add(t2)
            self._emit_value(_replace(base, op, pattern, replacement), taint, quoted)
            return
        if op_m.group(4):
            op = op_m.group(4)
            if op == "^^":
                out = base.upper()
            elif op == ",,":
                out = base.lower()
            elif op == "^":
                out = base[:1].upper() + base[1:]
            else:
                out = base[:1].lower() + base[1:]
            self._emit_value(out, taint, quoted)
            return
        if op_m.group(5):
            off_raw, _, len_raw = word.partition(":")
            off = interp._arith_value(off_raw, w, 0) if off_raw.strip() else 0
            ln = interp._arith_value(len_raw, w, 0) if len_raw.strip() else None
            if off is None or (len_raw.strip() and ln is None):
                self._add(literal, _Taint(unknown=[literal]), quoted)
                return
            if off < 0:
                off = max(0, len(base) + off)
            piece = base[off:]
            if ln is not None:
                piece = piece[:ln] if ln >= 0 else piece[: max(0, len(piece) + ln)]
            self._emit_value(piece, taint, quoted)
            return
        self._emit_value(base, taint, quoted)

    def _emit_value(self, value: str, taint: _Taint, quoted: bool) -> None:
        if quoted:
            self._add(value, taint, True)
        else:
            self._add_split(value, taint)

    def _param(self, name: str, sub: str | None) -> tuple[str | None, _Taint, bool]:
        w = self.w
        if name.isdigit():
            k = int(name)
            if k == 0:
                return self.interp.script_path, _Taint(), True
            if k <= len(w.pos):
                return w.pos[k - 1], _Taint(), True
            return None, _Taint(args=not w.pos_known), False
        if name in "#?$!-":
            if name == "#":
                return str(len(w.pos)), _Taint(args=not w.pos_known), True
            if name == "?":
                return "0", _Taint(), True
            return f"${name}", _Taint(unknown=[f"${name}"]), True
        value, taint = self._value_of(name, sub)
        if value is not None:
            return value, taint, True
        if sub is None and not w.is_set(name):
            special, t = self._lookup(name)
            if not t.unset:
                return special, t, True
        return None, taint if taint.unknown else _Taint(unset=[name]), False

    def _value_of(self, name: str, sub: str | None) -> tuple[str | None, _Taint]:
        w = self.w
        name = w.deref(name) if w.refs else name
        taint = _Taint()
        if name in w.taint:
            taint.add(w.taint[name])
        if sub is None:
            if not w.is_set(name):
                return None, _Taint(unset=[name]) if name not in _UNKNOWN_SPECIAL else taint
            return w.get(name), taint
        if name in w.assoc:
            key, t = self.interp._expand_string(sub, w)
            taint.add(t)
            return w.assoc[name].get(key), taint
        idx = self.interp._arith_value(sub, w, 0)
        if idx is None:
            return None, _Taint(unknown=[f"${{{name}[{sub}]}}"])
        arr = w.arrays.get(name)
        if arr is None:
            if idx == 0 and name in w.vars:
                return w.vars[name], taint
            return None, _Taint(unset=[name])
        if idx < 0 and arr:
            idx = max(arr) + 1 + idx
        return arr.get(idx), taint


def _split_unescaped(text: str, sep: str) -> tuple[str, str, str]:
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == sep:
            return text[:i], sep, text[i + 1 :]
        i += 1
    return text, "", ""


_PATTERN_LIMIT = 20_000
"""Longest value a pattern operation (``${V#p}``, ``${V/p/r}``) is applied to."""


def _glob_to_regex(pattern: str, lazy: bool) -> str:
    """A bash glob as a regular expression (``*`` lazy or greedy)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            out.append(".*?" if lazy else ".*")
        elif c == "?":
            out.append(".")
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        elif c == "[":
            j = pattern.find("]", i + 2)
            if j < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : j]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _check_pattern_size(value: str) -> None:
    if len(value) > _PATTERN_LIMIT:
        raise ShellLimitError(
            f"a pattern operation on a value of more than {_PATTERN_LIMIT} characters"
        )


def _trim(value: str, op: str, pattern: str) -> str:
    """``${V#p}`` / ``##`` / ``%`` / ``%%``: cut the shortest/longest glob prefix or suffix."""
    _check_pattern_size(value)
    rx = re.compile("(?s:" + _glob_to_regex(pattern, lazy=False) + ")")
    n = len(value)
    if op in ("#", "##"):
        cuts = range(n + 1) if op == "#" else range(n, -1, -1)
        for k in cuts:
            if rx.fullmatch(value, 0, k):
                return value[k:]
        return value
    cuts = range(n, -1, -1) if op == "%" else range(n + 1)
    for k in cuts:
        if rx.fullmatch(value, k):
            return value[:k]
    return value


def _replace(value: str, op: str, pattern: str, replacement: str) -> str:
    """``${V/p/r}`` (first), ``//`` (all), ``/#`` (prefix), ``/%`` (suffix)."""
    if not pattern:
        return value
    _check_pattern_size(value)
    rx = "(?s:" + _glob_to_regex(pattern, lazy=False) + ")"
    if op == "/#":
        return re.sub("^" + rx, lambda m: replacement, value, count=1)
    if op == "/%":
        return re.sub(rx + "\\Z", lambda m: replacement, value, count=1)
    out = []
    i = 0
    compiled = re.compile(rx)
    while i < len(value):
        m = compiled.match(value, i)
        if m and m.end() > i:
            out.append(replacement)
            i = m.end()
            if op == "/":
                out.append(value[i:])
                return "".join(out)
            continue
        out.append(value[i])
        i += 1
    return "".join(out)


# ============================================================================ entry point
def parse_script(
    text: str,
    variables: dict[str, str] | None = None,
    script_dir: str | None = None,
    *,
    script_path: str | None = None,
    reader: Callable[[str], str | None] | None = None,
    partial: bool = False,
) -> ShellScript:
    """Every simple command a launch script runs, read as bash would, running nothing.

    ``variables`` are known before the script runs (the caller's ``--var NAME=VALUE``; they are
    not exported); the script's own assignments override them. ``script_dir`` is the script's
    directory (for ``$(dirname "$0")``, ``$(cd "$(dirname "$0")" && pwd)`` and relative paths);
    ``script_path`` its path (``$0``); ``reader(path)`` returns the text of a file the script
    sources or runs (``source``, ``bash FILE``), or None when it cannot be read: it must only
    read, never run.

    A parse error raises :class:`ShellParseError`; with ``partial=True`` it stops the reading
    where bash stops too: the commands before it are kept and :attr:`ShellScript.error` says
    why (it still raises when no command came before it). :class:`ShellLimitError` when a
    bound of :data:`LIMITS` is hit.
    """
    interp = _Interp(dict(variables or {}), script_dir, script_path or "", reader)
    world = _World()
    world.vars.update(variables or {})
    world.exported.update(variables or {})
    world.script = script_path or ""
    worlds = [world]
    parser = _Parser(_Lexer(text))
    error = ""
    while True:
        try:
            node = parser.complete_command()
        except ShellParseError as err:
            if not partial or not interp.emitted:
                raise
            error = str(err)
            interp.note(f"{err}: bash stops here too; the rest of the script is not read")
            break
        if node is None:
            break
        out: list[_World] = []
        for w in worlds:
            out.extend([w] if w.stopped else interp.run(node, w)[0])
        for w in out:
            w.returning = w.aborted = False
            w.breaking = w.continuing = 0
        worlds = interp._cap(out, node.line)
        if all(w.done for w in worlds):
            break
    commands = _merge(interp)
    first = next((w for w in worlds if not w.done), worlds[0])
    return ShellScript(
        commands=commands,
        variables=dict(first.vars),
        notes=list(interp.notes),
        files=dict(interp.files),
        error=error,
    )


def _merge(interp: _Interp) -> list[Command]:
    """Commands of every branch combination, deduplicated: a command met identically in
    several branches keeps only the branch labels they share (with two or more outcomes)."""
    valid = {cid for cid, alive in interp.outcomes.items() if alive >= 2}
    seen: dict[tuple[Any, ...], tuple[Command, set[str] | None]] = {}
    order: list[tuple[Any, ...]] = []
    for cmd, labels in interp.emitted:
        texts = {text for cid, text in labels if cid in valid}
        key = (cmd.file, cmd.line, cmd.loop, cmd.calls, tuple(cmd.words), tuple(cmd.dropped))
        if key in seen:
            first, common = seen[key]
            seen[key] = (first, (common or set()) & texts)
            continue
        seen[key] = (cmd, texts)
        order.append(key)
    out = []
    for key in order:
        cmd, common = seen[key]
        cmd.branch = tuple(sorted(common or ()))
        out.append(cmd)
    return out
