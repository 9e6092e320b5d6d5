"""One wire format for a KLConfig that crosses a process boundary (Ray workers, ranks).

Training libraries run their KL code in processes the user's script never touches (verl's and
OpenRLHF's Ray actors re-import everything; accelerate starts one process per rank), so each
adapter carries the configuration in an environment variable, ``KL_PATCHES_<LIBRARY>``, and
applies the patch on arrival. The value is compact JSON: the KLConfig fields that differ from
their defaults (``placement`` always), plus adapter options (e.g. verl's ``kl_outside_std``).
A full ``KLConfig.to_dict()`` decodes the same way, so older senders keep working.

It also holds the post-import hook (:func:`install_post_import`) that the adapters' Ray worker
setup hooks install: a library module is patched right after it is imported, in the processes
that import it, and no other process imports anything.

Standard library only: Ray's worker setup hooks import this before anything else.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
import types
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from kl_patches.config import KLConfig

_DEFAULTS = KLConfig(placement="none").to_dict() | {"placement": None}
"""Field values left out of the wire format (placement is always written)."""


def env_var(library: str) -> str:
    """The environment variable carrying a library's configuration: ``KL_PATCHES_VERL``."""
    return f"KL_PATCHES_{library.upper()}"


def encode(config: KLConfig, options: Mapping[str, object] | None = None) -> str:
    """Compact, sorted JSON of ``config`` (non-default fields) and adapter ``options``."""
    payload: dict[str, object] = {
        k: v for k, v in config.to_dict().items() if v != _DEFAULTS.get(k, object())
    }
    for key, value in (options or {}).items():
        if key in payload or key in _DEFAULTS:
            raise ValueError(f"adapter option {key!r} collides with a KLConfig field")
        payload[key] = value
    return json.dumps(payload, separators=(",", ":"), sort_keys=True)


def decode(
    text: str, variable: str, options: Collection[str] = ()
) -> tuple[KLConfig, dict[str, object]]:
    """Inverse of :func:`encode`: the KLConfig and the adapter options among ``options``.

    Raises ValueError naming ``variable``, the text and why it is not a configuration.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{variable}={text!r} is not a valid KLConfig: not JSON ({err})") from err
    if not isinstance(data, dict):
        raise ValueError(
            f"{variable}={text!r} is not a valid KLConfig: expected a JSON object of KLConfig "
            "fields"
        )
    extra = {key: data.pop(key) for key in list(data) if key in options}
    try:
        config = KLConfig.from_dict(data)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{variable}={text!r} is not a valid KLConfig: {err}") from err
    return config, extra


def from_environ(
    library: str, options: Collection[str] = ()
) -> tuple[KLConfig, dict[str, object]] | None:
    """The configuration in :func:`env_var`, or None when it is unset or empty."""
    variable = env_var(library)
    text = os.environ.get(variable, "").strip()
    return decode(text, variable, options) if text else None


class _PatchingLoader(importlib.abc.Loader):
    """Runs a module's real loader, then the callback registered for that module."""

    def __init__(self, loader: importlib.abc.Loader, then: Callable[[], None]) -> None:
        self._loader = loader
        self._then = then

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._loader.exec_module(module)
        self._then()

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... for tracebacks
        return getattr(self._loader, name)


class PostImportFinder(importlib.abc.MetaPathFinder):
    """Calls a function right after one of ``modules`` has been imported (executed), in every
    process where it is on ``sys.meta_path``: how a Ray worker setup hook patches a library
    without importing it in processes that never do. ``owner`` names the adapter (one finder
    per adapter: :func:`install_post_import`)."""

    def __init__(self, owner: str, modules: Mapping[str, Callable[[], None]]) -> None:
        self.owner = owner
        self.modules = dict(modules)

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        """The spec the other finders give ``fullname``, its loader wrapped (None otherwise)."""
        then = self.modules.get(fullname)
        if then is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec: importlib.machinery.ModuleSpec | None = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _PatchingLoader(spec.loader, then)
                return spec
        return None


def post_import_finder(owner: str) -> PostImportFinder | None:
    """The :class:`PostImportFinder` of adapter ``owner`` on ``sys.meta_path``, or None."""
    return next(
        (f for f in sys.meta_path if isinstance(f, PostImportFinder) and f.owner == owner), None
    )


def install_post_import(owner: str, modules: Mapping[str, Callable[[], None]]) -> None:
    """Run each callback now if its module is already imported, else right after its import
    (idempotent per ``owner``: a second call replaces the callbacks)."""
    finder = post_import_finder(owner)
    if finder is None:
        sys.meta_path.insert(0, PostImportFinder(owner, modules))
    else:
        finder.modules = dict(modules)
    for name, then in modules.items():
        if name in sys.modules:
            then()


def uninstall_post_import(owner: str) -> None:
    """Remove adapter ``owner``'s finder (patches already made stay)."""
    finder = post_import_finder(owner)
    if finder is not None:
        sys.meta_path.remove(finder)
