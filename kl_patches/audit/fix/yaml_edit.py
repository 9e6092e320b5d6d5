"""Minimal edits of a YAML config (verl Hydra YAML, TRL YAML) for a change set.

A dotted key (``algorithm.kl_ctrl.kl_coef``, TRL's ``beta``) is found by indentation: each
part a ``name:`` line in block style inside its parent's block. ``set`` replaces the scalar
after the colon and keeps the line's comment and quoting; a missing key is added as the last
line of its deepest existing parent's block (indented like that block's other children, two
spaces deeper than the parent when it has none), with the parents it lacks. ``unset`` deletes
the key's line (a scalar only). Flow-style mappings (``kl_ctrl: {type: fixed}``) and keys
written as YAML anchors or on several lines are not edited: :class:`EditError` names them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kl_patches.audit.fix.change import Change
from kl_patches.audit.fix.shell_edit import EditError, split_comment

__all__ = ["apply_yaml"]

_KEY = re.compile(r"^(?P<indent>[ ]*)(?P<key>[\w.\-]+|\"[^\"]+\"|'[^']+')[ ]*:(?P<rest>.*)$")


def _meaningful(line: str) -> bool:
    s = line.strip()
    return bool(s) and not s.startswith("#")


def _children(lines: list[str], start: int, end: int, indent: int) -> dict[str, int]:
    """Keys directly inside lines[start:end] whose indent is the block's child indent."""
    out: dict[str, int] = {}
    child: int | None = None
    for r in range(start, end):
        line = lines[r]
        if not _meaningful(line):
            continue
        width = len(line) - len(line.lstrip(" "))
        if width <= indent:
            break
        if child is None:
            child = width
        if width != child:
            continue
        m = _KEY.match(line)
        if m:
            out[m.group("key").strip("\"'")] = r
    return out


def _block_end(lines: list[str], r: int, indent: int) -> int:
    """The index after the last line of the block opened at ``r`` (indent ``indent``)."""
    end = r + 1
    last = r + 1
    while end < len(lines):
        line = lines[end]
        if _meaningful(line):
            width = len(line) - len(line.lstrip(" "))
            if (width <= indent and not line.lstrip().startswith("- ")) or width < indent:
                break
            last = end + 1
        end += 1
    return last


def _locate(lines: list[str], parts: list[str]) -> tuple[list[int], int, int]:
    """Rows of the found prefix of ``parts``, and the block (start, indent) of the last."""
    rows: list[int] = []
    start, end, indent = 0, len(lines), -1
    for part in parts:
        kids = _children(lines, start, end, indent)
        if part not in kids:
            break
        r = kids[part]
        rows.append(r)
        indent = len(lines[r]) - len(lines[r].lstrip(" "))
        start, end = r + 1, _block_end(lines, r, indent)
    return rows, start, indent


def _scalar(value: str) -> str:
    if value in ("True", "False"):
        return value.lower()
    if value == "" or re.search(r"[:#{}\[\],&*!|>'\"%@`]", value):
        return f'"{value}"'
    return value


def _set(lines: list[str], change: Change) -> None:
    parts = change.key.split(".")
    rows, _, _ = _locate(lines, parts)
    if len(rows) == len(parts):
        r = rows[-1]
        m = _KEY.match(lines[r])
        assert m is not None
        rest = m.group("rest")
        value_part, comment = split_comment(rest)
        old = value_part.strip()
        if old.startswith(("{", "[", "|", ">", "&", "*")) or old == "":
            raise EditError(f"{change.key} is not a plain scalar in this file; edit it by hand")
        new = _scalar(str(change.value))
        if old[:1] in "\"'" and new[:1] not in "\"'":
            new = old[0] + new + old[0]
        lead = value_part[: len(value_part) - len(value_part.lstrip())]
        lines[r] = lines[r][: m.start("rest")] + lead + new + (
            value_part[len(value_part.rstrip()):] + comment if comment else "")  # fmt: skip
        return
    # add the missing part under the deepest existing parent
    if rows:
        parent = rows[-1]
        p_indent = len(lines[parent]) - len(lines[parent].lstrip(" "))
        m = _KEY.match(lines[parent])
        if m and split_comment(m.group("rest"))[0].strip():
            raise EditError(f"{'.'.join(parts[: len(rows)])} is not a mapping in block style")
        end = _block_end(lines, parent, p_indent)
        kids = _children(lines, parent + 1, end, p_indent)
        if kids:
            any_row = next(iter(kids.values()))
            step = len(lines[any_row]) - len(lines[any_row].lstrip(" ")) - p_indent
        else:
            step = 2
        base = p_indent + step
    else:
        end = len(lines)
        while end > 0 and not lines[end - 1].strip():
            end -= 1
        base, step = 0, _file_step(lines)
    new_lines = []
    for k, part in enumerate(parts[len(rows) :]):
        pad = " " * (base + k * step)
        last = k == len(parts) - len(rows) - 1
        new_lines.append(f"{pad}{part}: {_scalar(str(change.value))}" if last else f"{pad}{part}:")
    lines[end:end] = new_lines


def _file_step(lines: list[str]) -> int:
    for ln in lines:
        if _meaningful(ln) and ln.startswith(" "):
            return len(ln) - len(ln.lstrip(" "))
    return 2


def _unset(lines: list[str], change: Change) -> None:
    parts = change.key.split(".")
    rows, _, _ = _locate(lines, parts)
    if len(rows) != len(parts):
        return
    r = rows[-1]
    indent = len(lines[r]) - len(lines[r].lstrip(" "))
    del lines[r : _block_end(lines, r, indent)]


def apply_yaml(text: str, changes: Sequence[Change]) -> str:
    """``text`` with ``changes`` made (entry-point changes are the caller's to report)."""
    lines = text.split("\n")
    for change in changes:
        if change.action == "set":
            _set(lines, change)
        elif change.action == "unset":
            _unset(lines, change)
        elif change.action == "rename":
            rows, _, _ = _locate(lines, change.key.split("."))
            if len(rows) == len(change.key.split(".")):
                r = rows[-1]
                m = _KEY.match(lines[r])
                assert m is not None
                new = str(change.new_key).split(".")[-1]
                lines[r] = lines[r][: m.start("key")] + new + lines[r][m.end("key") :]
    return "\n".join(lines)
