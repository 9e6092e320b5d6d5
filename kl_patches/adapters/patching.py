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
  copied a replacement get the original;
* checks signatures when asked: a target patched with ``signatures=`` (the texts recorded for the
  tested releases) is refused when the installed function's call shape (parameter names, kinds
  and literal defaults; annotations ignored, see :func:`signature_shape`) matches none of them,
  because a wrapper written for another shape can pass arguments to the wrong parameters.

:meth:`PatchRegistry.applied` checks the live objects, so a patch undone behind the registry's
back is reported, never assumed.

Thread safety: one process-wide re-entrant lock (:data:`LOCK`) serialises every registry
operation, every adapter's ``apply``/``revert``/``applied`` (:func:`serialized`) and every run of
the behaviour canaries (:func:`kl_patches.adapters.support.run_canaries`), so two threads (two
ranks started as threads, a test runner's workers) applying at once patch once and leave every
original exactly restorable; without it, one thread's canary could save another's temporary
stand-in as "the original" and restore it for good.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import sys
import threading
import warnings
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

MARK = "__kl_patches__"
"""Attribute set on every replacement: the name of the library whose adapter made it."""

_MISSING = object()

LOCK = threading.RLock()
"""The one lock of every patch operation and canary run in the process (re-entrant: ``apply``
holds it while its registry and canaries take it again)."""

_F = TypeVar("_F", bound=Callable[..., Any])


def serialized(function: _F) -> _F:
    """``function`` run while holding :data:`LOCK` (for the adapters' ``apply``, ``revert``,
    ``applied``)."""

    @functools.wraps(function)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with LOCK:
            return function(*args, **kwargs)

    return locked  # type: ignore[return-value]


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


class SignatureMismatchError(RuntimeError):
    """A function the patch wraps has a call shape none of the tested releases had."""


_LITERALS = (str, int, float, bool, type(None))


def _default_text(value: object) -> str:
    """A default as the shape writes it: the repr of a literal, else ``...``."""

    def literal(v: object) -> bool:
        return isinstance(v, _LITERALS) or (isinstance(v, tuple) and all(literal(x) for x in v))

    return repr(value) if literal(value) else "..."


def _shape(params: list[tuple[str, str, str | None]]) -> str:
    """``(a, b=None, *args, c, **kw)`` from (name, kind, default text) triples."""
    out: list[str] = []
    star_done = False
    for name, kind, default in params:
        if kind == "POSITIONAL_ONLY_END":
            out.append("/")
            continue
        if kind == "KEYWORD_ONLY" and not star_done:
            out.append("*")
            star_done = True
        prefix = {"VAR_POSITIONAL": "*", "VAR_KEYWORD": "**"}.get(kind, "")
        if kind == "VAR_POSITIONAL":
            star_done = True
        out.append(prefix + name + ("" if default is None else f"={default}"))
    return "(" + ", ".join(out) + ")"


def signature_shape(function: Callable[..., Any]) -> str:
    """The call shape of ``function``: parameter names, kinds and literal defaults, in order.

    Annotations and the return type are left out (they do not change how a wrapper's arguments
    land), so ``(self, model, inputs)`` is the shape of ``def f(self, model: Any, inputs) -> T``.
    """
    params: list[tuple[str, str, str | None]] = []
    positional_only = False
    for p in inspect.signature(function).parameters.values():
        if p.kind is p.POSITIONAL_ONLY:
            positional_only = True
        elif positional_only:
            params.append(("", "POSITIONAL_ONLY_END", None))
            positional_only = False
        default = None if p.default is p.empty else _default_text(p.default)
        params.append((p.name, p.kind.name, default))
    if positional_only:
        params.append(("", "POSITIONAL_ONLY_END", None))
    return _shape(params)


def shape_of_text(text: str) -> str:
    """:func:`signature_shape` of a recorded signature text, ``name(args) -> ret`` or ``(args)``
    (as :func:`ast.unparse` writes a ``def``)."""
    head = text.strip()
    start = head.index("(")
    function = ast.parse(f"def f{head[start:]}:\n    pass").body[0]
    assert isinstance(function, ast.FunctionDef)
    args = function.args

    def default(node: ast.expr | None) -> str | None:
        if node is None:
            return None
        try:
            return _default_text(ast.literal_eval(node))
        except ValueError:
            return "..."

    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    defaults += list(args.defaults)
    params: list[tuple[str, str, str | None]] = []
    for i, (arg, node) in enumerate(zip(positional, defaults, strict=True)):
        kind = "POSITIONAL_ONLY" if i < len(args.posonlyargs) else "POSITIONAL_OR_KEYWORD"
        params.append((arg.arg, kind, default(node)))
        if args.posonlyargs and i == len(args.posonlyargs) - 1:
            params.append(("", "POSITIONAL_ONLY_END", None))
    if args.vararg is not None:
        params.append((args.vararg.arg, "VAR_POSITIONAL", None))
    for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        params.append((arg.arg, "KEYWORD_ONLY", default(kw_default)))
    if args.kwarg is not None:
        params.append((args.kwarg.arg, "VAR_KEYWORD", None))
    return _shape(params)


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
    def _shape_problem(self, target: Target, signatures: Collection[str]) -> tuple[str, str]:
        """(call shape of ``target``'s function, "" or what is wrong with it)."""
        current = self._current(target)
        if current is _MISSING or not callable(current):
            raise RuntimeError(self._missing(target.name))
        found = signature_shape(inspect.unwrap(current))
        expected = sorted({shape_of_text(text) for text in signatures})
        if found in expected:
            return found, ""
        return found, (
            f"{target.name} has the signature {found}, which no tested release has (tested: "
            f"{' or '.join(expected)})"
        )

    def check_signature(
        self, target: Target, signatures: Collection[str], *, force: bool = False
    ) -> str:
        """The call shape of ``target``'s current function; refuses (SignatureMismatchError, a
        warning when ``force``) when it matches none of the recorded ``signatures``."""
        return self.check_signatures({target: signatures}, force=force)[target]

    @serialized
    def check_signatures(
        self, expected: Mapping[Target, Collection[str]], *, force: bool = False
    ) -> dict[Target, str]:
        """The call shape of every target's function, checked against the signature texts
        recorded for the tested releases, before anything is patched: one
        SignatureMismatchError (a warning when ``force``) naming every mismatch."""
        found: dict[Target, str] = {}
        problems: list[str] = []
        for target, texts in expected.items():
            found[target], problem = self._shape_problem(target, texts)
            if problem:
                problems.append(problem)
        if problems:
            message = (
                f"kl_patches.{self.library}: {'; '.join(problems)}. A wrapper written for another "
                "call shape could pass its arguments to the wrong parameters, so the patch "
                "refuses. Install a tested release, or set KL_PATCHES_FORCE=1 to run anyway."
            )
            if not force:
                raise SignatureMismatchError(message)
            warnings.warn(message, stacklevel=3)
        return found

    @serialized
    def patch(
        self,
        target: Target,
        factory: Callable[[Any], Any],
        *,
        signatures: Collection[str] | None = None,
        force: bool = False,
    ) -> Any:
        """Replace ``target`` by ``factory(original)`` (once); returns the replacement.

        With ``signatures`` (the texts recorded for the tested releases) the original's call
        shape is checked first (:meth:`check_signature`; ``force`` turns a mismatch into a
        warning).
        """
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
        if signatures is not None:
            self.check_signature(target, signatures, force=force)
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

    @serialized
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

    @serialized
    def slots(self) -> dict[str, Any]:
        """``module.attr`` -> the object now there, for every slot the registry wrote."""
        out = {}
        for holder, attr, _ in self._slots.values():
            name = getattr(holder, "__module__", "") + "." + holder.__name__
            label = holder.__name__ if isinstance(holder, ModuleType) else name
            out[f"{label}:{attr}"] = vars(holder).get(attr)
        return out

    @serialized
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

    @serialized
    def stale(self) -> list[str]:
        """``module.attr`` of loaded modules that still hold an original of a propagating target."""
        originals = {id(self._originals[t]) for t in self._replacements if t.propagate}
        return sorted(f"{m.__name__}.{a}" for m, a, v in self._module_attrs() if id(v) in originals)

    @serialized
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
