"""The audit's report: a table a person reads in seconds, detail per trainer, and stable JSON.

Text: one row per trainer (source, library, trainer, KL as run, policy, expected gradient,
status), then a block per trainer with the verdict, the findings and the fix. Uses ``rich`` (a base
dependency) when it is importable, plain text otherwise or with ``--plain``;
both carry the same information.

JSON (``--json``), schema ``kl-patches.audit/1`` (documented in docs/audit.md; fields are only
ever added):

    {"schema": "kl-patches.audit/1", "strict": bool, "exit_code": int, "notes": [str],
     "summary": {"trainers": int, "unbiased": int, "biased": int, "kl_off": int, "error": int},
     "trainers": [{
        "origin": str, "input_kind": str, "library": str, "version": str|null, "trainer": str,
        "library_version": str|null, "version_source": str, "version_where": str,
        "status": "unbiased"|"biased"|"kl_off"|"error", "refused": bool, "kl_on": bool,
        "off_policy": bool,
        "off_policy_reason": str,
        "config": {KLConfig.to_dict(), + "loss_estimator" when the sides differ},
        "description": str,
        "verdict": {"gradient": str, "unbiased": bool, "unbiased_as_run": bool,
                    "explanation": str, "advice": str, "caveats": [str],
                    "terms": [{"basis": str, "coef": float, "length_normalised": bool,
                               "side": str}]},
        "findings": [{"code": str, "severity": str, "message": str, "fix": str,
                      "origin": "adapter"|"audit"}],
        "fix": {"native": [str], "kl_patches": str, "label": str, "checked": str},
        "settings": {str: JSON value}, "ignored_keys": [str], "notes": [str]}]}
"""

from __future__ import annotations

import io
import json
import textwrap
from collections.abc import Sequence
from typing import Any

from kl_patches.audit.fix.change import LABELS
from kl_patches.audit.model import STATUSES, AuditEntry
from kl_patches.audit.verdicts import describe_reading, verdict_of

SCHEMA = "kl-patches.audit/1"
"""Identifier of the JSON layout; bumped only if a field changes meaning or disappears."""

NATIVE = LABELS[0]
"""The label of a native fix the library's own parser accepted."""

_STATUS_TEXT = {
    "unbiased": "ok",
    "biased": "BIASED",
    "kl_off": "KL off",
    "error": "ERROR",
}
_STATUS_STYLE = {"unbiased": "green", "biased": "yellow", "kl_off": "cyan", "error": "bold red"}
_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    return str(value)


def entry_dict(entry: AuditEntry) -> dict[str, Any]:
    """One trainer as the JSON schema's ``trainers`` item."""
    r = entry.reading
    as_run = verdict_of(r, off_policy=r.off_policy)
    v = entry.verdict
    config = r.config.to_dict()
    if r.loss_config is not None and r.config.has_reward:
        config["loss_estimator"] = r.loss_config.estimator
        config["loss_coef"] = r.loss_config.coef
    elif r.config.placement == "both" and r.config.loss_coef is not None:
        config["loss_estimator"] = r.config.estimator
    return {
        "origin": entry.origin,
        "input_kind": entry.kind,
        "library": r.library,
        "version": r.version,
        "library_version": entry.library_version,
        "version_source": entry.version_source,
        "version_where": entry.version_where,
        "trainer": r.trainer,
        "status": entry.status,
        "refused": entry.refused,
        "kl_on": entry.kl_on,
        "off_policy": r.off_policy,
        "off_policy_reason": r.off_policy_reason,
        "config": config,
        "description": describe_reading(r),
        "verdict": {
            "gradient": v.gradient,
            "unbiased": v.unbiased,
            "unbiased_as_run": as_run.unbiased,
            "explanation": v.explanation,
            "advice": v.advice,
            "caveats": list(as_run.caveats),
            "terms": [
                {
                    "basis": t.basis,
                    "coef": t.coef,
                    "length_normalised": t.length_normalised,
                    "side": t.side,
                }
                for t in v.terms
            ],
        },
        "findings": [
            {
                "code": f.code,
                "severity": f.severity,
                "message": f.message,
                "fix": f.fix,
                "origin": f.origin,
            }
            for f in entry.findings
        ],
        "fix": {
            "native": list(entry.fix_native),
            "kl_patches": entry.fix_switch,
            **dict(zip(("label", "checked"), _fix_check(entry), strict=True)),
        },
        "settings": _jsonable(r.settings),
        "ignored_keys": list(entry.ignored_keys),
        "notes": list(entry.notes),
    }


def summary(entries: Sequence[AuditEntry]) -> dict[str, int]:
    """Count of trainers per status."""
    out = {"trainers": len(entries)}
    for s in STATUSES:
        out[s] = sum(1 for e in entries if e.status == s)
    return out


def to_json(
    entries: Sequence[AuditEntry],
    notes: Sequence[str] = (),
    strict: bool = False,
    exit_code: int = 0,
) -> str:
    """The report as JSON (schema :data:`SCHEMA`)."""
    doc = {
        "schema": SCHEMA,
        "strict": strict,
        "exit_code": exit_code,
        "notes": list(notes),
        "summary": summary(entries),
        "trainers": [entry_dict(e) for e in entries],
    }
    return json.dumps(doc, indent=2, sort_keys=False)


# ----------------------------------------------------------------------------- text
def _coef(entry: AuditEntry) -> str:
    c = entry.reading.config
    if not entry.kl_on:
        return "-"
    loss = entry.reading.loss_config
    if loss is not None and c.has_reward:
        return f"{c.coef:g} / {loss.coef:g}"
    if c.placement == "both" and c.loss_coef is not None:
        return f"{c.coef:g} / {c.loss_coef:g}"
    return f"{c.coef if c.has_reward else c.loss_coef_value:g}"


def _kl(entry: AuditEntry) -> str:
    c = entry.reading.config
    if not entry.kl_on:
        return "none"
    parts = [describe_reading(entry.reading)]
    if c.has_reward and c.reward_shape != "sequence":
        parts.append(c.reward_shape.replace("_", "-"))
    return ", ".join(parts)


def _policy(entry: AuditEntry) -> str:
    return "off-policy" if entry.reading.off_policy else "on-policy"


def _gradient(entry: AuditEntry) -> str:
    return entry.verdict.gradient if entry.kl_on else "zero"


def _library(entry: AuditEntry) -> str:
    r = entry.reading
    return f"{r.library} {r.version}" if r.version else r.library


def _source(entry: AuditEntry) -> str:
    """The table's short source: file name, line and loop values (full path in the details)."""
    head, sep, rest = entry.origin.partition(" [")
    short = head.replace("\\", "/").rsplit("/", 1)[-1]
    return short + (sep + rest if sep else "")


def _status_text(entry: AuditEntry) -> str:
    """``REFUSED`` for a launch the library refuses to start, else the status's text."""
    return "REFUSED" if entry.refused else _STATUS_TEXT[entry.status]


def _kl_cell(entry: AuditEntry) -> str:
    """The table's KL column; a refused launch's reading is what runs once the refused names
    are deleted, and says so first (it must not read like a healthy launch)."""
    text = _kl(entry) + (f", coef {_coef(entry)}" if entry.kl_on else "")
    return f"not run (refused); once fixed: {text}" if entry.refused else text


def _rows(entries: Sequence[AuditEntry]) -> list[list[str]]:
    return [
        [
            str(i),
            _source(e),
            f"{_library(e)}: {e.reading.trainer}",
            _kl_cell(e),
            _policy(e),
            _gradient(e),
            _status_text(e),
        ]
        for i, e in enumerate(entries, 1)
    ]


_HEADERS = ["#", "source", "trainer", "KL as run", "policy", "gradient", "status"]


def _verdict_line(entry: AuditEntry) -> str:
    v = entry.verdict
    if entry.refused:
        return (
            f"the library refuses to start this launch (see the ERROR below); once the refused "
            f"names are fixed it follows {v.gradient} ({'unbiased' if v.unbiased else 'biased'})."
        )
    if entry.status == "error":
        return (
            f"{v.gradient} ({'unbiased' if v.unbiased else 'biased'}) for the KL as read; an "
            "ERROR finding below says the library does not run the KL the way it is configured."
        )
    if not entry.kl_on:
        return "no KL gradient (KL off)."
    head = "unbiased" if v.unbiased else "BIASED"
    off = entry.reading.off_policy
    if v.unbiased and off and not verdict_of(entry.reading, off_policy=True).unbiased:
        head += " on-policy (this run is off-policy: see findings)"
    elif v.unbiased and off:
        head += " off-policy too (prefix importance weights)"
    return f"{v.gradient}: {head}. {v.explanation}"


_SOURCE_TEXT = {
    "given": "given with --library-version",
    "pin": "pinned",
    "vendored": "a vendored copy",
    "names": "told from the names the launch uses",
    "installed": "the installed package",
    "newest": "no usable pin, vendored copy or installed package: the newest tested release",
}


def _version_text(entry: AuditEntry) -> str:
    """``trl 0.18.0, pinned: setup.py:12 ==0.18.0`` for the detail block."""
    text = f"{entry.reading.library} {entry.library_version}, "
    text += _SOURCE_TEXT.get(entry.version_source, entry.version_source)
    if entry.version_where and entry.version_source not in ("given", "newest"):
        text += f": {entry.version_where}"
    return text


def _detail_lines(i: int, entry: AuditEntry, width: int) -> list[str]:
    r = entry.reading
    out = [f"[{i}] {entry.origin}  {_library(entry)}  {r.trainer}  -> {_status_text(entry)}"]

    def field(label: str, text: str) -> None:
        wrapped = textwrap.wrap(text, width - 16) or [""]
        out.append(f"    {label:<11} {wrapped[0]}")
        out.extend(f"    {'':<11} {w}" for w in wrapped[1:])

    if entry.version_source and entry.version_source != "object":
        field("version", _version_text(entry))
    field("KL as run", str(r.config) + (f"; loss side: {r.loss_config}" if r.loss_config else ""))
    field("policy", _policy(entry) + (f" ({r.off_policy_reason})" if r.off_policy_reason else ""))
    field("verdict", _verdict_line(entry))
    for f in entry.findings:
        field(f.severity.upper(), f"[{f.code}] {f.message}")
        if f.fix:
            field("", f"fix: {f.fix}")
    if entry.fix_native or entry.fix_switch:
        label, checked = _fix_check(entry)
        if entry.fix_native:
            head = (
                f"native ({checked})"
                if label == NATIVE
                else f"native, {label}"
                if label.startswith("not checked")
                else f"not native ({checked})"
            )
            field("fix", f"{head}: " + " ".join(entry.fix_native))
        if entry.fix_switch:
            field("fix" if not entry.fix_native else "", "with kl-patches: " + entry.fix_switch)
    for n in entry.notes:
        field("note", n)
    return out


def _fix_check(entry: AuditEntry) -> tuple[str, str]:
    """(label, what the parser said) of the entry's fix (:mod:`.fix.validate`): the label is
    ``native`` only when the library's own parser accepted the native fix; empty without a
    fix."""
    if not (entry.fix_native or entry.fix_switch):
        return "", ""
    from kl_patches.audit.fix.validate import fix_label, native_check

    return fix_label(entry), native_check(entry).message


def _footer(entries: Sequence[AuditEntry], notes: Sequence[str], strict: bool) -> list[str]:
    s = summary(entries)
    line = f"{s['trainers']} trainer(s): " + ", ".join(
        f"{s[k]} {_STATUS_TEXT[k]}" for k in STATUSES if s[k]
    )
    refused = sum(1 for e in entries if e.refused)
    if refused:
        line += f" ({refused} of them REFUSED by the library)"
    out = [line] if entries else ["no trainers found"]
    out += [f"note: {n}" for n in notes]
    if strict:
        failed = [e for e in entries if e.fails_strict]
        out.append(
            f"--strict: FAIL ({len(failed)} biased or KL-dropping setup(s))"
            if failed
            else "--strict: pass"
        )
    return out


def render_plain(
    entries: Sequence[AuditEntry],
    notes: Sequence[str] = (),
    strict: bool = False,
    width: int = 100,
) -> str:
    """The report as plain text (no dependencies)."""
    rows = _rows(entries)
    lines: list[str] = []
    if rows:
        widths = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(_HEADERS)]
        lines.append("  ".join(h.ljust(w) for h, w in zip(_HEADERS, widths, strict=True)).rstrip())
        lines.append("  ".join("-" * w for w in widths))
        lines += [
            "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
        ]
        lines.append("")
    for i, e in enumerate(entries, 1):
        lines += _detail_lines(i, e, width)
        lines.append("")
    lines += _footer(entries, notes, strict)
    return "\n".join(lines)


def rich_available() -> bool:
    """True when the optional ``rich`` package can be imported."""
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


def render_rich(
    entries: Sequence[AuditEntry],
    notes: Sequence[str] = (),
    strict: bool = False,
    width: int = 120,
    color: bool | None = None,
) -> str:
    """The report with ``rich`` (a table and coloured details), as a string."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    buf = io.StringIO()
    console = Console(
        file=buf, width=width, force_terminal=color, no_color=color is False, soft_wrap=False
    )
    if entries:
        table = Table(show_lines=False, header_style="bold")
        for h in _HEADERS:
            fixed = h in ("#", "policy", "status")
            table.add_column(h, overflow="fold", no_wrap=fixed)
        for e, row in zip(entries, _rows(entries), strict=True):
            cells = [Text(c) for c in row[:-1]]  # Text: "[name=...]" is not rich markup
            cells.append(Text(row[-1], style=_STATUS_STYLE[e.status]))
            table.add_row(*cells)
        console.print(table)
    for i, e in enumerate(entries, 1):
        lines = _detail_lines(i, e, width)
        console.print(Text(lines[0], style="bold"))
        for line in lines[1:]:
            label = line[4:15].strip().lower()
            console.print(Text(line, style=_SEVERITY_STYLE.get(label, "")))
        console.print()
    for line in _footer(entries, notes, strict):
        style = "bold red" if "FAIL" in line else ""
        console.print(Text(line, style=style))
    return buf.getvalue().rstrip("\n")


def render(
    entries: Sequence[AuditEntry],
    notes: Sequence[str] = (),
    strict: bool = False,
    rich: bool = True,
) -> str:
    """Rich when asked for and installed, plain text otherwise."""
    if rich and rich_available():
        import shutil
        import sys

        tty = sys.stdout.isatty()
        width = max(100, shutil.get_terminal_size((160, 40)).columns) if tty else 160
        return render_rich(entries, notes, strict, width=width, color=tty)
    return render_plain(entries, notes, strict)
