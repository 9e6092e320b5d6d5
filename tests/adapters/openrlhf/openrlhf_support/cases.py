"""Shared cases for the OpenRLHF tests: native configurations, OpenRLHF args, one training step.

Import after ``harness.activate()``; OpenRLHF itself is imported only inside the functions.
"""

from __future__ import annotations

from typing import Any

import torch
from openrlhf_support.harness import (
    actor_trainer,
    experience_class,
    installed,
    make_args,
    step_arguments,
)

from kl_patches import KLConfig, core
from kl_patches.adapters.openrlhf import to_args
from kl_patches.adapters.openrlhf.translate import parse_settings
from kl_patches.adapters.openrlhf.versions import native_kl_clamp

COEF = 0.1
"""The KL coefficient of every test (init_coef)."""


def native_clamp() -> float | None:
    """The installed release's clamp of the estimator values: 10 from 0.8.6, none before."""
    return native_kl_clamp(str(installed()))


def native_reward(estimator: str) -> KLConfig:
    """What the installed OpenRLHF runs for ``estimator`` without --algo.kl.use_loss."""
    return KLConfig(
        estimator=estimator,
        placement="reward",
        coef=COEF,
        reward_shape="reward_to_go",
        kl_clamp=native_clamp(),
    )


def native_loss(estimator: str) -> KLConfig:
    """What the installed OpenRLHF runs for ``estimator`` with --algo.kl.use_loss."""
    return KLConfig(
        estimator=estimator,
        placement="loss",
        coef=COEF,
        loss_aggregation="token_mean",
        kl_clamp=native_clamp(),
    )


def args_for(config: KLConfig, **kw: Any) -> Any:
    """OpenRLHF args as the real parser would set them from ``to_args(config)``."""
    settings, _ = parse_settings(to_args(config))
    return make_args(
        init_coef=settings["algo.kl.init_coef"],
        estimator=settings["algo.kl.estimator"],
        use_loss=settings["algo.kl.use_loss"],
        unbiased_gradient=settings["algo.kl.unbiased_gradient"],
        **kw,
    )


def actor_batch(seed: int = 0) -> dict[str, torch.Tensor]:
    """4 random sequences of 10 tokens, the last 6 the response, ragged padding."""
    g = torch.Generator().manual_seed(seed)
    sequences = torch.randint(0, 64, (4, 10), generator=g)
    attention_mask = torch.ones(4, 10, dtype=torch.long)
    action_mask = torch.tensor(
        [[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 0], [1, 1, 0, 0, 0, 0]],
        dtype=torch.bool,
    )
    attention_mask[1, 8:] = 0
    attention_mask[2, 9:] = 0
    attention_mask[3, 6:] = 0
    return {"sequences": sequences, "attention_mask": attention_mask, "action_mask": action_mask}


def run_training_step(
    actor: Any, args: Any, data: dict[str, torch.Tensor], seed: int = 1
) -> tuple[Any, ...]:
    """One real ``training_step`` with zero advantages: its loss is the KL term alone.

    Returns (loss recorded by the strategy, gradients, actor log-probs, ref and old log-probs).
    """
    Experience = experience_class()

    trainer = actor_trainer(actor, args)
    actor.zero_grad()
    with torch.no_grad():
        logp = actor(data["sequences"], data["action_mask"], attention_mask=data["attention_mask"])
    g = torch.Generator().manual_seed(seed)
    ref = logp + 0.4 * torch.randn(logp.shape, generator=g)
    old = logp + 0.05 * torch.randn(logp.shape, generator=g)
    exp = Experience(
        sequences=data["sequences"],
        attention_mask=data["attention_mask"],
        action_mask=data["action_mask"],
        action_log_probs=old,
        base_action_log_probs=ref,
        advantages=torch.zeros_like(logp),
        info={},
    )
    trainer.training_step(exp, COEF, *step_arguments())
    grads = [p.grad.clone() for p in actor.parameters()]
    return trainer.strategy.losses[-1], grads, logp, ref, old


def core_loss_and_grads(
    actor: Any,
    data: dict[str, torch.Tensor],
    config: KLConfig,
    ref: torch.Tensor,
    old: torch.Tensor,
) -> tuple[Any, ...]:
    """The core's ``loss_term`` on a fresh forward of ``actor``, and its gradients."""
    actor.zero_grad()
    logp = actor(data["sequences"], data["action_mask"], attention_mask=data["attention_mask"])
    loss = core.loss_term(logp, ref, data["action_mask"], config, old_logp=old)
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in actor.parameters()]
