"""Real OpenRLHF 0.11.2 code vs kl_patches.core for every configuration OpenRLHF runs natively.

For each natively expressible KLConfig, the flags from ``to_args`` are read back into the
OpenRLHF ``args`` the real code sees; OpenRLHF's numbers must equal the core's to 1e-6:
``compute_approx_kl`` (values and gradients), ``compute_reward`` plus the real
``compute_advantages_and_returns`` (the KL part of the returns is the core's reward-to-go
penalty, added after the group baseline), and the real ``ActorPPOTrainer.training_step`` (its
loss is the core's ``loss_term``, with OpenRLHF's clamp written as ``kl_clamp=10``).
"""

from __future__ import annotations

import pytest
from openrlhf_support.harness import activate

activate()

torch = pytest.importorskip("torch")
em = pytest.importorskip("openrlhf.trainer.ppo_utils.experience_maker")

from openrlhf.models import utils as orl_utils  # noqa: E402
from openrlhf_support.cases import (  # noqa: E402
    actor_batch,
    args_for,
    core_loss_and_grads,
    native_clamp,
    native_loss,
    native_reward,
    run_training_step,
)
from openrlhf_support.harness import (  # noqa: E402
    attach_kl_like_make_experience,
    make_experience,
    make_experience_maker,
    tiny_actor,
)

from kl_patches import KLConfig, core  # noqa: E402
from kl_patches.adapters.openrlhf import from_args, is_native, to_args  # noqa: E402
from kl_patches.adapters.openrlhf.versions import installed_version  # noqa: E402

RELEASE = installed_version() or "0"
ESTIMATORS = ("k1", "k2", "k3")
ADVANTAGES = ("rloo", "reinforce_baseline", "group_norm", "dr_grpo", "gae")


@pytest.fixture(scope="module")
def batch() -> dict[str, torch.Tensor]:
    """8 responses (2 prompts x 4 samples), 6 tokens, ragged padding, a few extreme log-ratios."""
    g = torch.Generator().manual_seed(0)
    logp = -torch.rand(8, 6, generator=g) * 3
    ref = logp + 0.5 * torch.randn(8, 6, generator=g)
    ref[0, 1] = logp[0, 1] + 12.0  # log-ratio -12: k1 and k3 hit OpenRLHF's clamp
    ref[3, 0] = logp[3, 0] - 11.0  # log-ratio +11: k1 and k2 hit it
    lengths = torch.tensor([6, 4, 5, 3, 6, 2, 4, 5])
    mask = torch.arange(6)[None, :] < lengths[:, None]
    rewards = torch.rand(8, generator=g)
    old = logp + 0.05 * torch.randn(8, 6, generator=g)
    return {"logp": logp, "ref": ref, "mask": mask, "rewards": rewards, "old": old}


def test_natively_expressible_configs_round_trip() -> None:
    """On the installed release, with its flag spelling and its clamp (none before 0.8.6)."""
    for est in ESTIMATORS:
        for config in (native_reward(est), native_loss(est)):
            assert is_native(config, RELEASE)
            assert from_args(to_args(config, RELEASE), RELEASE) == config
    off = KLConfig(placement="none", coef=0.0, kl_clamp=native_clamp())
    assert from_args(to_args(off, RELEASE), RELEASE) == off


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_compute_approx_kl_values_and_gradients(estimator: str, batch: dict) -> None:
    logp = batch["logp"].clone().requires_grad_(True)
    native = orl_utils.compute_approx_kl(logp, batch["ref"], kl_estimator=estimator)
    mask = batch["mask"]
    ours = core.kl_terms(logp, batch["ref"], mask, native_loss(estimator))
    torch.testing.assert_close(native * mask, ours, atol=1e-6, rtol=1e-6)
    (g_native,) = torch.autograd.grad((native * mask).sum(), logp)
    (g_ours,) = torch.autograd.grad(ours.sum(), logp)
    torch.testing.assert_close(g_native, g_ours, atol=1e-6, rtol=1e-6)
    # The clamp matters: with the other clamp (none from 0.8.6, +-10 before) the core differs
    # on the extreme tokens.
    other = 10.0 if native_clamp() is None else None
    elsewise = core.kl_terms(
        logp, batch["ref"], mask, native_loss(estimator).replace(kl_clamp=other)
    )
    assert not torch.allclose(native * mask, elsewise)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_unbiased_gradient_is_importance_weighted_k3(estimator: str, batch: dict) -> None:
    """``--algo.kl.unbiased_gradient``: gradient of pi/pi_old * k3, whatever the estimator."""
    config = from_args(
        ["--algo.kl.use_loss", "--algo.kl.unbiased_gradient", "--algo.kl.estimator", estimator]
    )
    assert (config.estimator, config.importance_weighting) == ("k3", "token")
    mask = batch["mask"]
    # Keep away from the clamps (IS weight <= 10, values within +-10) for this identity.
    ref = batch["logp"] + 0.3 * torch.randn(8, 6, generator=torch.Generator().manual_seed(1))
    logp = batch["logp"].clone().requires_grad_(True)
    native = orl_utils.compute_approx_kl(
        logp, ref, log_probs_old=batch["old"], kl_estimator=estimator, unbiased_gradient=True
    )
    (g_native,) = torch.autograd.grad((native * mask).sum(), logp)
    ours = core.loss_per_token(logp, ref, mask, config, old_logp=batch["old"])
    (g_ours,) = torch.autograd.grad(ours.sum(), logp)
    torch.testing.assert_close(g_native, g_ours, atol=1e-6, rtol=1e-6)


def _returns(maker: object, exps: list) -> list[torch.Tensor]:
    out = maker.compute_advantages_and_returns(exps)  # type: ignore[attr-defined]
    return [e.returns.clone() for e in out]


def _experiences(batch: dict, args: object, advantage: str) -> list:
    values = torch.zeros(8, 6) if advantage == "gae" else None
    # Two micro-batches, as split_rollout_samples would hand them over.
    exps = []
    for rows in (slice(0, 4), slice(4, 8)):
        idx = list(range(8))[rows]
        exp = make_experience(
            batch["rewards"][rows],
            batch["logp"][rows],
            batch["ref"][rows],
            batch["mask"][rows],
            idx,
            values=None if values is None else values[rows],
        )
        attach_kl_like_make_experience(exp, batch["ref"][rows], args)
        exps.append(exp)
    return exps


@pytest.mark.parametrize("advantage", ADVANTAGES)
@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_reward_kl_in_real_returns_is_core_reward_to_go(
    estimator: str, advantage: str, batch: dict
) -> None:
    """returns(with KL) - returns(KL off) == -core.reward_penalty(reward_to_go), every estimator.

    The KL-off run uses the same real code with ``init_coef 0`` (to_args of placement none), so
    the difference is exactly the KL's contribution; that it is the same whatever the group
    statistics shows the KL enters after the group baseline, unnormalised.
    """
    config = native_reward(estimator)
    on = args_for(config, advantage=advantage)
    off = args_for(KLConfig(placement="none", coef=0.0), advantage=advantage)
    with_kl = _returns(make_experience_maker(on), _experiences(batch, on, advantage))
    without = _returns(make_experience_maker(off), _experiences(batch, off, advantage))
    penalty = core.reward_penalty(batch["logp"], batch["ref"], batch["mask"], config)
    got = torch.cat(with_kl) - torch.cat(without)
    torch.testing.assert_close(got * batch["mask"], -penalty, atol=1e-6, rtol=1e-6)


def test_reward_off_returns_are_the_group_shaped_reward(batch: dict) -> None:
    """Sanity for the subtraction above: with KL off, group_norm returns are (R - mu) / sigma."""
    off = args_for(KLConfig(placement="none", coef=0.0), advantage="group_norm")
    got = torch.cat(_returns(make_experience_maker(off), _experiences(batch, off, "group_norm")))
    r = batch["rewards"].reshape(2, 4)
    shaped = ((r - r.mean(-1, keepdim=True)) / (r.std(-1, keepdim=True) + 1e-9)).reshape(8)
    torch.testing.assert_close(got, shaped[:, None] * batch["mask"], atol=1e-6, rtol=1e-6)


@pytest.fixture(scope="module")
def actor() -> object:
    return tiny_actor()


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_real_training_step_loss_is_core_loss_term(estimator: str, actor: object) -> None:
    config = native_loss(estimator)
    data = actor_batch()
    loss, grads, _, ref, old = run_training_step(actor, args_for(config), data)
    want, want_grads = core_loss_and_grads(actor, data, config, ref, old)
    assert want.abs() > 1e-4  # the KL term is not trivially zero
    torch.testing.assert_close(loss, want, atol=1e-6, rtol=1e-6)
    for a, b in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
