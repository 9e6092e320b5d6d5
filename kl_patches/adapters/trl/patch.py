"""``apply(config)`` / ``revert()``: put the KL hooks into TRL's own trainer classes in place.

For scripts you do not own (``trl grpo``, a recipe, a library calling ``trl.GRPOTrainer``):
after ``apply("k1-in-reward")`` every ``trl.GRPOTrainer``/``trl.RLOOTrainer`` *constructed
afterwards* runs the KL config (pass ``kl=...`` to one trainer to override it). The methods are
patched on the classes themselves, so every module that imported the class by name sees them;
the originals sit in the shared :class:`~kl_patches.adapters.patching.PatchRegistry` and
:func:`revert` puts exactly those back. Applying twice only replaces the active config.
Instances built before ``apply`` (or after ``revert``) and the subclasses of :mod:`.trainers`
pass through untouched. A trainer built while the patch is applied keeps its KL config for its
whole life: the patched ``__init__`` moves the instance to a subclass of its class that routes
the five other methods through the hooks (:func:`instance_class`), so :func:`revert` cannot leave
it running TRL's own loss at the KL coefficient it was given as ``beta``. The hooks sit right
above TRL's own methods in that class's MRO, below the user's classes: a user override that
calls ``super()`` runs around the hook, exactly as it would around a subclass of
``kl_patches.trl.GRPOTrainer``.

Before patching, :func:`guard` checks the installed TRL: the classes ``trl`` exports are TRL's
own (:mod:`.foreign`: unsloth, ms-swift), the version is in the tested range or above it, the
behaviour canaries pass (:mod:`.canaries`), and each hooked method has a signature recorded for
a tested release (:data:`~.compat.SIGNATURES`). When a trainer is built, a subclass overriding a
hooked method is accepted if its code calls ``super()`` (:func:`.foreign.check_subclass`), and
the hooks are checked in the first training step. ``KL_PATCHES_FORCE=1`` forces the version
guard only; ``KL_PATCHES_FORCE_TRAINER=1`` accepts a trainer class that cannot be checked.

Each accelerate rank runs the user's script, so calling ``apply`` at the top of the script (or
launching through ``python -m kl_patches.trl``) applies it on every rank.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from typing import Any

from kl_patches.adapters import delivery
from kl_patches.adapters.patching import PatchRegistry, Target, serialized
from kl_patches.config import KLConfig

from . import canaries, compat, foreign, hooks, legacy
from .delivery import configured
from .versions import SUPPORT, installed_version, online_rloo, patch_mode

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


def signatures(target: Target) -> tuple[str, ...]:
    """The signature texts of ``target`` recorded for the tested TRL releases (0.x and 1.x)."""
    name = f"{target.owner}.{target.attr}"
    steps = (*compat.SIGNATURES_0X.get(name, ()), *compat.SIGNATURES[name])
    return tuple(dict.fromkeys(text for _, text in steps))


def guard(force: bool = False) -> str:
    """Check the installed TRL before patching; returns its version.

    In order: the version is in the tested range or above it, the trainer classes ``trl``
    exports are TRL's own (:func:`.foreign.check_classes`), each hooked method's call shape is
    one a tested release has, and the behaviour canaries pass (:func:`.canaries.canaries`; above
    the range, passing gives one warning). Raises (an
    :class:`~kl_patches.adapters.support.UnsupportedVersionError`,
    :class:`~kl_patches.adapters.support.CanaryError`,
    :class:`~.foreign.ForeignTrainerError` or
    :class:`~kl_patches.adapters.patching.SignatureMismatchError`) unless ``force`` or
    ``KL_PATCHES_FORCE=1``, which turn each version refusal into a warning; a foreign trainer
    class is accepted by ``KL_PATCHES_FORCE_TRAINER=1`` instead (:mod:`.foreign`).
    """
    import trl

    forced = SUPPORT.forced(force)
    version = SUPPORT.gate(installed_version(), force=forced)
    if patch_mode(version) == "native":  # 0.14-0.26: beta only (legacy.py)
        foreign.check_classes(("__init__",))
        init = Target("trl", "__init__", owner=TRAINERS["GRPO"])
        REGISTRY.check_signatures({init: signatures(init)}, force=forced)
        return SUPPORT.verify(version, force=forced, canaries=legacy.canaries())
    foreign.check_classes(HOOKED)  # forced by KL_PATCHES_FORCE_TRAINER, not by a version force
    for cls in TRAINERS.values():
        missing = [n for n in HOOKED if not callable(getattr(getattr(trl, cls), n, None))]
        if missing:
            raise RuntimeError(
                f"kl_patches.trl: trl.{cls} {trl.__version__} lacks {missing}; "
                "this TRL version is not supported"
            )
    REGISTRY.check_signatures(
        {t: signatures(t) for items in targets().values() for t in items}, force=forced
    )
    return SUPPORT.verify(version, force=forced, canaries=canaries.canaries())


def _active(trainer: Any) -> bool:
    return not isinstance(trainer, hooks.KLTrainerMixin) and "_kl_config" in trainer.__dict__


def _hook(kind: str, name: str) -> Callable[..., Any]:
    """``hook(trainer, call, args, kwargs)`` for TRL method ``name`` of trainer ``kind``."""
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
    return hook


class _Applied(hooks.KLTrainerMixin):
    """Marker base of the classes :func:`instance_class` makes (TRL's patched methods pass
    straight through for their instances, whose own methods run the hooks)."""


_INSTANCE_CLASSES: dict[tuple[type, str], type] = {}


def instance_class(cls: type, kind: str) -> type:
    """A subclass of ``cls`` (same name and module) whose hooked methods run the hooks around
    TRL's own; a trainer built under :func:`apply` is moved to it, so it keeps its KL config
    after :func:`revert`. Cached per class.

    The hooks live in a class placed right above TRL's trainer in the MRO (below every class of
    the user's): ``cls``'s own overrides run first and reach the hook through ``super()``, so an
    override sees what a subclass of ``kl_patches.trl.GRPOTrainer`` sees (the advantages
    penalised after ``super()._generate_and_score_completions``, TRL's loss plus the KL term
    after ``super()._compute_loss``).
    """
    if isinstance(cls, type) and issubclass(cls, hooks.KLTrainerMixin):
        return cls
    key = (cls, kind)
    if key in _INSTANCE_CLASSES:
        return _INSTANCE_CLASSES[key]
    import trl

    base = getattr(trl, TRAINERS[kind])

    def routed(name: str) -> Callable[..., Any]:
        hook = _hook(kind, name)

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            _CALLS[name] += 1
            return hook(self, getattr(super(hooked, self), name), args, kwargs)

        method.__name__ = name
        method.__qualname__ = f"{base.__name__}.{name}"
        return method

    body: dict[str, Any] = {n: routed(n) for n in HOOKED if n != "__init__"}
    body.update(__module__=__name__, __doc__=f"TRL's {base.__name__} with the kl-patches hooks.")
    hooked = type(base.__name__, (base,), body)
    bases = (_Applied, hooked) if cls is base else (_Applied, cls, hooked)
    klass = type(
        cls.__name__,
        bases,
        {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__},
    )
    _INSTANCE_CLASSES[key] = klass
    return klass


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
            if not _ACTIVE:  # the class kept a reference to this wrapper past revert()
                original(self, model, reward_funcs, args, *more, **kwargs)
                return
            import trl

            foreign.check_subclass(type(self), getattr(trl, TRAINERS[kind]), HOOKED)
            config = KLConfig.coerce(kl) if kl is not None else _ACTIVE[-1]
            monitor = _MONITOR[-1] if kl_full_monitor is None else kl_full_monitor
            hooks.init_state(self, config, monitor)
            args = hooks.prepare_args(kind, model, args, config)
            original(self, model, reward_funcs, args, *more, **kwargs)
            hooks.after_init(self, kind)
            self.__class__ = instance_class(type(self), kind)
            _CALLS["__init__"] += 1

        return init

    hook = _hook(kind, name)

    @functools.wraps(original)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not _active(self):
            return original(self, *args, **kwargs)
        _CALLS[name] += 1
        return hook(self, functools.partial(original, self), args, kwargs)

    return method


def _wrap_native(kind: str, version: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """``__init__`` of a release patched through ``beta`` only (:mod:`.legacy`)."""

    @functools.wraps(original)
    def init(
        self: Any,
        model: Any = None,
        reward_funcs: Any = None,
        args: Any = None,
        *more: Any,
        kl: Any = None,
        kl_full_monitor: bool | None = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(self, hooks.KLTrainerMixin) or not _ACTIVE:
            if kl is not None or kl_full_monitor is not None:
                raise TypeError("pass kl= to the kl_patches trainer itself")
            original(self, model, reward_funcs, args, *more, **kwargs)
            return
        if kind == "RLOO" and not online_rloo(version):
            legacy.native_beta(kind, None, _ACTIVE[-1], version)  # raises: PPO-style trainer
        if kl_full_monitor or (kl_full_monitor is None and _MONITOR[-1]):
            raise ValueError(
                f"kl_patches.trl: the full-vocabulary KL monitor needs the hooks (trl>=0.27); "
                f"TRL {version} is patched through beta only"
            )
        config = KLConfig.coerce(kl) if kl is not None else _ACTIVE[-1]
        args, reward_funcs = legacy.prepare(kind, model, args, reward_funcs, config, version)
        original(self, model, reward_funcs, args, *more, **kwargs)
        legacy.after_init(self, kind, config, float(args.beta), version)
        _CALLS["__init__"] += 1

    return init


@serialized
def apply(
    config: KLConfig | str | dict[str, Any] | None = None,
    *,
    force: bool = False,
    full_monitor: bool = False,
) -> KLConfig:
    """Patch ``trl.GRPOTrainer`` and ``trl.RLOOTrainer`` to run ``config``.

    Without ``config``: the one in ``KL_PATCHES_TRL`` (:mod:`.delivery`) when set, else the
    default k1-in-reward.

    ``full_monitor`` makes them log the exact full-vocabulary KL (``kl_patches/full_vocab``). Raises
    when :func:`guard` refuses the installed TRL (an untested version, a failed behaviour
    canary, a foreign trainer class, a changed signature) unless ``force`` (or
    ``KL_PATCHES_FORCE=1``), and if a hooked method is missing. Returns the active config.
    """
    resolved = KLConfig.coerce(config) if config is not None else configured() or KLConfig()
    version = guard(force)
    _ACTIVE[:] = [resolved]
    _MONITOR[:] = [full_monitor]
    if patch_mode(version) == "native":  # only __init__ (beta); legacy.py says why
        for kind, cls in TRAINERS.items():
            target = Target("trl", "__init__", owner=cls)
            REGISTRY.patch(target, functools.partial(_wrap_native, kind, version))
        delivery.announce("trl", str(resolved))
        return resolved
    for kind, items in targets().items():
        for target in items:
            REGISTRY.patch(target, functools.partial(_wrap, kind, target.attr))
    delivery.announce("trl", str(resolved))
    return resolved


@serialized
def revert() -> None:
    """Restore every patched attribute exactly; a no-op when nothing is applied."""
    REGISTRY.revert()
    _ACTIVE.clear()
    _MONITOR.clear()
    _CALLS.clear()


@serialized
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
