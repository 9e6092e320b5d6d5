"""``importance_weighting="sequence"`` in verl 0.9.1: the reward-side KL at loss time.

The per-decision prefix weights W_{1:u} = prod_{s<=u} pi/mu depend on the policy being updated,
so verl's ``apply_kl_penalty`` (run once per batch, before the PPO epochs and mini-batches)
cannot hold them. For this option only, :func:`overrides` keeps the KL out of the reward
(``algorithm.use_kl_in_reward=False``: the advantages are the task reward's) and switches the
actor's KL loss on with the marker estimator, so the patched ``ppo_loss`` adds, for every
micro-batch,

* :func:`kl_patches.core.importance_weighted_surrogate` (REINFORCE form, sum_t log pi_t *
  sg(P_t) per response) from the current log-probs of the actor's forward (``log_probs``, with
  grad), verl's ``old_log_probs`` (the behaviour policy: the log-probs recomputed at the start
  of the step, or the rollout's in bypass mode) and ``ref_log_prob``; summed per sequence and
  divided by verl's global sequence count per rank (``global_batch_size / dp_size``, as verl's
  ``seq-mean-token-sum``), so the micro-batches of a mini-batch add up to the mean over its
  sequences: the gradient of ``coef * KL``, not a token mean, whatever ``loss_agg_mode`` the
  policy loss uses;
* for placement ``both``, the loss side ``core.loss_term`` as for every other config.

No baseline and no GRPO std scaling apply to the KL part (a baseline is not unbiased under
samples from mu without a weight of its own). Metrics: ``kl_patches/reward_sequence_kl`` (the
sequence estimate at the current policy), ``kl_patches/reward_penalty`` (P at each response's
first token: the importance-weighted sequence KL times coef), ``kl_patches/is_weight_mean`` and
``kl_patches/is_weight_max`` (each response's unclipped full prefix weight).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from kl_patches import core
from kl_patches.config import KLConfig

from .versions import ACTOR, AGG_TO_VERL, MARKER


def active(config: KLConfig) -> bool:
    """True when the reward side runs at loss time: sequence weighting with a reward side."""
    return config.importance_weighting == "sequence" and config.has_reward


def loss_coefficient(config: KLConfig) -> float:
    """The ``kl_loss_coef`` verl is given under :func:`active`: the loss side's coefficient for
    placement ``both``, else the reward side's (which the patched loss then applies)."""
    return config.loss_coef_value if config.has_loss else config.coef


def overrides(config: KLConfig) -> list[str]:
    """The KL switches for :func:`active` configs (the patch spec is added by the caller)."""
    out = [
        "algorithm.use_kl_in_reward=False",
        f"{ACTOR}use_kl_loss=True",
        f"{ACTOR}kl_loss_type={MARKER}",
        f"{ACTOR}kl_loss_coef={loss_coefficient(config)!r}",
    ]
    if config.has_loss:  # verl shares loss_agg_mode with the policy loss: set only for 'both'
        out.append(f"{ACTOR}loss_agg_mode={AGG_TO_VERL[config.loss_aggregation]}")
    return out


def refuse_in_reward(config: KLConfig) -> None:
    """Raise when verl is asked to put an :func:`active` config's KL in the reward."""
    if active(config):
        raise ValueError(
            "kl_patches.verl: importance_weighting='sequence' computes the reward-side KL in "
            "the actor's loss (its prefix weights change at every update), not in "
            "apply_kl_penalty; set algorithm.use_kl_in_reward=False (to_overrides() does)"
        )


def _get(data: Any, key: str) -> Any:
    try:
        value = data[key]
    except KeyError:
        return None
    if isinstance(value, torch.Tensor):
        return value.item() if value.numel() == 1 else None
    return value


def _first_token(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    first = mask & (mask.long().cumsum(-1) == 1)
    return (values * first).sum(-1)


def ppo_loss(
    loss: torch.Tensor,
    metrics: dict[str, Any],
    actor_config: Any,
    model_output: Any,
    data: Any,
    config: KLConfig,
    loss_side: Callable[..., torch.Tensor],
) -> tuple[torch.Tensor, dict[str, Any]]:
    """Add the loss-time reward side (and the loss side of ``both``) to verl's KL-free loss.

    ``loss``/``metrics``: verl's ``ppo_loss`` without its KL; ``loss_side``: the patch's
    ``_aggregated_loss_term`` (core.loss_term with verl's global counts).
    """
    from verl.utils.metric import AggregationType, Metric
    from verl.workers.utils.padding import no_padding_2_padding

    want = loss_coefficient(config)
    if abs(float(actor_config.kl_loss_coef) - want) > 1e-12 * max(1.0, want):
        raise ValueError(
            f"actor.kl_loss_coef={actor_config.kl_loss_coef} differs from the kl-patches "
            f"coefficient {want} of {config}; use the overrides from to_overrides()"
        )
    for key in ("ref_log_prob", "old_log_probs"):
        if key not in data:
            raise ValueError(
                f"kl_patches.verl: importance_weighting='sequence' needs {key!r} in the actor's "
                "batch and verl passed none (no reference model, or old log-probs not "
                "computed); use to_overrides() (it turns the reference on) or "
                "importance_weighting='none'"
            )
    log_prob = no_padding_2_padding(model_output["log_probs"], data)
    batch = data.select("response_mask", "old_log_probs", "ref_log_prob").to_padded_tensor()
    mask = batch["response_mask"].bool()
    ref, old = batch["ref_log_prob"], batch["old_log_probs"]
    dp_size = int(_get(data, "dp_size") or 1)
    sequences = _get(data, "global_batch_size")
    term = core.importance_weighted_surrogate(
        log_prob,
        ref,
        old,
        mask,
        config,
        num_sequences=None if sequences is None else float(sequences) / dp_size,
    )
    total = loss + term
    current = log_prob.detach()
    penalty = core.importance_weighted_penalty(current, ref, old, mask, config)
    plain = config.replace(importance_weighting="none", is_clip=None, reward_shape="sequence")
    seq_kl = core.sequence_kl(current, ref, mask, plain)
    last = mask & (mask.long().cumsum(-1) == mask.long().sum(-1, keepdim=True))
    # each response's whole prefix weight W_{1:T} (unclipped), a measure of off-policyness
    weight = (core.prefix_log_weights(current, old, mask) * last).sum(-1).float().exp()
    mean = AggregationType.MEAN
    metrics["kl_patches/reward_sequence_kl"] = Metric(value=seq_kl.mean(), aggregation=mean)
    metrics["kl_patches/reward_penalty"] = Metric(
        value=_first_token(penalty, mask).mean(), aggregation=mean
    )
    metrics["kl_patches/is_weight_mean"] = Metric(value=weight.mean(), aggregation=mean)
    metrics["kl_patches/is_weight_max"] = Metric(
        value=weight.max() if weight.numel() else torch.ones(()),
        aggregation=AggregationType.MAX,
    )
    metrics["kl_patches/active"] = 1.0
    if config.has_loss:
        kl_loss = loss_side(log_prob, batch, mask, config, data)
        aggregation = metrics["actor/pg_loss"].aggregation
        metrics["kl_loss"] = Metric(
            value=kl_loss.detach() / config.loss_coef_value, aggregation=aggregation
        )
        metrics["kl_coef"] = config.loss_coef_value
        total = total + kl_loss
    return total, metrics
