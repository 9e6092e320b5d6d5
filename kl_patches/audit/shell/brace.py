"""Brace expansion (``{a,b}``, ``{1..9..2}``, ``{a..e}``, nested), done before any other
expansion as in bash; the number of words is bounded (``LIMITS["brace"]``)."""

from __future__ import annotations

import itertools
import re

from kl_patches.audit.shell.model import LIMITS, ShellLimitError


def brace_expand(raw: str) -> list[str]:
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
