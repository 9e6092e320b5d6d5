"""Minimal edits of a bash launch for a :class:`~.change.ChangeSet` (verl overrides, OpenRLHF
and TRL flags).

The shell reader knows where a launch starts (its line), not where each value was written, so
the text is located here: the launch's lines are the start line and its ``\\`` continuations. A
``set`` edits the value where it is written: on the command line (``key=value``, ``--flag
value``, ``--flag=value``); when that value is a variable used nowhere else, at the variable's
one assignment; else in the one place elsewhere in the file that writes the key (an array
element, a string of options). A key written nowhere is added at the end of the launch's
arguments, on a new line in the file's continuation style (before a last line that forwards
``$@`` or redirects the output). ``unset`` removes the word (and its line if nothing else is
left on it); ``rename`` replaces the name; ``entry_point`` replaces the module after ``-m``.

Every edit is checked by the caller (:mod:`.apply`) by re-auditing the edited text; this
module only edits. It raises :class:`EditError` where it cannot place an edit safely.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kl_patches.audit.fix.change import Change

__all__ = ["EditError", "apply_list", "apply_shell", "command_lines"]


class EditError(ValueError):
    """A change the writer cannot place in the text (the message says why)."""


_WORD_END = r"(?=[\s\"';)]|\\$|$)"
_VALUE = r"(\"[^\"]*\"|'[^']*'|[^\s\"';)\\]*)"


def command_lines(lines: list[str], start: int) -> tuple[int, int]:
    """0-based first and last line of the command starting at 0-based ``start``: a line
    continues it when it ends with a backslash outside quotes, or inside a quoted word that
    spans lines (``--runtime-env-json='{`` ... ``}'``: bash reads the newlines as part of the
    word, so the command goes on past them)."""
    end = start
    quote = ""
    while end < len(lines):
        quote, continued = _line_state(lines[end], quote)
        if not (quote or continued) or end == len(lines) - 1:
            break
        end += 1
    return start, end


def _line_state(line: str, quote: str) -> tuple[str, bool]:
    """The quote still open at the end of ``line`` (given the one open at its start) and
    whether it ends with a line-continuing backslash outside quotes."""
    i = 0
    while i < len(line):
        ch = line[i]
        if quote == "'":
            if ch == "'":
                quote = ""
        elif quote == '"':
            if ch == "\\":
                i += 1
            elif ch == '"':
                quote = ""
        elif ch == "\\":
            if i == len(line.rstrip()) - 1:
                return "", True
            i += 1
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            break
        i += 1
    return quote, False


def split_comment(text: str) -> tuple[str, str]:
    """``text`` split before its trailing comment (a ``#`` at the start or after whitespace,
    outside quotes): the rule bash and YAML share (the YAML writer uses it too)."""
    quote = ""
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i], text[i:]
    return text, ""


def _code(line: str) -> str:
    """The line without a trailing comment."""
    return split_comment(line)[0]


def _pattern(change: Change, key: str | None = None) -> re.Pattern[str]:
    k = re.escape(key or change.key)
    if change.namespace == "hydra":
        return re.compile(r"(?<![\w.+~-])(\+{0,2}|~)" + k + r"(=)" + _VALUE)
    flag = key or (change.key if change.namespace == "argparse" else f"--{change.key}")
    return re.compile(r"(?<![\w.-])()" + re.escape(flag) + r"(?:(=)|(?=\s|$))")


def _find(lines: list[str], rows: range, pat: re.Pattern[str]) -> list[tuple[int, re.Match[str]]]:
    out = []
    for r in rows:
        code = _code(lines[r])
        for m in pat.finditer(code):
            out.append((r, m))
    return out


def _var_of(value: str) -> str | None:
    m = re.fullmatch(r"\"?\$\{?([A-Za-z_]\w*)\}?\"?", value)
    return m.group(1) if m else None


def _set_variable(lines: list[str], var: str, value: str) -> bool:
    """Edit ``var``'s one assignment when ``$var`` is used once in the file."""
    uses = sum(len(re.findall(r"\$\{?" + var + r"\b(?!\w)", _code(ln))) for ln in lines)
    assign = re.compile(r"^(\s*(?:export\s+|local\s+|readonly\s+)?" + var + r"=)" + _VALUE)
    found = [r for r, ln in enumerate(lines) if assign.match(ln)]
    if uses != 1 or len(found) != 1:
        return False
    r = found[0]
    m = assign.match(lines[r])
    assert m is not None
    if "$" in m.group(2) or "`" in m.group(2):  # not a literal: edit where it is used
        return False
    lines[r] = lines[r][: m.end(1)] + _quoted_like(m.group(2), value) + lines[r][m.end(2) :]
    return True


def _quoted_like(old: str, value: str) -> str:
    if old.startswith('"') and old.endswith('"') and len(old) > 1:
        return f'"{value}"'
    if old.startswith("'") and old.endswith("'") and len(old) > 1:
        return f"'{value}'"
    return value


def _flag_value(line: str, after: int) -> tuple[int, int] | None:
    """Span of the value word following a flag at ``after`` on ``line`` (None: none)."""
    m = re.compile(r"[ \t]+" + _VALUE).match(line, after)
    if m is None or not m.group(1) or m.group(1).startswith("-"):
        return None
    return m.start(1), m.end(1)


def _edit_at(lines: list[str], r: int, m: re.Match[str], change: Change) -> None:
    line = lines[r]
    if change.namespace == "hydra":
        start, end = m.start(3), m.end(3)
        old = m.group(3)
        if change.action == "set":
            var = _var_of(old)
            if var is not None and _set_variable(lines, var, str(change.value)):
                return
            lines[r] = line[:start] + _quoted_like(old, str(change.value)) + line[end:]
        elif change.action == "rename":
            lines[r] = (
                line[: m.start(0) + len(m.group(1))] + str(change.new_key) + line[m.start(2) :]
            )
        else:
            _remove_word(lines, r, m.start(0), m.end(0))
        return
    # a flag: --flag value, --flag=value, or a store-true --flag
    span: tuple[int, int] | None
    if m.group(2):  # --flag=value
        vm = re.compile(_VALUE).match(line, m.end(0))
        span = (vm.start(1), vm.end(1)) if vm else (m.end(0), m.end(0))
    else:
        span = _flag_value(line, m.end(0))
    if change.action == "rename":
        new = str(change.new_key)
        if change.namespace == "trl":
            new = f"--{new}"
        lines[r] = line[: m.start(0)] + new + line[m.end(0) - (1 if m.group(2) else 0) :]
        return
    if change.action == "unset":
        _remove_word(lines, r, m.start(0), span[1] if span else m.end(0))
        return
    value = str(change.value)
    if value == "":
        if span is not None and not m.group(2):
            raise EditError(f"{change.key} is a switch here but is followed by a value")
        return
    if span is None:
        lines[r] = line[: m.end(0)] + " " + value + line[m.end(0) :]
        return
    old = line[span[0] : span[1]]
    var = _var_of(old)
    if var is not None and _set_variable(lines, var, value):
        return
    lines[r] = line[: span[0]] + _quoted_like(old, value) + line[span[1] :]


def _remove_word(lines: list[str], r: int, start: int, end: int) -> None:
    line = lines[r]
    head, tail = line[:start].rstrip(), line[end:].lstrip()
    new = head + (" " + tail if head and tail else tail)
    if new.strip() in ("", "\\"):
        continued = line.rstrip().endswith("\\")
        del lines[r]
        if not continued and r > 0 and lines[r - 1].rstrip().endswith("\\"):
            lines[r - 1] = lines[r - 1].rstrip()[:-1].rstrip()
        return
    lines[r] = new


_TAIL = re.compile(r"\"?\$\{?[@*]|(^|\s)(\d?>|&>|\||;|&&)")


def _word(change: Change) -> str:
    if change.namespace == "hydra":
        return f"{change.key}={change.value}"
    flag = change.key if change.namespace == "argparse" else f"--{change.key}"
    return flag if change.value == "" else f"{flag} {change.value}"


def _append(lines: list[str], first: int, last: int, word: str) -> int:
    """Add ``word`` at the end of the command's arguments; the new last line."""
    if first == last:
        line = lines[first]
        code = _code(line)
        m = re.search(r"[ \t]+(\d?>|&>|\||;|&&|\"?\$\{?@)", code)
        at = m.start() if m else len(code.rstrip())
        lines[first] = line[:at] + " " + word + line[at:]
        return last
    if _TAIL.search(_code(lines[last])):  # it forwards "$@" or redirects: insert before it
        indent = re.match(r"\s*", lines[last]).group(0)  # type: ignore[union-attr]
        lines.insert(last, f"{indent}{word}{_continuation(lines[first:last])}\\")
        return last + 1
    prev = lines[last]
    indent = re.match(r"\s*", prev).group(0)  # type: ignore[union-attr]
    if not indent and last > first:
        indent = re.match(r"\s*", lines[first + 1]).group(0)  # type: ignore[union-attr]
    sep = _continuation(lines[first:last])
    code = _code(prev)
    comment = prev[len(code) :]
    if comment:
        raise EditError("the launch's last line ends with a comment; add the setting by hand")
    lines[last] = prev.rstrip() + sep + "\\"
    lines.insert(last + 1, f"{indent}{word}")
    return last + 1


def _continuation(lines: Sequence[str]) -> str:
    """The whitespace the file puts before a continuation backslash (default one space)."""
    for ln in lines:
        m = re.search(r"(\s*)\\$", ln.rstrip("\n"))
        if m:
            return m.group(1) if m.group(1) else ""
    return " "


def apply_shell(text: str, line: int, changes: Sequence[Change]) -> str:
    """``text`` with ``changes`` made for the launch starting at 1-based ``line``."""
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        raise EditError(f"the launch's line {line} is not in the file")
    first, last = command_lines(lines, line - 1)
    for change in changes:
        first, last = command_lines(lines, first)
        if change.action == "entry_point":
            _entry_point(lines, first, last, change)
            continue
        pat = _pattern(change)
        here = _find(lines, range(first, last + 1), pat)
        if not here:
            before = [x for x in _find(lines, range(0, first), pat)]
            here = before[-1:] if before else []
        if here:
            r, m = here[-1]
            _edit_at(lines, r, m, change)
            continue
        if change.action == "set":
            _append(lines, first, last, _word(change))
        # unset/rename of a key written nowhere: nothing to do (the audit reads the default)
    return "\n".join(lines)


def _entry_point(lines: list[str], first: int, last: int, change: Change) -> None:
    words = str(change.value).split()
    for r in range(first, last + 1):
        code = _code(lines[r])
        if change.namespace == "trl":  # the trainer word stays right after the launcher
            m = re.search(r"(?<![\w.-])(-m\s+trl\s+|-m\s+trl\.scripts\.|trl\s+)(grpo|rloo)\b", code)
            if m:
                head = "-m kl_patches.trl" if m.group(1).startswith("-m") else "kl-patches trl"
                launcher = f"{head} {m.group(2)} " + " ".join(words[1:])
                lines[r] = lines[r][: m.start(0)] + launcher + lines[r][m.end(0) :]
                return
            continue
        m = re.search(r"(-m\s+|--module\s+)([\w.]+)", code)
        if m and ("." in m.group(2) or change.key in m.group(2)):
            lines[r] = lines[r][: m.start(2)] + str(change.value) + lines[r][m.end(2) :]
            return
    raise EditError(
        f"the launch's entry point ({change.key}) is not written as 'python -m MODULE' or "
        "'trl grpo' on its lines: switch it to the kl-patches launcher by hand "
        f"({change.value})"
    )


def apply_list(text: str, changes: Sequence[Change]) -> str:
    """An override or flag list file (one or more per line, no command): each value edited
    where it is written, a new one appended as a last line."""
    lines = text.split("\n")
    for change in changes:
        if change.action == "entry_point":
            raise EditError("an overrides file has no entry point to switch; run it with "
                            f"{change.value}")  # fmt: skip
        here = _find(lines, range(len(lines)), _pattern(change))
        if here:
            r, m = here[-1]
            _edit_at(lines, r, m, change)
        elif change.action == "set":
            end = len(lines)
            while end > 0 and not lines[end - 1].strip():
                end -= 1
            lines.insert(end, _word(change))
    return "\n".join(lines)
