"""The hooks that put a :class:`~kl_patches.KLConfig` into TRL's GRPOTrainer and RLOOTrainer.

Each hook is a plain function ``hook(trainer, call, ...)`` where ``call`` is TRL's own method
bound to the trainer; the subclasses in :mod:`.trainers` and the in-place patch in
:mod:`.patching` both route through these functions, so the two ways in behave identically.

What changes against TRL 1.16 (and nothing else):

* TRL's ``beta`` only decides whether the reference model is built (so the PEFT "disable the
  adapter" trick and ``sync_ref_model`` keep working); its value is the KL coefficient and it is
  set to 0 while TRL's own loss runs, so TRL's k3 term (GRPO) is never added.
* Reward side: after TRL has scored a generation batch, the penalty from
  :func:`kl_patches.core.reward_penalty` is subtracted from the summed task reward *before* the
  group baseline, and the advantages are recomputed with TRL's own normalisation
  (:mod:`.advantages`). The penalty uses the sampling policy's log-probs: TRL's
  ``old_per_token_logps`` when it has them, otherwise one extra no-grad forward of the policy
  with TRL's own arguments. The reference forward is never repeated.
* Loss side: the differentiable log-probs of TRL's single loss forward are captured and
  :func:`kl_patches.core.loss_term` is added, reduced by ``KLConfig.loss_aggregation`` and
  scaled for gradient accumulation the way TRL scales its own loss.

Deviation on purpose: RLOO's native ``beta * sum_t k1`` is discarded when a KLConfig is given
(the reward-side penalty of the KLConfig replaces it; k1-in-reward reproduces it exactly).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from typing import Any

import torch

from kl_patches.adapters.base import check_supported
from kl_patches.config import KLConfig
from kl_patches.core import full_kl, kl_terms, loss_term, reward_penalty, sequence_kl

from .advantages import grpo_advantages, rloo_advantages, summed_rewards
from .canaries import DETECTED
from .versions import (
    GLOBAL_TOKEN_COUNT_LOSS_TYPES,
    GRPO_DEFAULTS,
    GRPO_LOSS_AGGREGATION,
    RLOO_DEFAULTS,
)

REF_KEY = "kl_ref_per_token_logps"
"""RLOO only: batch key under which the captured reference log-probs travel to the loss."""

OLD_KEY = "kl_old_per_token_logps"
"""RLOO only: batch key under which the sampling policy's log-probs travel to the loss."""

_NOT_TAKEN = (
    "kl_patches.trl: the {hook} hook did not run during {where}, so the KL regulariser would "
    "silently change. TRL's internals differ from the tested version; see "
    "kl_patches.adapters.trl.versions.SUPPORT."
)


class KLTrainerMixin:
    """Marker base of the kl-patches trainers; TRL's patched methods pass straight through for
    instances of it (their hooks already run once, in the subclass)."""

    _kl_config: KLConfig


def needs_reference(config: KLConfig) -> bool:
    """True when the config uses reference log-probs (a reward or a loss side)."""
    return config.has_reward or config.has_loss


def trl_beta(config: KLConfig) -> float:
    """The value given to TRL's ``beta``: non-zero exactly when a reference model is needed."""
    if not needs_reference(config):
        return 0.0
    return config.coef if config.has_reward else config.loss_coef_value


# ---------------------------------------------------------------------------------- construction
def prepare_args(kind: str, model: Any, args: Any, config: KLConfig) -> Any:
    """A copy of the trainer ``args`` with ``beta`` set for ``config``, after validation.

    ``kind`` is ``"GRPO"`` or ``"RLOO"``. ``args=None`` builds TRL's default config the way the
    trainer would.
    """
    import trl

    config_cls = trl.GRPOConfig if kind == "GRPO" else trl.RLOOConfig
    if args is None:
        name = model if isinstance(model, str) else model.config._name_or_path
        args = config_cls(f"{str(name).split('/')[-1]}-{kind}")
    else:
        args = copy.copy(args)
    validate(kind, args, config)
    beta = trl_beta(config)
    native_default = (GRPO_DEFAULTS if kind == "GRPO" else RLOO_DEFAULTS)["beta"]
    if args.beta not in (0.0, native_default, beta):
        warnings.warn(
            f"kl_patches.trl: {kind}Config.beta={args.beta} is replaced by the KL config "
            f"({config}); the KL coefficient is KLConfig.coef. Set beta to 0 to silence this.",
            UserWarning,
            stacklevel=4,
        )
    args.beta = beta
    return args


def validate(kind: str, args: Any, config: KLConfig) -> None:
    """Refuse settings the adapter cannot honour, naming the valid choices."""
    check_supported(config, "trl")
    import trl

    # TRL 1.0-1.13 route use_liger_kernel=True to GRPOTrainer.compute_liger_loss (a fused loss
    # that never calls _compute_loss); later releases have no such path. use_liger_loss is the
    # 0.17-0.27 spelling of the same switch.
    fused = kind == "GRPO" and callable(getattr(trl.GRPOTrainer, "compute_liger_loss", None))
    for flag in ("use_liger_loss", "use_liger_kernel" if fused else ""):
        if flag and getattr(args, flag, False) is True:
            raise ValueError(
                f"kl_patches.trl: {flag}=True computes a fused GRPO loss "
                "(GRPOTrainer.compute_liger_loss) with a hard-coded k3 term that bypasses the KL "
                f"hooks; set {flag}=False"
            )
    if kind == "GRPO":
        if config.has_reward and args.multi_objective_aggregation != "sum_then_normalize":
            raise ValueError(
                "kl_patches.trl: KL in the reward needs multi_objective_aggregation="
                f"'sum_then_normalize' (got {args.multi_objective_aggregation!r}): with "
                "'normalize_then_sum' each reward function is normalised on its own and the KL "
                "penalty has no defined place"
            )
        if config.has_loss and args.loss_type not in GRPO_LOSS_AGGREGATION:
            raise ValueError(
                f"kl_patches.trl: loss_type={args.loss_type!r} is unknown to the adapter; choose "
                f"one of {sorted(GRPO_LOSS_AGGREGATION)}"
            )
    elif config.has_reward and config.reward_shape == "reward_to_go":
        raise ValueError(
            "kl_patches.trl: RLOOTrainer's loss takes one advantage per sequence, so "
            "reward_shape='reward_to_go' cannot be expressed; use reward_shape='sequence' "
            "(same expected gradient) or GRPOTrainer"
        )


def init_state(trainer: Any, config: KLConfig, full_monitor: bool = False) -> None:
    """Attach the adapter's per-trainer state (before TRL's ``__init__`` runs).

    ``full_monitor`` logs ``kl/full_vocab``, the exact KL over the vocabulary summed over each
    completion (:func:`kl_patches.core.full_kl`): a low-variance monitor that costs one extra
    policy and one extra reference forward with full logits per generation batch.
    """
    trainer._kl_config = config
    trainer._kl_full_monitor = bool(full_monitor)
    trainer._kl_capture = None
    trainer._kl_rewards_per_func = None
    trainer._kl_loss_calls = 0


def after_init(trainer: Any, kind: str) -> None:
    """Checks and warnings that need the constructed trainer."""
    config: KLConfig = trainer._kl_config
    if trainer._kl_full_monitor and trainer.ref_model is None:
        raise ValueError(
            "kl_patches.trl: the full-vocabulary KL monitor needs a separate reference model: "
            "use a KL config with a reward or loss side (placement 'reward', 'loss' or 'both') "
            "and no PEFT adapter, or kl_full_monitor=False"
        )
    if kind == "GRPO" and config.has_reward and trainer.scale_rewards != "none":
        warnings.warn(
            f"kl_patches.trl: KL in the reward with scale_rewards={trainer.scale_rewards!r}: "
            "GRPO divides reward minus KL by the group (or batch) std, so each group's effective "
            f"coefficient is coef/std (coef={config.coef:g}); groups with a constant task reward "
            "get a pure, unit-scaled KL signal. For the paper's objective set "
            "scale_rewards='none'.",
            UserWarning,
            stacklevel=3,
        )


# ---------------------------------------------------------------------------------- small helpers
def _mode(trainer: Any) -> str:
    return "train" if trainer.model.training else "eval"


def _log(trainer: Any, name: str, value: float) -> None:
    trainer._metrics[_mode(trainer)][name].append(value)


def _global_mean(trainer: Any, values: torch.Tensor) -> float:
    return float(trainer.accelerator.gather(values.detach().float()).nanmean().item())


def _global_token_mean(trainer: Any, values: torch.Tensor, mask: torch.Tensor) -> float:
    m = mask.float()
    stats = torch.stack([(values.detach().float() * m).sum(), m.sum()])
    total = trainer.accelerator.reduce(stats, reduction="sum")
    return float((total[0] / total[1].clamp(min=1.0)).item())


def _loss_mask(batch: dict[str, Any]) -> torch.Tensor:
    mask = batch["completion_mask"]
    return mask * batch["tool_mask"] if "tool_mask" in batch else mask


def _run_capturing(
    trainer: Any, call: Callable[..., Any], *args: Any
) -> tuple[Any, list[tuple[tuple[Any, ...], dict[str, Any], torch.Tensor]], Any]:
    trainer._kl_capture = []
    trainer._kl_rewards_per_func = None
    try:
        out = call(*args)
    finally:
        calls = trainer._kl_capture
        trainer._kl_capture = None
    rewards = trainer._kl_rewards_per_func
    trainer._kl_rewards_per_func = None
    return out, calls, rewards


# ---------------------------------------------------------------------------------- shared hooks
def get_logps(trainer: Any, call: Callable[..., Any], args: tuple[Any, ...], kwargs: Any) -> Any:
    """``_get_per_token_logps_and_entropies``: record arguments and log-probs while capturing."""
    out = call(*args, **kwargs)
    capture = trainer.__dict__.get("_kl_capture")
    if capture is not None:
        capture.append((args, kwargs, out[0]))
    return out


def calculate_rewards(
    trainer: Any, call: Callable[..., Any], args: tuple[Any, ...], kwargs: Any
) -> Any:
    """``_calculate_rewards``: keep the gathered per-function rewards for the recompute."""
    rewards = call(*args, **kwargs)
    trainer._kl_rewards_per_func = rewards
    return rewards


def training_step(
    trainer: Any, call: Callable[..., Any], args: tuple[Any, ...], kwargs: Any
) -> Any:
    """``training_step``: fail loudly if TRL's loss bypassed the loss hook (fused paths)."""
    before = trainer._kl_loss_calls
    out = call(*args, **kwargs)
    if needs_reference(trainer._kl_config) and trainer._kl_loss_calls == before:
        raise RuntimeError(_NOT_TAKEN.format(hook="_compute_loss", where="a training step"))
    return out


def _policy_logps_again(trainer: Any, calls: list[Any]) -> torch.Tensor:
    """The sampling policy's log-probs: one no-grad forward with TRL's last scoring arguments."""
    if not calls:
        raise RuntimeError(
            _NOT_TAKEN.format(hook="_get_per_token_logps_and_entropies", where="scoring")
        )
    args, kwargs, _ = calls[-1]
    with torch.no_grad():
        out = trainer._get_per_token_logps_and_entropies(trainer.model, *args[1:], **kwargs)
    return out[0]


def _relog_advantages(trainer: Any, advantages: torch.Tensor) -> None:
    """Replace the advantages TRL just put in its completions table with the recomputed ones."""
    logged = getattr(trainer, "_logs", {}).get("advantages")
    if logged is None:
        return
    n = min(len(logged), advantages.numel())
    for _ in range(n):
        logged.pop()
    logged.extend(advantages[advantages.numel() - n :].tolist())


_MULTIMODAL = ("pixel_values", "image_grid_thw", "pixel_attention_mask", "image_sizes")


def _log_full_kl(trainer: Any, calls: list[Any], mask: torch.Tensor) -> None:
    """``kl/full_vocab``: mean over completions of sum_t KL(pi(.|s_t) || pi_ref(.|s_t))."""
    if not calls:
        raise RuntimeError(
            _NOT_TAKEN.format(hook="_get_per_token_logps_and_entropies", where="scoring")
        )
    args, kwargs, _ = calls[-1]
    if any(kwargs.get(k) is not None for k in _MULTIMODAL):
        raise ValueError("kl_patches.trl: the full-vocabulary KL monitor supports text-only models")
    ids, attention, keep = args[1], args[2], args[3]
    chunk = kwargs.get("batch_size", args[4] if len(args) > 4 else None) or ids.size(0)
    totals = []
    with torch.no_grad(), trainer.accelerator.autocast():
        for start in range(0, ids.size(0), chunk):
            rows = slice(start, start + chunk)
            logits = [
                model(input_ids=ids[rows], attention_mask=attention[rows]).logits[:, -keep - 1 : -1]
                / trainer.temperature
                for model in (trainer.model, trainer.ref_model)
            ]
            totals.append(full_kl(logits[0], logits[1], mask[rows]).sum(-1))
    _log(trainer, "kl/full_vocab", _global_mean(trainer, torch.cat(totals)))


def _local_slice(trainer: Any, batch_size: int) -> slice:
    rank = trainer.accelerator.process_index
    return slice(rank * batch_size, (rank + 1) * batch_size)


def _log_reward_side(
    trainer: Any, config: KLConfig, policy: torch.Tensor, ref: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Sequence penalty ``[B]`` (local) for ``config``; logs the estimate and the penalty."""
    seq_config = config.replace(reward_shape="sequence")
    penalty = reward_penalty(policy, ref, mask, seq_config)
    estimate = sequence_kl(policy.detach(), ref, mask, seq_config)
    _log(trainer, f"kl/{config.estimator}_reward", _global_mean(trainer, estimate))
    _log(trainer, "kl/reward_penalty", _global_mean(trainer, penalty))
    return penalty


# ---------------------------------------------------------------------------------- GRPO hooks
def grpo_generate_and_score(trainer: Any, call: Callable[..., Any], inputs: Any) -> Any:
    """``_generate_and_score_completions`` with the reward-side penalty before the baseline."""
    config: KLConfig = trainer._kl_config
    if not config.has_reward and not trainer._kl_full_monitor:
        return call(inputs)
    out, calls, rewards_per_func = _run_capturing(trainer, call, inputs)
    if trainer._kl_full_monitor:
        _log_full_kl(trainer, calls, _loss_mask(out))
    if not config.has_reward:
        return out
    if rewards_per_func is None:
        raise RuntimeError(_NOT_TAKEN.format(hook="_calculate_rewards", where="scoring"))
    ref = out.get("ref_per_token_logps")
    if ref is None:
        raise RuntimeError(
            "kl_patches.trl: GRPOTrainer returned no reference log-probs (is trainer.beta 0?); "
            "the KL config needs them"
        )
    mask = _loss_mask(out)
    policy = out.get("old_per_token_logps")
    if policy is None:
        policy = _policy_logps_again(trainer, calls)
    penalty_local = _log_reward_side(trainer, config, policy, ref, mask)
    penalty = trainer.accelerator.gather(penalty_local)
    num_generations = (
        trainer.num_generations if _mode(trainer) == "train" else trainer.num_generations_eval
    )
    rewards = summed_rewards(rewards_per_func, trainer.reward_weights)
    advantages, scale = grpo_advantages(rewards, penalty, num_generations, trainer.scale_rewards)
    _relog_advantages(trainer, advantages)
    local = _local_slice(trainer, out["completion_ids"].size(0))
    advantages, scale = advantages[local], scale[local]
    if config.reward_shape == "reward_to_go":
        to_go = reward_penalty(policy, ref, mask, config)
        # token t: reward minus the KL of tokens t..T, same (sequence-level) baseline and scale
        advantages = advantages.unsqueeze(1) + (
            penalty_local.unsqueeze(1) - to_go
        ) / scale.unsqueeze(1)
    out["advantages"] = advantages
    return out


def grpo_loss_scaling(
    trainer: Any, config: KLConfig, inputs: dict[str, Any]
) -> tuple[torch.Tensor | None, float]:
    """``(normalizer, divisor)`` so the KL term is scaled like TRL's own loss.

    A token mean under dapo/cispo/vespo divides by TRL's window-wide token count (which already
    includes gradient accumulation); everything else divides by the accumulation steps, as TRL
    does for its other loss types. Eval: no accumulation.
    """
    train = _mode(trainer) == "train"
    steps = trainer.current_gradient_accumulation_steps if train else 1
    if config.loss_aggregation == "token_mean" and trainer.loss_type in (
        GLOBAL_TOKEN_COUNT_LOSS_TYPES
    ):
        normalizer = inputs["num_items_in_batch"].clamp(min=1.0) / trainer.accelerator.num_processes
        if train and DETECTED.get("grpo.dapo_normaliser_ga_scaled", True):  # TRL >= 1.9.1
            normalizer = normalizer * steps / trainer.args.steps_per_generation
        return normalizer, 1.0
    return None, float(steps)


def grpo_compute_loss(trainer: Any, call: Callable[..., Any], model: Any, inputs: Any) -> Any:
    """``_compute_loss`` without TRL's k3 term, plus the KL config's loss-side term."""
    config: KLConfig = trainer._kl_config
    trainer._kl_loss_calls += 1
    if not needs_reference(config):
        return call(model, inputs)
    saved_beta = trainer.beta
    trainer.beta = 0.0
    trainer._kl_capture = [] if config.has_loss else None
    try:
        loss = call(model, inputs)
    finally:
        trainer.beta = saved_beta
        calls = trainer._kl_capture
        trainer._kl_capture = None
    if not config.has_loss:
        return loss
    if not calls:
        raise RuntimeError(
            _NOT_TAKEN.format(hook="_get_per_token_logps_and_entropies", where="the loss")
        )
    logp = calls[0][2]
    mask = _loss_mask(inputs)
    ref = inputs["ref_per_token_logps"]
    old = inputs.get("old_per_token_logps")
    old = logp.detach() if old is None else old
    normalizer, divisor = grpo_loss_scaling(trainer, config, inputs)
    term = loss_term(logp, ref, mask, config, old_logp=old, normalizer=normalizer)
    if divisor != 1.0:
        term = term / divisor
    values = kl_terms(logp.detach(), ref, mask, config)
    _log(trainer, f"kl/{config.estimator}_loss", _global_token_mean(trainer, values, mask))
    return loss + term


# ---------------------------------------------------------------------------------- RLOO hooks
def rloo_generate_and_score(trainer: Any, call: Callable[..., Any], inputs: Any) -> Any:
    """``_generate_and_score_completions`` with the KL config's penalty replacing TRL's k1."""
    config: KLConfig = trainer._kl_config
    if not needs_reference(config):
        return call(inputs)
    out, calls, rewards_per_func = _run_capturing(trainer, call, inputs)
    if rewards_per_func is None or len(calls) != 2:
        raise RuntimeError(
            _NOT_TAKEN.format(hook="_calculate_rewards/_get_per_token_logps", where="scoring")
        )
    policy, ref = calls[0][2], calls[1][2]
    mask = out["completion_mask"]
    if trainer._kl_full_monitor:
        _log_full_kl(trainer, calls, mask)
    if config.has_loss:
        out[REF_KEY] = ref
        out[OLD_KEY] = policy
    penalty_local = (
        _log_reward_side(trainer, config, policy, ref, mask)
        if config.has_reward
        else torch.zeros(mask.size(0), device=mask.device)
    )
    penalty = trainer.accelerator.gather(penalty_local)
    num_generations = (
        trainer.num_generations if _mode(trainer) == "train" else trainer.num_generations_eval
    )
    rewards = summed_rewards(rewards_per_func, trainer.reward_weights)
    advantages = rloo_advantages(
        rewards,
        penalty,
        num_generations,
        trainer.reward_clip_range,
        trainer.normalize_advantages,
    )
    _relog_advantages(trainer, advantages)
    out["advantages"] = advantages[_local_slice(trainer, out["completion_ids"].size(0))]
    return out


def rloo_compute_loss(trainer: Any, call: Callable[..., Any], model: Any, inputs: Any) -> Any:
    """``_compute_loss`` plus the KL config's loss-side term (RLOO's loss is per sequence and
    not pre-scaled for gradient accumulation, so neither is the term)."""
    config: KLConfig = trainer._kl_config
    trainer._kl_loss_calls += 1
    if not config.has_loss:
        return call(model, inputs)
    trainer._kl_capture = []
    try:
        loss = call(model, inputs)
    finally:
        calls = trainer._kl_capture
        trainer._kl_capture = None
    if not calls:
        raise RuntimeError(
            _NOT_TAKEN.format(hook="_get_per_token_logps_and_entropies", where="the loss")
        )
    logp = calls[0][2]
    mask = inputs["completion_mask"]
    ref, old = inputs[REF_KEY], inputs[OLD_KEY]
    term = loss_term(logp, ref, mask, config, old_logp=old)
    values = kl_terms(logp.detach(), ref, mask, config)
    _log(trainer, f"kl/{config.estimator}_loss", _global_token_mean(trainer, values, mask))
    return loss + term
