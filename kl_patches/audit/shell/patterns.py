"""Glob patterns as bash matches them in ``case``, ``[[ == ]]`` and the ``${V#p}``/``${V%p}``/
``${V/p/r}`` expansions. Pattern size is bounded so that matching stays linear enough."""

from __future__ import annotations

import re

from kl_patches.audit.shell.model import ShellLimitError


def glob_match(text: str, pattern: str) -> bool:
    """Bash pattern matching of a whole string (``case``, ``[[ == ]]``)."""
    return re.fullmatch("(?s:" + _glob_to_regex(pattern, lazy=False) + ")", text) is not None


def split_unescaped(text: str, sep: str) -> tuple[str, str, str]:
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


def trim(value: str, op: str, pattern: str) -> str:
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


def replace(value: str, op: str, pattern: str, replacement: str) -> str:
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
