"""Bad inputs to the core's public functions (issue 32): each is a one-line error naming the
argument and the valid form, never a silently wrong number.

The valid inputs' results are unchanged bit for bit (``tests/test_core_numerics.py``: a 0/1 mask
of any dtype gives the bool mask's bits).
"""

from __future__ import annotations

import pytest
import torch

from kl_patches import core
from kl_patches.config import KLConfig

CASES: list[tuple[str, str]] = [
    ("core", "is-clip-nan"),
    ("core", "is-clip-zero"),
    ("core", "is-clip-negative"),
    ("core", "is-clip-infinite"),
    ("core", "integer-log-probs"),
    ("core", "complex-log-probs"),
    ("core", "integer-behaviour-log-probs"),
    ("core", "mask-holding-a-half"),
    ("core", "mask-holding-two"),
    ("core", "mask-holding-nan"),
    ("core", "mask-holding-minus-one"),
]
"""Every case of this module as (category, name); the test parameter id is the name."""


def _batch(dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    logp = (-torch.rand(2, 4, generator=gen)).to(dtype)
    ref = (-torch.rand(2, 4, generator=gen)).to(dtype)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.bool)
    return logp, ref, mask


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(float("nan"), id="is-clip-nan"),
        pytest.param(0.0, id="is-clip-zero"),
        pytest.param(-2.0, id="is-clip-negative"),
        pytest.param(float("inf"), id="is-clip-infinite"),
    ],
)
def test_prefix_log_weights_validates_is_clip_as_klconfig_does(value: float) -> None:
    """Before: ``is_clip=nan`` returned all-NaN weights silently (KLConfig refuses it)."""
    logp, ref, mask = _batch()
    with pytest.raises(ValueError) as err:
        core.prefix_log_weights(logp, ref, mask, is_clip=value)
    assert str(err.value) == (
        f"prefix_log_weights: is_clip={value!r} is not valid; use None or a finite float > 0"
    )
    with pytest.raises(ValueError, match="is_clip"):
        KLConfig(placement="reward", importance_weighting="sequence", is_clip=value)
    assert torch.equal(
        core.prefix_log_weights(logp, ref, mask, is_clip=2.0),
        core.prefix_log_weights(logp, ref, mask, is_clip=2),
    )


@pytest.mark.parametrize(
    ("which", "dtype"),
    [
        pytest.param("logp", torch.int64, id="integer-log-probs"),
        pytest.param("logp", torch.complex64, id="complex-log-probs"),
        pytest.param("behaviour_logp", torch.int32, id="integer-behaviour-log-probs"),
    ],
)
def test_log_probs_must_be_real_floats(which: str, dtype: torch.dtype) -> None:
    """Before: integer log-probs were computed in float32 and cast back to integers (a
    truncated penalty), complex ones reached torch's own errors deep inside."""
    logp, ref, mask = _batch()
    cfg = KLConfig.parse("k1-in-reward")
    bad = (-torch.arange(8).reshape(2, 4)).to(dtype)
    message = f"{which} has dtype {dtype}; log-probabilities must be a real floating-point"
    with pytest.raises(TypeError, match=message):
        if which == "logp":
            core.reward_penalty(bad, ref, mask, cfg)
        else:
            core.reward_penalty(logp, ref, mask, cfg, behaviour_logp=bad)
    if which == "logp":
        with pytest.raises(TypeError, match=message):
            core.loss_term(bad, ref, mask, KLConfig.parse("k3-in-loss"))
        with pytest.raises(TypeError, match=message):
            core.prefix_log_weights(bad, ref, mask)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(0.5, id="mask-holding-a-half"),
        pytest.param(2.0, id="mask-holding-two"),
        pytest.param(float("nan"), id="mask-holding-nan"),
        pytest.param(-1.0, id="mask-holding-minus-one"),
    ],
)
def test_a_mask_must_hold_zeros_and_ones(value: float) -> None:
    """Before: any nonzero entry counted as a valid token (0.5 as a whole token, NaN too)."""
    logp, ref, bool_mask = _batch()
    mask = bool_mask.float()
    mask[1, 1] = value
    for call in (
        lambda: core.reward_penalty(logp, ref, mask, KLConfig.parse("k1-in-reward")),
        lambda: core.loss_term(logp, ref, mask, KLConfig.parse("k3-in-loss")),
        lambda: core.prefix_log_weights(logp, ref, mask),
        lambda: core.aggregate(logp, mask, "token_mean"),
    ):
        with pytest.raises(ValueError, match=r"mask holds .* at row 1, column 1 \(torch.float32\)"):
            call()
    mask[1, 1] = 1.0
    got = core.reward_penalty(logp, ref, mask, KLConfig.parse("k1-in-reward"))
    want = core.reward_penalty(logp, ref, mask != 0, KLConfig.parse("k1-in-reward"))
    assert torch.equal(got, want)
