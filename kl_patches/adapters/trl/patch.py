"""``apply(config)`` / ``revert()``: put the KL hooks into TRL's own trainer classes in place.

For scripts you do not own (``trl grpo``, a recipe, a library calling ``trl.GRPOTrainer``):
after ``apply("k1-in-reward")`` every ``trl.GRPOTrainer``/``trl.RLOOTrainer`` *constructed
afterwards* runs the KL config (pass ``kl=...`` to one trainer to override it). The methods are
patched on the classes themselves, so every module that imported the class by name sees them;
the originals sit in the shared :class:`~kl_patches.adapters.patching.PatchRegistry` and
:func:`revert` puts exactly those back. Applying twice only replaces the active config.
Instances built before ``apply`` (or after ``revert``) and the subclasses of :mod:`.trainers`
pass through untouched.

Each accelerate rank runs the user's script, so calling ``apply`` at the top of the script (or
launching through ``python -m kl_patches.trl``) applies it on every rank.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from typing import Any

from kl_patches.adapters.patching import PatchRegistry, Target
from kl_patches.config import KLConfig

from . import hooks
from .delivery import configured
from .versions import SUPPORT

REGISTRY = PatchRegistry("trl", f"supported: {SUPPORT.describe()}")
"""The originals and replacements of TRL's patched trainer methods."""

_ACTIVE: list[KLConfig] = []
"""The config applied to trainers built without ``kl=`` (empty when not applied)."""

_MONITOR: list[bool] = []
"""Whether trainers built without ``kl_full_monitor=`` log the full-vocabulary KL."""

_CALLS: Counter[str] = Counter()
"""How often each patched method ran its hook in this process (the proof that the patch took)."""

HOOKED = (
    "__init__",
    "_get_per_token_logps_and_entropies",
    "_calculate_rewards",
    "_generate_and_score_completions",
    "_compute_loss",
    "training_step",
)
"""The TRL methods patched on GRPOTrainer and RLOOTrainer."""

TRAINERS = {"GRPO": "GRPOTrainer", "RLOO": "RLOOTrainer"}
"""Kind -> the ``trl`` class patched in place."""


def targets() -> dict[str, list[Target]]:
    """Kind -> the patched methods of its TRL trainer class."""
    return {
        kind: [Target("trl", name, owner=cls) for name in HOOKED] for kind, cls in TRAINERS.items()
    }


def _active(trainer: Any) -> bool:
    return not isinstance(trainer, hooks.KLTrainerMixin) and "_kl_config" in trainer.__dict__


def _wrap(kind: str, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    if name == "__init__":

        @functools.wraps(original)
        def init(
            self: Any,
            model: Any,
            reward_funcs: Any = None,
            args: Any = None,
            *more: Any,
            kl: Any = None,
            kl_full_monitor: bool | None = None,
            **kwargs: Any,
        ) -> None:
            if isinstance(self, hooks.KLTrainerMixin):
                if kl is not None or kl_full_monitor is not None:
                    raise TypeError("pass kl= to the kl_patches trainer itself")
                original(self, model, reward_funcs, args, *more, **kwargs)
                return
            config = KLConfig.coerce(kl) if kl is not None else _ACTIVE[-1]
            monitor = _MONITOR[-1] if kl_full_monitor is None else kl_full_monitor
            hooks.init_state(self, config, monitor)
            args = hooks.prepare_args(kind, model, args, config)
            original(self, model, reward_funcs, args, *more, **kwargs)
            hooks.after_init(self, kind)
            _CALLS["__init__"] += 1

        return init

    grpo = kind == "GRPO"
    hook: Callable[..., Any] = {
        "_get_per_token_logps_and_entropies": lambda t, c, a, k: hooks.get_logps(t, c, a, k),
        "_calculate_rewards": lambda t, c, a, k: hooks.calculate_rewards(t, c, a, k),
        "training_step": lambda t, c, a, k: hooks.training_step(t, c, a, k),
        "_generate_and_score_completions": lambda t, c, a, k: (
            hooks.grpo_generate_and_score if grpo else hooks.rloo_generate_and_score
        )(t, c, *a),
        "_compute_loss": lambda t, c, a, k: (
            hooks.grpo_compute_loss if grpo else hooks.rloo_compute_loss
        )(t, c, *a),
    }[name]

    @functools.wraps(original)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not _active(self):
            return original(self, *args, **kwargs)
        _CALLS[name] += 1
        return hook(self, functools.partial(original, self), args, kwargs)

    return method


def apply(
    config: KLConfig | str | dict[str, Any] | None = None,
    *,
    force: bool = False,
    full_monitor: bool = False,
) -> KLConfig:
    """Patch ``trl.GRPOTrainer`` and ``trl.RLOOTrainer`` to run ``config``.

    Without ``config``: the one in ``KL_PATCHES_TRL`` (:mod:`.delivery`) when set, else the
    default k1-in-reward.

    ``full_monitor`` makes them log the exact full-vocabulary KL (``kl/full_vocab``). Raises on
    an unsupported TRL version unless ``force`` (or ``KL_PATCHES_FORCE=1``), and if a hooked
    method is missing. Returns the active config.
    """
    import trl

    resolved = KLConfig.coerce(config) if config is not None else configured() or KLConfig()
    SUPPORT.check(trl.__version__, force=force)
    for cls in TRAINERS.values():
        missing = [n for n in HOOKED if not callable(getattr(getattr(trl, cls), n, None))]
        if missing:
            raise RuntimeError(
                f"kl_patches.trl: trl.{cls} {trl.__version__} lacks {missing}; "
                "this TRL version is not supported"
            )
    _ACTIVE[:] = [resolved]
    _MONITOR[:] = [full_monitor]
    for kind, items in targets().items():
        for target in items:
            REGISTRY.patch(target, functools.partial(_wrap, kind, target.attr))
    return resolved


def revert() -> None:
    """Restore every patched attribute exactly; a no-op when nothing is applied."""
    REGISTRY.revert()
    _ACTIVE.clear()
    _MONITOR.clear()
    _CALLS.clear()


def applied() -> list[str]:
    """The patched TRL methods (checked on the live classes); empty when not applied."""
    return REGISTRY.applied()


def is_applied() -> bool:
    """True while :func:`apply` is in effect (same as ``bool(applied())``)."""
    return bool(applied())


def active_config() -> KLConfig | None:
    """The config trainers built without ``kl=`` get, or None when not applied."""
    return _ACTIVE[-1] if _ACTIVE else None


def hook_calls() -> dict[str, int]:
    """Patched-method name -> how many times its hook ran in this process since :func:`apply`."""
    return dict(_CALLS)
