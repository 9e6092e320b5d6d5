"""``importance_weighting="sequence"`` in OpenRLHF 0.11.x: the reward-side KL in the actor's loss.

The per-decision prefix weights W_{1:u} = prod_{s<=u} pi/mu change at every update, so the
penalty cannot be fixed when the experience is made. For this option only, ``to_args`` passes
``--algo.kl.use_loss`` (OpenRLHF then keeps the reference log-probs in the experience and puts
no KL in the reward: the advantages are the task reward's), and the loss-side patches of
:mod:`.patch` call this module in ``ActorPPOTrainer.training_step``:

* ``ppo_actor.compute_approx_kl`` receives the current log-probs (with grad), the reference's
  (``base_action_log_probs``) and the behaviour policy's (``experience.action_log_probs``, the
  log-probs the experience maker computed for the sampled tokens); :func:`loss_values` keeps
  them for the aggregation;
* ``aggregate_loss`` of that tensor returns :func:`aggregate`:
  :func:`kl_patches.core.importance_weighted_surrogate` (REINFORCE form, sum_t log pi_t *
  sg(P_t) per sequence) over OpenRLHF's global sequence count per rank (``global_batch_size /
  dp_size``), so the micro-batches of an optimiser step add up to one mean over its sequences
  (the gradient of ``coef * KL``), plus, for placement ``both``, ``core.loss_term`` with the
  configured aggregation and OpenRLHF's global counts. Both carry their coefficients, so the
  training step multiplies by 1 instead of ``kl_ctl`` (which must equal ``coef``).

No baseline and no group normalisation apply to the KL part. Metrics (OpenRLHF's per-sample
status): ``kl`` (each sequence's KL estimate per token at the current policy, as the reward-side
patch logs it), ``kl_patches/reward_sequence_kl``, ``kl_patches/reward_penalty`` (P at the first
token), ``kl_patches/is_weight`` (each sequence's unclipped full prefix weight) and
``kl_patches/is_weight_max``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from kl_patches import core
from kl_patches.config import KLConfig


def active(config: KLConfig) -> bool:
    """True when the reward side runs at loss time: sequence weighting with a reward side."""
    return config.importance_weighting == "sequence" and config.has_reward


GAP = "importance_weighting='sequence' (the reward-side KL runs in the actor's loss)"
"""The reason :func:`~.translate.native_gaps` gives for the loss-side patches."""


@dataclass
class Inputs:
    """What one training step's ``compute_approx_kl`` saw, for its ``aggregate_loss``."""

    logp: torch.Tensor
    """Current policy log-probs (float32, with grad)."""
    ref: torch.Tensor
    """Reference log-probs (float32)."""
    behaviour: torch.Tensor
    """Behaviour policy log-probs (float32)."""
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)
    """Per-sample metrics computed by :func:`aggregate`."""


def check_coefficient(config: KLConfig, kl_ctl: float) -> float:
    """The ``kl_ctl`` the training step passes on (1: the terms carry their coefficients);
    raises unless OpenRLHF's coefficient is the config's ``coef``."""
    if abs(float(kl_ctl) - config.coef) > 1e-9 * max(1.0, config.coef):
        raise RuntimeError(
            f"kl_patches: importance_weighting='sequence' with coef={config.coef} but OpenRLHF's "
            f"KL coefficient is {kl_ctl} (an adaptive --algo.kl.target?); launch with "
            "--algo.kl.init_coef equal to coef and no target"
        )
    return 1.0


def loss_values(
    log_probs: torch.Tensor,
    log_probs_base: torch.Tensor,
    log_probs_old: torch.Tensor | None,
    mask: torch.Tensor,
    config: KLConfig,
) -> tuple[torch.Tensor, Inputs]:
    """The tensor handed back to OpenRLHF (detached per-token KL values) and the kept inputs."""
    if log_probs_old is None:
        raise RuntimeError(
            "kl_patches: importance_weighting='sequence' needs the behaviour log-probs "
            "(experience.action_log_probs) at loss time and OpenRLHF passed none"
        )
    logp = log_probs.float()
    ref, old = log_probs_base.float(), log_probs_old.float().detach()
    plain = config.replace(importance_weighting="none", is_clip=None, reward_shape="sequence")
    values = core.kl_terms(logp.detach(), ref, mask, plain)
    return values, Inputs(logp, ref, old)


def _first(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.bool()
    return (values * (m & (m.long().cumsum(-1) == 1))).sum(-1)


def aggregate(
    inputs: Inputs,
    mask: torch.Tensor,
    config: KLConfig,
    dp_size: int,
    batch_num_tokens: Any,
    global_batch_size: Any,
) -> torch.Tensor:
    """The reward side at loss time (and the loss side of ``both``), with coefficients."""
    m = mask.bool()
    sequences = None if global_batch_size is None else global_batch_size / dp_size
    out = core.importance_weighted_surrogate(
        inputs.logp, inputs.ref, inputs.behaviour, m, config, num_sequences=sequences
    )
    if config.has_loss:
        tokens = None if batch_num_tokens is None else batch_num_tokens / dp_size
        out = out + core.loss_term(
            inputs.logp,
            inputs.ref,
            m,
            config,
            old_logp=inputs.behaviour,
            normalizer=tokens if config.loss_aggregation == "token_mean" else None,
            num_sequences=None if config.loss_aggregation == "token_mean" else sequences,
        )
    current = inputs.logp.detach()
    penalty = core.importance_weighted_penalty(current, inputs.ref, inputs.behaviour, m, config)
    plain = config.replace(importance_weighting="none", is_clip=None, reward_shape="sequence")
    seq_kl = core.sequence_kl(current, inputs.ref, m, plain)
    last = m & (m.long().cumsum(-1) == m.long().sum(-1, keepdim=True))
    log_w = core.prefix_log_weights(current, inputs.behaviour, m)
    weight = (log_w * last).sum(-1).exp()
    inputs.metrics = {
        "kl": seq_kl / m.sum(-1).clamp(min=1),
        "kl_patches/reward_sequence_kl": seq_kl,
        "kl_patches/reward_penalty": _first(penalty, m),
        "kl_patches/is_weight": weight,
    }
    return out


def add_metrics(status: Any, inputs: Inputs | None) -> Any:
    """Put the step's metrics into the status ``training_step`` returns (per sample)."""
    if inputs is None or not isinstance(status, dict) or "metrics" not in status:
        return status
    for key, value in inputs.metrics.items():
        status["metrics"][key] = value.detach()
        status["weights"][key] = "sample"
    weight = inputs.metrics.get("kl_patches/is_weight")
    if weight is not None and weight.numel():
        status["metrics"]["kl_patches/is_weight_max"] = float(weight.max())
        status["weights"]["kl_patches/is_weight_max"] = None
    return status
