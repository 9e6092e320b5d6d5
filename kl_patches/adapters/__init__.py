"""Per-library adapters, and the registry that finds them without importing any library.

Each library has one folder here with the same files for the same jobs: ``translate``
(KLConfig <-> the library's own options), ``read`` (what a launch runs, for the audit),
``patch`` (what the library cannot express), ``delivery`` (the patch reaching Ray workers and
ranks), ``launch`` (the ``kl-patches <library>`` launcher), ``versions`` (tested versions and
recorded defaults) and ``descriptor`` (an :class:`~kl_patches.adapters.base.AdapterDescriptor`).
The shared machinery sits beside them: :mod:`.base`, :mod:`.patching`, :mod:`.support`,
:mod:`.delivery`, :mod:`.flags`, :mod:`.files`.

A new library is one folder plus one line in :data:`REGISTRY`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kl_patches.adapters.base import AdapterDescriptor

REGISTRY: dict[str, str] = {
    "verl": "kl_patches.adapters.verl.descriptor",
    "openrlhf": "kl_patches.adapters.openrlhf.descriptor",
    "trl": "kl_patches.adapters.trl.descriptor",
}
"""Library name -> module holding its ``DESCRIPTOR`` (imports no training library)."""


def names() -> tuple[str, ...]:
    """The libraries kl-patches has adapters for, in registry order."""
    return tuple(REGISTRY)


def get(name: str) -> AdapterDescriptor:
    """The descriptor of library ``name``; ValueError naming the valid libraries otherwise."""
    if name not in REGISTRY:
        raise ValueError(f"unknown library {name!r}; choose one of {list(REGISTRY)}")
    descriptor: AdapterDescriptor = importlib.import_module(REGISTRY[name]).DESCRIPTOR
    return descriptor


def descriptors() -> list[AdapterDescriptor]:
    """Every registered descriptor, in registry order."""
    return [get(name) for name in REGISTRY]
