"""kl_patches.core.importance_weighted_surrogate: the loss-time form of the sequence weighting.

Its gradient w.r.t. the current log-probs is checked against the penalty written out token by
token (products of ratios), on-policy against the REINFORCE k1-in-reward estimator without a
baseline, and its exact expectation under a behaviour policy against coef * grad KL(pi || pi_ref)
by enumeration (kl_patches.oracle).
"""

from __future__ import annotations

import math

import pytest
import torch

from kl_patches import core
from kl_patches.config import KLConfig
from kl_patches.oracle import behaviour_policy, make_problem

SEQ = KLConfig(coef=0.3, importance_weighting="sequence")


def _batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(3, 5, generator=g, dtype=torch.float64) * 2
    ref = -torch.rand(3, 5, generator=g, dtype=torch.float64) * 2
    mu = -torch.rand(3, 5, generator=g, dtype=torch.float64) * 2
    mask = torch.tensor([[1, 1, 0, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    return logp, ref, mu, mask


def _loop_target(
    logp: torch.Tensor, ref: torch.Tensor, mu: torch.Tensor, mask: torch.Tensor, cfg: KLConfig
) -> torch.Tensor:
    """P_t of the docstring, token by token, k1, with products of ratios."""
    out = torch.zeros_like(logp)
    for i in range(logp.shape[0]):
        valid = [u for u in range(logp.shape[1]) if mask[i, u]]
        weight, w = 1.0, {}
        for u in valid:
            weight *= math.exp(float(logp[i, u] - mu[i, u]))
            w[u] = weight if cfg.is_clip is None else min(weight, cfg.is_clip)
        k = {u: float(logp[i, u] - ref[i, u]) for u in valid}
        for s in valid:
            p = sum(w[u] * k[u] for u in valid if u >= s)
            if cfg.reward_shape == "sequence":
                p += w[s] * sum(k[u] for u in valid if u < s)
            out[i, s] = cfg.coef * p
    return out


@pytest.mark.parametrize(
    "cfg",
    [SEQ, SEQ.replace(reward_shape="reward_to_go"), SEQ.replace(is_clip=1.5)],
    ids=["sequence", "reward_to_go", "clip"],
)
@pytest.mark.parametrize("num_sequences", [None, 7.0])
def test_gradient_is_the_penalty_over_the_sequence_count(
    cfg: KLConfig, num_sequences: float | None
) -> None:
    logp, ref, mu, mask = _batch()
    leaf = logp.clone().requires_grad_(True)
    out = core.importance_weighted_surrogate(leaf, ref, mu, mask, cfg, num_sequences=num_sequences)
    (grad,) = torch.autograd.grad(out, leaf)
    target = _loop_target(logp, ref, mu, mask, cfg)
    rows = 3.0 if num_sequences is None else num_sequences
    assert torch.allclose(grad, target / rows, atol=1e-12, rtol=0)
    assert float(out.detach()) == pytest.approx(float((logp * target).sum()) / rows, abs=1e-12)
    assert float(grad[~mask].abs().max()) == 0.0


def test_on_policy_gradient_is_reinforce_without_baseline() -> None:
    logp, ref, _, mask = _batch(1)
    leaf = logp.clone().requires_grad_(True)
    out = core.importance_weighted_surrogate(leaf, ref, logp, mask, SEQ)
    (grad,) = torch.autograd.grad(out, leaf)
    seq_k1 = ((logp - ref) * mask).sum(-1, keepdim=True)
    expected = SEQ.coef * seq_k1 * mask / 3.0  # d/d logp_t of mean_i sum_t logp_t * coef K_i
    assert torch.allclose(grad, expected, atol=1e-12, rtol=0)


def test_padding_and_no_reward_side() -> None:
    logp, ref, mu, mask = _batch(2)
    logp = logp.masked_fill(~mask, -math.inf)  # garbage on padding never leaks
    leaf = logp.clone().requires_grad_(True)
    out = core.importance_weighted_surrogate(leaf, ref, mu, mask, SEQ)
    (grad,) = torch.autograd.grad(out, leaf)
    assert math.isfinite(float(out.detach())) and bool(torch.isfinite(grad).all())
    off = KLConfig(placement="none")
    zero = core.importance_weighted_surrogate(leaf, ref, mu, mask, off)
    assert float(zero.detach()) == 0.0 and zero.requires_grad


@pytest.mark.parametrize(("v", "t", "d"), [(2, 3, 1.0), (3, 3, 2.0), (2, 4, 0.5)])
@pytest.mark.parametrize("shape", ["sequence", "reward_to_go"])
def test_expected_gradient_under_mu_is_coef_grad_kl(v: int, t: int, d: float, shape: str) -> None:
    """E_mu[grad surrogate] over every sequence = coef * grad KL(pi || pi_ref) (exact)."""
    enum, logits, ref_logits = make_problem(vocab=v, length=t, seed=0)
    mu_logits = behaviour_policy(logits, d, seed=1)
    cfg = SEQ.replace(reward_shape=shape)
    theta = logits.detach().clone().requires_grad_(True)
    logp = enum.token_logp(theta)
    ref = enum.token_logp(ref_logits)
    mu = enum.token_logp(mu_logits)
    mu_prob = mu.sum(-1).exp()
    mask = torch.ones_like(logp, dtype=torch.bool)
    total = theta.new_zeros(())
    for i in range(logp.shape[0]):  # one sequence at a time, weighted by mu(y)
        rows = slice(i, i + 1)
        total = total + mu_prob[i] * core.importance_weighted_surrogate(
            logp[rows], ref[rows], mu[rows], mask[rows], cfg
        )
    (got,) = torch.autograd.grad(total, theta, retain_graph=True)
    want = cfg.coef * enum.basis_gradient("reverse_kl", logits, ref_logits)
    assert float((got - want).norm() / want.norm()) < 1e-8
    # the unweighted REINFORCE form on mu's samples does not (so the check can fail)
    plain = theta.new_zeros(())
    for i in range(logp.shape[0]):
        rows = slice(i, i + 1)
        plain = plain + mu_prob[i] * core.importance_weighted_surrogate(
            logp[rows], ref[rows], logp[rows].detach(), mask[rows], cfg
        )
    (biased,) = torch.autograd.grad(plain, theta)
    assert float((biased - want).norm() / want.norm()) > 1e-3
