"""kl_patches.core numerics: the finiteness policy, k3's overflow, half precision, empty batches,
zero denominators, full_kl's -inf slots and memory, and the closed-form backward.

Each test here failed on the core before these fixes (issue 15): a -inf reference log-prob gave
an inf penalty and a NaN loss, k3 overflowed to a silent inf, bfloat16 k3 was computed in
bfloat16, B=0 gave NaN, normalizer=0 gave inf, full_kl was NaN on a padded vocabulary and kept
three [B, T, V] buffers for its backward.
"""

from __future__ import annotations

import math

import pytest
import torch

from kl_patches import core
from kl_patches.config import KLConfig

INF = float("inf")


def _batch(dtype: torch.dtype = torch.float64, seed: int = 0, b: int = 3, t: int = 5):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(b, t, generator=g, dtype=torch.float64) * 2
    ref = -torch.rand(b, t, generator=g, dtype=torch.float64) * 2
    mask = torch.ones(b, t, dtype=torch.bool)
    mask[1, 3:] = False
    mask[2, 1:] = False
    return logp.to(dtype), ref.to(dtype), mask


# Every public function that takes a config, as (name, call(logp, ref, mask, cfg)).
CALLS = {
    "kl_terms": lambda lp, rl, m, c: core.kl_terms(lp, rl, m, c),
    "sequence_kl": lambda lp, rl, m, c: core.sequence_kl(lp, rl, m, c),
    "per_token_kl": lambda lp, rl, m, c: core.per_token_kl(lp, rl, m, c),
    "reward_penalty": lambda lp, rl, m, c: core.reward_penalty(
        lp, rl, m, c.replace(placement="both")
    ),
    "reward_to_go": lambda lp, rl, m, c: core.reward_penalty(
        lp, rl, m, c.replace(placement="both", reward_shape="reward_to_go", granularity="token")
    ),
    "loss_per_token": lambda lp, rl, m, c: core.loss_per_token(lp, rl, m, c),
    "loss_term": lambda lp, rl, m, c: core.loss_term(lp, rl, m, c),
    "loss_term_token_mean": lambda lp, rl, m, c: core.loss_term(
        lp, rl, m, c.replace(loss_aggregation="token_mean")
    ),
}
CONFIGS = {
    "k1": KLConfig.parse("k1-in-loss"),
    "k3": KLConfig.parse("k3-in-loss"),
    "k3-clamped": KLConfig.parse("k3-in-loss", log_ratio_clamp=20.0, kl_clamp=10.0),
    "k2-sequence": KLConfig.parse("k2-in-loss", granularity="sequence"),
}


# ----------------------------------------------------------------------------- mask dtypes
@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64, torch.uint8]
)
def test_a_zero_one_mask_of_any_dtype_gives_the_bool_masks_bits(
    call: str, dtype: torch.dtype
) -> None:
    """A non-bool mask holding only 0 and 1 (-0.0 counts as 0) gives every core function the
    bits of the bool mask ``mask != 0``."""
    logp, ref, bool_mask = _batch(torch.float32)
    mask = bool_mask.to(dtype)
    if dtype.is_floating_point:
        mask[0, 2] = -0.0
    cfg = CONFIGS["k3"]
    got = CALLS[call](logp, ref, mask, cfg)
    want = CALLS[call](logp, ref, mask != 0, cfg)
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize(
    ("dtype", "value"),
    [
        (torch.float32, 0.5),
        (torch.float32, 2.0),
        (torch.float32, float("nan")),
        (torch.float32, -1.0),
        (torch.float32, 1e-30),  # counted as a valid token by the bool cast
        (torch.bfloat16, 0.5),
        (torch.float64, 1 - 2**-53),  # float64 masks: compared exactly
        (torch.int64, 2),
        (torch.int64, -1),
        (torch.uint8, 255),
    ],
)
def test_a_mask_holding_other_values_is_refused_naming_the_first(
    call: str, dtype: torch.dtype, value: float
) -> None:
    """Before: any nonzero entry (0.5, 2, -1, NaN) counted as a valid token, silently; the rule
    is a bool mask or one of 0 and 1 only (a weight belongs in the loss, not in the mask)."""
    logp, ref, bool_mask = _batch(torch.float32)
    mask = bool_mask.to(dtype)
    mask[1, 1] = value
    with pytest.raises(ValueError, match=r"mask holds .* at row 1, column 1") as err:
        CALLS[call](logp, ref, mask, CONFIGS["k3"])
    assert "only 0 (padding) and 1" in str(err.value) and "\n" not in str(err.value)


# ----------------------------------------------------------------------------- finiteness
@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("cfg_name", sorted(CONFIGS))
@pytest.mark.parametrize("bad", [-INF, INF, float("nan")])
def test_non_finite_reference_logp_raises_naming_row_and_column(
    call: str, cfg_name: str, bad: float
) -> None:
    """Before: -inf gave an inf penalty / NaN loss silently (and the clamps hid it)."""
    logp, ref, mask = _batch()
    ref[1, 2] = bad  # a valid token (row 1 has 3 valid tokens)
    with pytest.raises(core.NonFiniteKLError) as err:
        CALLS[call](logp, ref, mask, CONFIGS[cfg_name])
    text = str(err.value)
    assert "row 1, column 2" in text and "nan_policy='mask'" in text
    assert "\n" not in text


@pytest.mark.parametrize("call", sorted(CALLS))
def test_non_finite_policy_logp_raises(call: str) -> None:
    logp, ref, mask = _batch()
    logp[0, 4] = -INF
    with pytest.raises(core.NonFiniteKLError, match="row 0, column 4"):
        CALLS[call](logp, ref, mask, CONFIGS["k3"])


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("cfg_name", sorted(CONFIGS))
def test_mask_policy_drops_the_bad_tokens_and_counts_them(call: str, cfg_name: str) -> None:
    """nan_policy='mask' gives the numbers of the same batch with those tokens masked out."""
    logp, ref, mask = _batch()
    ref[1, 2], logp[0, 0] = -INF, float("nan")
    cfg = CONFIGS[cfg_name].replace(nan_policy="mask")
    dropped = mask.clone()
    dropped[1, 2] = dropped[0, 0] = False
    clean_ref, clean_logp = ref.clone(), logp.clone()
    clean_ref[1, 2], clean_logp[0, 0] = 0.0, 0.0
    core.nonfinite_count(reset=True)
    lp = logp.clone().requires_grad_(True)
    got = CALLS[call](lp, ref, mask, cfg)
    assert core.nonfinite_count() == 2
    assert core.nonfinite_count(reset=True) == 2 and core.nonfinite_count() == 0
    lp_clean = clean_logp.clone().requires_grad_(True)
    want = CALLS[call](lp_clean, clean_ref, dropped, cfg)
    assert core.nonfinite_count() == 0
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    if got.requires_grad:
        got.sum().backward()
        want.sum().backward()
        assert lp.grad is not None and lp_clean.grad is not None
        assert torch.isfinite(lp.grad).all() and lp.grad[0, 0] == 0 and lp.grad[1, 2] == 0
        torch.testing.assert_close(lp.grad, lp_clean.grad, rtol=0, atol=0)


def test_importance_weighted_penalty_checks_behaviour_and_ratio_logp() -> None:
    logp, ref, mask = _batch()
    cfg = KLConfig(importance_weighting="sequence")
    behaviour = logp - 0.1
    behaviour[1, 1] = -INF
    with pytest.raises(core.NonFiniteKLError, match=r"row 1, column 1.*behaviour_logp=-inf"):
        core.reward_penalty(logp, ref, mask, cfg, behaviour_logp=behaviour)
    core.nonfinite_count(reset=True)
    got = core.reward_penalty(
        logp, ref, mask, cfg.replace(nan_policy="mask"), behaviour_logp=behaviour
    )
    assert core.nonfinite_count(reset=True) == 1 and torch.isfinite(got).all()
    dropped = mask.clone()
    dropped[1, 1] = False
    clean = behaviour.clone()
    clean[1, 1] = 0.0
    want = core.reward_penalty(logp, ref, dropped, cfg, behaviour_logp=clean)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    ratio = logp.clone()
    ratio[0, 3] = float("nan")
    with pytest.raises(core.NonFiniteKLError, match=r"row 0, column 3.*ratio_logp=nan"):
        core.reward_penalty(
            logp, ref, mask, cfg, behaviour_logp=logp, trainer_ratio=True, ratio_logp=ratio
        )


def test_token_importance_weighting_checks_old_logp() -> None:
    logp, ref, mask = _batch()
    cfg = KLConfig.parse("k3-in-loss", importance_weighting="token")
    old = logp.clone()
    old[2, 0] = INF
    with pytest.raises(core.NonFiniteKLError, match=r"row 2, column 0.*old_logp=inf"):
        core.loss_term(logp, ref, mask, cfg, old_logp=old)


def test_reward_only_loss_term_is_an_exact_zero_whatever_logp_holds() -> None:
    """Before: where(m, logp, 0).sum() * 0.0 is NaN for a -inf log-prob on a valid token."""
    logp, ref, mask = _batch()
    logp[0, 1] = -INF
    lp = logp.clone().requires_grad_(True)
    zero = core.loss_term(lp, ref, mask, KLConfig())
    assert zero.item() == 0.0 and zero.requires_grad and zero.dtype == logp.dtype
    zero.backward()
    assert lp.grad is not None and torch.equal(lp.grad, torch.zeros_like(logp))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
def test_padding_may_hold_anything(dtype: torch.dtype) -> None:
    """NaN and inf on padding change nothing, on every path (half precision masks its output
    instead of its input when no gradient is needed: checked here too)."""
    logp, ref, mask = _batch(dtype)
    dirty_logp, dirty_ref = logp.clone(), ref.clone()
    dirty_logp[~mask], dirty_ref[~mask] = float("nan"), -INF
    for cfg in CONFIGS.values():
        for call in CALLS.values():
            for grad in (False, True):
                clean = call(logp.clone().requires_grad_(grad), ref, mask, cfg)
                dirty = call(dirty_logp.clone().requires_grad_(grad), dirty_ref, mask, cfg)
                torch.testing.assert_close(dirty, clean, rtol=0, atol=0)


# ----------------------------------------------------------------------------- k3 overflow
def test_k3_overflow_in_float32_raises_instead_of_a_silent_inf() -> None:
    """Before: exp(-delta) overflowed float32 at delta < -88.7 and the value was inf."""
    lp = torch.tensor([[-95.0, -1.0]])
    ref = torch.tensor([[0.0, -1.2]])
    mask = torch.ones(1, 2, dtype=torch.bool)
    cfg = KLConfig(estimator="k3")
    with pytest.raises(core.NonFiniteKLError) as err:
        core.kl_terms(lp, ref, mask, cfg)
    text = str(err.value)
    assert "row 0, column 0" in text and "overflows float32" in text
    assert "log_ratio_clamp" in text
    clamped = core.kl_terms(lp, ref, mask, cfg.replace(log_ratio_clamp=20.0))
    assert float(clamped[0, 0]) == pytest.approx(math.exp(20.0) - 21.0, rel=1e-6)
    # just inside the range: finite and exact to float32's rounding
    near = core.kl_terms(torch.tensor([[-88.0]]), torch.zeros(1, 1), mask[:, :1], cfg)
    assert float(near) == pytest.approx(math.exp(88.0) - 89.0, rel=2e-7)
    masked = core.kl_terms(lp, ref, mask, cfg.replace(nan_policy="mask"))
    assert masked[0, 0] == 0 and torch.isfinite(masked).all()


def test_k3_in_float16_is_computed_in_float32_and_an_overflow_of_the_result_raises() -> None:
    """Before: float16 k3 overflowed at |delta| > 11 silently (exp in float16)."""
    mask = torch.ones(1, 1, dtype=torch.bool)
    cfg = KLConfig(estimator="k3")
    lp, ref = torch.tensor([[-10.5]], dtype=torch.float16), torch.zeros(1, 1, dtype=torch.float16)
    got = core.kl_terms(lp, ref, mask, cfg)
    assert got.dtype == torch.float16
    assert float(got) == pytest.approx(math.exp(10.5) - 11.5, rel=2**-10)
    with pytest.raises(core.NonFiniteKLError, match="overflows float16"):
        core.kl_terms(torch.tensor([[-12.0]], dtype=torch.float16), ref, mask, cfg)
    with pytest.raises(core.NonFiniteKLError, match="overflows float16"):
        # the per-token values fit; their float32 sum is cast to float16 and overflows
        core.sequence_kl(
            torch.full((1, 3), -10.5, dtype=torch.float16),
            torch.zeros(1, 3, dtype=torch.float16),
            torch.ones(1, 3, dtype=torch.bool),
            cfg,
        )


# ----------------------------------------------------------------------------- precision
def _k3_exact(lp: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    d = ref.double() - lp.double()
    return torch.expm1(d) - d


def test_bfloat16_k3_near_the_reference_is_float32_exact_then_rounded_once() -> None:
    """Before: bf16 k3 computed in bf16 was up to ~5e-2 off (relative) near the reference."""
    g = torch.Generator().manual_seed(2)
    ref = (-torch.rand(64, 256, generator=g) * 3).bfloat16()
    lp = (ref.float() + 0.05 * torch.randn(64, 256, generator=g)).bfloat16()
    mask = torch.ones_like(lp, dtype=torch.bool)
    cfg = KLConfig(estimator="k3")
    exact = _k3_exact(lp, ref)
    got = core.kl_terms(lp, ref, mask, cfg)
    assert got.dtype == torch.bfloat16
    # one bfloat16 rounding (half an ulp: at most 2^-8 relative) of a value exact to
    # float32's absolute rounding of exp (2^-24 e^d, with d < 1 here)
    bound = 2**-8 * exact + 2**-22
    assert bool(((got.double() - exact).abs() <= bound).all())
    # the native bfloat16 formula on the same inputs, for the record of what was fixed
    native = torch.exp(ref - lp) - (ref - lp) - 1
    assert float(((native.double() - exact).abs() / bound).max()) > 100
    # reductions are summed in float32: the sequence sums are float32-exact, rounded once
    seq = core.sequence_kl(lp, ref, mask, cfg)
    torch.testing.assert_close(seq.double(), exact.sum(-1), rtol=2**-8, atol=0)


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
def test_float32_values_are_exact_to_one_rounding(estimator: str) -> None:
    """k1 and k2: bit-identical to the textbook expressions; k3: within one float32 ulp of
    exp(d) (exp's rounding; the other steps are exact near the reference) plus the result's."""
    g = torch.Generator().manual_seed(3)
    ref = -torch.rand(32, 512, generator=g) * 3
    lp = ref + 0.3 * torch.randn(32, 512, generator=g)
    mask = torch.rand(32, 512, generator=g) > 0.2
    got = core.kl_terms(lp, ref, mask, KLConfig(estimator=estimator))
    delta = torch.where(mask, lp - ref, torch.zeros(()))
    if estimator == "k1":
        assert torch.equal(got, delta)
    elif estimator == "k2":
        assert torch.equal(got, 0.5 * delta * delta)
    else:
        exact = torch.where(mask, _k3_exact(lp, ref), torch.zeros((), dtype=torch.float64))
        eps = torch.finfo(torch.float32).eps
        bound = eps * (torch.exp(-delta.double()) + exact)
        assert bool(((got.double() - exact).abs() <= bound).all())


# ----------------------------------------------------------------------------- gradients
@pytest.mark.parametrize("cfg_name", sorted(CONFIGS))
@pytest.mark.parametrize("call", ["kl_terms", "loss_per_token", "loss_term", "sequence_kl"])
def test_closed_form_backward_matches_finite_differences(call: str, cfg_name: str) -> None:
    """The hand-written backward, against torch.autograd.gradcheck in float64 (both inputs;
    the clamps fire on some tokens, away from their kinks)."""
    g = torch.Generator().manual_seed(4)
    logp = -torch.rand(3, 6, generator=g, dtype=torch.float64) * 2
    ref = logp + torch.randn(3, 6, generator=g, dtype=torch.float64)
    ref[0, 0], ref[1, 1] = logp[0, 0] + 30.0, logp[1, 1] - 15.0  # beyond the clamps
    mask = torch.rand(3, 6, generator=g) > 0.25
    cfg = CONFIGS[cfg_name]
    fn = CALLS[call]
    assert torch.autograd.gradcheck(
        lambda lp, rl: fn(lp, rl, mask, cfg),
        (logp.clone().requires_grad_(True), ref.clone().requires_grad_(True)),
    )


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_backward_equals_autograd_of_the_textbook_expression(
    estimator: str, dtype: torch.dtype
) -> None:
    """Same gradient as autograd of the library formula evaluated in float32 (1e-7 relative
    in float32; bfloat16 gradients within one bfloat16 rounding), zero on padding."""
    g = torch.Generator().manual_seed(5)
    ref = (-torch.rand(16, 128, generator=g) * 3).to(dtype)
    lp = (ref.float() + 0.3 * torch.randn(16, 128, generator=g)).to(dtype)
    mask = torch.rand(16, 128, generator=g) > 0.2
    weights = torch.randn(16, 128, generator=g)
    x = lp.clone().requires_grad_(True)
    (core.kl_terms(x, ref, mask, KLConfig(estimator=estimator)).float() * weights).sum().backward()
    y = lp.float().clone().requires_grad_(True)
    delta = torch.where(mask, y - ref.float(), torch.zeros(()))
    value = {"k1": delta, "k2": 0.5 * delta**2, "k3": torch.exp(-delta) - 1 + delta}[estimator]
    (value * weights).sum().backward()
    assert x.grad is not None and y.grad is not None and x.grad.dtype == dtype
    assert bool((x.grad[~mask] == 0).all())
    tol = {torch.float32: 1e-7, torch.bfloat16: 2**-8}[dtype]
    scale = y.grad.abs().max()
    torch.testing.assert_close(x.grad.float(), y.grad, atol=float(tol * scale), rtol=tol)


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
@pytest.mark.parametrize(
    "dtypes",
    [
        (torch.float32, torch.float32),
        (torch.bfloat16, torch.bfloat16),
        (torch.bfloat16, torch.float32),
        (torch.float32, torch.bfloat16),
    ],
)
def test_both_inputs_get_opposite_gradients_in_their_own_dtype(
    estimator: str, dtypes: tuple[torch.dtype, torch.dtype]
) -> None:
    """The KL depends on logp - ref_logp only: d/d ref_logp is exactly -d/d logp (the backward
    negates after narrowing to each input's dtype, and may share one buffer between the two
    sides when they have the work dtype)."""
    g = torch.Generator().manual_seed(6)
    ref = -torch.rand(8, 64, generator=g) * 3
    lp = ref + 0.3 * torch.randn(8, 64, generator=g)
    mask = torch.rand(8, 64, generator=g) > 0.2
    weights = torch.randn(8, 64, generator=g)
    x = lp.to(dtypes[0]).requires_grad_(True)
    y = ref.to(dtypes[1]).requires_grad_(True)
    (core.kl_terms(x, y, mask, KLConfig(estimator=estimator)).float() * weights).sum().backward()
    assert x.grad is not None and y.grad is not None
    assert (x.grad.dtype, y.grad.dtype) == dtypes
    if dtypes[0] == dtypes[1]:
        assert torch.equal(y.grad, -x.grad)
    elif dtypes[1] == torch.float32:  # y.grad is the float32 gradient; x.grad its rounding
        assert torch.equal(x.grad, y.grad.neg().to(dtypes[0]))
    else:
        assert torch.equal(y.grad, x.grad.neg().to(dtypes[1]))
    assert bool((x.grad[~mask] == 0).all()) and bool((y.grad[~mask] == 0).all())


def test_double_backward_refuses_instead_of_a_silent_zero() -> None:
    logp, ref, mask = _batch()
    lp = logp.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(
        core.loss_term(lp, ref, mask, CONFIGS["k3"]), lp, create_graph=True
    )
    with pytest.raises(RuntimeError):
        grad.sum().backward()


def test_vmap_gives_the_plain_numbers() -> None:
    """The oracle runs loss_term under torch.func.vmap: same values and gradients."""
    logp, ref, mask = _batch()
    for cfg in CONFIGS.values():
        lp = logp.clone().requires_grad_(True)
        plain = torch.stack(
            [core.loss_term(lp[i : i + 1], ref[i : i + 1], mask[i : i + 1], cfg) for i in range(3)]
        )
        lv = logp.clone().requires_grad_(True)
        mapped = torch.func.vmap(
            lambda a, b, m, cfg=cfg: core.loss_term(a[None], b[None], m[None], cfg)
        )(lv, ref, mask)
        torch.testing.assert_close(mapped, plain, rtol=0, atol=0)
        plain.sum().backward()
        mapped.sum().backward()
        assert lp.grad is not None and lv.grad is not None
        torch.testing.assert_close(lv.grad, lp.grad, rtol=0, atol=0)


def test_bit_mask_equals_torch_where() -> None:
    specials = [0.0, -0.0, INF, -INF, float("nan"), 1e-45, -3.0, 3.4e38]
    for dtype in (torch.float64, torch.float32, torch.bfloat16, torch.float16):
        x = torch.tensor(specials * 4, dtype=dtype).reshape(4, -1)
        valid = torch.rand(x.shape, generator=torch.Generator().manual_seed(0)) > 0.5
        got = core._zero_invalid(x, valid)
        want = torch.where(valid, x, torch.zeros((), dtype=dtype))
        bits = {8: torch.int64, 4: torch.int32, 2: torch.int16}[x.element_size()]
        assert torch.equal(got.view(bits), want.view(bits))


# ----------------------------------------------------------------------------- empty, zero
@pytest.mark.parametrize("aggregation", ["sum", "token_mean", "seq_mean_token_mean"])
def test_an_empty_micro_batch_gives_zero(aggregation: str) -> None:
    """Before: B=0 gave NaN for 'sum' and 'seq_mean_token_mean' (0 / 0, mean of nothing)."""
    lp = torch.zeros(0, 7, requires_grad=True)
    ref, mask = torch.zeros(0, 7), torch.zeros(0, 7, dtype=torch.bool)
    cfg = KLConfig.parse("k3-in-both", loss_aggregation=aggregation)
    loss = core.loss_term(lp, ref, mask, cfg)
    assert loss.item() == 0.0
    loss.backward()
    assert core.aggregate(torch.zeros(0, 7), mask, aggregation).item() == 0.0
    assert core.reward_penalty(lp, ref, mask, cfg).shape == (0,)
    assert core.kl_terms(lp, ref, mask, cfg).shape == (0, 7)


@pytest.mark.parametrize("as_tensor", [False, True])
@pytest.mark.parametrize(("name", "mode"), [("normalizer", "token_mean"), ("num_sequences", "sum")])
def test_a_zero_denominator_is_an_error_or_zero(name: str, mode: str, as_tensor: bool) -> None:
    """Before: normalizer=0 gave inf. Now: 0 when no token is valid, else a clear error."""
    logp, ref, mask = _batch()
    cfg = KLConfig.parse("k3-in-loss", loss_aggregation=mode)
    zero: float | torch.Tensor = torch.tensor(0.0) if as_tensor else 0
    with pytest.raises(ValueError, match=f"{name}=.*not valid with 9 valid token"):
        core.loss_term(logp, ref, mask, cfg, **{name: zero})
    with pytest.raises(ValueError, match=name):
        core.aggregate(logp, mask, mode, **{name: zero})
    none = torch.zeros_like(mask)
    lp = logp.clone().requires_grad_(True)
    got = core.loss_term(lp, ref, none, cfg, **{name: zero})
    assert got.item() == 0.0 and got.requires_grad
    assert core.aggregate(logp, none, mode, **{name: zero}).item() == 0.0
    if not as_tensor:
        with pytest.raises(ValueError, match=name):
            core.loss_term(logp, ref, mask, cfg, **{name: -3.0})


# ----------------------------------------------------------------------------- full_kl
def test_full_kl_of_a_padded_vocabulary_is_the_kl_of_the_real_one() -> None:
    """Before: -inf in both logits at one slot gave 0 * (-inf - -inf) = NaN."""
    g = torch.Generator().manual_seed(6)
    logits = torch.randn(2, 3, 9, generator=g, dtype=torch.float64)
    ref = torch.randn(2, 3, 9, generator=g, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]], dtype=torch.bool)
    padded, ref_padded = logits.clone(), ref.clone()
    padded[..., 7:], ref_padded[..., 7:] = -INF, -INF
    padded[0, 1, 2] = -INF  # pi = 0 at a slot where pi_ref > 0: contributes 0
    truncated = logits[..., :7].clone()
    truncated[0, 1, 2] = -INF
    x = padded.clone().requires_grad_(True)
    y = truncated.clone().requires_grad_(True)
    got = core.full_kl(x, ref_padded, mask, chunk_size=2)
    want = core.full_kl(y, ref[..., :7], mask, chunk_size=2)
    assert torch.isfinite(got).all()  # equal up to the order of log-softmax's sum
    torch.testing.assert_close(got, want, rtol=1e-15, atol=1e-15)
    got.sum().backward()
    want.sum().backward()
    assert x.grad is not None and y.grad is not None and torch.isfinite(x.grad).all()
    torch.testing.assert_close(x.grad[..., :7], y.grad, rtol=0, atol=1e-15)
    assert bool((x.grad[..., 7:] == 0).all())


def test_full_kl_backward_matches_finite_differences_and_ignores_garbage_rows() -> None:
    g = torch.Generator().manual_seed(7)
    logits = torch.randn(2, 4, 6, generator=g, dtype=torch.float64)
    ref = torch.randn(2, 4, 6, generator=g, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 1, 1]], dtype=torch.bool)
    assert torch.autograd.gradcheck(
        lambda a, b: core.full_kl(a, b, mask, chunk_size=3),
        (logits.clone().requires_grad_(True), ref.clone().requires_grad_(True)),
    )
    garbage = logits.clone()
    garbage[0, 3] = float("nan")
    x = garbage.clone().requires_grad_(True)
    core.full_kl(x, ref, mask, chunk_size=3).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all() and (x.grad[0, 3] == 0).all()


def test_full_kl_policy() -> None:
    logits = torch.zeros(1, 3, 4)
    ref = torch.zeros(1, 3, 4)
    ref[0, 1, 2] = -INF  # pi > 0 where pi_ref = 0: the KL is infinite
    logits[0, 2, 0] = float("nan")
    mask = torch.ones(1, 3, dtype=torch.bool)
    with pytest.raises(core.NonFiniteKLError, match=r"row 0, column 1 \(2 valid"):
        core.full_kl(logits, ref, mask)
    core.nonfinite_count(reset=True)
    got = core.full_kl(logits, ref, mask, nan_policy="mask")
    assert core.nonfinite_count(reset=True) == 2 and torch.equal(got, torch.zeros(1, 3))
    with pytest.raises(ValueError, match="nan_policy"):
        core.full_kl(logits, ref, mask, nan_policy="ignore")


def test_full_kl_keeps_nothing_but_its_inputs_for_the_backward() -> None:
    """Before: autograd kept log pi, pi and the log-ratio of every chunk, three [B, T, V]
    float32 tensors (with the gradient about 4x the logits; measured in benchmarks/). Now the
    graph holds the inputs (no copies) and the [B, T] result only."""
    g = torch.Generator().manual_seed(8)
    logits = torch.randn(2, 8, 50, generator=g).requires_grad_(True)
    ref = torch.randn(2, 8, 50, generator=g)
    mask = torch.ones(2, 8, dtype=torch.bool)
    inputs = {logits.untyped_storage().data_ptr(), ref.untyped_storage().data_ptr()}
    saved: list[torch.Tensor] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = core.full_kl(logits, ref, mask, chunk_size=4)
    new = [t for t in saved if t.untyped_storage().data_ptr() not in inputs]
    assert sum(t.numel() for t in new) <= 2 * 2 * 8  # the result and the mask, [B * T] each
    out.sum().backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all()
