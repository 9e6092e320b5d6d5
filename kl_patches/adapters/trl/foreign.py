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
* **any subclass** that overrides a hooked method other than ``__init__``: if the override does
  not call ``super()``, the hook never runs.

:func:`check_classes` (at ``apply()``) checks that each hooked method of the classes ``trl``
exports is TRL's own code (defined in the class, compiled from a file of the installed ``trl``
package); :func:`check_subclass` (when a trainer is built) lists the overrides in its class's
MRO. ``KL_PATCHES_FORCE=1`` turns a refusal into a warning. The audit reads such setups without
importing anything (``kl-patches audit``).
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

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


def _refuse(message: str, force: bool) -> None:
    if force:
        warnings.warn(f"{message} (KL_PATCHES_FORCE=1: patching anyway)", stacklevel=4)
        return
    raise ForeignTrainerError(message)


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


def check_subclass(cls: type, base: type, hooked: tuple[str, ...], *, force: bool = False) -> None:
    """Refuse (ForeignTrainerError; a warning when ``force``) a trainer class that overrides a
    hooked method of ``base`` (the TRL class)."""
    found = overrides(cls, base, hooked)
    if not found:
        return
    names = ", ".join(f"{k.__module__}.{k.__qualname__}.{m}" for k, m in found)
    known = next((_known(k.__module__) for k, _ in found if _known(k.__module__)), None)
    if known is not None:
        what, advice = known
        message = f"kl_patches.trl: {names} override trl.{base.__name__}: {what}. {advice}."
    else:
        message = (
            f"kl_patches.trl: {names} override{'s' if len(found) == 1 else ''} trl."
            f"{base.__name__} methods that the kl-patches hooks wrap; an override that does not "
            "call super() silently drops the KL config. Remove the override (or build "
            "kl_patches.trl.GRPOTrainer/RLOOTrainer), or set KL_PATCHES_FORCE=1 if every "
            "override calls super()"
        )
    _refuse(message, force)
