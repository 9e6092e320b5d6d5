"""Foreign TRL trainers: code that replaces or overrides what the TRL patch hooks.

The patch wraps six methods of TRL's own ``GRPOTrainer`` and ``RLOOTrainer``. Three kinds of
code make that a silent no-op, and each is refused with what replaces the loss and what to do:

* **unsloth** (``PatchFastRL``, run when ``unsloth`` is imported) compiles a modified copy of
  TRL's trainer source into ``unsloth_compiled_cache.UnslothGRPOTrainer`` and rebinds
  ``trl.GRPOTrainer``, ``trl.trainer.GRPOTrainer`` and ``trl.trainer.grpo_trainer.GRPOTrainer``
  to it; its ``compute_loss`` is unsloth's own (``grpo_accumulated_loss``, k3 in the loss at
  ``beta``), not TRL's ``_compute_loss``. :mod:`.unsloth` patches that loss instead.
* **ms-swift** (``swift.rlhf_trainers.grpo_trainer``) deletes ``trl.GRPOTrainer.__init__`` and
  ``.log`` when imported, and its ``GRPOTrainer`` subclasses TRL's with its own scoring and loss
  (``--beta`` in the loss, ``--kl_in_reward`` in the reward, which also serves its RLOO).
* **a user subclass** whose override of a hooked method (other than ``__init__``) does not
  call ``super()``: the hook below it never runs.

:func:`check_classes` (at ``apply()``) checks that each hooked method of the classes ``trl``
exports is TRL's own code (defined in the class, compiled from a file of the installed ``trl``
package). :func:`check_subclass` (when a trainer is built) lists the overrides in its class's
MRO and reads each one's code (:func:`calls_super`): an override that calls
``super().<method>(...)`` (the usual pattern: custom logging, research trainers) is accepted,
and the hooks are checked again at run time, in the first training step
(:func:`kl_patches.adapters.trl.hooks.after_init`); one that does not, or whose code cannot be
read, is refused. ``KL_PATCHES_FORCE_TRAINER=1`` turns a refusal into a warning and leaves the
version guards on (``KL_PATCHES_FORCE=1``, which forces the version guard, still does it too,
with a deprecation warning). The audit reads such setups without importing anything
(``kl-patches audit``).
"""

from __future__ import annotations

import ast
import inspect
import os
import sys
import textwrap
import warnings
from typing import Any

from kl_patches.adapters.support import FORCE_ENV, TRAINER_FORCE_ENV

from .canaries import original_of

MODULES = {"GRPOTrainer": "trl.trainer.grpo_trainer", "RLOOTrainer": "trl.trainer.rloo_trainer"}
"""TRL trainer class -> the module that defines it in every 1.x release."""

KNOWN: tuple[tuple[str, str, str], ...] = (
    (
        "unsloth",
        "unsloth's patched trainer (a modified copy of TRL's code)",
        "unsloth computes the GRPO loss in its own compute_loss (grpo_accumulated_loss: k3 in "
        "the loss at beta), so the kl-patches hooks would not run. Keep unsloth and replace its "
        "loss-side KL with kl_patches.adapters.trl.unsloth.apply (loss placement only), or "
        "build the trainer without unsloth's RL patching (do not import unsloth in this "
        "process); `kl-patches audit` reads what unsloth runs",
    ),
    (
        "swift",
        "ms-swift's GRPO trainer",
        "ms-swift scores completions and computes the loss itself (--beta puts k3 in the loss, "
        "--kl_in_reward puts the KL in the reward, also for its RLOO), so the kl-patches hooks "
        "would not run. Use ms-swift's own flags (`kl-patches audit` reads them), or TRL's "
        "trainer in a process that does not import swift",
    ),
)
"""(module prefix, what it is, what replaces the loss and what to do) per known foreign library."""


class ForeignTrainerError(RuntimeError):
    """A trainer class replaces or overrides the TRL methods the patch hooks."""


def _known(module: str) -> tuple[str, str] | None:
    head = module.split(".")[0]
    for prefix, what, advice in KNOWN:
        if head == prefix or head.startswith(prefix + "_"):  # unsloth_compiled_cache
            return what, advice
    return None


def _loaded_foreign() -> list[str]:
    """Known foreign libraries already imported in this process."""
    return sorted({p for p, _, _ in KNOWN if p in sys.modules})


def trainer_forced(force: bool = False) -> bool:
    """True when ``force`` or ``KL_PATCHES_FORCE_TRAINER=1`` accepts a trainer the patch cannot
    check (the version guards are not affected)."""
    return force or os.environ.get(TRAINER_FORCE_ENV, "") == "1"


def _refuse(message: str, force: bool) -> None:
    if trainer_forced(force):
        warnings.warn(
            f"{message} ({TRAINER_FORCE_ENV}=1: building it anyway; the hooks are checked in "
            "the first training step)",
            stacklevel=4,
        )
        return
    if os.environ.get(FORCE_ENV, "") == "1":
        warnings.warn(
            f"{FORCE_ENV}=1 accepting a trainer class is deprecated: it forces the version "
            f"guard; set {TRAINER_FORCE_ENV}=1 instead, which leaves the version guards on",
            FutureWarning,
            stacklevel=4,
        )
        warnings.warn(f"{message} ({FORCE_ENV}=1: building it anyway)", stacklevel=4)
        return
    raise ForeignTrainerError(
        f"{message} To build it anyway, set {TRAINER_FORCE_ENV}=1 (the version guards stay on "
        "and the hooks are checked in the first training step)."
    )


def _trl_root() -> str:
    import trl

    return os.path.dirname(os.path.abspath(trl.__file__))


def _file_of(function: Any) -> str:
    code = getattr(original_of(function), "__code__", None)
    return os.path.abspath(code.co_filename) if code is not None else "?"


def class_problems(name: str, cls: Any, hooked: tuple[str, ...]) -> list[str]:
    """What is foreign about ``cls`` (exported as ``trl.<name>``): empty for TRL's own class."""
    if not isinstance(cls, type):
        return [f"is {cls!r}, not a class"]
    module = getattr(cls, "__module__", "?")
    if module != MODULES[name]:
        return [f"is {module}.{cls.__qualname__}, not TRL's {MODULES[name]}.{name}"]
    root = _trl_root()
    problems = []
    for method in hooked:
        if method not in vars(cls):
            problems.append(f"has no {method} of its own")
            continue
        where = _file_of(vars(cls)[method])
        if not where.startswith(root + os.sep):
            problems.append(f"has a {method} compiled from {where}, not from TRL")
    return problems


def check_classes(hooked: tuple[str, ...], *, force: bool = False) -> None:
    """Refuse (ForeignTrainerError; a warning when ``force``) when a class ``trl`` exports under
    a trainer's name is not TRL's own, or misses a hooked method of its own."""
    import importlib

    import trl
    import trl.trainer

    for name, module_name in MODULES.items():
        module = importlib.import_module(module_name)
        holders = {
            f"trl.{name}": getattr(trl, name),
            f"trl.trainer.{name}": getattr(trl.trainer, name, None),
            f"{module_name}.{name}": getattr(module, name),
        }
        seen: dict[int, list[str]] = {}
        for label, cls in holders.items():
            if cls is not None:
                seen.setdefault(id(cls), []).append(label)
        problems: list[str] = []
        culprit: tuple[str, str] | None = None
        for labels in seen.values():
            cls = holders[labels[0]]
            found = class_problems(name, cls, hooked)
            if found:
                problems.append(f"{' = '.join(labels)} {'; '.join(found)}")
                culprit = culprit or _known(getattr(cls, "__module__", ""))
        if not problems:
            continue
        loaded = _loaded_foreign()
        if culprit is None and loaded:
            culprit = _known(loaded[0])
        what, advice = culprit or (
            "not TRL's own trainer",
            "the kl-patches hooks wrap TRL's own methods and would not run; use TRL's own "
            "trainer class",
        )
        _refuse(f"kl_patches.trl: {'; '.join(problems)}: {what}. {advice}.", force)


def overrides(cls: type, base: type, hooked: tuple[str, ...]) -> list[tuple[type, str]]:
    """(class, method) for each hooked method other than ``__init__`` that a class between
    ``cls`` and ``base`` (excluding kl-patches' own) defines in its body."""
    found = []
    for klass in cls.__mro__:
        if klass is base:
            break
        if klass.__module__.startswith("kl_patches."):
            continue
        found += [(klass, m) for m in hooked if m != "__init__" and m in vars(klass)]
    return found


def _function(member: Any) -> Any:
    """The plain function behind a class attribute (staticmethod, classmethod, wrappers)."""
    member = getattr(member, "__func__", member)
    return inspect.unwrap(member) if callable(member) else member


def calls_super(member: Any, name: str) -> bool | None:
    """Whether the code of ``member`` (an override of method ``name``) calls the method it
    overrides through ``super()``: ``super().name(...)`` or ``super(Cls, self).name(...)``.
    None when its source cannot be read (a function compiled from a string, a C function).

    Read from the code, not run: a call on one branch only counts, which the check in the first
    training step covers. A call by class name (``GRPOTrainer.name(self, ...)``) does not
    count: it skips the class that holds the hooks.
    """
    function = _function(member)
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        return None
    try:
        tree = ast.parse(source)
    except SyntaxError:  # e.g. a lambda's line cut out of an expression
        return None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == name
            and isinstance(node.func.value, ast.Call)
            and isinstance(node.func.value.func, ast.Name)
            and node.func.value.func.id == "super"
        ):
            return True
    return False


def check_subclass(
    cls: type, base: type, hooked: tuple[str, ...], *, force: bool = False
) -> list[tuple[type, str]]:
    """Check a trainer class's overrides of the methods the hooks wrap in ``base`` (the TRL
    class, or the kl-patches one it derives from); returns the accepted overrides.

    An override whose code calls the method it overrides (:func:`calls_super`) is accepted;
    one that does not, one whose code cannot be read, and any override from a known foreign
    library are refused (:class:`ForeignTrainerError`; a warning when forced, see
    :func:`trainer_forced`).
    """
    found = overrides(cls, base, hooked)
    if not found:
        return []
    known = next((_known(k.__module__) for k, _ in found if _known(k.__module__)), None)
    if known is not None:
        names = ", ".join(f"{k.__module__}.{k.__qualname__}.{m}" for k, m in found)
        what, advice = known
        _refuse(f"kl_patches.trl: {names} override trl.{base.__name__}: {what}. {advice}.", force)
        return found
    problems = []
    for klass, method in found:
        where = f"{klass.__module__}.{klass.__qualname__}.{method}"
        verdict = calls_super(vars(klass)[method], method)
        if verdict is None:
            problems.append(f"{where} (its code cannot be read to check that it calls super())")
        elif not verdict:
            problems.append(f"{where} (its code never calls super().{method}(...))")
    if problems:
        _refuse(
            f"kl_patches.trl: {'; '.join(problems)} override{'s' if len(problems) == 1 else ''} "
            f"a trl.{base.__name__} method that the kl-patches hooks wrap: without a call to "
            "the overridden method the hook never runs and the KL config is silently dropped. "
            "Call super() in the override (an override that does is accepted), or build "
            "kl_patches.trl.GRPOTrainer/RLOOTrainer without it.",
            force,
        )
    return found
