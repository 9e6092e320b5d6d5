"""Tokenising a script the way bash does: words with their quotes kept, operators,
redirections, here-documents (read after the line that opens them), ``\\``-newline
continuations, comments, ``((...))``/``[[...]]`` bodies and array literals ``A=(...)``.
Words are kept raw (quotes, ``$``) for the expander. A comment inside a continued command ends
it, as in bash (recorded on the token). Deviation: a template's placeholder right after ``=``
(``VAR=<PATH>``) stays in the word, where bash sees redirections (and, at the end of a line, a
syntax error); the expander reads it as an unknown value."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kl_patches.audit.shell.model import LIMITS, ShellLimitError, ShellParseError
from kl_patches.audit.shell.vocabulary import ASSIGN, CUT_NEXT, PLACEHOLDER


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
class ArrayLit:
    name: str
    append: bool
    elements: list[str]
    line: int


@dataclass
class Redir:
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


class Lexer:
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
                if CUT_NEXT.match(rest):
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
        self.command_start = was_start and (raw in _COMMAND_START_WORDS or bool(ASSIGN.match(raw)))
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
            return _Tok("REDIR", op, line, Redir(op, "", doc, fd))
        if op in (">&", "<&") and re.match(r"[0-9-]", self.peekc() or " "):
            target = ""
            while self.peekc().isdigit() or self.peekc() == "-":
                target += self.adv()
            return _Tok("REDIR", op, line, Redir(op, target, None, fd))
        if not self.peekc() or self.peekc() in "\n;|&":
            raise ShellParseError(f"syntax error near unexpected token after {op!r}", line)
        raw, _ = self._word(line)
        return _Tok("REDIR", op, line, Redir(op, raw, None, fd))

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
    def _word(self, line: int, cond: bool = False) -> tuple[str, ArrayLit | None]:
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
                    m = ASSIGN.match("".join(out))
                    if m and m.group(4) == "" and m.group(2) is None:
                        self.adv()
                        elements = self._array_elements(line)
                        return "".join(out), ArrayLit(
                            m.group(1), m.group(3) == "+=", elements, line
                        )
                placeholder = PLACEHOLDER.match(self.s, self.i) if c == "<" else None
                if placeholder and out and out[-1].endswith("="):  # VAR=<PLACEHOLDER>
                    out.append(self.adv(placeholder.end() - self.i))
                    continue
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
