"""A small, bash-faithful reader of launch scripts, for the audit.

It does not run anything. It splits a script into simple commands the way bash would (quotes,
``\\``-newline continuations, comments, ``;``/``&&``/``|`` separators, redirections, here-docs),
expands ``$VAR``/``${VAR:-default}``/``$((arithmetic))`` from the assignments met so far in the
script (plus variables given by the caller), and returns each command's words with its line.

Deviations from bash, all reported in :attr:`Command.notes` or :attr:`ShellScript.notes`:

* the process environment is NOT read (the audit must not depend on the shell it runs in): a
  variable the script does not set stays as the literal ``$NAME`` and is listed as unresolved;
* command substitution (``$(...)``, backticks) is not run: it stays as literal text;
* script arguments (``$1``, ``$@``) are empty;
* both branches of ``if``/``case`` and loop bodies are read once, as straight-line code.

A comment inside a continued command ends that command, as in bash: the lines after it are not
part of it (a common way for a ``\\``-continued flag to be silently dropped; noted).
"""

from __future__ import annotations

import ast
import fnmatch
import operator
import re
from dataclasses import dataclass, field

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\+?=)(.*)$", re.S)
_RESERVED_LEADING = {
    "if",
    "then",
    "else",
    "elif",
    "do",
    "while",
    "until",
    "!",
    "{",
    "time",
    "exec",
    "nohup",
    "command",
}
_RESERVED_ALONE = {"fi", "done", "esac", "}", "then", "do", "else"}
_DECLARE = {"export", "declare", "local", "readonly", "typeset"}
_LOOP_WORDS = {"for", "while", "until", "done"}
_ORPHAN = re.compile(r"^(-|\+{0,2}[A-Za-z_][\w.]*\.[\w.]*=)")
"""A command that is really arguments: a flag, or a dotted ``key.sub=value`` override."""
_SELF = r"\"?\$(?:0|\{0\}|\{BASH_SOURCE(?:\[0\])?\})\"?"  # "$0" or "${BASH_SOURCE[0]}"
_DIRNAME = rf"dirname\s+(?:--\s+)?{_SELF}"
_SCRIPT_DIR_IDIOM = re.compile(
    rf"^\s*(?:{_DIRNAME}"  # dirname "$0"
    rf"|cd\s+(?:--\s+)?\"?\$\({_DIRNAME}\)\"?"  # cd "$(dirname "$0")"
    r"(?:\s*&>\s*/dev/null)?\s*(?:&&|;)\s*pwd)\s*$"  # && pwd
)
"""``$(dirname "$0")`` and ``$(cd "$(dirname "$0")" && pwd)``: the script's own directory."""


class ShellParseError(ValueError):
    """A script line the reader cannot split into words (unbalanced quote, bad here-doc)."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


@dataclass
class Command:
    """One simple command of a script, after expansion and quote removal."""

    words: list[str]
    """The command's words (assignments and redirections removed from the front/anywhere)."""
    line: int
    """1-based line where the command starts."""
    assignments: dict[str, str] = field(default_factory=dict)
    """``NAME=value`` words in front of the command (or the whole command when it has no words)."""
    unresolved: list[str] = field(default_factory=list)
    """Variables the command used that the script never set."""
    notes: list[str] = field(default_factory=list)
    """What the reader could not follow exactly (command substitution, ``$@``...)."""
    warnings: list[str] = field(default_factory=list)
    """Script mistakes that change what runs (a comment that cuts a continued command)."""
    dropped: list[str] = field(default_factory=list)
    """Arguments on the lines after such a comment: bash runs them as a separate command."""
    heredoc: str | None = None
    """Body of a here-document fed to this command, if any (expanded unless quoted)."""
    keyword: str = ""
    """``for``, ``while``, ``until`` or ``done`` when the command opens or closes a loop."""
    loop: tuple[str, ...] = ()
    """``NAME=value`` of each enclosing ``for`` loop in this iteration (outermost first)."""


@dataclass
class ShellScript:
    """Every simple command of a script, in order, and the variables it set."""

    commands: list[Command]
    variables: dict[str, str]
    notes: list[str]


# ----------------------------------------------------------------------------- arithmetic
_ARITH_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


def _arith(expr: str, variables: dict[str, str]) -> str | None:
    """Integer ``$((...))`` with the script's variables; None when it cannot be evaluated."""

    def sub(m: re.Match[str]) -> str:
        value = variables.get(m.group(1) or m.group(2) or m.group(3))
        return value if value is not None else m.group(0)

    text = re.sub(r"\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)|\b([A-Za-z_]\w*)\b", sub, expr)

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH_OPS:
            return int(_ARITH_OPS[type(node.op)](ev(node.left), ev(node.right)))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        raise ValueError(expr)

    try:
        return str(ev(ast.parse(text.replace("/", "//").replace("////", "//"), mode="eval")))
    except (ValueError, SyntaxError, ZeroDivisionError, RecursionError):
        return None


# ----------------------------------------------------------------------------- lexer
class _Lexer:
    """Character-level scanner; one instance per script."""

    def __init__(self, text: str, variables: dict[str, str], script_dir: str | None = None) -> None:
        self.script_dir = script_dir
        self.s = text.replace("\r\n", "\n")
        self.i = 0
        self.line = 1
        self.vars = variables
        self.pending_heredocs: list[tuple[str, bool, bool, int]] = []  # delim, quoted, strip, line

    # -- helpers
    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def advance(self, n: int = 1) -> str:
        out = self.s[self.i : self.i + n]
        self.line += out.count("\n")
        self.i += n
        return out

    def read_until_matching(self, open_: str, close: str) -> str:
        """From after an opening ``open_``; returns the text up to the matching ``close``."""
        depth = 1
        start_line = self.line
        buf = []
        quote = ""
        while True:
            c = self.peek()
            if not c:
                raise ShellParseError(f"unbalanced {open_!r}", start_line)
            if quote:
                if c == "\\" and quote == '"':
                    buf.append(self.advance(2))
                    continue
                if c == quote:
                    quote = ""
            elif c in "'\"":
                quote = c
            elif c == "\\":
                buf.append(self.advance(2))
                continue
            elif c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    self.advance()
                    return "".join(buf)
            buf.append(self.advance())

    # -- expansion
    def expand_dollar(self, cmd: Command) -> str:
        """At a ``$``; returns the expansion text (unchanged literal when unknown)."""
        start = self.i
        self.advance()  # $
        c = self.peek()
        if c == "(" and self.peek(1) == "(":
            self.advance(2)
            inner = self.read_until_matching("(", ")")
            if self.peek() == ")":
                self.advance()
            value = _arith(inner, self.vars)
            if value is None:
                cmd.notes.append(f"arithmetic $(({inner})) could not be evaluated; kept as text")
                return self.s[start : self.i]
            return value
        if c == "(":
            self.advance()
            inner = self.read_until_matching("(", ")")
            text = self.s[start : self.i]
            if self.script_dir is not None and _SCRIPT_DIR_IDIOM.search(inner):
                return self.script_dir
            cmd.notes.append(f"command substitution {text} is not run; kept as text")
            return text
        if c == "{":
            self.advance()
            inner = self.read_until_matching("{", "}")
            return self._brace(inner, self.s[start : self.i], cmd)
        if c == "'":  # $'...' ANSI-C quoting: read as a single-quoted string
            self.advance()
            end = self.s.find("'", self.i)
            if end < 0:
                raise ShellParseError("unbalanced $'", self.line)
            return self.advance(end - self.i + 1)[:-1]
        if c.isdigit() or c in "@*#?$!-":
            self.advance()
            if c in "@*" or c.isdigit():
                note = "script arguments ($1, $@, ...) are unknown to the audit; read as empty"
                if note not in cmd.notes:
                    cmd.notes.append(note)
                return ""
            return self.s[start : self.i]
        m = _NAME.match(self.s, self.i)
        if not m:
            return "$"
        name = m.group(0)
        self.advance(len(name))
        return self._lookup(name, "$" + name, cmd)

    def _lookup(self, name: str, literal: str, cmd: Command) -> str:
        if name in self.vars:
            return self.vars[name]
        if name not in cmd.unresolved:
            cmd.unresolved.append(name)
        return literal

    def _brace(self, inner: str, literal: str, cmd: Command) -> str:
        trim = re.match(r"^([A-Za-z_]\w*)(##|#|%%|%)(.*)$", inner, re.S)
        if trim:
            return self._trim(trim.group(1), trim.group(2), trim.group(3), literal, cmd)
        if re.match(r"^#[A-Za-z_]\w*$", inner):
            known = self.vars.get(inner[1:])
            return literal if known is None else str(len(known))
        m = re.match(r"^([A-Za-z_]\w*|\d+|[@*#])(?:(:?[-=+?])(.*))?$", inner, re.S)
        if not m:
            cmd.notes.append(f"parameter expansion {literal} is not supported; kept as text")
            return literal
        name, op, word = m.group(1), m.group(2), m.group(3) or ""
        if name.isdigit() or name in "@*#":
            note = "script arguments ($1, $@, ...) are unknown to the audit; read as empty"
            if note not in cmd.notes:
                cmd.notes.append(note)
            value: str | None = None
        else:
            value = self.vars.get(name)
        word = self._expand_plain(word, cmd)
        if op is None:
            if value is None and not (name.isdigit() or name in "@*#"):
                return self._lookup(name, literal, cmd)
            return value or ""
        empty = value is None or (op.startswith(":") and value == "")
        kind = op[-1]
        if kind == "-":
            return word if empty else str(value)
        if kind == "=":
            if empty:
                self.vars[name] = word
                return word
            return str(value)
        if kind == "+":
            return "" if empty else word
        if empty:  # "?": bash would stop the script
            cmd.notes.append(f"{literal}: the variable is unset, bash would stop here")
            return literal
        return str(value)

    def _trim(self, name: str, op: str, pattern: str, literal: str, cmd: Command) -> str:
        """``${NAME#pat}``, ``##``, ``%``, ``%%``: cut a glob prefix/suffix (shortest/longest)."""
        value = self.vars.get(name)
        if value is None:
            return self._lookup(name, literal, cmd)
        rx = fnmatch.translate(self._expand_plain(pattern, cmd)).removesuffix("\\Z")
        rx = rx.removeprefix("(?s:").removesuffix(")")
        cuts = range(len(value) + 1)
        if op.startswith("#"):
            order = reversed(cuts) if op == "##" else cuts
            for k in order:
                if re.fullmatch(rx, value[:k], re.S):
                    return value[k:]
        else:
            order = cuts if op == "%%" else reversed(cuts)
            for k in order:
                if re.fullmatch(rx, value[k:], re.S):
                    return value[:k]
        return value

    def _expand_plain(self, text: str, cmd: Command) -> str:
        """Expand ``$`` references inside a default word (no quote handling needed there)."""
        if "$" not in text:
            return text.strip("\"'")
        sub = _Lexer(text, self.vars)
        out = []
        while sub.i < len(sub.s):
            if sub.peek() == "$":
                out.append(sub.expand_dollar(cmd))
            elif sub.peek() in "\"'":
                sub.advance()
            else:
                out.append(sub.advance())
        return "".join(out)

    # -- words and commands
    def skip_blank(self) -> None:
        while self.peek() in (" ", "\t") and self.peek():
            self.advance()
        while self.peek() == "\\" and self.peek(1) == "\n":
            self.advance(2)
            while self.peek() in (" ", "\t") and self.peek():
                self.advance()

    def read_heredocs(self, cmd: Command) -> None:
        """After a newline: consume pending here-doc bodies; the first one feeds ``cmd``."""
        for delim, quoted, strip_tabs, start in self.pending_heredocs:
            lines = []
            while True:
                if not self.peek():
                    raise ShellParseError(
                        f"here-document ends before its delimiter {delim!r}", start
                    )
                end = self.s.find("\n", self.i)
                end = len(self.s) if end < 0 else end
                raw = self.s[self.i : end]
                self.advance(end - self.i + (1 if end < len(self.s) else 0))
                check = raw.lstrip("\t") if strip_tabs else raw
                if check == delim:
                    break
                lines.append(check)
            body = "\n".join(lines)
            if not quoted:
                body = body.replace("\\\n", "")
                body = self._expand_plain_keep_quotes(body, cmd)
            if cmd.heredoc is None:
                cmd.heredoc = body
        self.pending_heredocs = []

    def _expand_plain_keep_quotes(self, text: str, cmd: Command) -> str:
        sub = _Lexer(text, self.vars)
        out = []
        while sub.i < len(sub.s):
            c = sub.peek()
            if c == "$":
                out.append(sub.expand_dollar(cmd))
            elif c == "\\" and sub.peek(1) in "$`\\":
                sub.advance()
                out.append(sub.advance())
            else:
                out.append(sub.advance())
        return "".join(out)

    def next_command(self) -> Command | None:
        """The next simple command, or None at the end of the script."""
        while True:
            self.skip_blank()
            c = self.peek()
            if not c:
                return None
            if c == "#":
                self._skip_comment()
                continue
            if c in "\n;&|()":
                self.advance()
                continue
            break
        cmd = Command(words=[], line=self.line)
        words: list[str] = []
        while True:
            self.skip_blank()
            c = self.peek()
            if not c:
                break
            if c == "#":  # a comment at a word start ends the command at this newline
                comment_line = self.line
                self._skip_comment()
                rest = self.s[self.i + 1 :].lstrip(" \t") if self.peek() == "\n" else ""
                if words and re.match(r"^(--|\+{0,2}[A-Za-z_][\w.]*=)", rest):
                    cmd.warnings.append(
                        f"line {comment_line}: a comment inside the continued command ends it "
                        "(bash ignores the '\\' inside a comment); the lines after it are "
                        "separate commands, not arguments"
                    )
                continue
            if c == "\n":
                self.advance()
                if self.pending_heredocs:
                    self.read_heredocs(cmd)
                break
            if c in ";|&()":
                if c == "&" and self.peek(1) == ">":
                    self._redirection()
                    continue
                self.advance()
                if c in "|&" and self.peek() == c:
                    self.advance()
                if c == ";" and self.peek() == ";":
                    self.advance()
                break
            if c in "<>":
                self._redirection()
                continue
            word_parts = self._word(cmd)
            for w in word_parts:
                words.append(w)
        # Trailing fd number before a redirection is removed in _word via the marker.
        words = [w for w in words if w is not _FD_MARK]
        self._finish(cmd, words)
        return cmd

    def _skip_comment(self) -> None:
        while self.peek() and self.peek() != "\n":
            self.advance()

    def _redirection(self) -> None:
        start = self.line
        op = self.advance()
        if op == "&":
            op += self.advance()  # &>
        if op == "<" and self.peek() == "<":
            self.advance()
            if self.peek() == "<":  # here-string <<< word
                self.advance()
                self.skip_blank()
                self._word(Command([], start))
                return
            strip_tabs = False
            if self.peek() == "-":
                self.advance()
                strip_tabs = True
            self.skip_blank()
            delim_words = self._word(Command([], start), raw_quotes=True)
            if not delim_words:
                raise ShellParseError("here-document without a delimiter", start)
            raw = delim_words[0]
            quoted = any(q in raw for q in "'\"\\")
            delim = raw.replace("'", "").replace('"', "").replace("\\", "")
            self.pending_heredocs.append((delim, quoted, strip_tabs, start))
            return
        if self.peek() in "><":
            self.advance()
        if self.peek() == "&":
            self.advance()
            while self.peek().isdigit() or self.peek() == "-":
                self.advance()
            return
        self.skip_blank()
        if self.peek() and self.peek() not in "\n;|&":
            self._word(Command([], start))

    def _word(self, cmd: Command, raw_quotes: bool = False) -> list[str]:
        """One shell word (after expansion: possibly several, by word splitting)."""
        start_line = self.line
        fields: list[str] = []
        cur: list[str] = []
        quoted = False  # a quoted empty string is still a word
        plain = True  # only literal characters so far (an fd number before '>')
        while True:
            c = self.peek()
            if not c or c in " \t\n;|&()<>":
                if c in "<>" and c and plain and not fields and "".join(cur).isdigit():
                    return [_FD_MARK]  # the "2" of 2>&1
                break
            if c == "\\":
                if self.peek(1) == "\n":
                    self.advance(2)
                    continue
                if raw_quotes:
                    cur.append(self.advance())
                else:
                    self.advance()
                cur.append(self.advance())
                plain = False
                continue
            if c == "'":
                self.advance()
                end = self.s.find("'", self.i)
                if end < 0:
                    raise ShellParseError("unbalanced single quote (')", start_line)
                text = self.advance(end - self.i + 1)[:-1]
                cur.append(f"'{text}'" if raw_quotes else text)
                quoted, plain = True, False
                continue
            if c == '"':
                self.advance()
                cur.append('"' if raw_quotes else "")
                while True:
                    d = self.peek()
                    if not d:
                        raise ShellParseError('unbalanced double quote (")', start_line)
                    if d == '"':
                        self.advance()
                        break
                    if d == "\\" and self.peek(1) in '$`"\\\n':
                        self.advance()
                        e = self.advance()
                        if e != "\n":
                            cur.append(e)
                        continue
                    if d == "$" and not raw_quotes:
                        cur.append(self.expand_dollar(cmd))
                        continue
                    if d == "`":
                        cur.append(self._backtick(cmd))
                        continue
                    cur.append(self.advance())
                if raw_quotes:
                    cur.append('"')
                quoted, plain = True, False
                continue
            if c == "$" and not raw_quotes:
                plain = False
                substitution = self.peek(1) == "(" and self.peek(2) != "("
                value = self.expand_dollar(cmd)
                # Unquoted expansion: word splitting on blanks (kept text is one word).
                pieces = [value] if substitution else re.split(r"[ \t\n]+", value)
                if len(pieces) == 1:
                    cur.append(value)
                else:
                    if pieces[0]:
                        cur.append(pieces[0])
                    if "".join(cur):
                        fields.append("".join(cur))
                    fields.extend(p for p in pieces[1:-1] if p)
                    cur = [pieces[-1]] if pieces[-1] else []
                continue
            if c == "`":
                cur.append(self._backtick(cmd))
                plain = False
                continue
            cur.append(self.advance())
        text = "".join(cur)
        if text or quoted:
            fields.append(text)
        return fields

    def _backtick(self, cmd: Command) -> str:
        start = self.i
        line = self.line
        self.advance()
        end = self.s.find("`", self.i)
        if end < 0:
            raise ShellParseError("unbalanced backtick (`)", line)
        self.advance(end - self.i + 1)
        text = self.s[start : self.i]
        cmd.notes.append(f"command substitution {text} is not run; kept as text")
        return text

    def _finish(self, cmd: Command, words: list[str]) -> None:
        if words and words[0] in _LOOP_WORDS:
            cmd.keyword = words[0]
        while words and words[0] in _RESERVED_LEADING:
            words.pop(0)
        if words and words[0] in _RESERVED_ALONE:
            words = []
        # NAME=value words in front: variable assignments (or env for this command only)
        prefix: dict[str, str] = {}
        while words:
            m = _ASSIGN.match(words[0])
            if not m:
                break
            name, op, value = m.groups()
            prefix[name] = (self.vars.get(name, "") + value) if op == "+=" else value
            words.pop(0)
        if not words:
            self.vars.update(prefix)
        elif words[0] in _DECLARE:
            for w in words[1:]:
                m = _ASSIGN.match(w)
                if m:
                    self.vars[m.group(1)] = m.group(3)
            words = []
        cmd.assignments = prefix
        cmd.words = words


_FD_MARK = "\x00fd"


def parse_script(
    text: str, variables: dict[str, str] | None = None, script_dir: str | None = None
) -> ShellScript:
    """Split a launch script into its simple commands, expanding variables as bash would.

    ``variables`` are known before the script runs (the caller's ``--var NAME=VALUE``); the
    script's own assignments override them from the line they appear on. With ``script_dir``,
    the idioms ``$(dirname "$0")`` and ``$(cd "$(dirname "$0")" && pwd)`` give that directory.
    ``for NAME in WORDS``
    loops are unrolled (each command of the body once per value, with :attr:`Command.loop`);
    ``while``/``until`` bodies are read once.
    """
    lexer = _Lexer(text, dict(variables or {}), script_dir)
    commands: list[Command] = []

    def block(loop: tuple[str, ...], in_loop: bool, keep: bool) -> None:
        depth = 0  # open while/until loops inside this block
        cut: Command | None = None  # the last command a comment cut short
        while True:
            cmd = lexer.next_command()
            if cmd is None:
                return
            if cut is not None and cmd.words and _ORPHAN.match(cmd.words[0]):
                cut.dropped.extend(cmd.words)  # orphaned arguments, not a command
                if not cmd.warnings:
                    cut = None
                continue
            cut = cmd if cmd.warnings else None
            if cmd.keyword == "done":
                if depth == 0 and in_loop:
                    return
                depth = max(0, depth - 1)
                continue
            if cmd.keyword in ("while", "until"):
                depth += 1
            if cmd.keyword == "for" and len(cmd.words) >= 3 and cmd.words[2] == "in":
                name, values = cmd.words[1], cmd.words[3:]
                body = (lexer.i, lexer.line)
                for value in values or [""]:
                    lexer.i, lexer.line = body
                    lexer.vars[name] = value
                    block((*loop, f"{name}={value}"), True, keep and bool(values))
                continue
            if cmd.keyword == "for":
                depth += 1  # for ((...)) or for NAME without in: read the body once
                continue
            if cmd.heredoc is not None and cmd.words[:1] == ["read"]:
                # read -r -d '' NAME <<EOF ... EOF: the body becomes the variable NAME.
                target = [w for w in cmd.words[1:] if not w.startswith("-") and w]
                if target:
                    lexer.vars[target[-1]] = cmd.heredoc.strip("\n")
            if cmd.words and keep:
                cmd.loop = loop
                commands.append(cmd)

    block((), False, True)
    return ShellScript(commands=commands, variables=lexer.vars, notes=[])
