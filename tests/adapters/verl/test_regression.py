"""Regression: verl 0.9.1's own KL code, configured by to_overrides, equals kl_patches.core.

For every configuration verl expresses natively:
* loss side: verl's ``kl_penalty`` + ``agg_loss`` (every estimator name x aggregation), and the
  KL part of the whole actor loss ``workers.utils.losses.ppo_loss`` built from verl's composed
  config, equal ``core.loss_term`` for ``from_config`` of that config (value and gradient);
* reward side: ``ray_trainer.apply_kl_penalty`` followed by the real advantage estimators
  (GRPO, RLOO, REINFORCE++, GAE) equals the same estimator fed the core's penalty.
verl's k3 clamps are part of the KLConfig read back (log_ratio_clamp=20, kl_clamp=10); one test
shows they matter by making them fire.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("verl")

sys.path.insert(0, str(Path(__file__).parent))

from verl.trainer.ppo import core_algos, ray_trainer

try:
    from verl.workers.utils import losses
except ImportError:  # verl < 0.7: no engine loss (its legacy actor computes the KL loss)
    losses = None
from verl_support.batches import (
    actor_config,
    last_token,
    make_rollout,
    ppo_loss_inputs,
    to_dataproto,
)
from verl_support.configs import NATIVE_LOSS, NATIVE_REWARD, native_overrides, overlay

from kl_patches import core
from kl_patches.adapters import verl as kv
from kl_patches.config import KLConfig

TOL = {"atol": 1e-6, "rtol": 1e-6}
VERL_AGG = {
    "sum": "seq-mean-token-sum",
    "token_mean": "token-mean",
    "seq_mean_token_mean": "seq-mean-token-mean",
}


def grad(value: torch.Tensor, leaf: torch.Tensor) -> torch.Tensor:
    (g,) = torch.autograd.grad(value, leaf)
    return g


# ----------------------------------------------------------------------------- loss side
@pytest.mark.parametrize("name", ["kl", "k1", "mse", "k2", "low_var_kl", "k3"])
@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"])
def test_kl_penalty_agg_loss_equals_core(name: str, mode: str) -> None:
    r = make_rollout(seed=1)
    overrides = [
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.kl_loss_coef=1",
        f"actor_rollout_ref.actor.kl_loss_type={name}",
        f"actor_rollout_ref.actor.loss_agg_mode={mode}",
    ]
    config = kv.from_config(overrides)
    native = core_algos.agg_loss(
        core_algos.kl_penalty(r.logp, r.ref_logp, name), r.mask.float(), mode
    )
    ours = core.loss_term(r.logp, r.ref_logp, r.mask, config)
    torch.testing.assert_close(native, ours, **TOL)
    torch.testing.assert_close(grad(native, r.logp), grad(ours, r.logp), **TOL)


@pytest.mark.parametrize("name", ["k1+", "k3+", "low_var_kl+", "k2+"])
def test_straight_through_names_take_k2_gradient(name: str) -> None:
    r = make_rollout(seed=2)
    overrides = [
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.kl_loss_coef=1",
        f"actor_rollout_ref.actor.kl_loss_type={name}",
    ]
    config = kv.from_config(overrides)
    assert config.estimator == "k2"
    native = core_algos.agg_loss(
        core_algos.kl_penalty(r.logp, r.ref_logp, name), r.mask.float(), "token-mean"
    )
    ours = core.loss_term(r.logp, r.ref_logp, r.mask, config)
    torch.testing.assert_close(grad(native, r.logp), grad(ours, r.logp), **TOL)


def test_k3_clamps_fire_and_are_read_back() -> None:
    """Log-ratios beyond 20 and k3 values beyond 10: verl equals the core only with its clamps."""
    r = make_rollout(seed=3, spread=12.0)
    name_cfg = kv.from_config(
        ["actor_rollout_ref.actor.use_kl_loss=True", "actor_rollout_ref.actor.kl_loss_coef=1"]
    )
    assert (name_cfg.log_ratio_clamp, name_cfg.kl_clamp) == (20.0, 10.0)
    native = core_algos.kl_penalty(r.logp, r.ref_logp, "low_var_kl") * r.mask
    torch.testing.assert_close(native, core.kl_terms(r.logp, r.ref_logp, r.mask, name_cfg), **TOL)
    unclamped = core.kl_terms(
        r.logp, r.ref_logp, r.mask, name_cfg.replace(log_ratio_clamp=None, kl_clamp=None)
    )
    assert (unclamped - native).abs().max() > 1.0


@pytest.mark.parametrize("config", NATIVE_LOSS, ids=str)
@pytest.mark.parametrize("dp_size", [1, 2])
def test_ppo_loss_kl_equals_core(config: KLConfig, dp_size: int) -> None:
    """The KL part of verl's whole actor loss, from verl's config with our overrides."""
    from verl.utils.config import omega_conf_to_dataclass

    cfg = overlay(
        [*native_overrides(config), "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4"]
    )
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    without_kl = actor_config(loss_agg_mode=actor.loss_agg_mode)
    read = kv.from_config(cfg)
    r = make_rollout(seed=4)
    adv = torch.randn(r.mask.shape, generator=torch.Generator().manual_seed(9))
    for rows in (slice(0, 3), slice(3, 8)):  # two micro-batches normalised by global counts
        out, data = ppo_loss_inputs(r, adv, rows, dp_size=dp_size)
        with_kl, _ = losses.ppo_loss(actor, out, data)
        out2, data2 = ppo_loss_inputs(r, adv, rows, dp_size=dp_size)
        pg_only, _ = losses.ppo_loss(without_kl, out2, data2)
        tokens = float(r.mask.sum()) / dp_size
        sub = r.mask[rows]
        expected = core.loss_term(r.logp[rows], r.ref_logp[rows], sub, read, normalizer=tokens)
        if read.loss_aggregation != "token_mean":
            expected = expected * sub.shape[0] * dp_size / r.mask.shape[0]
        torch.testing.assert_close(with_kl - pg_only, expected, **TOL)
        torch.testing.assert_close(
            grad(with_kl, r.logp) - grad(pg_only, r.logp), grad(expected, r.logp), **TOL
        )


# ----------------------------------------------------------------------------- reward side
def _native_advantage(config: KLConfig, adv_estimator: str, r, values=None):  # type: ignore[no-untyped-def]
    cfg = overlay([*kv.to_overrides(config), f"algorithm.adv_estimator={adv_estimator}"])
    kl_ctrl = core_algos.get_kl_controller(cfg.algorithm.kl_ctrl)
    data = to_dataproto(r, values)
    assert cfg.algorithm.use_kl_in_reward
    data, metrics = ray_trainer.apply_kl_penalty(data, kl_ctrl, kl_penalty=cfg.algorithm.kl_penalty)
    assert metrics["actor/reward_kl_penalty_coeff"] == config.coef
    data = ray_trainer.compute_advantage(
        data,
        adv_estimator,
        gamma=cfg.algorithm.gamma,
        lam=cfg.algorithm.lam,
        num_repeat=4,
        norm_adv_by_std_in_grpo=True,
        config=cfg.algorithm,
    )
    return data, kv.from_config(cfg)


def _reference_advantage(token_rewards: torch.Tensor, adv_estimator: str, r, values=None):  # type: ignore[no-untyped-def]
    """The same verl estimator with the KL switch off, fed rewards already shaped by the core."""
    cfg = overlay(["algorithm.use_kl_in_reward=False", f"algorithm.adv_estimator={adv_estimator}"])
    data = to_dataproto(r, values)
    data.batch["token_level_rewards"] = token_rewards
    return ray_trainer.compute_advantage(
        data,
        adv_estimator,
        gamma=1.0,
        lam=1.0,
        num_repeat=4,
        norm_adv_by_std_in_grpo=True,
        config=cfg.algorithm,
    )


@pytest.mark.parametrize("config", NATIVE_REWARD, ids=str)
@pytest.mark.parametrize("adv_estimator", ["grpo", "rloo"])
def test_sequence_estimators_equal_core_penalty(config: KLConfig, adv_estimator: str) -> None:
    r = make_rollout(seed=5)
    data, read = _native_advantage(config, adv_estimator, r)
    assert read.reward_shape == "sequence"
    penalty = core.reward_penalty(r.old_logp, r.ref_logp, r.mask, read)
    torch.testing.assert_close(data.batch["token_level_rewards"].sum(-1), r.score - penalty, **TOL)
    ref = _reference_advantage(last_token(r.score - penalty, r.mask), adv_estimator, r)
    torch.testing.assert_close(data.batch["advantages"], ref.batch["advantages"], **TOL)


@pytest.mark.parametrize("config", NATIVE_REWARD, ids=str)
@pytest.mark.parametrize("adv_estimator", ["reinforce_plus_plus", "gae"])
def test_reward_to_go_estimators_equal_core_penalty(config: KLConfig, adv_estimator: str) -> None:
    r = make_rollout(seed=6)
    values = torch.zeros_like(r.old_logp)  # GAE with V = 0, gamma = lam = 1: returns = reward-to-go
    data, read = _native_advantage(config, adv_estimator, r, values)
    assert read.reward_shape == "reward_to_go"
    to_go = core.reward_penalty(r.old_logp, r.ref_logp, r.mask, read)
    expected_returns = (r.score[:, None] - to_go) * r.mask
    torch.testing.assert_close(data.batch["returns"] * r.mask, expected_returns, **TOL)


def test_adaptive_controller_coefficient_is_the_read_coef() -> None:
    """With kl_ctrl.type=adaptive the first step uses kl_coef, which from_config reports."""
    config = KLConfig(estimator="k1", placement="reward", coef=0.2)
    cfg = overlay([*kv.to_overrides(config), "algorithm.kl_ctrl.type=adaptive"])
    kl_ctrl = core_algos.get_kl_controller(cfg.algorithm.kl_ctrl)
    assert kl_ctrl.value == kv.from_config(cfg).coef == 0.2
