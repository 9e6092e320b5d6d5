"""TRL 1.16's advantage computations, re-run with a KL penalty from the core in the reward.

TRL exposes no function for its group normalisation, so these two functions copy what
``GRPOTrainer._generate_and_score_completions`` (``multi_objective_aggregation=
"sum_then_normalize"``) and ``RLOOTrainer._generate_and_score_completions`` do, line for line,
with one change: ``penalty`` (from :func:`kl_patches.core.reward_penalty`) is subtracted from
the summed reward *before* the group baseline. With a zero penalty both reproduce TRL's
advantages exactly (a regression test checks this on every supported TRL version).

Library behaviour kept on purpose: GRPO divides by the group (or batch) std plus 1e-4 when
``scale_rewards`` is not "none", so a reward-side KL is rescaled per group, like the task
reward; RLOO clips the task reward (``reward_clip_range``) before the penalty, as TRL does.
"""

from __future__ import annotations

import torch


def _nanstd(x: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    from trl.trainer.utils import nanstd

    return nanstd(x) if dim is None else nanstd(x, dim=dim)


def summed_rewards(rewards_per_func: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Weighted sum over reward functions; NaN for rows every function left unscored."""
    unscorable = torch.isnan(rewards_per_func).all(dim=1)
    rewards = (rewards_per_func * weights.to(rewards_per_func.device).unsqueeze(0)).nansum(dim=1)
    rewards[unscorable] = torch.nan
    return rewards


def grpo_advantages(
    rewards: torch.Tensor,
    penalty: torch.Tensor,
    num_generations: int,
    scale_rewards: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO advantages of ``rewards - penalty`` (all processes, ``[N]``).

    Returns ``(advantages, scale)``: ``scale`` is what each row was divided by (std + 1e-4, or 1
    when ``scale_rewards == "none"``), needed to spread a reward-to-go penalty over tokens.
    """
    rewards = rewards - penalty.to(rewards.dtype)
    mean = torch.nanmean(rewards.view(-1, num_generations), dim=1)
    mean = mean.repeat_interleave(num_generations, dim=0)
    if scale_rewards in ("group", "none"):
        if num_generations > 1:
            std = _nanstd(rewards.view(-1, num_generations), dim=1)
            std = std.repeat_interleave(num_generations, dim=0)
        else:
            std = torch.zeros_like(rewards)
    elif scale_rewards == "batch":
        std = (
            _nanstd(rewards).expand_as(rewards)
            if rewards.numel() > 1
            else torch.zeros_like(rewards)
        )
    else:
        raise ValueError(
            f"scale_rewards={scale_rewards!r} is not valid; "
            "choose one of ['group', 'batch', 'none']"
        )
    advantages = rewards - mean
    if scale_rewards != "none":
        scale = std + 1e-4
        advantages = advantages / scale
    else:
        scale = torch.ones_like(advantages)
    return torch.nan_to_num(advantages, nan=0.0), scale


def rloo_advantages(
    rewards: torch.Tensor,
    penalty: torch.Tensor,
    num_generations: int,
    reward_clip_range: tuple[float, float] | None,
    normalize_advantages: bool,
) -> torch.Tensor:
    """RLOO advantages of ``clip(rewards) - penalty`` with TRL's leave-one-out baseline."""
    if reward_clip_range:
        rewards = rewards.clamp(min=reward_clip_range[0], max=reward_clip_range[1])
    rewards = rewards - penalty.to(rewards.dtype)
    grouped = rewards.view(-1, num_generations)
    if num_generations > 1:
        counts = (~torch.isnan(grouped)).sum(dim=1, keepdim=True)
        total = torch.nansum(grouped, dim=1, keepdim=True)
        baselines = ((total - grouped) / (counts - 1)).view(-1)
        advantages = rewards - baselines
    else:
        advantages = torch.zeros_like(rewards)
    if normalize_advantages:
        advantages = (advantages - torch.nanmean(advantages)) / (_nanstd(advantages) + 1e-4)
    return torch.nan_to_num(advantages, nan=0.0)
