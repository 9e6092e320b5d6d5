"""Exact checks: every KLConfig's expected gradient, from core, equals what theory names."""

from __future__ import annotations

import pytest
import torch

from kl_patches import core
from kl_patches.config import KLConfig, all_configs
from kl_patches.oracle import check_config, make_problem
from kl_patches.theory import verdict


@pytest.fixture(scope="module")
def problem():
    enum, logits, ref = make_problem(vocab=3, length=3, seed=0)
    return enum, logits, ref, enum.basis_gradients(logits, ref)


def test_full_grid_matches_theory(problem) -> None:
    enum, logits, ref, bases = problem
    failures = []
    for cfg in all_configs(coef=0.1):
        err, got, _ = check_config(cfg, enum, logits, ref, bases)
        if err > 1e-8:
            failures.append((str(cfg), err))
        v = verdict(cfg)
        if v.unbiased:
            target = cfg.coef * bases["reverse_kl"]
            assert float((got - target).norm() / target.norm()) < 1e-8, cfg
        elif cfg.coef > 0 and cfg.placement != "none" and v.gradient != "reverse_kl":
            target = cfg.coef * bases["reverse_kl"]
            assert float((got - target).norm() / target.norm()) > 1e-3, cfg
    assert not failures, failures


def test_bases_are_distinct_and_t1_identities() -> None:
    enum, logits, ref = make_problem(vocab=4, length=1, seed=3)
    b = enum.basis_gradients(logits, ref)
    # one token: token-level and sequence-level KLs coincide
    torch.testing.assert_close(b["forward_kl_token"], b["forward_kl"])
    torch.testing.assert_close(b["reverse_kl_partial"], b["reverse_kl"])
    enum3, logits3, ref3 = make_problem(vocab=3, length=3, seed=3)
    b3 = enum3.basis_gradients(logits3, ref3)
    assert float((b3["forward_kl_token"] - b3["forward_kl"]).norm()) > 1e-3
    assert float((b3["reverse_kl_partial"] - b3["reverse_kl"]).norm()) > 1e-3


def test_reverse_kl_gradient_matches_finite_differences() -> None:
    enum, logits, ref = make_problem(vocab=2, length=3, seed=5)
    g = enum.basis_gradient("reverse_kl", logits, ref)
    eps = 1e-6
    for idx in [(0, 0), (3, 1), (6, 0)]:
        plus, minus = logits.clone(), logits.clone()
        plus[idx] += eps
        minus[idx] -= eps
        fd = (enum.reverse_kl(plus, ref) - enum.reverse_kl(minus, ref)) / (2 * eps)
        assert float(fd) == pytest.approx(float(g[idx]), rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("name", ["k1-in-reward", "k3-in-both", "k3-in-loss"])
def test_reinforce_with_task_reward(problem, name: str) -> None:
    """-(R - penalty) * logp + loss_term: expected gradient = -grad E[R] + coef * named gradient."""
    enum, logits, ref, bases = problem
    r = torch.randn(
        enum.sequences.shape[0], generator=torch.Generator().manual_seed(7), dtype=torch.float64
    )
    cfg = KLConfig.parse(name, coef=0.3)
    got = enum.config_gradient(cfg, logits, ref, reward=r)
    theta = logits.clone().requires_grad_(True)
    expected_reward = (enum.token_logp(theta).sum(-1).exp() * r).sum()
    (grad_r,) = torch.autograd.grad(expected_reward, theta)
    want = -grad_r + enum.terms_gradient(verdict(cfg).terms, logits, ref, bases)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12)


def test_full_kl_sequence_sum_is_unbiased(problem) -> None:
    """E over sequences of sum_t full_kl(s_t) equals the exact sequence KL."""
    enum, logits, ref, _ = problem
    n, t = enum.sequences.shape
    lg = logits[enum.prefix_ids]  # [N, T, V]
    rl = ref[enum.prefix_ids]
    per_tok = core.full_kl(lg, rl, torch.ones(n, t, dtype=torch.bool))
    probs = enum.token_logp(logits).sum(-1).exp()
    est = (probs * per_tok.sum(-1)).sum()
    torch.testing.assert_close(est, enum.reverse_kl(logits, ref))
