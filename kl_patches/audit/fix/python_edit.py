"""Apply TRL config changes to a Python training script with libcst, keeping its layout.

:func:`apply_python` edits the place the audit's Python reader
(:mod:`kl_patches.audit.python`) takes each setting from, and only that place:

* a keyword argument of the config call (``GRPOConfig(beta=0.04)``, one line or one per line);
* an entry of a dict expanded into it (``GRPOConfig(**cfg)`` with ``cfg = {"beta": 0.04}`` or
  ``dict(beta=0.04)``, or the literal written in the call);
* an attribute assigned after the config is built (``training_args.beta = 0.0``), which wins
  over the call, also on a config that ``TrlParser`` fills from the command line;
* a class-level default of the script's own config subclass (``beta: float = 0.04`` or
  ``field(default=0.04)``), used when the call does not set the key.

``set`` changes the value there (a literal of the field's type: the type of the value written,
else of TRL's default, else told from the value) or, when nothing sets the key, adds a keyword
argument to the config call in the call's layout; ``unset`` removes every place that sets the
key (the library's default then applies); ``rename`` renames each of them. The config is found
the way the reader finds it: the trainer's ``args=`` (or third positional argument), through
a variable's one assignment, a helper function's one ``return`` and a subclass's bases.

Anything that cannot be placed without guessing is a :class:`PythonEditError` naming why,
never a silent no-op: a value computed from an expression, a config built in several places or
passed in from outside, several trainers using different configs (pass ``line``), a key that may
hide in an expansion the reader cannot read (``**vars(args)``), a config read from the command
line with no assignment of the key in the file (its flags belong to the launch command), or a
change the reader would not see after the edit (checked by reading the result again).

Deviations: only namespace ``trl`` is accepted: the reader reads no verl override lists or
OpenRLHF argv lists written in Python (their changes belong to the launch command's writer);
``entry_point`` changes are not edits of a Python config. A comment on a removed line goes
with it.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from kl_patches.audit.fix.change import Change
from kl_patches.audit.fix.python_values import PythonEditError
from kl_patches.audit.model import InputError
from kl_patches.audit.python import PyLaunch, read_python

if TYPE_CHECKING:
    from kl_patches.audit.fix.python_plan import Plan

__all__ = ["PythonEditError", "apply_python", "libcst_module"]

EXTRA = "fix"
"""The kl-patches extra that installs libcst (``pip install 'kl-patches[fix]'``)."""


_MISSING = object()


def libcst_module() -> ModuleType:
    """libcst, imported on first use; ImportError naming the extra to install if it is not."""
    try:
        return importlib.import_module("libcst")
    except ImportError as err:
        raise ImportError(
            f"editing a Python launch needs libcst: pip install 'kl-patches[{EXTRA}]' "
            f"(or pip install 'libcst>=1.1'); {err}"
        ) from err


def apply_python(
    source: str, changes: Sequence[Change], *, line: int | None = None, origin: str = "<python>"
) -> str:
    """``source`` with ``changes`` (namespace ``trl``) written where the audit reads them.

    ``line``: the trainer construction to edit (:attr:`PyLaunch.line`) when the script builds
    several TRL trainers with different configs. PythonEditError when a change cannot be placed
    unambiguously; InputError when ``source`` is not Python the reader reads."""
    _check(changes)
    libcst_module()
    from kl_patches.audit.fix.python_plan import Plan, Script

    every = [x for x in read_python(source, origin).launches if x.library == "trl"]
    launches = _launches(every, line, origin)
    script = Script(source, origin)
    plans = [Plan(script, x, next(i for i, y in enumerate(every) if y is x)) for x in launches]
    first = plans[0]
    for other in plans[1:]:
        if not first.same_config(other):
            lines = ", ".join(str(p.launch.line) for p in plans)
            raise PythonEditError(
                f"{origin}: the trainers at lines {lines} use different configs; "
                "pass line= to say which one to edit"
            )
    for change in changes:
        first.apply(change)
    for other in plans[1:]:
        other.written = first.written  # one config: the same edits
    edited = script.render()
    for plan in plans:
        _verify(edited, changes, plan, len(every), origin)
    return edited


def _check(changes: Sequence[Change]) -> None:
    seen: set[str] = set()
    for change in changes:
        if change.namespace != "trl":
            raise PythonEditError(
                f"{change.key}: a {change.namespace!r} change has no place in a Python script: "
                "the audit reads only TRL config fields (namespace 'trl') from Python; verl "
                "overrides and OpenRLHF flags belong to the launch command"
            )
        if change.action not in ("set", "unset", "rename"):
            raise PythonEditError(
                f"{change.key}: a {change.action!r} change is not an edit of a Python config "
                "(valid here: set, unset, rename)"
            )
        if change.key in seen:
            raise PythonEditError(f"{change.key}: changed twice in one set")
        seen.add(change.key)


def _launches(found: list[PyLaunch], line: int | None, origin: str) -> list[PyLaunch]:
    if not found:
        raise PythonEditError(f"{origin}: no TRL trainer is built in this script")
    if line is not None:
        found = [launch for launch in found if launch.line == line]
        if not found:
            raise PythonEditError(f"{origin}: no TRL trainer is built at line {line}")
    return found


def _verify(edited: str, changes: Sequence[Change], plan: Plan, count: int, origin: str) -> None:
    """Read the edited script again: each change must be what the reader now finds for the
    trainer ``plan`` follows (a safety net: the plan follows the reader's rules, and where they
    part, such as a branch the reader skips, this says so instead of returning a wrong edit)."""
    try:
        launches = [x for x in read_python(edited, origin).launches if x.library == "trl"]
    except InputError as err:  # pragma: no cover - libcst keeps valid Python valid
        raise PythonEditError(f"{origin}: the edited script does not read back: {err}") from err
    if len(launches) != count:  # pragma: no cover - an edit of config values only
        raise PythonEditError(f"{origin}: the edit changed the trainers the script builds")
    got = launches[plan.launch_index]
    for change in changes:
        key = change.key
        if change.action == "set":
            want = plan.written[key]
            have = got.kwargs.get(key, _MISSING)
            if not _same(have, want):
                raise PythonEditError(
                    f"{origin}: after writing {key}={change.value}, the audit reads "
                    f"{got.kwargs.get(key, 'nothing')!r} for {key}: the change is not where the "
                    "config takes it from"
                )
        elif change.action == "unset":
            if key in got.kwargs or key in got.unresolved:
                raise PythonEditError(
                    f"{origin}: {key} is still set after removing it (the audit reads "
                    f"{got.kwargs.get(key, 'a value it cannot compute')!r})"
                )
        elif key in got.kwargs or key in got.unresolved:
            raise PythonEditError(f"{origin}: {key} is still set after renaming it")


def _same(have: Any, want: Any) -> bool:
    if have is _MISSING or type(have) is not type(want):
        return False
    if isinstance(have, float) and math.isnan(have):
        return math.isnan(want)
    return bool(have == want)
