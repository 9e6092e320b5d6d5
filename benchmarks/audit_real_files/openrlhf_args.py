"""Parse an OpenRLHF launch's argv with that OpenRLHF version's own argparse parser.

OpenRLHF builds its parser inside ``if __name__ == "__main__":`` of
``openrlhf/cli/train_ppo_ray.py`` (and ``train_ppo.py``), so it cannot be imported. This
module takes the statements of that block up to the first ``parser.parse_args()`` with
``ast``, executes only them (they are ``argparse`` calls) with ``argparse``, ``os``, ``json``
and ``datetime`` available and nothing of OpenRLHF imported, and parses the recorded argv
with the resulting parser. An argument the parser refuses (an unknown or removed flag, a bad
value) makes the launch ``rejected``, with argparse's message, as it would at launch.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import datetime
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ExtractError(RuntimeError):
    """The parser-building code could not be found or run."""


def _is_main_guard(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
    )


def _is_parse_call(stmt: ast.stmt) -> bool:
    for node in ast.walk(stmt):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("parse_args", "parse_known_args")
        ):
            return True
    return False


def build_parser(source: str) -> argparse.ArgumentParser:
    """The ``argparse.ArgumentParser`` the script's ``__main__`` block builds."""
    tree = ast.parse(source)
    block = next((n for n in tree.body if _is_main_guard(n)), None)
    if not isinstance(block, ast.If):
        raise ExtractError("no `if __name__ == '__main__':` block")
    stmts: list[ast.stmt] = []
    for stmt in block.body:
        if _is_parse_call(stmt):
            break
        stmts.append(stmt)
    else:
        raise ExtractError("no parser.parse_args() in the __main__ block")
    # Module-level helper functions the parser code may call (e.g. a str2bool type).
    helpers = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    module = ast.Module(body=[*helpers, *stmts], type_ignores=[])
    ns: dict[str, Any] = {
        "argparse": argparse,
        "os": os,
        "json": json,
        "datetime": datetime.datetime,
        "__name__": "rf_openrlhf_parser",
    }
    exec(compile(module, "<openrlhf parser>", "exec"), ns)
    parser = ns.get("parser")
    if not isinstance(parser, argparse.ArgumentParser):
        raise ExtractError("the __main__ block did not build `parser`")
    return parser


@dataclass
class Parsed:
    """The result of parsing one argv."""

    args: dict[str, Any] = field(default_factory=dict)
    """argparse's namespace as a dict (dests as written: dotted names stay dotted)."""
    rejected: str | None = None
    """argparse's error message when it refuses the argv, else None."""
    unknown: list[str] = field(default_factory=list)
    """With ``lenient``: the arguments the parser does not know (left out)."""


def parse(script: Path, argv: list[str], lenient: bool = False) -> Parsed:
    """Parse ``argv`` with the parser of ``script`` (a ``train_ppo_ray.py`` of some version).

    ``lenient``: ``parse_known_args`` (unknown flags are left out and listed), for the
    benchmark's "KL keys only" reading of a launch the parser refuses.
    """
    parser = build_parser(script.read_text(encoding="utf-8"))
    parser.prog = "train_ppo_ray.py"
    err = io.StringIO()
    unknown: list[str] = []
    try:
        with contextlib.redirect_stderr(err):
            if lenient:
                ns, unknown = parser.parse_known_args(argv)
            else:
                ns = parser.parse_args(argv)
    except SystemExit:
        lines = [ln for ln in err.getvalue().strip().splitlines() if ln.strip()]
        return Parsed(rejected=(lines[-1] if lines else "argparse refused the argv")[:300])
    return Parsed(args=vars(ns), unknown=[u for u in unknown if u.startswith("--")])
