"""Bash's grammar over the lexer's tokens, one complete command at a time (so a parse error
stops the reading where bash stops). Nesting is bounded (``LIMITS["nesting"]``); a malformed
construct raises :class:`ShellParseError` naming its line."""

from __future__ import annotations

import re
from typing import Any

from kl_patches.audit.shell.lexer import Lexer, Redir
from kl_patches.audit.shell.model import LIMITS, ShellLimitError, ShellParseError
from kl_patches.audit.shell.nodes import (
    AndOr,
    ArithCmd,
    ArithFor,
    Case,
    CondCmd,
    For,
    FuncDef,
    Group,
    If,
    List,
    Loop,
    Node,
    Pipeline,
    Simple,
)


class Parser:
    """Recursive descent over :class:`Lexer` tokens, one complete command at a time."""

    def __init__(self, lexer: Lexer) -> None:
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

    def complete_command(self) -> Node | None:
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
    def _mark_cut(node: Node, line: int) -> None:
        last: Node = node
        while True:
            if isinstance(last, AndOr):
                last = last.rest[-1][1] if last.rest else last.first
            elif isinstance(last, Pipeline):
                last = last.commands[-1]
            else:
                break
        if isinstance(last, Simple):
            last.cut = line

    def _list(self, stops: set[str]) -> List:
        """Commands up to one of the reserved words ``stops`` (not consumed)."""
        line = self.lx.peek().line
        items: list[Node] = []
        while True:
            self._skip_newlines()
            tok = self.lx.peek()
            if tok.kind == "EOF":
                return List(line, items)
            if tok.kind == "WORD" and tok.text in stops:
                return List(line, items)
            if tok.kind == "OP" and tok.text in (")", ";;", ";&", ";;&") and tok.text in stops:
                return List(line, items)
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

    def _and_or(self) -> Node:
        first = self._pipeline()
        rest: list[tuple[str, Node]] = []
        while self.lx.peek().kind == "OP" and self.lx.peek().text in ("&&", "||"):
            op = self.lx.take().text
            self._skip_newlines()
            rest.append((op, self._pipeline()))
        return AndOr(first.line, first, rest) if rest else first

    def _pipeline(self) -> Node:
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
        return Pipeline(line, commands, negated)

    def _expect_word(self, text: str, opened: int) -> None:
        tok = self.lx.take()
        if tok.kind != "WORD" or tok.text != text:
            found = "end of file" if tok.kind == "EOF" else repr(tok.text)
            raise ShellParseError(f"expected {text!r}, found {found}", opened)

    def _command(self) -> Node:
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
                    return Loop(line, cond, body, tok.text == "until")
                if tok.text in ("for", "select"):
                    return self._for()
                if tok.text == "case":
                    return self._case()
                if tok.text == "{":
                    self.lx.take()
                    body = self._list({"}"})
                    self._expect_word("}", line)
                    return Group(line, body, False, self._redirects())
                if tok.text == "function":
                    self.lx.take()
                    name = self.lx.take().text
                    if self.lx.peek().kind == "OP" and self.lx.peek().text == "(":
                        self.lx.take()
                        if self.lx.take().text != ")":
                            raise ShellParseError("expected ')' after '('", line)
                    self._skip_newlines()
                    return FuncDef(line, name, self._command())
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
                    return FuncDef(line, tok.text, self._command())
            if tok.kind == "OP" and tok.text == "(":
                self.lx.take()
                body = self._list({")"})
                if self.lx.take().text != ")":
                    raise ShellParseError("unbalanced '(' (subshell)", line)
                return Group(line, body, True, self._redirects())
            if tok.kind == "ARITH":
                self.lx.take()
                return ArithCmd(line, tok.text)
            if tok.kind == "COND":
                self.lx.take()
                return CondCmd(line, tok.extra)
            return self._simple()
        finally:
            self._leave()

    def _redirects(self) -> list[Redir]:
        out = []
        while self.lx.peek().kind == "REDIR":
            out.append(self.lx.take().extra)
        return out

    def _simple(self) -> Simple:
        line = self.lx.peek().line
        items: list[Any] = []
        redirs: list[Redir] = []
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
        return Simple(line, items, redirs)

    def _if(self) -> If:
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
        return If(line, clauses, otherwise)

    def _for(self) -> Node:
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
            return ArithFor(line, parts[0], parts[1], parts[2], body)
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
        return For(line, name, words, body, tok.text == "select")

    def _loop_separator(self) -> None:
        while (self.lx.peek().kind == "OP" and self.lx.peek().text == ";") or (
            self.lx.peek().kind == "NL"
        ):
            self.lx.take()

    def _case(self) -> Case:
        line = self.lx.take().line
        word = self.lx.take().text
        self._skip_newlines()
        self._expect_word("in", line)
        items: list[tuple[list[str], List]] = []
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
        return Case(line, word, items)
