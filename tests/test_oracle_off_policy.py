"""Off-policy by exact enumeration: every sequence weighted by the behaviour policy mu(y).

The implementation route (kl_patches.core inside a REINFORCE or PPO-ratio trainer surrogate)
against coef * grad KL(pi || pi_ref), the on-policy theory terms, and the derived expression of
the clipped estimator (a sum over prefixes with the measure min(pi, c * mu), no core code).
"""

from __future__ import annotations

import functools

import pytest
import torch

from kl_patches.config import KLConfig, all_configs
from kl_patches.oracle import Enumeration, behaviour_policy, make_problem
from kl_patches.theory import expected_terms, verdict

FORMS = [False, True]
"""trainer_ratio: REINFORCE form, PPO-ratio form."""
DISTANCES = (0.5, 1.0, 2.0)
"""Noise scales of the behaviour policy's logits around pi's (KL(mu || pi) grows with them)."""
GRID = [(v, t, d) for v in (2, 3) for t in (1, 2, 3, 4) for d in DISTANCES]

UNBIASED_SEQUENCE = [
    KLConfig.parse("k1-in-reward", coef=0.1, importance_weighting="sequence"),
    KLConfig.parse(
        "k1-in-reward", coef=0.1, importance_weighting="sequence", reward_shape="reward_to_go"
    ),
    KLConfig.parse("k1-in-both", coef=0.1, importance_weighting="sequence"),
    KLConfig.parse("k3-in-both", coef=0.1, importance_weighting="sequence"),
    KLConfig.parse(
        "k3-in-both", coef=0.1, importance_weighting="sequence", reward_shape="reward_to_go"
    ),
]


@functools.cache
def _problem(
    v: int, t: int, d: float
) -> tuple[Enumeration, torch.Tensor, torch.Tensor, torch.Tensor]:
    enum, logits, ref = make_problem(vocab=v, length=t, seed=0)
    return enum, logits, ref, behaviour_policy(logits, d, seed=1)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def _distinct(configs: list[KLConfig]) -> list[KLConfig]:
    """Drop reward-only configs that differ only in the (unused) loss aggregation."""
    return [c for c in configs if c.placement != "reward" or c.loss_aggregation == "sum"]


@pytest.mark.parametrize(("v", "t", "d"), GRID)
def test_prefix_weighted_estimators_are_unbiased_off_policy(v: int, t: int, d: float) -> None:
    enum, logits, ref, mu = _problem(v, t, d)
    kl_mu = float(enum.reverse_kl(mu, logits))
    assert kl_mu > 1e-4  # mu really differs from pi
    target_unit = enum.basis_gradient("reverse_kl", logits, ref)
    for cfg in UNBIASED_SEQUENCE:
        assert verdict(cfg, off_policy=True).unbiased
        for form in FORMS:
            got = enum.off_policy_gradient(cfg, logits, ref, mu, trainer_ratio=form)
            assert _rel(got, cfg.coef * target_unit) < 1e-8, (cfg, form)


@pytest.mark.parametrize(("v", "t", "d"), GRID)
def test_unweighted_and_token_weighted_are_biased_off_policy(v: int, t: int, d: float) -> None:
    """Every none/token config that is unbiased on-policy misses grad KL off-policy."""
    enum, logits, ref, mu = _problem(v, t, d)
    target_unit = enum.basis_gradient("reverse_kl", logits, ref)
    grid = _distinct(
        [
            c
            for c in all_configs(coef=0.1)
            if c.importance_weighting != "sequence" and verdict(c).unbiased
        ]
    )
    assert len(grid) >= 10 and {c.importance_weighting for c in grid} == {"none"}
    # token weighting is never unbiased on-policy at sequence level: add its both-placements
    grid += [
        KLConfig.parse(n, coef=0.1, importance_weighting="token")
        for n in ("k1-in-both", "k3-in-both")
    ]
    smallest = float("inf")
    for cfg in grid:
        assert not verdict(cfg, off_policy=True).unbiased
        for form in FORMS:
            got = enum.off_policy_gradient(cfg, logits, ref, mu, trainer_ratio=form)
            smallest = min(smallest, _rel(got, cfg.coef * target_unit))
    assert smallest > 1e-3


@pytest.mark.parametrize(("v", "t", "d"), [(3, 3, 1.0), (2, 4, 2.0)])
def test_every_prefix_weighted_config_matches_theory_and_the_derived_expression(
    v: int, t: int, d: float
) -> None:
    """Unclipped: the off-policy expectation is the on-policy one (the verdict's terms at pi).
    Clipped or not: implementation = sum over prefixes with min(pi, c mu), in both forms."""
    enum, logits, ref, mu = _problem(v, t, d)
    bases = enum.basis_gradients(logits, ref)
    unit = float(bases["reverse_kl"].norm())
    grid = _distinct([c for c in all_configs(coef=0.1) if c.importance_weighting == "sequence"])
    assert {c.is_clip for c in grid} == {None, 2.0, 0.5}
    clip_bites = 0
    for cfg in grid:
        derived = enum.prefix_weighted_gradient(cfg, logits, ref, mu)
        scale = max(float(derived.norm()), max(cfg.coef, cfg.loss_coef_value) * unit)
        for form in FORMS:
            got = enum.off_policy_gradient(cfg, logits, ref, mu, trainer_ratio=form)
            assert float((got - derived).norm()) / scale < 1e-8, (cfg, form)
        theory = enum.terms_gradient(verdict(cfg, off_policy=True).terms, logits, ref, bases)
        gap = float((derived - theory).norm()) / scale
        if cfg.is_clip is None:
            assert gap < 1e-8, cfg
        else:
            clip_bites += gap > 1e-6
    assert clip_bites > 0  # the clips used do bind on these problems


def test_derived_expression_is_independent_of_mu_when_unclipped() -> None:
    """Unclipped, the derived sum never reads mu: it equals the on-policy bases directly."""
    enum, logits, ref, mu = _problem(3, 3, 2.0)
    cfg = KLConfig.parse("k3-in-reward", coef=0.2, importance_weighting="sequence")
    got = enum.prefix_weighted_gradient(cfg, logits, ref, mu)
    want = enum.terms_gradient(expected_terms(cfg), logits, ref)
    assert _rel(got, want) < 1e-12
    assert verdict(cfg, off_policy=True).gradient == "reverse_minus_forward_token"


@pytest.mark.parametrize("clip", [0.5, 1.0, 1.5, 3.0])
def test_clipped_bias_is_the_derived_one_and_vanishes_above_the_largest_weight(
    clip: float,
) -> None:
    enum, logits, ref, mu = _problem(3, 3, 1.0)
    target = 0.1 * enum.basis_gradient("reverse_kl", logits, ref)
    cfg = KLConfig.parse("k1-in-reward", coef=0.1, importance_weighting="sequence", is_clip=clip)
    derived = enum.prefix_weighted_gradient(cfg, logits, ref, mu)
    for form in FORMS:
        got = enum.off_policy_gradient(cfg, logits, ref, mu, trainer_ratio=form)
        assert _rel(got, derived) < 1e-8
    assert _rel(derived, target) > 1e-3  # c <= 3 binds on this problem
    # a clip above every prefix weight W = pi(y_1..u) / mu(y_1..u) never binds
    w_max = float((enum.token_logp(logits) - enum.token_logp(mu)).cumsum(-1).exp().max())
    above = cfg.replace(is_clip=w_max * 1.01)
    for form in FORMS:
        got = enum.off_policy_gradient(above, logits, ref, mu, trainer_ratio=form)
        assert _rel(got, target) < 1e-8


def test_on_policy_behaviour_reduces_to_the_on_policy_oracle() -> None:
    """mu = pi: the off-policy route of every config equals the on-policy route."""
    enum, logits, ref = make_problem(vocab=3, length=3, seed=0)
    for cfg in all_configs(coef=0.1)[::7]:
        on = enum.config_gradient(cfg, logits, ref)
        for form in FORMS:
            off = enum.off_policy_gradient(cfg, logits, ref, logits, trainer_ratio=form)
            torch.testing.assert_close(off, on, rtol=1e-9, atol=1e-13)


def test_ppo_form_with_task_reward_at_one_token() -> None:
    """T = 1: the PPO ratio is the whole sequence weight, so the PPO form of the trainer is
    unbiased for the task reward too, and the prefix-weighted KL keeps the total exact."""
    enum, logits, ref, mu = _problem(3, 1, 1.0)
    r = torch.randn(3, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    cfg = KLConfig.parse("k1-in-reward", coef=0.3, importance_weighting="sequence")
    got = enum.off_policy_gradient(cfg, logits, ref, mu, trainer_ratio=True, reward=r)
    theta = logits.clone().requires_grad_(True)
    (grad_r,) = torch.autograd.grad((enum.token_logp(theta).sum(-1).exp() * r).sum(), theta)
    want = -grad_r + 0.3 * enum.basis_gradient("reverse_kl", logits, ref)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12)
