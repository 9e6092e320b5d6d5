"""Patches for what verl 0.9.1 cannot express: ``apply(spec)`` / ``revert()``.

verl computes the reward KL in ``ray_trainer.apply_kl_penalty`` (TaskRunner process) and the
loss KL inside ``workers.utils.losses.ppo_loss`` (actor worker processes). Three functions are
wrapped, in their defining module and in every loaded ``verl`` module that imported them by
name (``v1.trainer_base``, ``v1.utils``, ``engine_workers``, ``distillation.losses``,
``experimental.separation.ray_trainer``, and any other loaded module, user code included, that
holds an original); modules imported later copy the wrapper:

* ``apply_kl_penalty``: when ``algorithm.kl_penalty`` is :data:`~.native.MARKER`, the penalty is
  ``kl_patches.core``'s (per token, or one sequence-level value on the last token), with the
  controller's coefficient; otherwise verl's own function runs unchanged.
* ``compute_advantage``: with ``kl_outside_std`` the sequence penalty is kept out of GRPO's
  score and added after the std normalisation, centred by verl's own GRPO estimator (no std).
* ``ppo_loss``: when ``kl_loss_type`` is the marker, verl's loss runs without its KL and the
  core's ``loss_term`` (importance weighting, sequence granularity, any aggregation) is added,
  normalised by verl's global batch counts like verl's ``agg_loss``.

Any other estimator name reaches verl's code untouched, so native configs behave natively while
the patch is applied. The originals live in one registry; ``apply`` twice is ``apply`` once.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from typing import Any

import torch

from kl_patches import core
from kl_patches.adapters.verl.native import MARKER, SUPPORTED_RANGE, PatchSpec
from kl_patches.config import KLConfig

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

PENALTY_KEY = "kl_patches_penalty"
"""Batch field carrying the sequence penalty from apply_kl_penalty to compute_advantage."""

_ORIGINALS: dict[str, Any] = {}
"""Registry: source qualname ``module:attr`` -> verl's original function."""
_PATCHED: dict[tuple[str, str], Any] = {}
"""Every ``(module, attr)`` this patch replaced -> the object that was there before."""
_ACTIVE: PatchSpec | None = None
_NATIVE_ACTOR_CONFIGS: dict[int, tuple[Any, Any]] = {}


class PatchNotActiveError(RuntimeError):
    """verl was asked for the kl-patches estimator in a process where the patch is not active."""


def _check_version() -> str:
    import verl
    from packaging.version import Version

    version = str(verl.__version__)
    low, high = (Version(v.lstrip("<>=")) for v in SUPPORTED_RANGE)
    if not low <= Version(version) < high:
        raise RuntimeError(
            f"kl_patches' verl patch supports verl {' '.join(SUPPORTED_RANGE)} (tested 0.9.1); "
            f"verl {version} is installed. Its KL hook points may differ: install "
            "verl==0.9.1, or use only native overrides (kl_patches.adapters.verl.to_overrides)."
        )
    return version


def apply(
    config: KLConfig | PatchSpec | str | dict[str, Any], *, kl_outside_std: bool = False
) -> PatchSpec:
    """Install the patch for ``config`` in this process (idempotent); returns the active spec.

    Calling it again with another config replaces the configuration, not the wrappers.
    """
    global _ACTIVE
    if isinstance(config, PatchSpec):
        spec = config
    else:
        spec = PatchSpec(KLConfig.coerce(config), kl_outside_std=kl_outside_std)
    _check_version()
    for (module_name, attr), wrapper_name in SOURCES.items():
        module = importlib.import_module(module_name)
        key = f"{module_name}:{attr}"
        current = getattr(module, attr, None)
        if current is None:
            raise RuntimeError(
                f"verl hook point {key} is missing; kl_patches supports verl "
                f"{' '.join(SUPPORTED_RANGE)}"
            )
        wrapper = globals()[wrapper_name]
        if key not in _ORIGINALS:
            _ORIGINALS[key] = current
        elif current is not wrapper and current is not _ORIGINALS[key]:
            raise RuntimeError(f"{key} was replaced by someone else since kl_patches patched it")
        _set(module, attr, wrapper)
    _patch_importers()
    _ACTIVE = spec
    check()
    return spec


def _set(module: Any, attr: str, value: Any) -> None:
    slot = (module.__name__, attr)
    if slot not in _PATCHED:
        _PATCHED[slot] = getattr(module, attr)
    setattr(module, attr, value)


def _wrappers() -> dict[int, Any]:
    """id(original) -> wrapper, for the functions in the registry."""
    out = {}
    for key, original in _ORIGINALS.items():
        wrapper_name = SOURCES[tuple(key.split(":"))]  # type: ignore[index]
        out[id(original)] = globals()[wrapper_name]
    return out


def _module_attrs() -> list[tuple[Any, str, Any]]:
    """(module, attr, value) for every loaded module's attributes (verl's and the user's)."""
    out = []
    for module in list(sys.modules.values()):
        if module is sys.modules[__name__]:
            continue  # the wrappers' own definitions
        try:
            items = list(vars(module).items())
        except TypeError:
            continue
        out += [(module, attr, value) for attr, value in items if callable(value)]
    return out


def _patch_importers() -> None:
    by_original = _wrappers()
    for module, attr, value in _module_attrs():
        wrapper = by_original.get(id(value))
        if wrapper is not None and any(value is o for o in _ORIGINALS.values()):
            _set(module, attr, wrapper)


def patched_symbols() -> dict[str, Any]:
    """``module:attr`` -> the object now there, for every symbol the patch replaced."""
    return {f"{m}:{a}": getattr(sys.modules[m], a) for (m, a) in _PATCHED if m in sys.modules}


def wrapper_names() -> dict[str, str]:
    """Source ``module:attr`` -> qualified name of its wrapper (for reports and tests)."""
    return {f"{m}:{a}": f"{__name__}.{w}" for (m, a), w in SOURCES.items()}


def check() -> PatchSpec:
    """Raise unless the patch is active and every loaded verl module holds the wrappers."""
    if _ACTIVE is None:
        raise PatchNotActiveError(_not_active_message())
    originals = {id(o) for o in _ORIGINALS.values()}
    stale = [f"{m.__name__}.{a}" for m, a, v in _module_attrs() if id(v) in originals]
    if stale:
        raise RuntimeError(f"kl_patches verl patch incomplete; still original: {sorted(stale)}")
    return _ACTIVE


def active() -> PatchSpec | None:
    """The active patch spec in this process, or None."""
    return _ACTIVE


def revert() -> None:
    """Restore every symbol the patch replaced, including in modules imported after apply."""
    global _ACTIVE
    wrappers = {id(globals()[w]): w for w in SOURCES.values()}
    originals = {SOURCES[tuple(k.split(":"))]: o for k, o in _ORIGINALS.items()}  # type: ignore[index]
    for (module_name, attr), before in _PATCHED.items():
        module = sys.modules.get(module_name)
        if module is not None:
            setattr(module, attr, before)
    for module, attr, value in _module_attrs() if originals else ():
        if id(value) in wrappers:
            setattr(module, attr, originals[wrappers[id(value)]])
    _PATCHED.clear()
    _NATIVE_ACTOR_CONFIGS.clear()
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
    return _ORIGINALS[f"{module_name}:{attr}"]


def _last_token_column(penalty: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``[B]`` values -> ``[B, T]`` with each value on its row's last valid token."""
    m = mask.bool()
    count = m.long().cumsum(-1)
    last = m & (count == count[:, -1:])
    return torch.where(
        last, penalty.unsqueeze(-1).to(mask.device), torch.zeros_like(penalty)[:, None]
    )


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
        penalty = _last_token_column(core.reward_penalty(old, ref, mask, cfg), mask)
        if spec.kl_outside_std:
            data.batch[PENALTY_KEY] = penalty
            data.batch["token_level_rewards"] = scores
        else:
            data.batch["token_level_rewards"] = scores - penalty
    seq_kl = core.sequence_kl(old.detach(), ref.detach(), mask, cfg)
    per_token_kl = (seq_kl / mask.sum(-1).clamp(min=1)).mean().item()
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
    old = batch["old_log_probs"]
    ref = batch["ref_log_prob"]
    if cfg.loss_aggregation == "token_mean":
        tokens = _get(data, "batch_num_tokens", None)
        normalizer = None if tokens is None else float(tokens) / dp_size
        return core.loss_term(log_prob, ref, mask, cfg, old_logp=old, normalizer=normalizer)
    value = core.loss_term(log_prob, ref, mask, cfg, old_logp=old)
    sequences = _get(data, "global_batch_size", None)
    if sequences is None:
        return value
    # core averages over the micro-batch's rows; verl over the global batch (x dp_size).
    return value * (mask.shape[0] * dp_size / float(sequences))


def _get(data: Any, key: str, default: Any) -> Any:
    try:
        value = data[key]
    except KeyError:
        return default
    if isinstance(value, torch.Tensor):
        return value.item() if value.numel() == 1 else default
    return value
