"""Records of a library's patch surface per release, shared by the adapters' ``compat`` data.

Each adapter's ``compat`` module lists, for every release of its tested range, the functions
its patch wraps (:class:`Symbol`: where each is defined, its signature and a hash of its body,
and the modules that bind it by name), the releases where something the patch relies on changed
(:class:`ChangePoint`), and how a release was installed and run on a CPU (:class:`InstallRecipe`).
These are plain data read from the released wheels; nothing here imports a training library.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Symbol:
    """One function or method an adapter relies on, as one release ships it."""

    name: str
    """Qualified name inside its module (``Class.method`` for methods)."""
    module: str
    """Module that defines it."""
    line: int
    """Line of the ``def`` in that module."""
    signature: str
    """``ast.unparse`` of the signature."""
    body_sha: str
    """First 12 hex digits of the sha256 of the function's source text (``def`` to end)."""
    importers: tuple[str, ...] = ()
    """Modules holding their own binding from ``from <module> import name``."""
    attribute_users: tuple[str, ...] = ()
    """Modules that call it as ``<module object>.name`` (reached by patching the definer)."""
    reexports: tuple[str, ...] = ()
    """Package ``__init__`` modules that re-export it."""


@dataclass(frozen=True)
class ChangePoint:
    """A release where something an adapter relies on changed."""

    release: str
    """First release with the change."""
    name: str
    """Function qualname, or ``flag:<dotted name>`` for a command-line flag."""
    fields: tuple[str, ...]
    """Which fields changed: :class:`Symbol` fields (``module``, ``signature``, ``body_sha``,
    ``importers``, ``attribute_users``, ``reexports``), or ``spelling`` / ``default`` of a flag."""
    reason: str
    """One line: what changed and what it means for the patch."""


@dataclass(frozen=True)
class InstallRecipe:
    """A measured CPU install that imports and runs one release's KL functions."""

    version: str
    """The library release."""
    commands: tuple[str, ...]
    """pip commands in order (``$P`` = the venv's pip)."""
    seconds: float
    """Wall time of the whole recipe on the 2-core build VM, venv creation included."""
    size: str
    """``du -sh`` of the venv."""
    imports: tuple[str, ...]
    """Modules that imported (with any import-only stand-ins the recipe names)."""
    not_importable: tuple[str, ...]
    """Modules that still fail, with the reason."""
    checks: str
    """What ran on CPU and what it gave."""
