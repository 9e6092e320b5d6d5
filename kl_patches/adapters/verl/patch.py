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
* ``compute_advantage``: with ``kl_outside_std`` GRPO's std normalisation sees the task score
  only; the sequence penalty, centred in its group as verl's GRPO without the std would, is
  added to the advantages afterwards.
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
import inspect
import os
import sys
from typing import Any

import torch

from kl_patches import core
from kl_patches.adapters import metrics as shared
from kl_patches.adapters.patching import PatchRegistry, Target, is_replacement, serialized
from kl_patches.config import KLConfig

from . import canaries, offpolicy
from .delivery import PatchSpec
from .versions import GRPO_LIKE, LOSS_PATCH, MARKER, SIGNATURES, SUPPORT

SOURCES: dict[tuple[str, str], str] = {
    ("verl.trainer.ppo.ray_trainer", "apply_kl_penalty"): "_apply_kl_penalty",
    ("verl.trainer.ppo.ray_trainer", "compute_advantage"): "_compute_advantage",
    ("verl.workers.utils.losses", "ppo_loss"): "_ppo_loss",
}
"""Defining module and name of each wrapped verl function -> the wrapper in this module."""

OPTIONAL_SOURCES: frozenset[str] = frozenset({"verl.workers.utils.losses"})
"""Modules of :data:`SOURCES` that verl < 0.7 does not have (its legacy actor adds the KL loss)."""

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
"""Batch field carrying minus the sequence penalty ``[B]`` from apply_kl_penalty (which has
placed it on each row's last token of ``token_level_rewards``) to compute_advantage (KL
outside GRPO's std), which adds its group-centred part to GRPO's advantages."""

REGISTRY = PatchRegistry("verl", f"kl_patches supports verl {SUPPORT.supported}")
"""The originals and wrappers of the patched verl functions."""

_ACTIVE: PatchSpec | None = None
_NATIVE_ACTOR_CONFIGS: dict[tuple[int, bool], tuple[Any, Any]] = {}


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
    then reaches every module that imported it. ``ppo_loss`` is left out where its module does
    not exist and the legacy actor computes the KL loss (verl 0.4-0.6): there is nothing to
    wrap, and a loss side that needs the patch is refused (:func:`_check_loss_site`).
    """
    out: dict[Target, str] = {}
    for (module, attr), wrapper in SOURCES.items():
        if attr in _BY_ATTR:
            out[_BY_ATTR[attr]] = wrapper
            continue
        if module in OPTIONAL_SOURCES and _absent(module) and _legacy_loss_site() is not None:
            continue  # verl < 0.7: the legacy actor is the only KL-loss site (_check_loss_site)
        function = vars(importlib.import_module(module)).get(attr)
        if not callable(function):
            raise RuntimeError(
                f"kl_patches.verl: {module} has no {attr}, a hook point the patch needs; "
                f"kl_patches supports verl {SUPPORT.supported}"
            )
        definer = getattr(function, "__module__", None) or module
        out[Target(definer, attr, propagate=True)] = wrapper
    return out


def _absent(module: str) -> bool:
    """True when the installed verl has no module ``module``."""
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


def _legacy_loss_site() -> str | None:
    """The module that computes the KL loss instead of ``ppo_loss``, if the installed verl has
    one (0.4-0.7: ``verl.workers.actor.dp_actor``)."""
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


@serialized
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


@serialized
def applied() -> list[str]:
    """The patched verl functions (checked on the live modules); empty when not applied."""
    return REGISTRY.applied()


@serialized
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
_UNSET: Any = object()
"""``multi_turn`` not passed (verl >= 0.5 has no such parameter)."""


@functools.lru_cache(maxsize=8)
def _takes(function: Any, parameter: str) -> bool:
    """True when ``function`` (a verl original) has a parameter named ``parameter``."""
    return parameter in inspect.signature(function).parameters


def _apply_kl_penalty(
    data: Any, kl_ctrl: Any, kl_penalty: str = "kl", multi_turn: Any = _UNSET
) -> tuple[Any, dict[str, Any]]:
    """verl's ``apply_kl_penalty`` with the core's penalty for the marker estimator.

    Each core quantity is computed once: the per-token terms (token granularity) or the
    sequence estimate, from which the penalty and both monitors follow. The response mask is
    read as the installed release reads it (:func:`_reward_mask`); ``multi_turn`` exists in
    verl 0.4.x only and is passed on only when given.
    """
    if kl_penalty != MARKER:
        original = _original("verl.trainer.ppo.ray_trainer", "apply_kl_penalty")
        if multi_turn is _UNSET:
            return original(data, kl_ctrl, kl_penalty)  # type: ignore[no-any-return]
        return original(data, kl_ctrl, kl_penalty, multi_turn=multi_turn)  # type: ignore[no-any-return]
    spec = _require_active()
    offpolicy.refuse_in_reward(spec.config)
    cfg = _reward_config(spec.config, float(kl_ctrl.value))
    if cfg.placement == "loss":
        raise ValueError(
            f"algorithm.kl_penalty={MARKER!r} but the kl-patches config {spec.config} has no "
            "reward side; set algorithm.use_kl_in_reward=False"
        )
    mask = _reward_mask(data, multi_turn)
    valid = mask.bool()  # the core's mask != 0, once for the one or two core calls below
    old, ref = _detached(data.batch["old_log_probs"]), _detached(data.batch["ref_log_prob"])
    scores = data.batch["token_level_scores"]
    weights = _float_mask(mask)
    counts = weights.sum(-1, keepdim=True)  # [B, 1] tokens per row: the metric and the placement
    if cfg.granularity == "token" and not spec.kl_outside_std:
        terms = core.kl_terms(old, ref, valid, cfg)
        seq_kl = terms.sum(-1)  # core.sequence_kl at token granularity
        data.batch["token_level_rewards"] = scores - cfg.coef * terms
    else:  # only the sequence values: one [B, T] reduction fewer than summing kl_terms
        seq_kl = core.sequence_kl(old, ref, valid, cfg)
        # minus the penalty: (-c) * x has the bits of -(c * x), so no separate negation
        if cfg.reward_shape == "sequence" and cfg.importance_weighting != "sequence":
            negative = seq_kl * -cfg.coef  # core.reward_penalty for this config, negated
        else:
            negative = core.reward_penalty(old, ref, valid, cfg).neg()
        data.batch["token_level_rewards"] = _plus_on_last_token(scores, negative, weights, counts)
        if spec.kl_outside_std:  # compute_advantage keeps it out of GRPO's std
            data.batch[PENALTY_KEY] = negative
    # core.per_token_kl: each row's estimate over its length; both means in one synchronisation
    per_row = seq_kl / counts.view(-1).clamp(min=1)
    per_token_kl, sequence_kl = torch.stack((per_row, seq_kl)).mean(-1).tolist()
    kl_ctrl.update(current_kl=per_token_kl, n_steps=data.batch.batch_size[0])
    metrics = {
        "actor/reward_kl_penalty": per_token_kl,
        "actor/reward_kl_penalty_coeff": cfg.coef,
        shared.REWARD_SEQUENCE_KL: sequence_kl,
        shared.REWARD_PENALTY: cfg.coef * sequence_kl,
        shared.ACTIVE: 1.0,
    }
    return data, metrics


def _reward_mask(data: Any, multi_turn: Any) -> torch.Tensor:
    """The response mask the installed ``apply_kl_penalty`` uses: ``response_mask`` (verl >=
    0.5), or, where it takes ``multi_turn`` (0.4.x), the response part of ``attention_mask``
    (``loss_mask`` for multi-turn data), as 0.4's ``ray_trainer.apply_kl_penalty`` slices it."""
    original = _original("verl.trainer.ppo.ray_trainer", "apply_kl_penalty")
    if not _takes(original, "multi_turn"):
        if multi_turn is not _UNSET:
            raise TypeError(
                "apply_kl_penalty() got multi_turn, which the installed verl's apply_kl_penalty "
                "does not take (verl 0.4.x only)"
            )
        return data.batch["response_mask"]  # type: ignore[no-any-return]
    length = data.batch["responses"].size(1)
    source = "loss_mask" if multi_turn is not _UNSET and multi_turn else "attention_mask"
    return data.batch[source][:, -length:]  # type: ignore[no-any-return]


def _detached(x: torch.Tensor) -> torch.Tensor:
    """``x`` without autograd history (no call when it has none: verl computes these log-probs
    without a graph)."""
    return x.detach() if x.requires_grad else x


@functools.lru_cache(maxsize=64)
def _reward_config(config: KLConfig, coef: float) -> KLConfig:
    """``config`` with the controller's ``coef`` and no loss coefficient (memoised: a fixed
    controller asks for the same one every step, and building a validated config costs more
    than the reward arithmetic of a small batch)."""
    return config.replace(coef=coef, loss_coef=None)


def _float_mask(mask: torch.Tensor) -> torch.Tensor:
    """The 0/1 ``mask`` as float32 (or float64); no copy when it already is one."""
    return mask if mask.dtype in (torch.float32, torch.float64) else mask.to(torch.float32)


@functools.lru_cache(maxsize=32)
def _odd_column(length: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``[length, 1]`` column of 2j + 1 (cached, view included; never written to)."""
    return _arange(1, 2 * length, 2, dtype, device).unsqueeze(-1)


@functools.lru_cache(maxsize=32)
def _arange(
    start: int, end: int, step: int, dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """``torch.arange(start, end, step)`` (cached: a few per response length; never written
    to)."""
    return torch.arange(start, end, step, dtype=dtype, device=device)


_EXACT_SUMS = 2**24
"""float32 adds integers exactly while every partial sum stays below this."""


def _last_positions(
    mask: torch.Tensor, buffer: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(index ``[B, 1]`` of each row's last valid position, ``[B, 1]`` whether the row has
    one) for a 0/1 ``mask``; 0 on a row without.

    :func:`_prefix_last_positions` when every row is right-padded, else
    :func:`_searched_last_positions` (written into ``buffer`` when given).
    """
    weights = _float_mask(mask)
    found = _prefix_last_positions(weights)
    return found if found is not None else _searched_last_positions(weights, buffer)


def _prefix_last_positions(
    weights: torch.Tensor, counts: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """:func:`_last_positions` of a float 0/1 mask whose rows are all right-padded (verl's
    single-turn response masks), from two read-only passes; None when a row is not, or the
    test cannot run exactly.

    A row of n valid tokens is the prefix 0..n-1 exactly when the sum of its
    (2 * position + 1) * mask is n * n (any other n distinct positions sum to more), and then
    its last valid index is n - 1 (``n - 0.5`` truncated toward zero, exact as n < 2**23:
    0 for an empty row, whose flag is False). Every count and sum is an integer below 2**24
    (float32; the test is skipped where it could exceed that), so the float arithmetic is
    exact; it runs on CPU with IEEE float32 matrix products only (elsewhere, and under reduced
    matmul precision, the caller searches). ``counts``: the caller's
    ``weights.sum(-1, keepdim=True)``.
    """
    length = weights.shape[-1]
    exact = weights.dtype == torch.float64 or length * length < _EXACT_SUMS
    if not (exact and weights.is_cpu and _ieee_matmul()):
        return None
    if counts is None:
        counts = weights.sum(-1, keepdim=True)
    odd = _odd_column(length, weights.dtype, weights.device)  # 2j + 1
    if not torch.equal(weights @ odd, counts * counts):
        return None
    return counts.sub(0.5).long(), counts > 0


def _searched_last_positions(
    weights: torch.Tensor, buffer: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_last_positions` of any float 0/1 mask (multi-turn masks with holes): the
    largest (position + 1) * mask (``amax``; ``argmax`` is 10x slower on CPU), written into
    ``buffer`` when given (a ``[B, T]`` tensor of the mask's float dtype that the caller
    overwrites next). Exact: the products are integers below 2**24."""
    length = weights.shape[-1]
    positions = _arange(1, length + 1, 1, weights.dtype, weights.device)
    product = (
        torch.mul(weights, positions, out=buffer) if buffer is not None else weights * positions
    )
    top = product.amax(-1, keepdim=True)
    # not the prefix test's top - 0.5 truncation: top reaches 2**24 here, past its exact range
    return top.long().sub_(1).clamp_(min=0), top > 0


def _ieee_matmul() -> bool:
    """True when a float32 matrix-vector product on CPU is computed in float32 (not in
    bfloat16 or TF32 after ``torch.set_float32_matmul_precision("medium")``)."""
    if torch.get_float32_matmul_precision() != "highest":
        return False
    mkldnn = getattr(getattr(torch.backends, "mkldnn", None), "matmul", None)
    return getattr(mkldnn, "fp32_precision", "ieee") in ("ieee", "none")


def _check_row_values(values: torch.Tensor, mask: torch.Tensor) -> None:
    if values.dim() != 1 or values.shape[0] != mask.shape[0]:
        raise ValueError(f"values must be [B] = [{mask.shape[0]}]; got shape {tuple(values.shape)}")


def _plus_on_last_token(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    counts: torch.Tensor | None = None,
) -> torch.Tensor:
    """``rewards + core.on_last_token(values, mask)`` as a new tensor, bit for bit (a copy of
    ``rewards`` with ``values`` added at each row's last valid token, and -0.0, which changes
    no bit, on a row without one), without building the placed ``[B, T]`` tensor and adding
    it: one ``[B, T]`` allocation (fresh pages cost more than the arithmetic on CPU), which
    first holds the last-position search when one is needed. The reward path passes minus the
    penalty: ``a + (-b)`` has the bits of ``a - b``. ``counts``: ``mask``'s row sums ``[B, 1]``
    as float, when the caller has them."""
    _check_row_values(values, mask)
    dtype = rewards.dtype
    if values.dtype != dtype:
        dtype = torch.promote_types(dtype, values.dtype)
    weights = _float_mask(mask)  # converted once: the searches take it as it is
    found = _prefix_last_positions(weights, counts)
    if found is not None:
        index, has = found
        out = rewards.to(dtype=dtype, memory_format=torch.contiguous_format, copy=True)
    else:
        out = torch.empty(rewards.shape, dtype=dtype, device=rewards.device)
        same = out.dtype == weights.dtype and out.device == weights.device
        index, has = _searched_last_positions(weights, out if same else None)
        out.copy_(rewards)
    if values.dtype != dtype or values.device != out.device:
        values = values.to(device=out.device, dtype=dtype)
    if index.device != out.device:
        index, has = index.to(out.device), has.to(out.device)
    return out.scatter_add_(1, index, torch.where(has, values.view(-1, 1), -0.0))


def _group_centred(values: torch.Tensor, index: Any, group: int = 0) -> torch.Tensor:
    """``values`` ``[B]`` minus the mean of its group (``index``: verl's ``uid`` per row), as a
    ``[B, 1]`` column.

    verl's GRPO advantage without the std (``compute_grpo_outcome_advantage(...,
    norm_adv_by_std_in_grpo=False)`` on a reward that sits on one token), vectorised: a group
    of one keeps its value, as in verl. When the rows come in contiguous blocks of ``group``
    (verl repeats each prompt ``rollout.n`` times in a row) with a distinct uid per block, the
    means are one reduction over a ``[B / group, group]`` view; otherwise the groups are found
    from the uids.
    """
    import numpy as np  # verl's dependency (its uids are a numpy array)

    keys = index.tolist() if isinstance(index, np.ndarray) else list(index)
    n = len(keys)
    if group > 1 and n % group == 0 and n == values.shape[0]:
        # list comparisons in C: faster here than numpy's object-array comparison; block i is
        # all firsts[i] exactly when every offset's slice keys[j::group] equals firsts
        firsts = keys[::group]
        if len(set(firsts)) == len(firsts) and all(
            keys[j::group] == firsts for j in range(1, group)
        ):
            rows = values.view(-1, group)
            return (rows - rows.mean(1, keepdim=True)).view(-1, 1)
    ids: dict[Any, int] = {}
    inverse = torch.tensor(
        [ids.setdefault(key, len(ids)) for key in keys], device=values.device, dtype=torch.long
    )
    counts = torch.bincount(inverse, minlength=len(ids))
    sums = torch.zeros(len(ids), dtype=values.dtype, device=values.device)
    sums.index_add_(0, inverse, values)
    means = torch.where(counts > 1, sums / counts.to(values.dtype), torch.zeros_like(sums))
    return (values - means[inverse]).view(-1, 1)


def _compute_advantage(data: Any, adv_estimator: Any, *args: Any, **kwargs: Any) -> Any:
    """verl's ``compute_advantage``; with ``kl_outside_std`` the KL skips GRPO's 1/std.

    ``apply_kl_penalty`` has already placed the penalty on each row's last token of
    ``token_level_rewards``. verl's GRPO runs once, on ``token_level_scores`` (put in the
    rewards' place for the call, the penalized rewards back afterwards); the penalty's
    group-centred part is then added to its advantages (:func:`_group_centred`), not through a
    second run of verl's per-row loop. ``grpo_vectorized`` takes the same route: verl's
    ``compute_advantage`` does not pass it ``norm_adv_by_std_in_grpo`` (0.6-0.9.1), so it always
    divides by the std (and were the flag passed, centring after a std-free GRPO is what GRPO on
    the penalized rewards gives). Other estimators, and ``grpo`` without the std, run on the
    penalized rewards.

    The arguments are passed on as given (the call shape differs by release: ``multi_turn``
    and ``**kwargs`` in 0.4.0, ``config`` from 0.4.1); ``num_repeat``,
    ``norm_adv_by_std_in_grpo`` and ``multi_turn`` are read by binding them to the installed
    function's signature.
    """
    original = _original("verl.trainer.ppo.ray_trainer", "compute_advantage")
    if PENALTY_KEY not in data.batch:  # (cheaper than popping a missing key)
        return original(data, adv_estimator, *args, **kwargs)
    negative = data.batch.pop(PENALTY_KEY)  # [B]: minus the sequence penalty
    bound = inspect.signature(original).bind(data, adv_estimator, *args, **kwargs)
    bound.apply_defaults()
    options = bound.arguments
    name = str(getattr(adv_estimator, "value", adv_estimator))
    if name not in GRPO_LIKE or (name == "grpo" and not options["norm_adv_by_std_in_grpo"]):
        # the rewards carry the whole penalty
        return original(data, adv_estimator, *args, **kwargs)
    # verl's GRPO on the task score alone; the penalized rewards go back afterwards
    penalized = data.batch["token_level_rewards"]
    data.batch["token_level_rewards"] = data.batch["token_level_scores"]
    try:
        data = original(data, adv_estimator, *args, **kwargs)
    finally:
        data.batch["token_level_rewards"] = penalized
    mask = data.batch["response_mask"]
    if options.get("multi_turn"):  # verl 0.4.x: GRPO's mask is the response part of loss_mask
        mask = data.batch["loss_mask"][:, -mask.size(1) :]
    uid = data.non_tensor_batch["uid"]
    # minus the centred penalty: centring is exact under negation ((-a) - mean(-a) has the
    # bits of -(a - mean(a))), so this adds the bits of subtracting the centred penalty
    centred = _group_centred(negative, uid, int(options["num_repeat"]))
    # in place: verl's GRPO has just made these tensors (no one else holds them) and returns one
    # tensor as both advantages and returns: one pass, no fresh [B, T] buffer
    advantages, returns = data.batch["advantages"], data.batch["returns"]
    advantages.addcmul_(centred, mask)
    if returns is not advantages:
        returns.addcmul_(centred, mask)
    return data


# ----------------------------------------------------------------------------- loss side
CAPTURE_LOSS_MODE = "kl_patches_capture"
"""Policy-loss name registered in verl's ``POLICY_LOSS_REGISTRY`` only while a marker
``ppo_loss`` runs: it records the padded log-probs verl hands its policy loss, then runs the
configured policy loss. The KL term reuses them, so the log-probs are re-padded once (by verl)."""

_CAPTURED: list[dict[str, Any]] = []
"""Per running marker ``ppo_loss`` call (a stack): the real loss mode, then the captured tensors."""


def _capturing_policy_loss(*args: Any, **kwargs: Any) -> Any:
    """The policy loss under :data:`CAPTURE_LOSS_MODE`: record, then run the real one."""
    if args or not _CAPTURED or "log_prob" not in kwargs:
        raise RuntimeError(
            f"kl_patches.verl: policy loss {CAPTURE_LOSS_MODE!r} called outside the patch's "
            "ppo_loss, or without keyword arguments; verl's ppo_loss differs from the supported "
            f"version ({SUPPORT.supported})"
        )
    slot = _CAPTURED[-1]
    slot["log_prob"] = kwargs["log_prob"]
    slot["response_mask"] = kwargs["response_mask"]
    slot["old_log_prob"] = kwargs["old_log_prob"]
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    return get_policy_loss_fn(slot["loss_mode"])(**kwargs)


def _native_actor_config(config: Any, capture: bool = True) -> Any:
    """The same verl actor config with ``use_kl_loss=False`` and, with ``capture``, the
    capturing policy loss (cached; configs are frozen)."""
    key = (id(config), capture)
    hit = _NATIVE_ACTOR_CONFIGS.get(key)
    if hit is None or hit[0] is not config:
        if not capture:
            hit = (config, dataclasses.replace(config, use_kl_loss=False))
            _NATIVE_ACTOR_CONFIGS[key] = hit
            return hit[1]
        policy = config.policy_loss
        if not dataclasses.is_dataclass(policy) or isinstance(policy, type):
            raise TypeError(
                f"kl_patches.verl: actor config policy_loss is {type(policy).__name__}, expected "
                "verl's PolicyLossConfig dataclass"
            )
        replaced = dataclasses.replace(policy, loss_mode=CAPTURE_LOSS_MODE)
        hit = (config, dataclasses.replace(config, use_kl_loss=False, policy_loss=replaced))
        _NATIVE_ACTOR_CONFIGS[key] = hit
    return hit[1]


def _ppo_loss(config: Any, model_output: Any, data: Any, dp_group: Any = None) -> tuple[Any, Any]:
    """verl's ``ppo_loss``; for the marker estimator the KL term is ``core.loss_term``.

    verl's loss runs without its KL; the padded log-probs, mask and behaviour log-probs it
    computed are captured from its policy-loss call (:data:`CAPTURE_LOSS_MODE`) and reused.
    """
    original = _original("verl.workers.utils.losses", "ppo_loss")
    if not (config.use_kl_loss and config.kl_loss_type == MARKER):
        return original(config, model_output, data, dp_group=dp_group)
    spec = _require_active()
    cfg = spec.config
    if offpolicy.active(cfg):  # the reward side at loss time (offpolicy.py)
        loss, metrics = original(
            _native_actor_config(config, capture=False), model_output, data, dp_group=dp_group
        )

        def loss_side(
            log_prob: torch.Tensor, batch: Any, mask: torch.Tensor, c: KLConfig, d: Any
        ) -> torch.Tensor:
            ref, old = batch["ref_log_prob"], batch["old_log_probs"]
            return _aggregated_loss_term(log_prob, ref, old, mask, c, d)

        return offpolicy.ppo_loss(loss, metrics, config, model_output, data, cfg, loss_side)
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
    if "ref_log_prob" not in data:
        raise KeyError(
            f"kl_patches.verl: actor.kl_loss_type={MARKER!r} needs ref_log_prob in the batch "
            "(the reference model is not enabled?)"
        )
    from verl.trainer.ppo import core_algos
    from verl.utils.metric import AggregationType, Metric

    registry = core_algos.POLICY_LOSS_REGISTRY
    previous = registry.get(CAPTURE_LOSS_MODE)
    registry[CAPTURE_LOSS_MODE] = _capturing_policy_loss
    _CAPTURED.append({"loss_mode": config.policy_loss.get("loss_mode", "vanilla")})
    try:
        loss, metrics = original(
            _native_actor_config(config), model_output, data, dp_group=dp_group
        )
    finally:
        slot = _CAPTURED.pop()
        if previous is None:
            registry.pop(CAPTURE_LOSS_MODE, None)
        else:
            registry[CAPTURE_LOSS_MODE] = previous
    if "log_prob" not in slot:
        raise RuntimeError(
            "kl_patches.verl: verl's ppo_loss did not call its policy loss, so the KL term "
            f"has no log-probs; verl differs from the supported version ({SUPPORT.supported})"
        )
    log_prob, mask = slot["log_prob"], slot["response_mask"].bool()
    ref = data.select("ref_log_prob").to_padded_tensor()["ref_log_prob"]
    kl_loss = _aggregated_loss_term(log_prob, ref, slot["old_log_prob"], mask, cfg, data)
    aggregation = metrics["actor/pg_loss"].aggregation
    metrics["kl_loss"] = Metric(
        value=kl_loss.detach() / cfg.loss_coef_value, aggregation=aggregation
    )
    metrics["kl_coef"] = cfg.loss_coef_value
    values = core.kl_terms(log_prob.detach(), ref, mask, cfg)  # the shared loss_kl metric
    metrics[shared.LOSS_KL] = Metric(
        value=values.sum() / mask.sum().clamp(min=1), aggregation=AggregationType.MEAN
    )
    metrics[shared.ACTIVE] = 1.0
    return loss + kl_loss, metrics


def _aggregated_loss_term(
    log_prob: torch.Tensor,
    ref: torch.Tensor,
    old: torch.Tensor,
    mask: torch.Tensor,
    cfg: KLConfig,
    data: Any,
) -> torch.Tensor:
    """``core.loss_term`` normalised by verl's global counts (dp size, tokens, sequences)."""
    dp_size = int(_get(data, "dp_size", 1) or 1)
    tokens = _get(data, "batch_num_tokens", None)
    sequences = _get(data, "global_batch_size", None)
    return core.loss_term(
        log_prob,
        ref,
        mask,
        cfg,
        old_logp=old,
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
