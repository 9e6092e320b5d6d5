"""``importance_weighting="sequence"`` in TRL's GRPOTrainer and RLOOTrainer: the KL at loss time.

With per-decision importance weights the reward-side penalty of token t depends on the current
policy pi through the prefix weights W_{1:u} = prod_{s<=u} pi/mu, so it cannot be fixed at
generation time when TRL reuses a batch (``num_iterations > 1``, ``steps_per_generation >
gradient_accumulation_steps``). For this option only, the hooks therefore keep the KL out of the
advantages (TRL's advantages are those of the task reward alone) and add, at every loss call,
:func:`kl_patches.core.importance_weighted_surrogate` (REINFORCE form, ``sum_t log pi_t *
sg(P_t)`` per completion, mean over the completions), computed from

* the current policy's differentiable log-probs of TRL's own loss forward,
* the behaviour policy's log-probs: TRL's ``old_per_token_logps`` (GRPO) or the scoring
  forward's (RLOO); when GRPO has none (TRL skips them when every update is on-policy) the
  detached current log-probs, which are then the behaviour policy's,
* the reference log-probs TRL computed at scoring time.

Scaled for gradient accumulation like TRL's loss, the micro-batch terms of an optimiser step add
up to one mean over the step's completions (per process; DDP averages the processes), i.e. the
gradient of ``coef * KL`` estimated over the step, not a token mean. No baseline and no group
std scaling (a baseline is not unbiased under samples from mu without a weight of its own).

Logged, like the other KL metrics, in TRL's metrics: ``kl_patches/reward_sequence_kl`` (the
sequence estimate at the current policy), ``kl_patches/reward_penalty`` (P at each completion's
first token: the importance-weighted sequence KL times coef), ``kl_patches/is_weight_mean`` and
``kl_patches/is_weight_max``
(the unclipped prefix weight of each completion's last token).
"""

from __future__ import annotations

from typing import Any

import torch

from kl_patches import core
from kl_patches.adapters import metrics
from kl_patches.config import KLConfig


def active(config: KLConfig) -> bool:
    """True when the reward side runs at loss time: sequence weighting with a reward side."""
    return config.importance_weighting == "sequence" and config.has_reward


def no_penalty(mask: torch.Tensor) -> torch.Tensor:
    """The generation-time penalty ``[B]`` under :func:`active`: zero (the KL is in the loss)."""
    return torch.zeros(mask.size(0), dtype=torch.float32, device=mask.device)


def _mode(trainer: Any) -> str:
    return "train" if trainer.model.training else "eval"


def _log(trainer: Any, name: str, value: float) -> None:
    trainer._metrics[_mode(trainer)][name].append(value)


def _global_mean(trainer: Any, values: torch.Tensor) -> float:
    return float(trainer.accelerator.gather(values.detach().float()).nanmean().item())


def _first_token(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``[B]``: each row's value at its first valid token (0 for a row without one)."""
    m = mask.bool()
    first = m & (m.long().cumsum(-1) == 1)
    return (values * first).sum(-1)


def surrogate(
    trainer: Any,
    config: KLConfig,
    logp: torch.Tensor,
    ref: torch.Tensor | None,
    behaviour: torch.Tensor | None,
    mask: torch.Tensor,
    divisor: float,
) -> torch.Tensor:
    """The loss-time reward side for one micro-batch, divided by ``divisor``; logs its metrics.

    ``logp``: the current policy's differentiable log-probs; ``behaviour``: the sampling
    policy's (None: on-policy, the detached ``logp``); ``ref``: the reference's (None raises,
    naming the option).
    """
    if ref is None:
        raise ValueError(
            "kl_patches.trl: importance_weighting='sequence' needs the reference log-probs at "
            "loss time and the batch has none (no reference model: is TRL's beta 0?); use a "
            "KL config with coef > 0 or importance_weighting='none'"
        )
    behaviour = logp.detach() if behaviour is None else behaviour
    term = core.importance_weighted_surrogate(logp, ref, behaviour, mask, config)
    current = logp.detach()
    penalty = core.importance_weighted_penalty(current, ref, behaviour, mask, config)
    seq_config = config.replace(importance_weighting="none", is_clip=None, reward_shape="sequence")
    estimate = core.sequence_kl(current, ref, mask, seq_config)
    log_w = core.prefix_log_weights(current, behaviour, mask)
    last = log_w.gather(-1, (mask.long().cumsum(-1).argmax(-1, keepdim=True))).squeeze(-1)
    weights = last.float().exp()
    _log(trainer, metrics.REWARD_SEQUENCE_KL, _global_mean(trainer, estimate))
    _log(trainer, metrics.REWARD_PENALTY, _global_mean(trainer, _first_token(penalty, mask)))
    _log(trainer, metrics.IS_WEIGHT_MEAN, _global_mean(trainer, weights))
    _log(trainer, metrics.ACTIVE, 1.0)
    gathered = trainer.accelerator.gather(weights.detach())
    _log(trainer, metrics.IS_WEIGHT_MAX, float(gathered.max().item()) if gathered.numel() else 1.0)
    return term / divisor if divisor != 1.0 else term


def grpo_term(
    trainer: Any, config: KLConfig, logp: torch.Tensor, inputs: dict[str, Any], mask: torch.Tensor
) -> torch.Tensor:
    """GRPO: the loss-time reward side, scaled by the accumulation steps as TRL scales its loss
    (``grpo``/``bnpo``/``dr_grpo``/``luspo``; for ``dapo``/``cispo``/``vespo`` TRL divides by
    a window token count instead, but the sequence mean over the step is the same)."""
    steps = trainer.current_gradient_accumulation_steps if _mode(trainer) == "train" else 1
    return surrogate(
        trainer,
        config,
        logp,
        inputs.get("ref_per_token_logps"),
        inputs.get("old_per_token_logps"),
        mask,
        float(steps),
    )


def rloo_term(
    trainer: Any,
    config: KLConfig,
    logp: torch.Tensor,
    ref: torch.Tensor | None,
    behaviour: torch.Tensor | None,
    mask: torch.Tensor,
) -> torch.Tensor:
    """RLOO: the loss-time reward side (RLOO's loss is not pre-scaled for accumulation)."""
    return surrogate(trainer, config, logp, ref, behaviour, mask, 1.0)
