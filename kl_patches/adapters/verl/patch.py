"""Patches for what verl 0.9.1 cannot express: ``apply(spec)`` / ``revert()``.

verl computes the reward KL in ``ray_trainer.apply_kl_penalty`` (TaskRunner process) and the
loss KL inside ``workers.utils.losses.ppo_loss`` (actor worker processes). Three functions are
wrapped, in their defining module and in every loaded ``verl`` module that imported them by
name (``v1.trainer_base``, ``v1.utils``, ``engine_workers``, ``distillation.losses``,
``experimental.separation.ray_trainer``, and any other loaded module, user code included, that
holds an original); modules imported later copy the wrapper:

* ``apply_kl_penalty``: when ``algorithm.kl_penalty`` is :data:`~.versions.MARKER`, the penalty is
  ``kl_patches.core``'s (per token, or one sequence-level value on the last token), with the
  controller's coefficient; otherwise verl's own function runs unchanged.
* ``compute_advantage``: with ``kl_outside_std`` the sequence penalty is kept out of GRPO's
  score and added after the std normalisation, centred by verl's own GRPO estimator (no std).
* ``ppo_loss``: when ``kl_loss_type`` is the marker, verl's loss runs without its KL and the
  core's ``loss_term`` (importance weighting, sequence granularity, any aggregation) is added,
  normalised by verl's global batch counts like verl's ``agg_loss``.

Any other estimator name reaches verl's code untouched, so native configs behave natively while
the patch is applied. The originals live in the shared
:class:`~kl_patches.adapters.patching.PatchRegistry`; ``apply`` twice is ``apply`` once.

Each function is patched where the installed verl defines it, read from the function object
that ``ray_trainer`` / ``losses`` hold (:func:`resolve_targets`: an upstream move into
``verl.trainer.ppo.trainer_utils`` is followed, and every module holding the original by name
gets the wrapper). Before patching, :func:`apply` checks the version (0.7.0-0.9.x, or newer with
every canary passing), the signatures recorded for the tested releases, the behaviour canaries
(:mod:`.canaries`), and that a loss side needing the patch has a ``ppo_loss`` to patch (verl
< 0.8 computes the KL loss in its legacy actor); after patching, :func:`check` fails loudly when
a loaded verl module still holds the original or defines a copy the patch did not reach.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
import os
import sys
from typing import Any

import torch

from kl_patches import core
from kl_patches.adapters.patching import PatchRegistry, Target, is_replacement
from kl_patches.config import KLConfig

from . import canaries
from .delivery import PatchSpec
from .versions import LOSS_PATCH, MARKER, SIGNATURES, SUPPORT

SOURCES: dict[tuple[str, str], str] = {
    ("verl.trainer.ppo.ray_trainer", "apply_kl_penalty"): "_apply_kl_penalty",
    ("verl.trainer.ppo.ray_trainer", "compute_advantage"): "_compute_advantage",
    ("verl.workers.utils.losses", "ppo_loss"): "_ppo_loss",
}
"""Defining module and name of each wrapped verl function -> the wrapper in this module."""

KNOWN_IMPORTERS: tuple[tuple[str, str], ...] = (
    ("verl.trainer.ppo.v1.trainer_base", "apply_kl_penalty"),
    ("verl.trainer.ppo.v1.utils", "compute_advantage"),
    ("verl.experimental.separation.ray_trainer", "apply_kl_penalty"),
    ("verl.experimental.separation.ray_trainer", "compute_advantage"),
    ("verl.workers.engine_workers", "ppo_loss"),
    ("verl.trainer.distillation.losses", "ppo_loss"),
)
"""verl 0.9.1 modules that import a wrapped function by name (found with grep; when loaded they
are patched, and any other loaded ``verl`` module holding an original is patched too)."""

TARGETS: dict[Target, str] = {
    Target(module, attr, propagate=True): wrapper for (module, attr), wrapper in SOURCES.items()
}
"""Each wrapped function (propagated to every importer) -> its wrapper's name here."""

PENALTY_KEY = "kl_patches_penalty"
"""Batch field carrying the sequence penalty from apply_kl_penalty to compute_advantage."""

REGISTRY = PatchRegistry("verl", f"kl_patches supports verl {SUPPORT.supported}")
"""The originals and wrappers of the patched verl functions."""

_ACTIVE: PatchSpec | None = None
_NATIVE_ACTOR_CONFIGS: dict[int, tuple[Any, Any]] = {}


class PatchNotActiveError(RuntimeError):
    """verl was asked for the kl-patches estimator in a process where the patch is not active."""


_BY_ATTR: dict[str, Target] = {}
"""Wrapped function name -> its patched target (where the installed verl defines it)."""


def _check_version(*, force: bool = False) -> str:
    import verl

    return SUPPORT.gate(str(verl.__version__), force=force)


def resolve_targets() -> dict[Target, str]:
    """Each wrapped function at its defining module in the installed verl -> its wrapper's name.

    The module is read from the function object that the module of :data:`SOURCES` holds
    (``ray_trainer.apply_kl_penalty.__module__``), so a function moved elsewhere and imported
    back by name (``verl.trainer.ppo.trainer_utils``) is patched where it lives; propagation
    then reaches every module that imported it.
    """
    out: dict[Target, str] = {}
    for (module, attr), wrapper in SOURCES.items():
        if attr in _BY_ATTR:
            out[_BY_ATTR[attr]] = wrapper
            continue
        function = vars(importlib.import_module(module)).get(attr)
        if not callable(function):
            raise RuntimeError(
                f"kl_patches.verl: {module} has no {attr}, a hook point the patch needs; "
                f"kl_patches supports verl {SUPPORT.supported}"
            )
        definer = getattr(function, "__module__", None) or module
        out[Target(definer, attr, propagate=True)] = wrapper
    return out


def _legacy_loss_site() -> str | None:
    """The module that computes the KL loss instead of ``ppo_loss``, if the installed verl has
    one (0.7.x: ``verl.workers.actor.dp_actor``)."""
    for name in ("verl.workers.actor.dp_actor",):
        try:
            if importlib.util.find_spec(name) is not None:
                return name
        except (ImportError, ValueError):
            continue
    return None


def _check_loss_site(version: str, *, force: bool = False) -> None:
    legacy = _legacy_loss_site()
    if legacy is None:
        return
    message = (
        f"kl_patches.verl: verl {version} computes the KL loss in its legacy actor ({legacy}, "
        "used by default: trainer.use_legacy_worker_impl=auto), which calls verl's own "
        "kl_penalty, so a loss side that needs the patch cannot run there (the patch supports "
        f"it on verl{LOSS_PATCH}, where workers.utils.losses.ppo_loss is the only KL-loss site). "
        "Use a loss side verl expresses natively (to_overrides writes verl's own names when it "
        f"can), a config without a loss side, or verl{LOSS_PATCH}; KL_PATCHES_FORCE=1 runs anyway."
    )
    if not force:
        raise RuntimeError(message)
    import warnings

    warnings.warn(message, stacklevel=3)


def apply(
    config: KLConfig | PatchSpec | str | dict[str, Any], *, kl_outside_std: bool = False
) -> KLConfig:
    """Install the patch for ``config`` in this process (idempotent); returns the active config.

    Calling it again with another config replaces the configuration, not the wrappers; the
    :class:`PatchSpec` in use is :func:`active`. Refuses (unless ``KL_PATCHES_FORCE=1``) a verl
    outside the tested range whose canaries fail, a changed signature, a failed canary, and a
    loss side on a verl whose legacy actor computes the KL loss.
    """
    global _ACTIVE
    if isinstance(config, PatchSpec):
        spec = config
    else:
        spec = PatchSpec(KLConfig.coerce(config), kl_outside_std=kl_outside_std)
    forced = SUPPORT.forced()
    version = _check_version(force=forced)
    targets = resolve_targets()
    REGISTRY.check_signatures({t: SIGNATURES[t.attr] for t in targets}, force=forced)
    if spec.config.has_loss:
        _check_loss_site(version, force=forced)
    SUPPORT.verify(
        version, force=forced, canaries=canaries.canaries(loss_patch=spec.config.has_loss)
    )
    for target, wrapper_name in targets.items():
        REGISTRY.patch(target, functools.partial(_wrapper, wrapper_name))
        _BY_ATTR[target.attr] = target
    _ACTIVE = spec
    check()
    return spec.config


def _wrapper(name: str, original: Any) -> Any:
    """The registry's factory: this module's wrapper ``name`` (it finds the original itself)."""
    return globals()[name]


def patched_symbols() -> dict[str, Any]:
    """``module:attr`` -> the object now there, for every symbol the patch replaced."""
    return REGISTRY.slots()


def wrapper_names() -> dict[str, str]:
    """Source ``module:attr`` -> qualified name of its wrapper (for reports and tests)."""
    return {f"{m}:{a}": f"{__name__}.{w}" for (m, a), w in SOURCES.items()}


def copies() -> list[str]:
    """``module.name`` of functions named like a wrapped one, defined in a loaded ``verl`` (or
    ``recipe``) module other than the definer: a trainer calling such a copy is not patched."""
    names = {t.attr: t for t in REGISTRY.targets()}
    found = []
    for module_name, module in list(sys.modules.items()):
        if module is None or not module_name.startswith(("verl.", "recipe.")):
            continue
        for attr, target in names.items():
            value = vars(module).get(attr)
            if (
                callable(value)
                and getattr(value, "__module__", None) == module_name
                and module_name != target.module
                and not is_replacement(value)
                and value is not REGISTRY.original(target)
            ):
                found.append(f"{module_name}.{attr}")
    return sorted(found)


def check() -> PatchSpec:
    """Raise unless the patch is active, every loaded verl module holds the wrappers, and no
    loaded verl module defines its own copy of a wrapped function."""
    if _ACTIVE is None:
        raise PatchNotActiveError(_not_active_message())
    REGISTRY.applied()
    stale = REGISTRY.stale()
    if stale:
        raise RuntimeError(f"kl_patches verl patch incomplete; still original: {stale}")
    copied = copies()
    if copied:
        raise RuntimeError(
            f"kl_patches verl patch incomplete: {copied} define their own copy of a function the "
            "patch wraps, so a trainer calling them runs verl's KL, not the KL config"
        )
    return _ACTIVE


def active() -> PatchSpec | None:
    """The active patch spec in this process, or None."""
    return _ACTIVE


def active_config() -> KLConfig | None:
    """The KLConfig the patch runs in this process, or None."""
    return None if _ACTIVE is None else _ACTIVE.config


def applied() -> list[str]:
    """The patched verl functions (checked on the live modules); empty when not applied."""
    return REGISTRY.applied()


def revert() -> None:
    """Restore every symbol the patch replaced, including in modules imported after apply."""
    global _ACTIVE
    REGISTRY.revert()
    _NATIVE_ACTOR_CONFIGS.clear()
    _BY_ATTR.clear()
    _ACTIVE = None


def _not_active_message() -> str:
    return (
        f"verl was configured with the estimator name {MARKER!r}, which only kl-patches "
        f"implements, but the patch is not active in process {os.getpid()}. Install kl-patches "
        "in every Ray worker's environment and set KL_PATCHES_VERL (to_overrides() does both "
        "through ray_kwargs.ray_init.runtime_env), or call kl_patches.adapters.verl.apply()."
    )


def _require_active() -> PatchSpec:
    if _ACTIVE is None:
        raise PatchNotActiveError(_not_active_message())
    return _ACTIVE


def _original(module_name: str, attr: str) -> Any:
    """verl's original ``attr`` (wherever :func:`resolve_targets` found it defined)."""
    return REGISTRY.original(_BY_ATTR.get(attr) or Target(module_name, attr, propagate=True))


# ----------------------------------------------------------------------------- reward side
def _apply_kl_penalty(
    data: Any, kl_ctrl: Any, kl_penalty: str = "kl"
) -> tuple[Any, dict[str, Any]]:
    """verl's ``apply_kl_penalty`` with the core's penalty for the marker estimator."""
    if kl_penalty != MARKER:
        return _original("verl.trainer.ppo.ray_trainer", "apply_kl_penalty")(
            data, kl_ctrl, kl_penalty
        )
    spec = _require_active()
    cfg = spec.config.replace(coef=float(kl_ctrl.value), loss_coef=None)
    if cfg.placement == "loss":
        raise ValueError(
            f"algorithm.kl_penalty={MARKER!r} but the kl-patches config {spec.config} has no "
            "reward side; set algorithm.use_kl_in_reward=False"
        )
    mask = data.batch["response_mask"]
    old, ref = data.batch["old_log_probs"], data.batch["ref_log_prob"]
    scores = data.batch["token_level_scores"]
    if cfg.granularity == "token" and not spec.kl_outside_std:
        per_token = cfg.coef * core.kl_terms(old.detach(), ref.detach(), mask, cfg)
        data.batch["token_level_rewards"] = scores - per_token
    else:
        penalty = core.on_last_token(core.reward_penalty(old, ref, mask, cfg), mask)
        if spec.kl_outside_std:
            data.batch[PENALTY_KEY] = penalty
            data.batch["token_level_rewards"] = scores
        else:
            data.batch["token_level_rewards"] = scores - penalty
    seq_kl = core.sequence_kl(old.detach(), ref.detach(), mask, cfg)
    per_token_kl = core.per_token_kl(old, ref, mask, cfg).mean().item()
    kl_ctrl.update(current_kl=per_token_kl, n_steps=data.batch.batch_size[0])
    metrics = {
        "actor/reward_kl_penalty": per_token_kl,
        "actor/reward_kl_penalty_coeff": cfg.coef,
        "kl_patches/reward_sequence_kl": seq_kl.mean().item(),
        "kl_patches/active": 1.0,
    }
    return data, metrics


def _compute_advantage(
    data: Any,
    adv_estimator: Any,
    gamma: float = 1.0,
    lam: float = 1.0,
    num_repeat: int = 1,
    norm_adv_by_std_in_grpo: bool = True,
    config: Any = None,
) -> Any:
    """verl's ``compute_advantage``; with ``kl_outside_std`` the KL skips GRPO's 1/std."""
    original = _original("verl.trainer.ppo.ray_trainer", "compute_advantage")
    kwargs = {
        "gamma": gamma,
        "lam": lam,
        "num_repeat": num_repeat,
        "norm_adv_by_std_in_grpo": norm_adv_by_std_in_grpo,
        "config": config,
    }
    if PENALTY_KEY not in data.batch.keys():  # noqa: SIM118 - TensorDict membership
        return original(data, adv_estimator, **kwargs)
    penalty = data.batch.pop(PENALTY_KEY)
    if str(getattr(adv_estimator, "value", adv_estimator)) != "grpo" or not norm_adv_by_std_in_grpo:
        data.batch["token_level_rewards"] = data.batch["token_level_rewards"] - penalty
        return original(data, adv_estimator, **kwargs)
    from verl.trainer.ppo import core_algos

    data = original(data, adv_estimator, **kwargs)
    kl_adv, _ = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=-penalty,
        response_mask=data.batch["response_mask"],
        index=data.non_tensor_batch["uid"],
        norm_adv_by_std_in_grpo=False,
    )
    data.batch["advantages"] = data.batch["advantages"] + kl_adv
    data.batch["returns"] = data.batch["returns"] + kl_adv
    data.batch["token_level_rewards"] = data.batch["token_level_rewards"] - penalty
    return data


# ----------------------------------------------------------------------------- loss side
def _native_actor_config(config: Any) -> Any:
    """The same verl actor config with ``use_kl_loss=False`` (cached; configs are frozen)."""
    hit = _NATIVE_ACTOR_CONFIGS.get(id(config))
    if hit is None or hit[0] is not config:
        hit = (config, dataclasses.replace(config, use_kl_loss=False))
        _NATIVE_ACTOR_CONFIGS[id(config)] = hit
    return hit[1]


def _ppo_loss(config: Any, model_output: Any, data: Any, dp_group: Any = None) -> tuple[Any, Any]:
    """verl's ``ppo_loss``; for the marker estimator the KL term is ``core.loss_term``."""
    original = _original("verl.workers.utils.losses", "ppo_loss")
    if not (config.use_kl_loss and config.kl_loss_type == MARKER):
        return original(config, model_output, data, dp_group=dp_group)
    spec = _require_active()
    cfg = spec.config
    if not cfg.has_loss:
        raise ValueError(
            f"actor.kl_loss_type={MARKER!r} but the kl-patches config {cfg} has no loss side; "
            "set actor_rollout_ref.actor.use_kl_loss=False"
        )
    if abs(float(config.kl_loss_coef) - cfg.loss_coef_value) > 1e-12 * max(
        1.0, cfg.loss_coef_value
    ):
        raise ValueError(
            f"actor.kl_loss_coef={config.kl_loss_coef} differs from the kl-patches loss "
            f"coefficient {cfg.loss_coef_value}; use the overrides from to_overrides()"
        )
    loss, metrics = original(_native_actor_config(config), model_output, data, dp_group=dp_group)
    from verl.utils.metric import Metric
    from verl.workers.utils.padding import no_padding_2_padding

    log_prob = no_padding_2_padding(model_output["log_probs"], data)
    batch = data.select("response_mask", "old_log_probs", "ref_log_prob").to_padded_tensor()
    mask = batch["response_mask"].bool()
    kl_loss = _aggregated_loss_term(log_prob, batch, mask, cfg, data)
    aggregation = metrics["actor/pg_loss"].aggregation
    metrics["kl_loss"] = Metric(
        value=kl_loss.detach() / cfg.loss_coef_value, aggregation=aggregation
    )
    metrics["kl_coef"] = cfg.loss_coef_value
    metrics["kl_patches/active"] = 1.0
    return loss + kl_loss, metrics


def _aggregated_loss_term(
    log_prob: torch.Tensor, batch: Any, mask: torch.Tensor, cfg: KLConfig, data: Any
) -> torch.Tensor:
    """``core.loss_term`` normalised by verl's global counts (dp size, tokens, sequences)."""
    dp_size = int(_get(data, "dp_size", 1) or 1)
    tokens = _get(data, "batch_num_tokens", None)
    sequences = _get(data, "global_batch_size", None)
    return core.loss_term(
        log_prob,
        batch["ref_log_prob"],
        mask,
        cfg,
        old_logp=batch["old_log_probs"],
        normalizer=None if tokens is None else float(tokens) / dp_size,
        num_sequences=None if sequences is None else float(sequences) / dp_size,
    )


def _get(data: Any, key: str, default: Any) -> Any:
    try:
        value = data[key]
    except KeyError:
        return default
    if isinstance(value, torch.Tensor):
        return value.item() if value.numel() == 1 else default
    return value
