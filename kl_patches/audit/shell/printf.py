"""``printf``'s format language, for ``printf -v`` and ``$(printf ...)``: the escapes and the
conversions the reader models. Deviation: a conversion it does not model gives None (the value
is then unknown), never a guess."""

from __future__ import annotations

import re

from kl_patches.audit.shell.arith import ArithError, parse_number, wrap
from kl_patches.audit.shell.model import LIMITS, ShellLimitError

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
                        float(number) if conv in "feEgG" else wrap(parse_number(number.lstrip("+")))
                    )
                except (ValueError, ArithError):
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
