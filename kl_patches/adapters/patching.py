"""One patch registry for every adapter: targets, originals, a marker, exact revert.

Modelled on instrument/uninstrument designs (OpenTelemetry's ``BaseInstrumentor`` with
``wrapt``'s ``unwrap``): an adapter names each :class:`Target` (a module attribute, or a class
attribute) and a factory that builds the replacement from the original; the registry

* keeps every original, and what each slot held before (an attribute a class only inherited is
  deleted again on revert, not shadowed);
* marks each replacement (``__kl_patches__`` = the library, ``__wrapped__`` = the original),
  and refuses to wrap something already marked outside the registry;
* is idempotent: patching a target twice keeps the first replacement, after checking that it is
  still in place (someone else replacing it since is an error);
* propagates to importers when asked: a module that did ``from lib import f`` holds its own
  reference, so for ``propagate=True`` targets every loaded module attribute that *is* the
  original gets the replacement too (user code included), and :meth:`PatchRegistry.stale` lists
  any that still hold it;
* reverts exactly: every slot gets back what it held, and modules imported after the patch that
  copied a replacement get the original.

:meth:`PatchRegistry.applied` checks the live objects, so a patch undone behind the registry's
back is reported, never assumed.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

MARK = "__kl_patches__"
"""Attribute set on every replacement: the name of the library whose adapter made it."""

_MISSING = object()


@dataclass(frozen=True)
class Target:
    """One patched attribute: ``module.attr``, or ``module.owner.attr`` for a class attribute."""

    module: str
    """Module that holds the attribute (or the class), e.g. ``verl.trainer.ppo.ray_trainer``."""
    attr: str
    """Attribute name."""
    owner: str | None = None
    """Class name inside :attr:`module` for a method; None for a module attribute."""
    propagate: bool = False
    """Also replace the original wherever another loaded module imported it by name."""

    @property
    def name(self) -> str:
        """Dotted name for messages: ``module.owner.attr``."""
        return ".".join(p for p in (self.module, self.owner, self.attr) if p)


def is_replacement(value: object, library: str | None = None) -> bool:
    """True when ``value`` is a kl-patches replacement (of ``library``, when given)."""
    mark = getattr(value, MARK, None)
    return mark is not None and (library is None or mark == library)


class PatchRegistry:
    """The originals and replacements of one adapter's patch (one instance per adapter)."""

    def __init__(self, library: str, missing_hint: str = "") -> None:
        self.library = library
        """Library name, written into each replacement's mark."""
        self.missing_hint = missing_hint
        """Appended to the error for a missing hook point (e.g. the supported versions)."""
        self._originals: dict[Target, Any] = {}
        self._replacements: dict[Target, Any] = {}
        self._slots: dict[tuple[int, str], tuple[Any, str, Any]] = {}
        self._own_modules: set[str] = set()

    # ------------------------------------------------------------------ resolution
    def holder(self, target: Target) -> Any:
        """The module or class that holds ``target``'s attribute (imports the module)."""
        module = importlib.import_module(target.module)
        if target.owner is None:
            return module
        owner = getattr(module, target.owner, None)
        if not isinstance(owner, type):
            raise RuntimeError(self._missing(f"{target.module}.{target.owner}"))
        return owner

    def _missing(self, name: str) -> str:
        hint = f"; {self.missing_hint}" if self.missing_hint else ""
        return (
            f"kl_patches.{self.library}: the installed {self.library} has no {name}, a hook point "
            f"the patch needs{hint}"
        )

    def _current(self, target: Target) -> Any:
        holder = self.holder(target)
        if target.owner is None:
            return vars(holder).get(target.attr, _MISSING)
        return getattr(holder, target.attr, _MISSING)

    # ------------------------------------------------------------------ patching
    def patch(self, target: Target, factory: Callable[[Any], Any]) -> Any:
        """Replace ``target`` by ``factory(original)`` (once); returns the replacement."""
        if target in self._replacements:
            replacement = self._replacements[target]
            if self._current(target) is not replacement:
                raise RuntimeError(
                    f"kl_patches.{self.library}: {target.name} was replaced by someone else since "
                    "kl_patches patched it"
                )
            if target.propagate:
                self.propagate()
            return replacement
        original = self._current(target)
        if original is _MISSING or not callable(original):
            raise RuntimeError(self._missing(target.name))
        if is_replacement(original):
            raise RuntimeError(
                f"kl_patches.{self.library}: {target.name} is already patched outside the registry"
            )
        replacement = factory(original)
        # The module that defines a replacement keeps its own definition in every scan.
        self._own_modules.add(getattr(replacement, "__module__", None) or "")
        setattr(replacement, MARK, self.library)
        if getattr(replacement, "__wrapped__", None) is None:
            replacement.__wrapped__ = original
        self._originals[target] = original
        self._replacements[target] = replacement
        self._set(self.holder(target), target.attr, replacement)
        if target.propagate:
            self.propagate()
        return replacement

    def _set(self, holder: Any, attr: str, value: Any) -> None:
        key = (id(holder), attr)
        if key not in self._slots:
            self._slots[key] = (holder, attr, vars(holder).get(attr, _MISSING))
        setattr(holder, attr, value)

    def _module_attrs(self) -> Iterator[tuple[ModuleType, str, Any]]:
        for module in list(sys.modules.values()):
            if module is None or getattr(module, "__name__", None) in self._own_modules:
                continue  # the module defining the replacements keeps its own definitions
            try:
                items = list(vars(module).items())
            except TypeError:
                continue
            for attr, value in items:
                if callable(value):
                    yield module, attr, value

    def _propagated(self) -> dict[int, Any]:
        """id(original) -> replacement, for the targets that propagate."""
        return {id(self._originals[t]): r for t, r in self._replacements.items() if t.propagate}

    def propagate(self) -> list[str]:
        """Replace the originals of propagating targets in every loaded module holding them."""
        by_original = self._propagated()
        originals = {id(self._originals[t]): self._originals[t] for t in self._replacements}
        done = []
        for module, attr, value in self._module_attrs():
            replacement = by_original.get(id(value))
            if replacement is not None and value is originals[id(value)]:
                self._set(module, attr, replacement)
                done.append(f"{module.__name__}.{attr}")
        return done

    # ------------------------------------------------------------------ state
    def targets(self) -> list[Target]:
        """The targets patched now, in patching order."""
        return list(self._replacements)

    def original(self, target: Target) -> Any:
        """The original of a patched target (KeyError when it is not patched)."""
        return self._originals[target]

    def originals(self) -> dict[Target, Any]:
        """Target -> original, for every patched target."""
        return dict(self._originals)

    def slots(self) -> dict[str, Any]:
        """``module.attr`` -> the object now there, for every slot the registry wrote."""
        out = {}
        for holder, attr, _ in self._slots.values():
            name = getattr(holder, "__module__", "") + "." + holder.__name__
            label = holder.__name__ if isinstance(holder, ModuleType) else name
            out[f"{label}:{attr}"] = vars(holder).get(attr)
        return out

    def applied(self) -> list[str]:
        """Names of the patched targets, checked on the live objects.

        Raises RuntimeError when a replacement is no longer in place (undone or overwritten
        behind the registry's back): the objective would silently be the library's again.
        """
        out = []
        for target, replacement in self._replacements.items():
            if self._current(target) is not replacement:
                raise RuntimeError(
                    f"kl_patches.{self.library}: {target.name} was replaced after patching"
                )
            out.append(target.name)
        return out

    def stale(self) -> list[str]:
        """``module.attr`` of loaded modules that still hold an original of a propagating target."""
        originals = {id(self._originals[t]) for t in self._replacements if t.propagate}
        return sorted(f"{m.__name__}.{a}" for m, a, v in self._module_attrs() if id(v) in originals)

    def revert(self) -> list[str]:
        """Restore every slot exactly; returns the names of the targets that were patched."""
        names = [t.name for t in self._replacements]
        back = {id(r): self._originals[t] for t, r in self._replacements.items() if t.propagate}
        for holder, attr, before in reversed(list(self._slots.values())):
            if before is _MISSING:
                if attr in vars(holder):
                    delattr(holder, attr)
            else:
                setattr(holder, attr, before)
        if back:  # modules imported after the patch copied a replacement
            for module, attr, value in self._module_attrs():
                if id(value) in back:
                    setattr(module, attr, back[id(value)])
        self._originals.clear()
        self._replacements.clear()
        self._slots.clear()
        self._own_modules.clear()
        return names
