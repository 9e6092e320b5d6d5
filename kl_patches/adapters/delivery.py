"""One wire format for a KLConfig that crosses a process boundary (Ray workers, ranks).

Training libraries run their KL code in processes the user's script never touches (verl's and
OpenRLHF's Ray actors re-import everything; accelerate starts one process per rank), so each
adapter carries the configuration in an environment variable, ``KL_PATCHES_<LIBRARY>``, and
applies the patch on arrival. The value is compact JSON: the KLConfig fields that differ from
their defaults (``placement`` always), plus adapter options (e.g. verl's ``kl_outside_std``).
A full ``KLConfig.to_dict()`` decodes the same way, so older senders keep working.

Also here, for every adapter: :func:`announce` (the active patch on stderr at WARNING level,
once per process, since verl and OpenRLHF set their loggers to WARNING),
:func:`after_import` (run a callback once given modules have finished importing, so a plugin
loaded while its library's ``__init__`` still runs does not import the library's trainer stack
before the library, and anything registered right after it, is ready) and
:func:`install_post_import` (what the adapters' Ray worker setup hooks install: a library module
is patched right after it is imported, in the processes that import it, and no other process
imports anything).

Standard library only: Ray's worker setup hooks import this before anything else.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from types import ModuleType
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


_ANNOUNCED: set[str] = set()
_LOCK = threading.Lock()


def announce(library: str, text: str) -> bool:
    """Log ``kl_patches: <library> patch active in pid N: <text>`` at WARNING, once per process
    and library (True when this call logged it).

    WARNING because verl and OpenRLHF configure logging at WARNING, which hides INFO lines; with
    no handler configured, Python's last-resort handler still writes it to stderr.
    """
    with _LOCK:
        if library in _ANNOUNCED:
            return False
        _ANNOUNCED.add(library)
    logging.getLogger(f"kl_patches.{library}").warning(
        "kl_patches: %s patch active in pid %d: %s", library, os.getpid(), text
    )
    return True


def initializing(module: ModuleType | None) -> bool:
    """True while ``module``'s own code is still running (its import has not finished)."""
    spec = getattr(module, "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


class _CallbackLoader(importlib.abc.Loader):
    """Runs a module's real loader, then ``then()`` (after the module's code finished)."""

    def __init__(self, loader: Any, then: Callable[[], object]) -> None:
        self._loader = loader
        self._then = then

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        created: ModuleType | None = self._loader.create_module(spec)
        return created

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        # what the import system does right after this returns, done first so that the
        # callback sees a finished module: not initializing, and an attribute of its package
        module.__spec__._initializing = False  # type: ignore[union-attr]
        parent, _, child = module.__name__.rpartition(".")
        if parent and parent in sys.modules:
            setattr(sys.modules[parent], child, module)
        self._then()

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... for tracebacks
        return getattr(self._loader, name)


class _AfterImportFinder(importlib.abc.MetaPathFinder):
    """Wraps the loaders of ``modules`` (and, with ``settle``, of every module of that package)
    so that ``callback`` runs once all are imported."""

    def __init__(
        self, modules: Sequence[str], callback: Callable[[], object], settle: str | None
    ) -> None:
        self.modules = tuple(modules)
        self.callback = callback
        self.settle = settle
        self.done = False
        self._busy: set[str] = set()

    def _watched(self, name: str) -> bool:
        if name in self.modules:
            return True
        return self.settle is not None and (
            name == self.settle or name.startswith(self.settle + ".")
        )

    def ready(self) -> bool:
        """One watched module is imported and no watched module (with ``settle``: no module of
        that package) is still running; a module still being imported fires when it ends."""
        if not any(name in sys.modules for name in self.modules):
            return False
        names = [n for n in list(sys.modules) if self._watched(n)] if self.settle else self.modules
        return not any(initializing(sys.modules.get(name)) for name in names)

    def fire(self) -> None:
        if self.done or not self.ready():
            return
        self.done = True
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        self.callback()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if self.done or not self._watched(fullname) or fullname in self._busy:
            return None  # (busy: another wrapping finder asked us back for the same name)
        self._busy.add(fullname)
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    if spec.loader is not None:
                        spec.loader = _CallbackLoader(spec.loader, self.fire)
                    return spec
            return None
        finally:
            self._busy.discard(fullname)


def after_import(
    modules: Sequence[str], callback: Callable[[], object], *, settle: str | None = None
) -> bool:
    """Run ``callback`` once, right after one of ``modules`` has been imported and no other
    import of them is still running; with ``settle`` (a package name), also only once no
    module of that package is still being imported (a module imported from inside another's
    import finishes first: patching there would import the package's other modules while they
    are half-initialised). Runs now when that holds already. Returns True when the callback
    ran now, False when it waits for an import."""
    finder = _AfterImportFinder(modules, callback, settle)
    if finder.ready():
        finder.done = True
        callback()
        return True
    sys.meta_path.insert(0, finder)
    return False


class PostImportFinder(importlib.abc.MetaPathFinder):
    """Calls a function right after one of ``modules`` has been imported (executed), in every
    process where it is on ``sys.meta_path``: how a Ray worker setup hook patches a library
    without importing it in processes that never do. ``owner`` names the adapter (one finder
    per adapter: :func:`install_post_import`)."""

    def __init__(self, owner: str, modules: Mapping[str, Callable[[], None]]) -> None:
        self.owner = owner
        self.modules = dict(modules)
        self._busy: set[str] = set()

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        """The spec the other finders give ``fullname``, its loader wrapped (None otherwise)."""
        then = self.modules.get(fullname)
        if then is None or fullname in self._busy:
            return None  # (busy: another wrapping finder asked us back for the same name)
        self._busy.add(fullname)
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec: importlib.machinery.ModuleSpec | None = finder.find_spec(
                    fullname, path, target
                )
                if spec is not None:
                    if spec.loader is not None:
                        spec.loader = _CallbackLoader(spec.loader, then)
                    return spec
            return None
        finally:
            self._busy.discard(fullname)


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
