"""The Python writer's error and literal reading, shared by :mod:`.python_edit` (the entry
point) and :mod:`.python_plan` (where each key is written) without either importing the other's
module at import time; nothing here needs libcst."""

from __future__ import annotations

import ast
from typing import Any

__all__ = ["PythonEditError", "literal_value"]


class PythonEditError(ValueError):
    """A change that cannot be written into the script unambiguously (the message says why)."""


def literal_value(text: str) -> Any:
    """The value of a literal written by :func:`~.python_cst.literal_text` (what the reader
    computes for it)."""
    if text.startswith("float("):
        return float(ast.literal_eval(text[len("float(") : -1]))
    return ast.literal_eval(text)
