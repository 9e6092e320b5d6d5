"""kl_patches.core: estimator values, masks, dtypes, placements, full-vocabulary KL."""

from __future__ import annotations

import pytest
import torch

from kl_patches import core
from kl_patches.config import KLConfig


def _batch(dtype: torch.dtype = torch.float64, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(3, 5, generator=g, dtype=torch.float64) * 2
    ref = -torch.rand(3, 5, generator=g, dtype=torch.float64) * 2
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    return logp.to(dtype), ref.to(dtype), mask


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
def test_estimator_values(estimator: str) -> None:
    logp, ref, mask = _batch()
    vals = core.kl_terms(logp, ref, mask, KLConfig(estimator=estimator))
    d = logp - ref
    r = torch.exp(ref - logp)
    want = {"k1": d, "k2": 0.5 * d**2, "k3": r - 1 - torch.log(r)}[estimator]
    torch.testing.assert_close(vals[mask], want[mask])
    assert (vals[~mask] == 0).all()


def test_padding_changes_nothing() -> None:
    logp, ref, mask = _batch()
    garbage_logp, garbage_ref = logp.clone(), ref.clone()
    garbage_logp[~mask] = float("-inf")
    garbage_ref[~mask] = 123.0
    for name in ["k1-in-reward", "k3-in-loss", "k2-in-both"]:
        for extra in [{}, {"granularity": "sequence"}, {"loss_aggregation": "token_mean"}]:
            if "reward" in name and extra.get("granularity"):
                extra = {**extra, "reward_shape": "sequence"}
            cfg = KLConfig.parse(name, **extra)
            a = core.reward_penalty(logp, ref, mask, cfg)
            b = core.reward_penalty(garbage_logp, garbage_ref, mask, cfg)
            torch.testing.assert_close(a, b)
            lp1 = logp.clone().requires_grad_(True)
            lp2 = garbage_logp.clone().requires_grad_(True)
            l1 = core.loss_term(lp1, ref, mask, cfg, old_logp=logp)
            l2 = core.loss_term(lp2, garbage_ref, mask, cfg, old_logp=logp)
            torch.testing.assert_close(l1, l2)
            l1.backward()
            l2.backward()
            torch.testing.assert_close(lp1.grad, lp2.grad)
            assert torch.isfinite(lp2.grad).all()
            assert (lp2.grad[~mask] == 0).all()


def test_padding_equals_truncation() -> None:
    """A padded row gives the same numbers as the same row alone without padding."""
    logp, ref, mask = _batch()
    cfg = KLConfig.parse("k3-in-both", reward_shape="sequence", loss_aggregation="sum")
    full = core.reward_penalty(logp, ref, mask, cfg)
    alone = core.reward_penalty(logp[1:2, :3], ref[1:2, :3], mask[1:2, :3], cfg)
    torch.testing.assert_close(full[1:2], alone)
    rtg = KLConfig.parse("k1-in-reward", reward_shape="reward_to_go")
    torch.testing.assert_close(
        core.reward_penalty(logp, ref, mask, rtg)[1:2, :3],
        core.reward_penalty(logp[1:2, :3], ref[1:2, :3], mask[1:2, :3], rtg),
    )


def test_reward_penalty_shapes_and_values() -> None:
    logp, ref, mask = _batch()
    cfg = KLConfig(coef=0.3)
    seq = core.reward_penalty(logp, ref, mask, cfg)
    assert seq.shape == (3,) and not seq.requires_grad
    torch.testing.assert_close(seq, 0.3 * ((logp - ref) * mask).sum(-1))
    rtg = core.reward_penalty(logp, ref, mask, cfg.replace(reward_shape="reward_to_go"))
    assert rtg.shape == (3, 5)
    torch.testing.assert_close(rtg[:, 0], seq)  # first token is charged the whole sequence
    for b in range(3):
        for t in range(5):
            want = 0.3 * ((logp - ref) * mask)[b, t:].sum() if mask[b, t] else 0.0
            assert float(rtg[b, t]) == pytest.approx(float(want), abs=1e-12)
    none = core.reward_penalty(logp, ref, mask, KLConfig.parse("k3-in-loss"))
    assert none.shape == (3,) and (none == 0).all()


def test_sequence_granularity() -> None:
    logp, ref, mask = _batch()
    s = ((logp - ref) * mask).sum(-1)
    for est, f in [
        ("k1", lambda x: x),
        ("k2", lambda x: 0.5 * x**2),
        ("k3", lambda x: torch.exp(-x) - 1 + x),
    ]:
        cfg = KLConfig(estimator=est, granularity="sequence")
        torch.testing.assert_close(core.sequence_kl(logp, ref, mask, cfg), f(s))
    per_tok = core.loss_per_token(
        logp, ref, mask, KLConfig.parse("k2-in-loss", granularity="sequence")
    )
    assert (per_tok != 0).sum() == 3  # one value per row, on the last valid token
    torch.testing.assert_close(per_tok.sum(-1), 0.5 * s**2)


def test_aggregations() -> None:
    logp, ref, mask = _batch()
    v = core.kl_terms(logp, ref, mask, KLConfig(estimator="k3"))
    lengths = mask.sum(-1).double()
    torch.testing.assert_close(core.aggregate(v, mask, "sum"), v.sum() / 3)
    torch.testing.assert_close(core.aggregate(v, mask, "token_mean"), v.sum() / mask.sum())
    torch.testing.assert_close(core.aggregate(v, mask, "token_mean", normalizer=20.0), v.sum() / 20)
    torch.testing.assert_close(
        core.aggregate(v, mask, "seq_mean_token_mean"), (v.sum(-1) / lengths).mean()
    )
    with pytest.raises(ValueError, match="loss_aggregation"):
        core.aggregate(v, mask, "mean")


def test_loss_term_coefficient_and_zero() -> None:
    logp, ref, mask = _batch()
    lp = logp.clone().requires_grad_(True)
    cfg = KLConfig.parse("k3-in-loss", coef=0.2)
    got = core.loss_term(lp, ref, mask, cfg)
    torch.testing.assert_close(got, 0.2 * core.kl_terms(logp, ref, mask, cfg).sum() / 3)
    zero = core.loss_term(lp, ref, mask, KLConfig())
    assert float(zero.detach()) == 0.0 and zero.requires_grad
    both = KLConfig.parse("k3-in-both", coef=0.2, loss_coef=0.5)
    torch.testing.assert_close(
        core.loss_term(lp, ref, mask, both), 2.5 * core.loss_term(lp, ref, mask, cfg)
    )


def test_importance_weighting() -> None:
    logp, ref, mask = _batch()
    cfg = KLConfig.parse("k3-in-loss", importance_weighting="token")
    with pytest.raises(ValueError, match="old_logp"):
        core.loss_term(logp, ref, mask, cfg)
    old = logp - 0.1
    torch.testing.assert_close(
        core.loss_per_token(logp, ref, mask, cfg, old_logp=old),
        torch.exp(torch.tensor(0.1, dtype=logp.dtype)) * core.kl_terms(logp, ref, mask, cfg),
    )
    # on-policy the value equals the plain term, the gradient is delta (k3 x ratio = k2's)
    lp = logp.clone().requires_grad_(True)
    core.loss_term(lp, ref, mask, cfg, old_logp=logp).backward()
    torch.testing.assert_close(lp.grad, cfg.coef * ((logp - ref) * mask) / 3)


def test_clamps() -> None:
    logp = torch.tensor([[0.0, -30.0]], dtype=torch.float64)
    ref = torch.tensor([[-25.0, 0.0]], dtype=torch.float64)
    mask = torch.ones_like(logp, dtype=torch.bool)
    cfg = KLConfig(estimator="k3", log_ratio_clamp=20.0, kl_clamp=10.0)
    vals = core.kl_terms(logp, ref, mask, cfg)
    assert float(vals.max()) == 10.0
    k1 = core.kl_terms(logp, ref, mask, KLConfig(estimator="k1", log_ratio_clamp=20.0))
    assert k1.tolist() == [[20.0, -20.0]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_dtypes(dtype: torch.dtype) -> None:
    logp64, ref64, mask = _batch()
    logp, ref = logp64.to(dtype), ref64.to(dtype)
    tol = {torch.float32: 1e-5, torch.float64: 1e-12, torch.bfloat16: 3e-2}[dtype]
    for name in ["k1-in-reward", "k3-in-loss", "k2-in-both"]:
        cfg = KLConfig.parse(name)
        pen = core.reward_penalty(logp, ref, mask, cfg)
        assert pen.dtype == dtype
        torch.testing.assert_close(
            pen.double(), core.reward_penalty(logp64, ref64, mask, cfg), atol=tol, rtol=tol
        )
        lp = logp.clone().requires_grad_(True)
        loss = core.loss_term(lp, ref, mask, cfg)
        assert loss.dtype == dtype
        loss.backward()
        lp64 = logp64.clone().requires_grad_(True)
        core.loss_term(lp64, ref64, mask, cfg).backward()
        assert lp.grad is not None and lp64.grad is not None
        torch.testing.assert_close(lp.grad.double(), lp64.grad, atol=tol, rtol=tol)


def test_shape_errors() -> None:
    logp, ref, mask = _batch()
    with pytest.raises(ValueError, match="shape"):
        core.kl_terms(logp, ref[:, :4], mask, KLConfig())
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        core.kl_terms(logp[0], ref[0], mask[0], KLConfig())


def test_full_kl_matches_brute_force() -> None:
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 4, 7, generator=g, dtype=torch.float64)
    ref_logits = torch.randn(2, 4, 7, generator=g, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.bool)
    got = core.full_kl(logits, ref_logits, mask, chunk_size=3)
    want = torch.zeros(2, 4, dtype=torch.float64)
    for b in range(2):
        for t in range(4):
            if mask[b, t]:
                p = torch.softmax(logits[b, t], -1)
                q = torch.softmax(ref_logits[b, t], -1)
                want[b, t] = sum(float(p[i] * torch.log(p[i] / q[i])) for i in range(7))
    torch.testing.assert_close(got, want)
    # sequence sum is an unbiased estimate of the sequence KL: checked by the oracle test
    half = core.full_kl(logits.bfloat16(), ref_logits.bfloat16(), mask)
    assert half.dtype == torch.float32
    torch.testing.assert_close(half.double(), want, atol=3e-2, rtol=3e-2)
    with pytest.raises(ValueError):
        core.full_kl(logits, ref_logits[:, :, :5], mask)


def test_on_last_token_places_each_value_on_its_last_valid_token() -> None:
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]])
    values = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    got = core.on_last_token(values, mask)
    want = torch.zeros(4, 4, dtype=torch.float64)
    want[0, 2], want[1, 0], want[3, 3] = 1.0, 2.0, 4.0  # row 2 has no valid token
    assert got.dtype == torch.float64 and torch.equal(got, want)
    with pytest.raises(ValueError, match=r"\[B\]"):
        core.on_last_token(values[:3], mask)


def test_per_token_kl_is_the_sequence_estimate_over_the_length() -> None:
    logp, ref, mask = _batch()
    cfg = KLConfig(estimator="k3")
    got = core.per_token_kl(logp.requires_grad_(), ref, mask, cfg)
    assert not got.requires_grad
    want = core.sequence_kl(logp.detach(), ref, mask, cfg) / mask.sum(-1)
    torch.testing.assert_close(got, want)
    empty = torch.zeros_like(mask)
    assert torch.equal(core.per_token_kl(logp, ref, empty, cfg), torch.zeros(3, dtype=logp.dtype))


@pytest.mark.parametrize("mode", ["sum", "seq_mean_token_mean", "token_mean"])
def test_num_sequences_turns_micro_batches_into_one_mean(mode: str) -> None:
    """Two micro-batches, each divided by the step's sequence count (and token count), add up to
    the aggregate of the whole step: what verl and OpenRLHF do across micro-batches."""
    g = torch.Generator().manual_seed(3)
    values = torch.randn(6, 5, generator=g, dtype=torch.float64)
    mask = torch.rand(6, 5, generator=g) > 0.3
    mask[:, 0] = True
    whole = core.aggregate(values, mask, mode)
    tokens = mask.sum()
    parts = sum(
        core.aggregate(values[rows], mask[rows], mode, normalizer=tokens, num_sequences=6)
        for rows in (slice(0, 2), slice(2, 6))
    )
    torch.testing.assert_close(parts, whole)
    if mode != "token_mean":  # without the global count each part is its own mean: not equal
        own = sum(core.aggregate(values[r], mask[r], mode) for r in (slice(0, 2), slice(2, 6)))
        assert abs(float(own - whole)) > 1e-3
