"""Find a class that a Python script imports from a module of its own checkout, read with ast.

A project script often builds its command-line parser from a dataclass kept in another file of
the project (VLM-R1's ``from open_r1.trainer import GRPOConfig``, a copy of TRL's config on
transformers' ``TrainingArguments``). Python finds such a module on ``sys.path``; a script run
by path has its own folder there, and a project installed with ``pip install -e`` has its
source root. This module looks for the module's file the same way, in the script's folder and
the folders above it (:data:`UP`), follows ``from .module import Name`` re-exports of a
package's ``__init__.py`` (:data:`HOPS`), and returns the class definition. Files are parsed,
never imported or run; a module that cannot be found gives None (the caller keeps the
library's meaning of the name).
"""

from __future__ import annotations

import ast
from pathlib import Path

__all__ = ["checkout_class"]

UP = 4
"""Folders above the script's own that may be the root its imports start from (a ``src/``
layout: ``repo/src/pkg/script.py`` imports ``pkg.module`` from ``repo/src``)."""
HOPS = 3
"""Re-exports followed at most (``pkg/__init__.py`` -> ``pkg/config.py``)."""
MAX_CHARS = 512 * 1024
"""Largest module file read (as the script reader's limit)."""


def _module_file(start: Path, module: str, level: int) -> Path | None:
    """The file of ``module`` imported from ``start`` (``level``: the dots of a relative
    import; 0 for an absolute one, searched from the file's folder and the folders above)."""
    parts = [p for p in module.split(".") if p]
    if level:
        if level > len(start.parents):
            return None
        bases = [start.parents[level - 1]]
    else:
        bases = [start.parent, *list(start.parent.parents)[:UP]]
    for base in bases:
        target = base.joinpath(*parts) if parts else base
        for candidate in (target.with_suffix(".py"), target / "__init__.py"):
            if parts and candidate.is_file():
                return candidate
            if not parts and candidate.name == "__init__.py" and candidate.is_file():
                return candidate
    return None


def _parse(path: Path) -> ast.Module | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if len(text) > MAX_CHARS:
        return None
    try:
        return ast.parse(text, filename=str(path))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def checkout_class(
    script: Path, module: str, level: int, name: str, hops: int = HOPS
) -> tuple[ast.ClassDef, Path] | None:
    """The definition of class ``name`` that ``from <level dots><module> import name`` in
    ``script`` imports from the checkout, and the file defining it; None when the module is
    not a file of the checkout (an installed library) or does not define or re-export it."""
    found = _module_file(script, module, level)
    if found is None:
        return None
    tree = _parse(found)
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node, found
    if hops <= 0:
        return None
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any(
            (a.asname or a.name) == name for a in node.names
        ):
            original = next(a.name for a in node.names if (a.asname or a.name) == name)
            return checkout_class(found, node.module or "", node.level, original, hops - 1)
    return None
