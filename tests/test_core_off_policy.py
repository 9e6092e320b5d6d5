"""kl_patches.core off-policy: prefix weights, the importance-weighted penalty, the loss side.

Every value is checked against an explicit loop over tokens that forms the products of ratios
directly (the implementation sums logs); gradients are checked in tests/test_oracle_off_policy.py.
"""

from __future__ import annotations

import math

import pytest
import torch

from kl_patches import core
from kl_patches.config import KLConfig

SEQ = KLConfig(coef=0.3, importance_weighting="sequence")
RTG = SEQ.replace(reward_shape="reward_to_go")


def _batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Current, reference and behaviour log-probs [3, 5] and a mask with a hole in row 0."""
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(3, 5, generator=g, dtype=torch.float64) * 2
    ref = -torch.rand(3, 5, generator=g, dtype=torch.float64) * 2
    mu = -torch.rand(3, 5, generator=g, dtype=torch.float64) * 2
    mask = torch.tensor(
        [[1, 1, 0, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool
    )  # row 0: token 2 is not the policy's (a tool token): ratio 1, no KL term
    return logp, ref, mu, mask


def _loop_penalty(
    logp: torch.Tensor,
    ref: torch.Tensor,
    mu: torch.Tensor,
    mask: torch.Tensor,
    config: KLConfig,
    ratio_logp: torch.Tensor | None = None,
) -> torch.Tensor:
    """The documented formula, token by token, with products of ratios."""
    b, t = logp.shape
    out = torch.zeros(b, t, dtype=torch.float64)
    for i in range(b):
        valid = [u for u in range(t) if mask[i, u]]
        weight, w = 1.0, {}
        for u in valid:
            weight *= math.exp(float(logp[i, u] - mu[i, u]))
            w[u] = weight if config.is_clip is None else min(weight, config.is_clip)
        d = {u: float(logp[i, u] - ref[i, u]) for u in valid}
        k = {
            u: {"k1": d[u], "k2": 0.5 * d[u] ** 2, "k3": math.expm1(-d[u]) + d[u]}[config.estimator]
            for u in valid
        }
        for s in valid:
            p = sum(w[u] * k[u] for u in valid if u >= s)
            if config.reward_shape == "sequence":
                p += w[s] * sum(k[u] for u in valid if u < s)
            if ratio_logp is not None:
                p /= math.exp(float(logp[i, s] - ratio_logp[i, s]))
            out[i, s] = config.coef * p
    return out


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
@pytest.mark.parametrize("shape", ["sequence", "reward_to_go"])
@pytest.mark.parametrize("clip", [None, 1.5])
@pytest.mark.parametrize("trainer_ratio", [False, True])
def test_penalty_matches_the_formula(
    estimator: str, shape: str, clip: float | None, trainer_ratio: bool
) -> None:
    logp, ref, mu, mask = _batch()
    cfg = SEQ.replace(estimator=estimator, reward_shape=shape, is_clip=clip)
    got = core.reward_penalty(logp, ref, mask, cfg, behaviour_logp=mu, trainer_ratio=trainer_ratio)
    want = _loop_penalty(logp, ref, mu, mask, cfg, ratio_logp=mu if trainer_ratio else None)
    assert got.shape == (3, 5) and not got.requires_grad
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert (got[~mask] == 0).all()
    if clip is not None:  # the clip binds somewhere in this batch, else the case is idle
        unclipped = core.reward_penalty(
            logp, ref, mask, cfg.replace(is_clip=None), behaviour_logp=mu
        )
        assert not torch.allclose(got, unclipped)


def test_trainer_ratio_with_its_own_denominator() -> None:
    """PPO form: ratio_t * penalty_t gives back the REINFORCE-form penalty, for any ratio."""
    logp, ref, mu, mask = _batch()
    old = mu + 0.3  # an async trainer's recomputed pi_old, different from the sampler mu
    ppo = core.reward_penalty(
        logp, ref, mask, RTG, behaviour_logp=mu, trainer_ratio=True, ratio_logp=old
    )
    plain = core.reward_penalty(logp, ref, mask, RTG, behaviour_logp=mu)
    ratio = torch.exp(logp - old)
    torch.testing.assert_close(torch.where(mask, ratio * ppo, 0.0), plain, rtol=1e-12, atol=0)
    torch.testing.assert_close(
        ppo, _loop_penalty(logp, ref, mu, mask, RTG, ratio_logp=old), rtol=1e-12, atol=1e-12
    )


def test_on_policy_equals_the_unweighted_penalty() -> None:
    logp, ref, _, mask = _batch()
    rtg = core.reward_penalty(logp, ref, mask, RTG, behaviour_logp=logp)
    plain_rtg = core.reward_penalty(logp, ref, mask, RTG.replace(importance_weighting="none"))
    torch.testing.assert_close(rtg, plain_rtg, rtol=1e-14, atol=0)
    seq = core.reward_penalty(logp, ref, mask, SEQ, behaviour_logp=logp, trainer_ratio=True)
    plain_seq = core.reward_penalty(logp, ref, mask, SEQ.replace(importance_weighting="none"))
    want = torch.where(mask, plain_seq.unsqueeze(-1).expand(3, 5), 0.0)
    torch.testing.assert_close(seq, want, rtol=1e-14, atol=1e-15)


def test_other_configs_use_the_behaviour_log_probs() -> None:
    """Unweighted configs are computed from the sampler, as the libraries do."""
    logp, ref, mu, mask = _batch()
    for cfg in [KLConfig(), RTG.replace(importance_weighting="none")]:
        torch.testing.assert_close(
            core.reward_penalty(logp, ref, mask, cfg, behaviour_logp=mu, trainer_ratio=True),
            core.reward_penalty(mu, ref, mask, cfg),
        )


def test_prefix_log_weights() -> None:
    logp, _, mu, mask = _batch()
    lw = core.prefix_log_weights(logp, mu, mask)
    step = torch.where(mask, logp - mu, 0.0)
    torch.testing.assert_close(lw, torch.where(mask, step.cumsum(-1), 0.0))
    assert float(lw[0, 3]) == pytest.approx(float(step[0, 0] + step[0, 1] + step[0, 3]))
    clipped = core.prefix_log_weights(logp, mu, mask, is_clip=1.2)
    torch.testing.assert_close(clipped, lw.clamp(max=math.log(1.2)))


def test_loss_side_carries_detached_prefix_weights() -> None:
    logp, ref, mu, mask = _batch()
    cfg = KLConfig.parse("k3-in-both", coef=0.3, importance_weighting="sequence", is_clip=1.5)
    with pytest.raises(ValueError, match="old_logp"):
        core.loss_term(logp, ref, mask, cfg)
    w = core.prefix_log_weights(logp, mu, mask, is_clip=1.5).exp()
    terms = core.kl_terms(logp, ref, mask, cfg)
    torch.testing.assert_close(
        core.loss_per_token(logp, ref, mask, cfg, old_logp=mu), torch.where(mask, w * terms, 0.0)
    )
    lp = logp.clone().requires_grad_(True)
    core.loss_term(lp, ref, mask, cfg, old_logp=mu).backward()
    # d/dlogp of W * (exp(ref - logp) - 1 + logp - ref) with W held fixed: W * (1 - r)
    r = torch.exp(ref - logp)
    torch.testing.assert_close(lp.grad, torch.where(mask, 0.3 * w * (1 - r) / 3, 0.0))


def test_padding_garbage_changes_nothing() -> None:
    logp, ref, mu, mask = _batch()
    bad_lp, bad_ref, bad_mu = logp.clone(), ref.clone(), mu.clone()
    bad_lp[~mask], bad_ref[~mask], bad_mu[~mask] = float("-inf"), 123.0, float("nan")
    for cfg in [
        SEQ,
        RTG.replace(is_clip=2.0),
        KLConfig.parse("k3-in-both").replace(importance_weighting="sequence"),
    ]:
        for ratio in (False, True):
            a = core.reward_penalty(logp, ref, mask, cfg, behaviour_logp=mu, trainer_ratio=ratio)
            b = core.reward_penalty(
                bad_lp, bad_ref, mask, cfg, behaviour_logp=bad_mu, trainer_ratio=ratio
            )
            torch.testing.assert_close(a, b)
        lp1, lp2 = logp.clone().requires_grad_(True), bad_lp.clone().requires_grad_(True)
        core.loss_term(lp1, ref, mask, cfg, old_logp=mu).backward()
        core.loss_term(lp2, bad_ref, mask, cfg, old_logp=bad_mu).backward()
        assert lp1.grad is not None and lp2.grad is not None
        torch.testing.assert_close(lp1.grad, lp2.grad)
        assert torch.isfinite(lp2.grad).all() and (lp2.grad[~mask] == 0).all()


def test_long_rows_stay_finite_in_float32() -> None:
    """200 tokens at ratio e^2: the product of ratios (e^400) overflows float32, the capped
    log-space weight does not."""
    t = 200
    logp = torch.full((1, t), -1.0)
    mu, ref = logp - 2.0, logp - 0.5
    mask = torch.ones(1, t, dtype=torch.bool)
    assert not torch.isfinite(torch.exp(logp - mu).prod())
    cfg = RTG.replace(is_clip=10.0, coef=1.0)
    got = core.reward_penalty(logp, ref, mask, cfg, behaviour_logp=mu)
    assert got.dtype == torch.float32 and torch.isfinite(got).all()
    # token t: weights e^2, e^4, then 10 on every later token; each k1 = 0.5
    want_first = 0.5 * (math.exp(2) + 10.0 * (t - 1))
    assert float(got[0, 0]) == pytest.approx(want_first, rel=1e-5)
    assert float(got[0, -1]) == pytest.approx(0.5 * 10.0, rel=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_low_precision_inputs(dtype: torch.dtype) -> None:
    logp, ref, mu, mask = _batch()
    want = core.reward_penalty(logp, ref, mask, SEQ, behaviour_logp=mu, trainer_ratio=True)
    got = core.reward_penalty(
        logp.to(dtype), ref.to(dtype), mask, SEQ, behaviour_logp=mu.to(dtype), trainer_ratio=True
    )
    assert got.dtype == dtype
    tol = {torch.float32: 1e-5, torch.bfloat16: 5e-2}[dtype]
    torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol)


def test_errors_name_what_is_missing() -> None:
    logp, ref, mu, mask = _batch()
    with pytest.raises(ValueError, match="behaviour_logp"):
        core.reward_penalty(logp, ref, mask, SEQ)
    with pytest.raises(ValueError, match="importance_weighting='sequence'"):
        core.importance_weighted_penalty(logp, ref, mu, mask, KLConfig())
    with pytest.raises(ValueError, match="behaviour_logp shape"):
        core.reward_penalty(logp, ref, mask, SEQ, behaviour_logp=mu[:, :4])
    with pytest.raises(ValueError, match="ratio_logp shape"):
        core.reward_penalty(
            logp, ref, mask, SEQ, behaviour_logp=mu, trainer_ratio=True, ratio_logp=mu[:2]
        )
    with pytest.raises(ValueError, match="behaviour_logp shape"):
        core.reward_penalty(logp, ref, mask, KLConfig(), behaviour_logp=mu[:2])


def test_no_reward_side_gives_zeros() -> None:
    logp, ref, mu, mask = _batch()
    zero = core.reward_penalty(logp, ref, mask, SEQ.replace(coef=0.0), behaviour_logp=mu)
    assert zero.shape == (3, 5) and (zero == 0).all()
