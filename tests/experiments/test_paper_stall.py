"""The stall experiments: their loops are the reproduction's, their expectations the oracle's."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from kl_patches.config import KLConfig
from kl_patches.experiments import paper_stall as stall
from kl_patches.experiments.reproduce_train import (
    TabularModel,
    ToyTask,
    exact_metrics,
    make_toy,
    optimum,
    train,
)

SHORT = replace(stall.BASE, steps=15)


@pytest.mark.parametrize("config", ["k1-in-reward", "k3-in-loss"])
def test_sampled_loop_is_the_reproduction_update(config: str) -> None:
    cfg = KLConfig.parse(config, coef=stall.BETA)
    ref = train(config, cfg, stall.TASK, SHORT, seed=2, betas=(stall.BETA,))
    curve, _, rkl, fkl = stall.sampled_loop(make_toy(stall.TASK), cfg, SHORT, seed=2)
    assert curve == ref.objective(stall.BETA)
    assert (rkl, fkl) == (ref.reverse_kl[-1], ref.forward_kl[-1])


def test_tabular_copy_has_the_transformers_reference_distribution() -> None:
    problem = make_toy(stall.TASK)
    table = stall.tabular_copy(problem)
    assert isinstance(table.model, TabularModel)
    torch.testing.assert_close(table.ref_logp, problem.ref_logp, rtol=0, atol=1e-12)
    torch.testing.assert_close(
        table.model.all_token_logp().detach(), problem.ref_logp, rtol=0, atol=1e-12
    )
    assert optimum(table, stall.BETA) == pytest.approx(optimum(problem, stall.BETA), abs=1e-12)


@pytest.mark.parametrize("config", ["k1-in-reward", "k3-in-loss", "k3-in-reward", "k1-in-both"])
def test_expected_loss_is_the_oracles_expected_gradient(config: str) -> None:
    problem = make_toy(ToyTask(vocab=3, length=3, seed=4))
    model = problem.model
    assert isinstance(model, TabularModel)
    with torch.no_grad():  # away from the reference, where the configurations differ
        gen = torch.Generator().manual_seed(0)
        model.logits.add_(torch.randn(model.logits.shape, generator=gen, dtype=torch.float64))
    cfg = KLConfig.parse(config, coef=0.3)
    loss = stall.expected_loss(problem, model.all_token_logp(), cfg)
    (grad,) = torch.autograd.grad(loss, model.logits)
    ref_logits = problem.ref_model.logits  # type: ignore[union-attr]
    want = problem.enum.config_gradient(cfg, model.logits, ref_logits, problem.reward)
    torch.testing.assert_close(grad, want, rtol=1e-9, atol=1e-12)


def test_k1_in_reward_expectation_is_the_objective_gradient() -> None:
    problem = make_toy(stall.TASK)
    logp = problem.model.all_token_logp()
    cfg = KLConfig.parse("k1-in-reward", coef=stall.BETA)
    params = list(problem.model.parameters())
    loss = stall.expected_loss(problem, logp, cfg)
    got = torch.autograd.grad(loss, params, allow_unused=True, retain_graph=True)
    p = logp.sum(-1).exp()
    objective = (p * problem.reward).sum() - stall.BETA * (
        p * (logp.sum(-1) - problem.ref_logp.sum(-1))
    ).sum()
    want = torch.autograd.grad(-objective, params, allow_unused=True)
    for g, w in zip(got, want, strict=True):
        if w is not None:
            torch.testing.assert_close(g, w, rtol=1e-8, atol=1e-12)


def test_the_optimal_policy_scores_the_optimum_and_misses_nothing() -> None:
    problem = make_toy(stall.TASK)
    star = stall.optimal_policy(problem, stall.BETA)
    # a token log-prob table whose sequence sums are log pi*: put everything on the last token
    logp = problem.ref_logp.clone()
    logp[:, -1] += star.log() - logp.sum(-1)
    er, rkl, _ = exact_metrics(problem, logp)
    assert er - stall.BETA * rkl == pytest.approx(optimum(problem, stall.BETA), abs=1e-12)
    missing, ref_top = stall.mass_diagnostics(problem, logp, stall.BETA)
    assert missing == 0.0
    assert ref_top == pytest.approx(float(star[problem.ref_logp.sum(-1).topk(10).indices].sum()))


def test_the_plan_tests_each_named_cause() -> None:
    jobs = stall.jobs(seeds=2, long_steps=50)
    experiments = {j[1] for j in jobs}
    assert experiments == {"baseline", "lr", "updates", "batch", "exact", "tabular", "reference"}
    assert any(j[0] == "resume" for j in jobs) and any(j[7] for j in jobs)  # tabular runs
    out = stall.run_job(("exact", "exact", "x", "k1-in-reward", stall.TASK, SHORT, 0, False))
    assert out.objective <= out.optimum + 1e-12 and out.seed == 0
