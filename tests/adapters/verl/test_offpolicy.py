"""importance_weighting='sequence' in verl 0.9.1: the reward-side KL runs in the actor's loss.

Through verl's real ``workers.utils.losses.ppo_loss`` (patched, with the actor config composed
from ``to_overrides``) over two micro-batches with verl's global counts: the loss minus verl's
KL-free loss has, on-policy (old_log_probs == current), the gradient of the k1-in-reward REINFORCE
estimator without baseline written out here, and off-policy that of sum_t log pi_t * P_t / B with
P_t from kl_patches.core on the same tensors (to 1e-6).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("verl")
sys.path.insert(0, str(Path(__file__).parent))

from verl.trainer.ppo import ray_trainer
from verl.workers.utils import losses
from verl_support.batches import (
    actor_config,
    make_rollout,
    ppo_loss_inputs,
    to_dataproto,
)
from verl_support.configs import overlay

from kl_patches import core
from kl_patches.adapters import verl as kv
from kl_patches.adapters.verl import patch, versions
from kl_patches.config import KLConfig

TOL = {"atol": 1e-6, "rtol": 1e-6}
COEF = 0.1
SEQ = KLConfig(coef=COEF, importance_weighting="sequence")
MICRO = (slice(0, 5), slice(5, 8))


@pytest.fixture(autouse=True)
def _reverted():  # type: ignore[no-untyped-def]
    patch.revert()
    yield
    patch.revert()


def actor_for(config: KLConfig, extra: tuple[str, ...] = ()) -> Any:
    from verl.utils.config import omega_conf_to_dataclass

    micro = "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4"
    return omega_conf_to_dataclass(
        overlay([*kv.to_overrides(config), micro, *extra]).actor_rollout_ref.actor
    )


def added_loss(config: KLConfig, r: Any, adv: torch.Tensor) -> tuple[torch.Tensor, list[Any]]:
    """Sum over the micro-batches of patched ppo_loss minus verl's own without KL."""
    kv.apply(config)
    actor = actor_for(config)
    plain = actor_config(loss_agg_mode=actor.loss_agg_mode)
    total = torch.zeros(())
    metrics = []
    for rows in MICRO:
        loss, m = losses.ppo_loss(actor, *ppo_loss_inputs(r, adv, rows))
        pg_only, _ = losses.ppo_loss(plain, *ppo_loss_inputs(r, adv, rows))
        total = total + (loss - pg_only)
        metrics.append(m)
    return total, metrics


def grad(value: torch.Tensor, leaf: torch.Tensor) -> torch.Tensor:
    (g,) = torch.autograd.grad(value, leaf, retain_graph=True)
    return g


# ----------------------------------------------------------------------------- overrides
@pytest.mark.parametrize(
    "cfg",
    [SEQ, SEQ.replace(reward_shape="reward_to_go", is_clip=2.0)],
    ids=["sequence", "rtg-clip"],
)
def test_overrides_move_the_reward_side_into_the_loss(cfg: KLConfig) -> None:
    overrides = kv.to_overrides(cfg)
    assert "algorithm.use_kl_in_reward=False" in overrides
    assert f"{versions.ACTOR}use_kl_loss=True" in overrides
    assert f"{versions.ACTOR}kl_loss_type={versions.MARKER}" in overrides
    assert not any("loss_agg_mode" in o for o in overrides)  # the policy loss keeps its own
    assert kv.from_config(overlay(overrides)) == cfg == kv.from_config(overrides)
    both = KLConfig.parse("k3-in-both", coef=COEF, importance_weighting="sequence")
    assert any("loss_agg_mode" in o for o in kv.to_overrides(both))
    with pytest.raises(ValueError, match="kl_outside_std"):
        kv.to_overrides(cfg, kl_outside_std=True)


# ----------------------------------------------------------------------------- gradients
def test_on_policy_is_reinforce_k1_without_baseline() -> None:
    r = make_rollout(seed=21)
    r.old_logp = r.logp.detach().clone()  # behaviour == current
    adv = torch.randn(r.mask.shape, generator=torch.Generator().manual_seed(1))
    total, metrics = added_loss(SEQ, r, adv)
    mask = r.mask.float()
    seq_k1 = ((r.logp.detach() - r.ref_logp) * mask).sum(-1, keepdim=True)
    expected = COEF * seq_k1 * mask / r.mask.shape[0]  # d/d logp of mean_i sum_t logp_t coef K_i
    got = grad(total, r.logp)
    assert float(expected.abs().max()) > 1e-3
    torch.testing.assert_close(got, expected, **TOL)
    assert all(m["kl_patches/is_weight_mean"].aggregate() == pytest.approx(1.0) for m in metrics)


@pytest.mark.parametrize(
    "cfg",
    [SEQ, SEQ.replace(reward_shape="reward_to_go"), SEQ.replace(is_clip=1.2)],
    ids=["sequence", "reward_to_go", "clip"],
)
def test_off_policy_is_the_core_target(cfg: KLConfig) -> None:
    r = make_rollout(seed=22)  # make_rollout's current log-probs differ from old_log_probs
    adv = torch.randn(r.mask.shape, generator=torch.Generator().manual_seed(2))
    total, metrics = added_loss(cfg, r, adv)
    target = core.importance_weighted_penalty(r.logp.detach(), r.ref_logp, r.old_logp, r.mask, cfg)
    b = r.mask.shape[0]
    torch.testing.assert_close(grad(total, r.logp), target * r.mask / b, **TOL)
    torch.testing.assert_close(total, (r.logp * target * r.mask).sum() / b, **TOL)
    on = core.importance_weighted_penalty(r.logp.detach(), r.ref_logp, r.logp, r.mask, cfg)
    assert float((on - target).abs().max()) > 1e-3  # the weights matter here
    assert max(m["kl_patches/is_weight_max"].aggregate() for m in metrics) > 1.0
    assert all("kl_patches/reward_sequence_kl" in m for m in metrics)


def test_both_adds_the_prefix_weighted_loss_side() -> None:
    cfg = KLConfig.parse("k3-in-both", coef=COEF, importance_weighting="sequence")
    r = make_rollout(seed=23)
    adv = torch.randn(r.mask.shape, generator=torch.Generator().manual_seed(3))
    total, metrics = added_loss(cfg, r, adv)
    reward_side = core.importance_weighted_surrogate(r.logp, r.ref_logp, r.old_logp, r.mask, cfg)
    loss_side = core.loss_term(r.logp, r.ref_logp, r.mask, cfg, old_logp=r.old_logp)
    torch.testing.assert_close(total, reward_side + loss_side, **TOL)
    torch.testing.assert_close(grad(total, r.logp), grad(reward_side + loss_side, r.logp), **TOL)
    assert float(grad(loss_side, r.logp).abs().max()) > 1e-3
    assert all("kl_loss" in m for m in metrics)


# ----------------------------------------------------------------------------- refusals
def test_without_reference_log_probs_says_so() -> None:
    kv.apply(SEQ)
    r = make_rollout(seed=24)
    out, data = ppo_loss_inputs(r, torch.zeros_like(r.old_logp))
    del data["ref_log_prob"]
    with pytest.raises(ValueError, match="importance_weighting='sequence' needs 'ref_log_prob'"):
        losses.ppo_loss(actor_for(SEQ), out, data)


def test_reward_time_penalty_is_refused() -> None:
    kv.apply(SEQ)
    r = make_rollout(seed=25)
    data = to_dataproto(r)
    from verl.trainer.ppo.core_algos import FixedKLController

    with pytest.raises(ValueError, match="use_kl_in_reward=False"):
        ray_trainer.apply_kl_penalty(data, FixedKLController(COEF), versions.MARKER)


def test_coefficient_mismatch_raises() -> None:
    kv.apply(SEQ)
    r = make_rollout(seed=26)
    out, data = ppo_loss_inputs(r, torch.zeros_like(r.old_logp))
    with pytest.raises(ValueError, match="kl_loss_coef"):
        losses.ppo_loss(actor_for(SEQ.replace(coef=0.3)), out, data)
