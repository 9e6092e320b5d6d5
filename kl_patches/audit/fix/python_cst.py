"""Layout-keeping edits of libcst nodes: add or drop a call argument or a dict entry, and the
Python literal for a command-line value.

:mod:`.python_edit` decides *what* to change in a Python launch; this module changes a node so
that the file keeps its layout: an argument added to a call written one per line goes on a line
of its own with the same indentation (and a trailing comma when the call has one), one added to
a call written on one line goes after ``, ``; dropping an item takes its own line and trailing
comment with it and leaves its neighbours' comments where they were. libcst is imported by the
caller (:func:`kl_patches.audit.fix.python_edit.libcst_module`), so this module's import of it
only runs once the caller has checked it is installed.

Deviation: a comment line *between* two items belongs to the whitespace after the first; it
stays when the item after it is dropped (it may then sit above the next item).
"""

from __future__ import annotations

import ast
import math

import libcst as cst

__all__ = ["append_arg", "literal_text", "remove_arg", "remove_element"]

_TRUE = ("true", "yes", "t", "y", "1", "on")
_FALSE = ("false", "no", "f", "n", "0", "off")

Space = cst.BaseParenthesizableWhitespace


def _clean(ws: Space) -> Space:
    """``ws`` without the comment on its first line and the comment lines after it: the bare
    line break and indentation (for an item that has no comment of its own)."""
    if isinstance(ws, cst.ParenthesizedWhitespace):
        return ws.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
    return ws


def _merge(head: Space, tail: Space) -> Space:
    """Whitespace that ends the line as ``head`` does (its comment, its comment lines, then
    ``tail``'s comment lines) and then indents as ``tail`` does (the start of the next item, or
    of the closing bracket)."""
    if isinstance(head, cst.ParenthesizedWhitespace):
        if isinstance(tail, cst.ParenthesizedWhitespace):
            return head.with_changes(
                empty_lines=[*head.empty_lines, *tail.empty_lines],
                indent=tail.indent,
                last_line=tail.last_line,
            )
        if head.first_line.comment is None and not head.empty_lines:
            return tail  # the bracket closes on the item's own line, as it did
        return head  # a comment ends the line: keep the line break and its indentation
    return _clean(tail) if isinstance(tail, cst.ParenthesizedWhitespace) else tail


def _between(call: cst.Call) -> Space:
    """The whitespace that leads into an argument after a comma in ``call`` (``" "`` for a call
    written on one line, a line break and the arguments' indentation for one per line)."""
    args = call.args
    if len(args) >= 2 and isinstance(args[-2].comma, cst.Comma):
        return _clean(args[-2].comma.whitespace_after)
    lead = call.whitespace_before_args
    if isinstance(lead, cst.ParenthesizedWhitespace):
        return _clean(lead)
    return cst.SimpleWhitespace(" ")


def append_arg(call: cst.Call, arg: cst.Arg) -> cst.Call:
    """``call`` with ``arg`` after its last argument, in the call's layout."""
    args = list(call.args)
    if not args:
        return call.with_changes(args=[arg])
    last = args[-1]
    between = _between(call)
    if isinstance(last.comma, cst.Comma):  # a trailing comma: the new argument gets one too
        closing = last.comma.whitespace_after
        args[-1] = last.with_changes(
            comma=last.comma.with_changes(whitespace_after=_merge(closing, between))
        )
        new = arg.with_changes(comma=cst.Comma(whitespace_after=_clean(closing)))
    else:
        closing = last.whitespace_after_arg
        args[-1] = last.with_changes(
            comma=cst.Comma(whitespace_after=_merge(closing, between)),
            whitespace_after_arg=cst.SimpleWhitespace(""),
        )
        new = arg.with_changes(
            comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=_clean(closing)
        )
    return call.with_changes(args=[*args, new])


def remove_arg(call: cst.Call, index: int) -> cst.Call:
    """``call`` without its argument ``index`` (its line and comment go with it)."""
    args = list(call.args)
    gone = args.pop(index)
    if not args:
        return call.with_changes(args=[], whitespace_before_args=cst.SimpleWhitespace(""))
    if index == len(args):  # the last one: its predecessor now ends the list
        prev = args[-1]
        prev_after = prev.comma.whitespace_after if isinstance(prev.comma, cst.Comma) else None
        if isinstance(gone.comma, cst.Comma):
            closing = gone.comma.whitespace_after
            head = prev_after if prev_after is not None else cst.SimpleWhitespace("")
            args[-1] = prev.with_changes(
                comma=cst.Comma(
                    whitespace_before=_comma_before(prev),
                    whitespace_after=_merge(head, closing),
                )
            )
        else:
            closing = gone.whitespace_after_arg
            head = prev_after if prev_after is not None else cst.SimpleWhitespace("")
            args[-1] = prev.with_changes(
                comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=_merge(head, closing)
            )
    return call.with_changes(args=args)


def _comma_before(item: cst.Arg | cst.BaseDictElement) -> cst.BaseParenthesizableWhitespace:
    comma = item.comma
    return comma.whitespace_before if isinstance(comma, cst.Comma) else cst.SimpleWhitespace("")


def remove_element(node: cst.Dict, index: int) -> cst.Dict:
    """The dict literal ``node`` without its entry ``index`` (its line and comment go too)."""
    items = list(node.elements)
    gone = items.pop(index)
    if not items:
        return node.with_changes(
            elements=[],
            lbrace=node.lbrace.with_changes(whitespace_after=cst.SimpleWhitespace("")),
            rbrace=node.rbrace.with_changes(whitespace_before=cst.SimpleWhitespace("")),
        )
    if index == len(items):  # the last one: the closing brace's whitespace ends the list
        prev = items[-1]
        prev_after = prev.comma.whitespace_after if isinstance(prev.comma, cst.Comma) else None
        head = prev_after if prev_after is not None else cst.SimpleWhitespace("")
        comma: cst.Comma | cst.MaybeSentinel = cst.MaybeSentinel.DEFAULT
        if isinstance(gone.comma, cst.Comma):
            comma = cst.Comma(
                whitespace_before=_comma_before(prev), whitespace_after=cst.SimpleWhitespace("")
            )
        closing = node.rbrace.whitespace_before
        if isinstance(gone.comma, cst.Comma) and isinstance(
            gone.comma.whitespace_after, cst.ParenthesizedWhitespace
        ):
            closing = gone.comma.whitespace_after
        items[-1] = prev.with_changes(comma=comma)
        return node.with_changes(
            elements=items,
            rbrace=node.rbrace.with_changes(whitespace_before=_merge(head, closing)),
        )
    return node.with_changes(elements=items)


def literal_text(value: str, like: type | None, quote: str = '"') -> str:
    """The Python literal for the command-line string ``value``, of type ``like`` (``float``,
    ``int``, ``bool``, ``str``; None: told from the value, as ``True``, ``None``, a number, else
    a string). ValueError when ``value`` is not of that type."""
    if like is bool:
        low = value.strip().lower()
        if low in _TRUE:
            return "True"
        if low in _FALSE:
            return "False"
        raise ValueError(f"{value!r} is not a boolean (true/false, yes/no, 1/0)")
    if like is not str and value.strip() in ("None", "none", "null"):
        return "None"
    if like is float:
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a number") from None
        if not math.isfinite(number):
            return f'float("{value.strip()}")'
        written = _number(value)
        return value.strip() if isinstance(written, float) else repr(number)
    if like is int:
        try:
            return str(int(value))
        except ValueError:
            raise ValueError(f"{value!r} is not an integer") from None
    if like is None:
        if value.strip() in ("True", "False"):
            return value.strip()
        if _number(value) is not None:
            return value.strip()
    return _string(value, quote)


def _number(text: str) -> int | float | None:
    """The int or float ``text`` is as a Python literal (``1e-3``, ``0.04``), else None."""
    try:
        found = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if isinstance(found, bool) or not isinstance(found, (int, float)):
        return None
    return found


def _string(value: str, quote: str) -> str:
    if quote in value or "\\" in value or not value.isprintable():
        return repr(value)
    return f"{quote}{value}{quote}"
