"""Estimator and placement maths: every KL number an adapter puts into a reward or a loss.

Pure torch. Inputs are per-token log-probabilities of the sampled tokens, shaped ``[B, T]``,
with a ``mask`` (bool or 0/1) of valid tokens; padding never contributes, whatever value the
log-probabilities hold there. Any float dtype and any device work; results keep the input dtype.
Log-probabilities that are not real floats (an integer or complex tensor) are a TypeError; a
non-bool mask holding anything but 0 and 1 (0.5, 2, -1, NaN) is a ValueError naming the first
such entry: a mask says which tokens count, it is not a weight (checked with one min/max pass
per call, plus a sum and a count for a float mask; a bool mask is used as it is).

With delta_t = log pi(y_t|s_t) - log pi_ref(y_t|s_t) and r_t = exp(-delta_t):
  k1 = delta,  k2 = delta^2 / 2,  k3 = r - 1 - log r = exp(-delta) - 1 + delta.

Two placements:
  * reward side (:func:`reward_penalty`): a detached penalty, times ``coef``, to subtract from the
    reward; it reaches the gradient only through the policy-gradient score function;
  * loss side (:func:`loss_term`): a differentiable scalar, times the loss coefficient, to add to
    the loss; it reaches the gradient path-wise.
:mod:`kl_patches.theory` says which gradient each combination follows in expectation.

Off-policy (samples from a behaviour policy mu, e.g. PPO epochs or asynchronous rollouts),
``importance_weighting="sequence"`` weights the KL term of token u by the detached prefix weight
W_{1:u} = prod_{s<=u} pi(y_s|s_s) / mu(y_s|s_s) (per-decision importance sampling):
:func:`importance_weighted_penalty` gives the per-token reward-side penalty a trainer must be
handed so that its own gradient (REINFORCE-style, or PPO-style with the token ratio) equals
coef * E_pi[sum_t grad log pi_t * sum_{u>=t} k_u], and the loss side of ``both`` multiplies each
term by the same detached W_{1:u} (:func:`prefix_log_weights`).

Deviations from the libraries, on purpose: no clamps unless the config asks for them (verl clamps
k3, OpenRLHF clamps every estimator); the paper's default loss aggregation is a per-sequence sum,
not a token mean.

Numerics. Half-precision inputs are computed in float32 inside (k3 of bfloat16 inputs is then
as exact as float32's, rounded once to bfloat16 at the end) and sums are taken in float32 before
the result is cast back. k3 is ``(exp(ref_logp - logp) - 1) - (ref_logp - logp)``, the
libraries' own formula in its most exact order (``exp(x) - 1`` and the final subtraction are
exact near the reference; the one rounding is that of ``exp``). Finiteness: a non-finite input
log-probability or per-token KL term on a valid token raises :class:`NonFiniteKLError` naming
the first one's row and column, or, with ``KLConfig.nan_policy="mask"``, is dropped like
padding and counted in :func:`nonfinite_count`; a result that overflows its dtype raises (never
a silent inf). The check costs one reduction of the result (no extra pass for the placements'
sums) and one host synchronisation per call; under ``torch.func`` transforms (``vmap``) it is
skipped, since it branches on data.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

import torch

from kl_patches.config import KLConfig, _real

__all__ = [
    "NonFiniteKLError",
    "aggregate",
    "estimate",
    "full_kl",
    "importance_weighted_penalty",
    "importance_weighted_surrogate",
    "kl_terms",
    "log_ratio",
    "loss_per_token",
    "loss_term",
    "nonfinite_count",
    "on_last_token",
    "per_token_kl",
    "prefix_log_weights",
    "reward_penalty",
    "sequence_kl",
]


class NonFiniteKLError(ValueError):
    """A non-finite log-probability or KL value on a valid token, or a KL result that overflows
    its dtype. The message names the first bad token's row and column and the remedies."""


_MASKED = 0
_MASKED_LOCK = threading.Lock()


def nonfinite_count(reset: bool = False) -> int:
    """Valid tokens dropped by ``nan_policy="mask"`` since the last reset (this process).

    Each core call that masks tokens adds their number, so a bad token that reaches both the
    reward side and the loss side counts twice. An adapter logs it as a metric, e.g.
    ``metrics["kl_patches/nonfinite_masked"] = core.nonfinite_count(reset=True)`` once per step.
    """
    global _MASKED
    with _MASKED_LOCK:
        value = _MASKED
        if reset:
            _MASKED = 0
    return value


def _count_masked(n: int) -> None:
    global _MASKED
    with _MASKED_LOCK:
        _MASKED += n


def _bool_mask(mask: torch.Tensor) -> torch.Tensor:
    """A mask as bool: a bool mask as it is; any other must hold only 0 and 1 (ValueError
    naming the first other value and where it is: 0.5, 2, -1 or NaN is a caller's bug, not a
    weight), checked with one min/max pass (and, for a floating-point mask, one sum against the
    count of nonzero entries) and one host synchronisation; skipped under torch.func
    transforms. ``.bool()`` is 4-25x faster on CPU than the comparison with a scalar."""
    if mask.dtype == torch.bool:
        return mask
    m = mask.bool()
    if not _transformed() and mask.numel() and not _zero_one(mask, m):
        raise ValueError(_mask_message(mask))
    return m


def _zero_one(mask: torch.Tensor, m: torch.Tensor) -> bool:
    """True when every entry of ``mask`` is 0 or 1 (``m`` is ``mask.bool()``), in one pass or
    two and one host synchronisation.

    Integers: min >= 0 and max <= 1. Floats: also in [0, 1] (NaN fails the comparison), and
    their sum equals the number of nonzero entries (a value in (0, 1) makes the sum fall
    short: a small one by almost 1, 0.5 by 0.5; a value within float32 rounding of 1 reads
    as 1, as the bool cast reads it anyway); the sum is taken in float32 up to 2**24 entries
    (exact for 0/1 values there) and in float64 above. float64 and complex masks are compared
    with their bool cast (exact)."""
    if mask.is_complex() or mask.dtype == torch.float64:
        return bool(torch.equal(m.to(mask.dtype), mask))
    low, high = torch.aminmax(mask)
    if not mask.is_floating_point():
        bounds = torch.stack([low, high]).tolist()
        return bool(bounds[0] >= 0 and bounds[1] <= 1)
    wide = torch.float32 if mask.numel() <= 2**24 else torch.float64
    found = torch.stack(
        [
            low.to(wide),
            high.to(wide),
            mask.sum(dtype=wide),
            m.sum(dtype=torch.int32 if wide == torch.float32 else torch.int64).to(wide),
        ]
    ).tolist()
    return bool(found[0] >= 0 and found[1] <= 1 and found[2] == found[3])


def _mask_message(mask: torch.Tensor) -> str:
    """The error for a mask holding a value other than 0 and 1 (slow path: names the first)."""
    flat = mask.detach().reshape(-1).cpu()
    bad = torch.nonzero((flat != 0) & (flat != 1) | (flat != flat)).flatten()
    index = int(bad[0]) if bad.numel() else 0
    width = mask.shape[-1] if mask.dim() else 1
    where = f"row {index // width}, column {index % width}" if mask.dim() == 2 else f"{index}"
    value = flat[index].item()
    return (
        f"mask holds {value!r} at {where} ({mask.dtype}); a mask must be bool or hold only 0 "
        "(padding) and 1 (a valid token). Pass mask.bool() or (mask != 0) if nonzero means "
        "valid; a weight belongs in the loss, not in the mask"
    )


def _check_dtype(name: str, x: torch.Tensor) -> None:
    """TypeError unless ``x`` holds real floating-point numbers (an integer tensor would be
    cast back to integers at the end, a complex one has no order)."""
    if not x.is_floating_point():
        raise TypeError(
            f"{name} has dtype {x.dtype}; log-probabilities must be a real floating-point "
            "tensor (float16, bfloat16, float32 or float64)"
        )


def _cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``x.to(dtype)``, without the call when ``x`` has that dtype already (a same-dtype
    ``.to()`` returns ``x`` too, but is still a dispatched call)."""
    return x if x.dtype == dtype else x.to(dtype)


def _check_shapes(logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor) -> None:
    if not (logp.is_floating_point() and ref_logp.is_floating_point()):
        _check_dtype("logp", logp)
        _check_dtype("ref_logp", ref_logp)
    shape = logp.shape
    if len(shape) == 2 and shape == ref_logp.shape == mask.shape:
        return
    if logp.dim() != 2:
        raise ValueError(f"log-probabilities must be [B, T]; got shape {tuple(logp.shape)}")
    if ref_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(
            "logp, ref_logp and mask must share one [B, T] shape; got "
            f"{tuple(logp.shape)}, {tuple(ref_logp.shape)}, {tuple(mask.shape)}"
        )


def _check_like(name: str, other: torch.Tensor | None, logp: torch.Tensor) -> None:
    if other is not None and not other.is_floating_point():
        _check_dtype(name, other)
    if other is not None and other.shape != logp.shape:
        raise ValueError(f"{name} shape {tuple(other.shape)} differs from logp {tuple(logp.shape)}")


def _transformed() -> bool:
    """True under torch.func transforms (vmap, grad): no data-dependent branches there."""
    return bool(torch._C._are_functorch_transforms_active())


_WORK: dict[tuple[torch.dtype, ...], torch.dtype] = {}


def _work_dtype(*dtypes: torch.dtype) -> torch.dtype:
    """float32 for half precision, else the widest input dtype (memoised: each
    ``torch.promote_types`` is a dispatched call)."""
    work = _WORK.get(dtypes)
    if work is None:
        work = torch.float32
        for dtype in dtypes:
            work = torch.promote_types(work, dtype)
        _WORK[dtypes] = work
    return work


def _bit_maskable(x: torch.Tensor) -> torch.dtype | None:
    """The integer dtype whose bits :func:`_zero_invalid` multiplies for ``x``, or None where
    it uses ``torch.where`` (other dtypes and devices, torch.func transforms)."""
    bits = _BITS.get(x.dtype)
    if bits is None or not (x.is_cpu or x.is_cuda) or _transformed():
        return None
    return bits


_BITS = {
    torch.float64: torch.int64,
    torch.float32: torch.int32,
    torch.bfloat16: torch.int16,
    torch.float16: torch.int16,
}


def _zero_invalid(x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """``x`` where ``valid``, +0.0 elsewhere, whatever ``x`` holds there (inf, NaN); not
    differentiable (used inside the autograd functions and on detached values).

    On CPU and CUDA it multiplies the bit pattern by the 0/1 mask (one vectorised pass,
    several times faster than ``torch.where`` on CPU); the result is the same as
    ``torch.where(valid, x, 0.0)``, bit for bit.
    """
    bits = _bit_maskable(x)
    if bits is None:
        return torch.where(valid, x, torch.zeros((), dtype=x.dtype, device=x.device))
    return x.view(bits).mul(valid).view(x.dtype)


def _zero_invalid_(x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """In-place :func:`_zero_invalid` of a fresh buffer (returns it)."""
    bits = _bit_maskable(x)
    if bits is None:
        return torch.where(valid, x, torch.zeros((), dtype=x.dtype, device=x.device))
    x.view(bits).mul_(valid)
    return x


def _empty(like: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    return like.new_empty(0, dtype=like.dtype if dtype is None else dtype)


def _indicator(a: torch.Tensor, b: torch.Tensor, plain: bool) -> torch.Tensor:
    """Float 1.0 where ``a == b``, else 0.0, written over ``b`` (a buffer of our own that
    the caller no longer needs: one [B, T] buffer fewer at the peak), unless under a
    torch.func transform (``plain=False``: no ``out=`` there, a new tensor)."""
    if not plain:
        return (a == b).to(a.dtype)
    return torch.eq(a, b, out=b)


def _token_terms(
    logp: torch.Tensor,
    ref_logp: torch.Tensor,
    valid: torch.Tensor,
    estimator: str,
    log_ratio_clamp: float | None,
    kl_clamp: float | None,
    need_grad: bool,
    out_dtype: torch.dtype,
    plain: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Per-token estimator values, zero where invalid: the forward of :class:`_TokenTerms`.

    One pass per operation and as few new buffers as possible (on CPU a fresh buffer costs
    as much as the arithmetic): the log-ratio, masked once in place (so padding gives 0 for
    every estimator, with no second mask), the optional clamps, the estimator. With
    ``need_grad`` it also returns the factor of the closed-form derivative (d/d logp of k1: 1,
    k2: delta, k3: 1 - exp(-delta) = -factor, times the clamps' pass-through masks, which are
    only formed then). Returns (values in ``out_dtype``, the factor or None, a probe whose
    finiteness says the masked log-ratios are finite, or None without clamps). ``plain=False``
    under torch.func transforms: no ``out=`` arguments (they have no batching rule).
    """
    if estimator not in ("k1", "k2", "k3"):
        raise ValueError(f"estimator={estimator!r} is not valid; choose one of ['k1', 'k2', 'k3']")
    work = _work_dtype(logp.dtype, ref_logp.dtype)
    # k1 and k2 from delta = logp - ref_logp, k3 from d = -delta (its exp's argument): the
    # same bits as the textbook expressions, computed in the work dtype (exact for half
    # inputs: the difference of two bfloat16 or float16 numbers is a float32 one). A
    # converted copy is reused in place (one buffer fewer).
    first, second = (ref_logp, logp) if estimator == "k3" else (logp, ref_logp)
    if first.dtype != work:
        x = first.to(work).sub_(second)
    elif second.dtype != work:
        y = second.to(work)
        # no out= under torch.func transforms; first + (-y) has the bits of first - y
        x = torch.sub(first, y, out=y) if plain else y.neg_().add_(first)
    else:
        x = torch.sub(first, second)
    clamped = log_ratio_clamp is not None or kl_clamp is not None
    # Forward only, no clamps, a narrower output: mask the (half as wide) output instead.
    late = not need_grad and not clamped and out_dtype != work and out_dtype in _BITS
    if not late:
        x = _zero_invalid_(x, valid)
    probe = x.sum() if clamped else None
    keep: torch.Tensor | None = None  # float 1/0: where the clamps pass the gradient
    if log_ratio_clamp is not None:
        if need_grad:
            xc = x.clamp(-log_ratio_clamp, log_ratio_clamp)
            keep = _indicator(xc, x, plain)  # torch.clamp's own pass-through rule (x's buffer)
            x = xc
        else:
            x = x.clamp_(-log_ratio_clamp, log_ratio_clamp)
    factor: torch.Tensor | None
    if estimator == "k1":
        values, factor = x, keep
    elif estimator == "k2":
        values = (x * 0.5).mul_(x)
        factor = x if keep is None else x * keep
    else:
        t = torch.exp(x).sub_(1.0)  # exp(d) - 1 and the next line are exact near d = 0
        if need_grad:
            # no out= under torch.func transforms; t + (-x) has the bits of t - x
            values = torch.sub(t, x, out=x) if plain else x.neg_().add_(t)
            factor = t if keep is None else t.mul_(keep)
        else:
            values, factor = t.sub_(x), None
            x = values  # drops the log-ratio's buffer before the cast: one [B, T] fewer at the peak
    if kl_clamp is not None:
        if need_grad:
            vc = values.clamp(-kl_clamp, kl_clamp)
            keep2 = _indicator(vc, values, plain)  # in values' buffer (values is ours)
            factor = keep2 if factor is None else factor.mul_(keep2)  # factor: ours too
            values = vc
        else:
            values = values.clamp_(-kl_clamp, kl_clamp)
    if estimator == "k1" and factor is not None:
        factor = _zero_invalid_(factor, valid)
    if late:
        return _zero_invalid_(values.to(out_dtype), valid), None, None
    return _cast(values, out_dtype), factor if need_grad else None, probe


def _token_grads(
    grad: torch.Tensor,
    factor: torch.Tensor | None,
    valid: torch.Tensor,
    estimator: str,
    dtypes: tuple[torch.dtype, torch.dtype],
    needs: tuple[bool, bool],
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The backward of :class:`_TokenTerms`: one multiplication by the saved factor.

    ``p = grad * factor`` is the gradient of the side the estimator's argument grows with
    (``logp`` for k1 and k2, ``ref_logp`` for k3: ``d = ref_logp - logp``); the other side's
    is ``-p``. The negation is done after narrowing to the input dtype (half the bytes for
    half-precision inputs; the same bits, as rounding is symmetric in sign), in place on our
    own buffer unless the other side shares it.
    """
    if factor is None or not factor.numel():  # k1 without clamps: d k1 / d logp = 1 where valid
        p = _zero_invalid(grad.to(_work_dtype(*dtypes)), valid)
    elif grad.dtype != factor.dtype:  # the converted copy is ours: multiplied in place
        p = grad.to(factor.dtype).mul_(factor)
    else:  # factor: k1 the clamps' mask, k2 delta, k3 exp(-delta) - 1; 0 where invalid
        p = torch.mul(grad, factor)
    plus, minus = (1, 0) if estimator == "k3" else (0, 1)
    out: list[torch.Tensor | None] = [None, None]
    if needs[plus]:
        out[plus] = p.to(dtypes[plus])
    if needs[minus]:
        q = p.to(dtypes[minus])
        out[minus] = q.neg() if q is p and out[plus] is p else q.neg_()
    return out[0], out[1]


class _TokenTerms(torch.autograd.Function):
    """Differentiable :func:`_token_terms`: the backward is the exact derivative in closed
    form, one multiplication by a saved factor, instead of autograd's chain of ops (d/d
    ref_logp is the negative of d/d logp). Outputs (values, probe or None). The non-tensor
    arguments come packed in one tuple, ``spec`` = (estimator, log_ratio_clamp, kl_clamp,
    out_dtype): each argument of ``apply`` costs a check per call."""

    @staticmethod
    def forward(
        ctx: torch.autograd.function.FunctionCtx,
        logp: torch.Tensor,
        ref_logp: torch.Tensor,
        valid: torch.Tensor,
        spec: tuple[str, float | None, float | None, torch.dtype],
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        estimator, log_ratio_clamp, kl_clamp, out_dtype = spec
        values, factor, probe = _token_terms(
            logp, ref_logp, valid, estimator, log_ratio_clamp, kl_clamp, True, out_dtype
        )
        ctx.save_for_backward(factor, valid)  # type: ignore[arg-type]
        if probe is not None:
            ctx.mark_non_differentiable(probe)
        ctx.estimator = estimator  # type: ignore[attr-defined]
        ctx.dtypes = (logp.dtype, ref_logp.dtype)  # type: ignore[attr-defined]
        return values, probe

    @staticmethod
    def backward(
        ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor, _: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, ...]:
        if torch.is_grad_enabled():  # create_graph=True: a second derivative must refuse
            return _token_terms_backward_once(ctx, grad)
        # A plain backward runs without grad mode already: once_differentiable's no_grad
        # context would cost about 3% of a [64, 2048] call here, for nothing.
        return _token_terms_backward(ctx, grad)


def _token_terms_backward(
    ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor
) -> tuple[torch.Tensor | None, ...]:
    factor, valid = ctx.saved_tensors  # type: ignore[attr-defined]
    needs = tuple(ctx.needs_input_grad[:2])  # type: ignore[attr-defined]
    estimator, dtypes = ctx.estimator, ctx.dtypes  # type: ignore[attr-defined]
    grads = _token_grads(grad, factor, valid, estimator, dtypes, needs)
    return (*grads, None, None)


_token_terms_backward_once = torch.autograd.function.once_differentiable(_token_terms_backward)
""":func:`_token_terms_backward` whose results raise if differentiated again."""


class _TokenTermsVmap(torch.autograd.Function):
    """:class:`_TokenTerms` in the ``setup_context`` form that ``torch.func`` transforms
    (``vmap``) need; slower to call, so used only under a transform."""

    generate_vmap_rule = True

    @staticmethod
    def forward(
        logp: torch.Tensor,
        ref_logp: torch.Tensor,
        valid: torch.Tensor,
        estimator: str,
        log_ratio_clamp: float | None,
        kl_clamp: float | None,
        out_dtype: torch.dtype,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        values, factor, probe = _token_terms(
            logp, ref_logp, valid, estimator, log_ratio_clamp, kl_clamp, True, out_dtype, False
        )
        return (
            values,
            _empty(values) if factor is None else factor,
            _empty(values) if probe is None else probe,
        )

    @staticmethod
    def setup_context(
        ctx: torch.autograd.function.FunctionCtx, inputs: tuple[Any, ...], output: tuple[Any, ...]
    ) -> None:
        logp, ref_logp, valid, estimator = inputs[:4]
        _, factor, probe = output
        ctx.save_for_backward(factor, valid)
        ctx.mark_non_differentiable(factor, probe)
        ctx.estimator = estimator  # type: ignore[attr-defined]
        ctx.dtypes = (logp.dtype, ref_logp.dtype)  # type: ignore[attr-defined]

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(
        ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor, *_: torch.Tensor
    ) -> tuple[torch.Tensor | None, ...]:
        factor, valid = ctx.saved_tensors  # type: ignore[attr-defined]
        needs = tuple(ctx.needs_input_grad[:2])  # type: ignore[attr-defined]
        estimator, dtypes = ctx.estimator, ctx.dtypes  # type: ignore[attr-defined]
        grads = _token_grads(grad, factor, valid, estimator, dtypes, needs)
        return (*grads, None, None, None, None, None)


def _values(
    logp: torch.Tensor,
    ref_logp: torch.Tensor,
    valid: torch.Tensor,
    config: KLConfig,
    estimator: str | None = None,
    kl_clamp: float | bool | None = True,
    out_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(per-token values, zero where invalid, in ``out_dtype`` (default: the work dtype);
    the probe). Unchecked. Without a gradient to take it calls :func:`_token_terms` directly
    (an autograd.Function call costs more than the arithmetic here)."""
    dtype = _work_dtype(logp.dtype, ref_logp.dtype) if out_dtype is None else out_dtype
    spec = (
        config.estimator if estimator is None else estimator,
        config.log_ratio_clamp,
        config.kl_clamp if kl_clamp is True else kl_clamp,
        dtype,
    )
    if _transformed():
        values, _, probe = _TokenTermsVmap.apply(logp, ref_logp, valid, *spec)  # type: ignore[no-untyped-call]
    elif torch.is_grad_enabled() and (logp.requires_grad or ref_logp.requires_grad):
        values, probe = _TokenTerms.apply(logp, ref_logp, valid, spec)  # type: ignore[no-untyped-call]
    else:
        values, _, probe = _token_terms(logp, ref_logp, valid, *spec[:3], False, dtype)
    return values, probe


def _finite(out: torch.Tensor | None, probe: torch.Tensor | None = None) -> bool:
    """One reduction and one synchronisation: True when ``out`` (and the probe) are finite.

    A sum of finite values can overflow: then the slow path looks token by token.
    """
    if _transformed():
        return True
    if out is not None and out.requires_grad:
        out = out.detach()  # no graph node for the check's sum
    flag = None if out is None else (out.sum() if out.dim() else out)
    if probe is not None and probe.numel():
        flag = probe if flag is None else flag + probe
    if flag is None:
        return True
    return math.isfinite(float(flag))  # float(): cheaper than torch.isfinite


def _bad_tokens(
    logp: torch.Tensor,
    ref_logp: torch.Tensor,
    valid: torch.Tensor,
    config: KLConfig,
    extra: tuple[torch.Tensor | None, ...] = (),
) -> torch.Tensor:
    """Bool ``[B, T]``: valid tokens whose inputs, log-ratio or per-token term is not finite."""
    with torch.no_grad():
        work = _work_dtype(logp.dtype, ref_logp.dtype)
        ok = torch.isfinite(ref_logp.to(work) - logp.to(work))
        if config.granularity == "token":
            values, _ = _values(logp.detach(), ref_logp.detach(), valid, config)
            ok &= torch.isfinite(values)
        for other in extra:
            if other is not None:
                ok &= torch.isfinite(other)
        return valid & ~ok


def _describe(x: torch.Tensor, row: int, col: int) -> str:
    return f"{float(x[row, col]):g}"


def _policy(
    logp: torch.Tensor,
    ref_logp: torch.Tensor,
    valid: torch.Tensor,
    config: KLConfig,
    what: str,
    extra: tuple[tuple[str, torch.Tensor | None], ...] = (),
) -> torch.Tensor | None:
    """Slow path: None when no valid token is bad; else raise (``nan_policy="raise"``) or
    return the mask without the bad tokens, counted in :func:`nonfinite_count`."""
    bad = _bad_tokens(logp, ref_logp, valid, config, tuple(t for _, t in extra))
    n = int(bad.sum())
    if n == 0:
        return None
    if config.nan_policy == "mask":
        _count_masked(n)
        return valid & ~bad
    first = int(bad.flatten().nonzero()[0])
    row, col = divmod(first, bad.shape[1])
    lp, rl = float(logp[row, col]), float(ref_logp[row, col])
    parts = [f"logp={lp:g}", f"ref_logp={rl:g}"]
    parts += [f"{name}={_describe(t, row, col)}" for name, t in extra if t is not None]
    if not (math.isfinite(lp) and math.isfinite(rl)) or any(
        t is not None and not math.isfinite(float(t[row, col])) for _, t in extra
    ):
        cause = "an input log-probability is not finite"
    elif not math.isfinite(rl - lp):
        cause = "the log-ratio overflows"
    else:
        work = _work_dtype(logp.dtype, ref_logp.dtype)
        cause = (
            f"{config.estimator} of log-ratio ref_logp - logp = {rl - lp:g} overflows "
            f"{str(work).removeprefix('torch.')}; bound it with KLConfig.log_ratio_clamp"
        )
    raise NonFiniteKLError(
        f"kl_patches.core.{what}: non-finite KL at row {row}, column {col} ({n} valid "
        f"token(s) in all; {', '.join(parts)}): {cause}; fix the inputs, or set "
        "KLConfig.nan_policy='mask' to drop such tokens (counted by "
        "kl_patches.core.nonfinite_count())"
    )


def _overflow(out: torch.Tensor, what: str) -> NonFiniteKLError:
    where = ""
    if out.dim() >= 1:
        index = int((~torch.isfinite(out.detach())).flatten().nonzero()[0])
        where = f" in row {index // out.shape[1] if out.dim() == 2 else index}"
        if out.dim() == 2:
            where += f", column {index % out.shape[1]}"
    dtype = str(out.dtype).removeprefix("torch.")
    return NonFiniteKLError(
        f"kl_patches.core.{what}: the result overflows {dtype}{where} although every input "
        "and per-token term is finite; bound the KL with KLConfig.log_ratio_clamp or "
        "kl_clamp, or compute in a wider dtype"
    )


def _guarded(
    fast: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor | None]],
    logp: torch.Tensor,
    ref_logp: torch.Tensor,
    valid: torch.Tensor,
    config: KLConfig,
    what: str,
    extra: tuple[tuple[str, torch.Tensor | None], ...] = (),
    probe_covers: bool = False,
) -> torch.Tensor:
    """Run ``fast(valid) -> (result, probe)`` under the finiteness policy.

    ``probe_covers``: the probe alone decides (the clamps bound every value, so only a
    non-finite log-ratio, which the probe sees, can make one non-finite): no pass over the
    result.
    """
    out, probe = fast(valid)
    if _finite(None if probe_covers else out, probe):
        return out
    reduced = _policy(logp, ref_logp, valid, config, what, extra)
    if reduced is not None:
        out, probe = fast(reduced)
        if _finite(out, probe):
            return out
    if bool(torch.isfinite(out.detach()).all()):
        return out  # only the check's own sum overflowed
    raise _overflow(out, what)


def estimate(delta: torch.Tensor, estimator: str) -> torch.Tensor:
    """Elementwise estimator value from the log-ratio ``delta`` (log pi - log pi_ref)."""
    if estimator == "k1":
        return delta
    if estimator == "k2":
        return 0.5 * delta * delta
    if estimator == "k3":
        return torch.expm1(-delta) + delta
    raise ValueError(f"estimator={estimator!r} is not valid; choose one of ['k1', 'k2', 'k3']")


def _clamp(x: torch.Tensor, c: float | None) -> torch.Tensor:
    return x if c is None else x.clamp(-c, c)


def _plus(probe: torch.Tensor | None, other: torch.Tensor) -> torch.Tensor:
    return other if probe is None or not probe.numel() else probe + other


def log_ratio(logp: torch.Tensor, ref_logp: torch.Tensor, config: KLConfig) -> torch.Tensor:
    """delta = logp - ref_logp, clamped to ``config.log_ratio_clamp`` when set."""
    return _clamp(logp - ref_logp, config.log_ratio_clamp)


def kl_terms(
    logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor, config: KLConfig
) -> torch.Tensor:
    """Per-token estimator values ``[B, T]``, differentiable through ``logp``; 0 on padding.

    The granularity is not used here: these are always the per-token values. Computed in
    float32 for half-precision inputs, returned in ``logp``'s dtype; non-finite values follow
    ``config.nan_policy``.
    """
    _check_shapes(logp, ref_logp, mask)

    def fast(valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        return _values(logp, ref_logp, valid, config, out_dtype=logp.dtype)

    # kl_clamp bounds every value: non-finite only from a NaN log-ratio, which the probe sees
    covers = config.kl_clamp is not None and config.kl_clamp <= torch.finfo(logp.dtype).max
    return _guarded(fast, logp, ref_logp, _bool_mask(mask), config, "kl_terms", probe_covers=covers)


def _sequence(
    logp: torch.Tensor, ref_logp: torch.Tensor, valid: torch.Tensor, config: KLConfig
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(sequence estimates ``[B]`` in the work dtype, probe). Unchecked."""
    if config.granularity == "token":
        values, probe = _values(logp, ref_logp, valid, config)
        return values.sum(-1), probe
    delta, probe = _values(logp, ref_logp, valid, config, estimator="k1", kl_clamp=None)
    total = delta.sum(-1)
    value = _clamp(estimate(total, config.estimator), config.kl_clamp)
    return value, _plus(probe, total.detach().sum())


def sequence_kl(
    logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor, config: KLConfig
) -> torch.Tensor:
    """Sequence-level estimate ``[B]`` under ``config.granularity``.

    ``token``: sum over the sequence of the per-token values; ``sequence``: the estimator of the
    summed log-ratio S = sum_t delta_t (``kl_clamp`` then bounds the sequence value). Summed in
    float32 or wider, returned in ``logp``'s dtype.
    """
    _check_shapes(logp, ref_logp, mask)

    def fast(valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        value, probe = _sequence(logp, ref_logp, valid, config)
        return _cast(value, logp.dtype), probe

    return _guarded(fast, logp, ref_logp, _bool_mask(mask), config, "sequence_kl")


def reward_penalty(
    logp: torch.Tensor,
    ref_logp: torch.Tensor,
    mask: torch.Tensor,
    config: KLConfig,
    *,
    behaviour_logp: torch.Tensor | None = None,
    trainer_ratio: bool = False,
    ratio_logp: torch.Tensor | None = None,
) -> torch.Tensor:
    """Detached penalty, already times ``coef``, to subtract from the reward.

    Without ``behaviour_logp``, pass the log-probs of the policy that sampled the batch as
    ``logp``. Shape ``[B]`` for ``reward_shape="sequence"``; ``[B, T]`` for ``"reward_to_go"``
    (token t is charged the estimator summed over tokens t..T; zero on padding). Zeros when
    there is no reward side.

    Off-policy, pass the current policy's log-probs as ``logp`` and the sampling (behaviour)
    policy's as ``behaviour_logp``. With ``importance_weighting="sequence"`` the result is
    :func:`importance_weighted_penalty` (always ``[B, T]``; ``trainer_ratio`` and
    ``ratio_logp`` are passed on) and ``behaviour_logp`` is required (on-policy pass
    ``behaviour_logp=logp``). For every other config the penalty is computed, as above, from
    the sampling policy's log-probs, here ``behaviour_logp`` (what the libraries do), and
    ``trainer_ratio``/``ratio_logp`` are not used.
    """
    if config.importance_weighting == "sequence":
        if behaviour_logp is None:
            raise ValueError(
                "importance_weighting='sequence' needs behaviour_logp (the sampling policy's "
                "log-probs) next to logp (the current policy's); on-policy pass "
                "behaviour_logp=logp"
            )
        return importance_weighted_penalty(
            logp,
            ref_logp,
            behaviour_logp,
            mask,
            config,
            trainer_ratio=trainer_ratio,
            ratio_logp=ratio_logp,
        )
    if behaviour_logp is not None:
        _check_like("behaviour_logp", behaviour_logp, logp)
        logp = behaviour_logp
    _check_shapes(logp, ref_logp, mask)
    logp, ref_logp = logp.detach(), ref_logp.detach()
    if config.reward_shape == "reward_to_go":
        if not config.has_reward:
            return torch.zeros_like(logp)

        def to_go(valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
            terms, probe = _values(logp, ref_logp, valid, config)
            total = terms.flip(-1).cumsum(-1).flip(-1)
            return _cast(_zero_invalid(total, valid).mul_(config.coef), logp.dtype), probe

        return _guarded(to_go, logp, ref_logp, _bool_mask(mask), config, "reward_penalty")
    if not config.has_reward:
        return torch.zeros(logp.shape[0], dtype=logp.dtype, device=logp.device)

    def sequence(valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        value, probe = _sequence(logp, ref_logp, valid, config)
        return _cast(value * config.coef, logp.dtype), probe

    return _guarded(sequence, logp, ref_logp, _bool_mask(mask), config, "reward_penalty")


def prefix_log_weights(
    logp: torch.Tensor,
    behaviour_logp: torch.Tensor,
    mask: torch.Tensor,
    is_clip: float | None = None,
) -> torch.Tensor:
    """Detached log prefix weights ``[B, T]``: log W_{1:u} = sum_{s<=u} (logp_s - behaviour_logp_s).

    A running sum in log space (no product of ratios is formed). Only valid tokens enter the
    sum: a masked-out token (padding, or a prompt/tool token inside the row) has ratio 1.
    ``is_clip`` caps each prefix weight from above, min(W_{1:u}, c), i.e. log W at log c.
    Zero (weight 1) on padding. Computed in float32 or wider; returned in ``logp``'s dtype.
    A non-finite log-prob on a valid token makes the weights from there on non-finite (the
    callers apply the finiteness policy).
    """
    _check_shapes(logp, behaviour_logp, mask)
    is_clip = _is_clip(is_clip)
    m = _bool_mask(mask)
    work = _work_dtype(logp.dtype, behaviour_logp.dtype)
    step = _zero_invalid(logp.detach().to(work) - behaviour_logp.detach().to(work), m)
    log_w = step.cumsum(-1)
    if is_clip is not None:
        log_w = log_w.clamp(max=math.log(is_clip))
    return _cast(_zero_invalid(log_w, m), logp.dtype)


def _is_clip(value: object) -> float | None:
    """``is_clip`` validated as :class:`KLConfig` validates its field: None or a finite
    float > 0 (a NaN would make every weight NaN, silently)."""
    if value is None:
        return None
    number = _real(value)
    if number is None or number <= 0:
        raise ValueError(
            f"prefix_log_weights: is_clip={value!r} is not valid; use None or a finite float > 0"
        )
    return number


def importance_weighted_penalty(
    logp: torch.Tensor,
    ref_logp: torch.Tensor,
    behaviour_logp: torch.Tensor,
    mask: torch.Tensor,
    config: KLConfig,
    *,
    trainer_ratio: bool = False,
    ratio_logp: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-token reward-side penalty ``[B, T]`` under per-decision importance weighting.

    For ``importance_weighting="sequence"``. ``logp``: the current policy pi (the one whose
    gradient the update takes; recompute at every update), ``behaviour_logp``: the policy mu
    that sampled the batch, ``ref_logp``: pi_ref, all at the sampled tokens. Detached, times
    ``coef``, zero on padding; to be subtracted from token t's reward before the advantage.
    With k_u the estimator of token u from pi and pi_ref and W_u = min(W_{1:u}, is_clip) the
    (capped) prefix weight of :func:`prefix_log_weights`, the target the trainer must reach is

      ``reward_to_go``: P_t = coef * sum_{u>=t} W_u k_u,
      ``sequence``:     P_t = coef * (sum_{u>=t} W_u k_u + W_t * sum_{u<t} k_u)

    (the second keeps the sequence scalar's past-token terms, which have zero mean under the
    weight W_t; on-policy every W is 1 and P_t is the sequence penalty on every token).

    ``trainer_ratio`` says how the trainer turns the penalty into a gradient:
      * ``False``: REINFORCE-style, sum_t grad log pi_t * A_t with A_t = R_t - P_t; the penalty
        is P_t itself;
      * ``True``: PPO-style, sum_t ratio_t * grad log pi_t * A_t with
        ratio_t = pi_t / exp(ratio_logp_t) (``ratio_logp`` defaults to ``behaviour_logp``); the
        penalty returned is P_t / ratio_t, so that ratio_t times it is P_t again. This assumes
        the token is inside PPO's clip range (outside it the trainer drops the token's gradient,
        for the task reward as well).
    Either way E_mu[sum_t grad log pi_t * P_t] = coef * E_pi[sum_t grad log pi_t sum_{u>=t} k_u],
    for k1 coef * grad KL(pi || pi_ref), when is_clip is None (and mu > 0 wherever pi > 0).
    Computed in float32 or wider; returned in ``logp``'s dtype. A non-finite ``behaviour_logp``
    or ``ratio_logp`` on a valid token counts as a bad token of ``config.nan_policy``.
    """
    if config.importance_weighting != "sequence":
        raise ValueError(
            "importance_weighted_penalty is for importance_weighting='sequence'; got "
            f"importance_weighting={config.importance_weighting!r} (use reward_penalty)"
        )
    _check_shapes(logp, ref_logp, mask)
    _check_like("behaviour_logp", behaviour_logp, logp)
    _check_like("ratio_logp", ratio_logp, logp)
    if not config.has_reward:
        return torch.zeros_like(logp).detach()
    work = _work_dtype(logp.dtype, ref_logp.dtype)
    lp, rl = logp.detach().to(work), ref_logp.detach().to(work)
    behaviour = behaviour_logp.detach().to(work)
    ratio = None if ratio_logp is None else ratio_logp.detach().to(work)

    def fast(valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        terms, probe = _values(lp, rl, valid, config)
        # the log-ratios to mu and to the ratio policy enter the check (a clipped or zero
        # weight would hide a non-finite one)
        probe = _plus(probe, _zero_invalid(lp - behaviour, valid).sum())
        if trainer_ratio and ratio is not None:
            probe = probe + _zero_invalid(lp - ratio, valid).sum()
        weight = torch.exp(prefix_log_weights(lp, behaviour, valid, config.is_clip))
        penalty = _zero_invalid(weight * terms, valid).flip(-1).cumsum(-1).flip(-1)
        if config.reward_shape == "sequence":
            past = terms.cumsum(-1) - terms
            penalty = penalty + _zero_invalid(weight * past, valid)
        if trainer_ratio:
            denom = behaviour if ratio is None else ratio
            penalty = penalty * torch.exp(-_zero_invalid(lp - denom, valid))
        return _cast(config.coef * _zero_invalid(penalty, valid), logp.dtype), probe

    extra = (("behaviour_logp", behaviour), ("ratio_logp", ratio if trainer_ratio else None))
    return _guarded(fast, lp, rl, _bool_mask(mask), config, "importance_weighted_penalty", extra)


def importance_weighted_surrogate(
    logp: torch.Tensor,
    ref_logp: torch.Tensor,
    behaviour_logp: torch.Tensor,
    mask: torch.Tensor,
    config: KLConfig,
    *,
    num_sequences: float | torch.Tensor | None = None,
) -> torch.Tensor:
    """Differentiable scalar: the reward side of ``importance_weighting="sequence"`` as a loss.

    For trainers that take the penalty at loss time instead of in the advantages:
    ``sum_t logp_t * P_t`` per sequence (P_t the detached target of
    :func:`importance_weighted_penalty` with ``trainer_ratio=False``, already times ``coef``),
    then :func:`aggregate`'s ``"sum"``: the mean over the rows, or the sum over
    ``num_sequences``. Added to a loss that is minimised, its expected gradient under samples
    from the behaviour policy is ``coef * grad KL(pi || pi_ref)`` for k1 (unclipped), the
    REINFORCE estimator of the on-policy reward-side KL without a baseline. ``logp`` must
    carry the graph of the current policy; only it is differentiated (the weights and the
    penalty are detached). An exact zero connected to ``logp`` without a reward side.
    """
    _check_shapes(logp, ref_logp, mask)
    if not config.has_reward:
        return logp[:0].sum()
    penalty = importance_weighted_penalty(
        logp.detach(), ref_logp, behaviour_logp, mask, config, trainer_ratio=False
    )
    work = _work_dtype(logp.dtype, penalty.dtype)
    weight = penalty.to(work)
    # a zero penalty (padding, a token dropped by nan_policy="mask") contributes exactly 0,
    # whatever logp holds there (-inf * 0 would be NaN)
    product = torch.where(
        weight == 0, torch.zeros((), dtype=work, device=weight.device), logp.to(work) * weight
    )
    return _cast(aggregate(product, mask, "sum", num_sequences=num_sequences), logp.dtype)


def _last_token(mask: torch.Tensor) -> torch.Tensor:
    """Bool ``[B, T]``: True at each row's last valid token."""
    m = _bool_mask(mask)
    count = m.long().cumsum(-1)
    return m & (count == count[:, -1:])


def on_last_token(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``[B]`` values -> ``[B, T]`` with each value on its row's last valid token, 0 elsewhere.

    How a sequence-level quantity enters a per-token reward or loss (rows with no valid token get
    nothing). Keeps ``values``' dtype, on ``mask``'s device.
    """
    if values.dim() != 1 or values.shape[0] != mask.shape[0]:
        raise ValueError(f"values must be [B] = [{mask.shape[0]}]; got shape {tuple(values.shape)}")
    column = values.to(mask.device).unsqueeze(-1)
    return torch.where(_last_token(mask), column, torch.zeros_like(column))


def per_token_kl(
    logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor, config: KLConfig
) -> torch.Tensor:
    """The monitor libraries log as "the KL": each row's sequence estimate / its length, ``[B]``.

    Detached; a row with no valid token gives 0. Tokens dropped by ``nan_policy="mask"`` do
    not count in the length.
    """
    _check_shapes(logp, ref_logp, mask)
    logp, ref_logp = logp.detach(), ref_logp.detach()

    def fast(valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        value, probe = _sequence(logp, ref_logp, valid, config)
        return _cast(value / valid.sum(-1).clamp(min=1), logp.dtype), probe

    return _guarded(fast, logp, ref_logp, _bool_mask(mask), config, "per_token_kl")


def _loss_values(
    logp: torch.Tensor,
    ref_logp: torch.Tensor,
    valid: torch.Tensor,
    config: KLConfig,
    old_logp: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(loss-side values ``[B, T]`` in the work dtype, zero where invalid; probe). Unchecked."""
    if config.granularity == "sequence":
        seq, probe = _sequence(logp, ref_logp, valid, config)
        return on_last_token(seq, valid), probe
    terms, probe = _values(logp, ref_logp, valid, config)
    if config.importance_weighting == "sequence":
        assert old_logp is not None  # checked by the callers
        steps = _zero_invalid(logp.detach().to(terms.dtype) - old_logp.to(terms.dtype), valid)
        weighted = _prefix_weighted_loss_terms(terms, logp, valid, config, old_logp)
        return weighted, _plus(probe, steps.sum())  # clipping would hide a non-finite step
    if config.importance_weighting == "token":
        assert old_logp is not None  # checked by the callers
        log_w = torch.where(
            valid,
            logp.to(terms.dtype) - old_logp.detach().to(terms.dtype),
            torch.zeros((), dtype=terms.dtype, device=terms.device),
        )
        terms = torch.exp(log_w) * terms
        probe = _plus(probe, log_w.detach().sum())  # a weight exp(-inf) = 0 hides old_logp=inf
    return terms, probe


def _check_old(config: KLConfig, old_logp: torch.Tensor | None, logp: torch.Tensor) -> None:
    if config.granularity == "sequence" or config.importance_weighting == "none":
        return
    if old_logp is None:
        if config.importance_weighting == "token":
            raise ValueError(
                "importance_weighting='token' needs old_logp (the sampling policy's log-probs)"
            )
        raise ValueError(
            "importance_weighting='sequence' needs old_logp (the behaviour policy's log-probs) "
            "for the loss side's prefix weights"
        )
    _check_like("old_logp", old_logp, logp)


def _old_extra(
    config: KLConfig, old_logp: torch.Tensor | None
) -> tuple[tuple[str, torch.Tensor | None], ...]:
    if config.granularity == "sequence" or config.importance_weighting == "none":
        return ()
    return (("old_logp", None if old_logp is None else old_logp.detach()),)


def loss_per_token(
    logp: torch.Tensor,
    ref_logp: torch.Tensor,
    mask: torch.Tensor,
    config: KLConfig,
    old_logp: torch.Tensor | None = None,
) -> torch.Tensor:
    """Differentiable loss-side values ``[B, T]``, before the coefficient and the aggregation.

    Token granularity: the per-token estimator, times pi/pi_old when
    ``importance_weighting="token"`` (``old_logp`` required), or times the detached prefix
    weight W_{1:u} of :func:`prefix_log_weights` (``old_logp`` = the behaviour policy's
    log-probs, required) when ``importance_weighting="sequence"``. Sequence granularity: the
    sequence estimate sits on each row's last valid token, zeros elsewhere, so every
    aggregation treats it as one term per sequence. Returned in ``logp``'s dtype.
    """
    _check_shapes(logp, ref_logp, mask)
    _check_old(config, old_logp, logp)

    def fast(valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        values, probe = _loss_values(logp, ref_logp, valid, config, old_logp)
        return _cast(values, logp.dtype), probe

    return _guarded(
        fast,
        logp,
        ref_logp,
        _bool_mask(mask),
        config,
        "loss_per_token",
        _old_extra(config, old_logp),
    )


def _prefix_weighted_loss_terms(
    terms: torch.Tensor,
    logp: torch.Tensor,
    mask: torch.Tensor,
    config: KLConfig,
    old_logp: torch.Tensor | None,
) -> torch.Tensor:
    """Loss side of ``importance_weighting="sequence"``: each term times its detached W_{1:u}.

    E_mu[sum_u W_{1:u} grad k_u] = E_pi[sum_u grad k_u]: the path-wise term of the on-policy
    loss side, so reward + loss with one coefficient stays unbiased off-policy. ``terms`` are
    zero where invalid and W is 1 there, so the product needs no mask.
    """
    assert old_logp is not None  # checked by the callers
    log_w = prefix_log_weights(logp.to(terms.dtype), old_logp.to(terms.dtype), mask, config.is_clip)
    return torch.exp(log_w) * terms


class _ZeroInvalid(torch.autograd.Function):
    """Differentiable :func:`_zero_invalid` (the mask passes the gradient where valid)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        return _zero_invalid(x, valid)

    @staticmethod
    def setup_context(
        ctx: torch.autograd.function.FunctionCtx, inputs: tuple[Any, ...], output: torch.Tensor
    ) -> None:
        ctx.save_for_backward(inputs[1])

    @staticmethod
    def backward(
        ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor
    ) -> tuple[torch.Tensor, None]:
        (valid,) = ctx.saved_tensors  # type: ignore[attr-defined]
        return _ZeroInvalid.apply(grad, valid), None  # type: ignore[no-untyped-call]


def _count_check(name: str, value: float | torch.Tensor | None, valid: torch.Tensor) -> bool:
    """Validate a Python-number denominator; True when it is 0 with no valid token (result 0).

    Tensors are not inspected here (that would synchronise): a zero tensor denominator gives a
    non-finite result, which the callers diagnose.
    """
    if value is None or isinstance(value, torch.Tensor):
        return False
    number = float(value)
    if number > 0 and math.isfinite(number):
        return False
    tokens = int(valid.sum())
    if number == 0 and tokens == 0:
        return True
    raise ValueError(
        f"{name}={value!r} is not valid with {tokens} valid token(s); pass a finite count > 0 "
        f"(or 0 only for a micro-batch without valid tokens)"
    )


def _reduce(
    values: torch.Tensor,
    valid: torch.Tensor,
    mode: str,
    normalizer: float | torch.Tensor | None,
    num_sequences: float | torch.Tensor | None,
) -> torch.Tensor:
    """:func:`aggregate` of values that are already zero where invalid."""
    if mode not in ("sum", "token_mean", "seq_mean_token_mean"):
        raise ValueError(
            f"loss_aggregation={mode!r} is not valid; choose one of "
            "['sum', 'token_mean', 'seq_mean_token_mean']"
        )
    empty = values.shape[0] == 0
    if mode == "token_mean":
        if normalizer is None:
            return values.sum() / valid.sum().clamp(min=1)
        if _count_check("normalizer", normalizer, valid):
            return values.sum()
        return values.sum() / normalizer
    if _count_check("num_sequences", num_sequences, valid):
        return values.sum()
    if mode == "sum":
        if num_sequences is None:
            return values.sum() if empty else values.sum() / values.shape[0]
        return values.sum() / num_sequences
    per_row = values.sum(-1) / valid.sum(-1).clamp(min=1)
    if num_sequences is None:
        return per_row.sum() if empty else per_row.mean()
    return per_row.sum() / num_sequences


def _zero_denominator(
    out: torch.Tensor,
    valid: torch.Tensor,
    normalizer: float | torch.Tensor | None,
    num_sequences: float | torch.Tensor | None,
    zero: Callable[[], torch.Tensor],
) -> torch.Tensor | None:
    """For a non-finite result: 0 (from ``zero()``) when a tensor denominator is 0 and no
    token is valid; raise ValueError naming it when it is 0 with valid tokens; else None."""
    for name, value in (("normalizer", normalizer), ("num_sequences", num_sequences)):
        if isinstance(value, torch.Tensor) and not bool((value != 0).all()):
            tokens = int(valid.sum())
            if tokens == 0:
                return zero()
            raise ValueError(
                f"{name}={value!r} is not valid with {tokens} valid token(s); pass a finite "
                "count > 0 (or 0 only for a micro-batch without valid tokens)"
            )
    return None


def aggregate(
    values: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    normalizer: float | torch.Tensor | None = None,
    num_sequences: float | torch.Tensor | None = None,
) -> torch.Tensor:
    """Reduce ``[B, T]`` values to a scalar.

    ``sum``: per-row sum, mean over rows. ``token_mean``: sum over valid tokens divided by their
    number (or by ``normalizer``, for libraries that divide by a global token count).
    ``seq_mean_token_mean``: mean over each row's valid tokens, then mean over rows.

    ``num_sequences`` replaces the row count ``B`` of the two per-sequence modes: libraries that
    split an optimiser step into micro-batches (and data-parallel ranks) divide each
    micro-batch's sum by the step's sequence count per rank, so the micro-batch terms add up to
    one mean over the step.

    An empty batch (B=0) gives 0. A ``normalizer`` or ``num_sequences`` of 0 gives 0 when no
    token is valid and a ValueError otherwise (as does a negative or non-finite one).
    """
    m = _bool_mask(mask)
    masked = _ZeroInvalid.apply(values, m)  # type: ignore[no-untyped-call]
    out = _reduce(masked, m, mode, normalizer, num_sequences)
    if (isinstance(normalizer, torch.Tensor) or isinstance(num_sequences, torch.Tensor)) and (
        not _finite(out)
    ):
        zero = _zero_denominator(out, m, normalizer, num_sequences, lambda: masked.sum())
        if zero is not None:
            return zero
    return out


def loss_term(
    logp: torch.Tensor,
    ref_logp: torch.Tensor,
    mask: torch.Tensor,
    config: KLConfig,
    old_logp: torch.Tensor | None = None,
    normalizer: float | torch.Tensor | None = None,
    num_sequences: float | torch.Tensor | None = None,
) -> torch.Tensor:
    """Differentiable scalar, already times the loss coefficient, to add to the loss.

    ``normalizer`` and ``num_sequences`` are :func:`aggregate`'s. An exact zero that stays
    connected to ``logp`` when the config has no loss side (whatever ``logp`` holds). Summed
    in float32 or wider, returned in ``logp``'s dtype; the finiteness check is that of the
    scalar itself (no extra pass).
    """
    _check_shapes(logp, ref_logp, mask)
    if not config.has_loss:
        return logp[:0].sum()
    _check_old(config, old_logp, logp)
    valid = _bool_mask(mask)

    def fast(v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        values, probe = _loss_values(logp, ref_logp, v, config, old_logp)
        total = _reduce(values, v, config.loss_aggregation, normalizer, num_sequences)
        return _cast(config.loss_coef_value * total, logp.dtype), probe

    try:
        return _guarded(
            fast, logp, ref_logp, valid, config, "loss_term", _old_extra(config, old_logp)
        )
    except NonFiniteKLError:
        zero = _zero_denominator(
            torch.zeros(()), valid, normalizer, num_sequences, lambda: logp[:0].sum()
        )
        if zero is None:
            raise
        return zero


def _full_kl_chunk(
    logits: torch.Tensor, ref_logits: torch.Tensor, work: torch.dtype, keep_ref: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(pi, log pi - log pi_ref with the xlogy convention, pi_ref or None) of one chunk of
    rows, in three ``[rows, V]`` buffers of the work dtype at most.

    xlogy convention: a slot with pi = 0 contributes 0, whatever pi_ref is there. log pi -
    log pi_ref is -inf only where log pi is (pi = 0) and NaN only where both are -inf (a
    padded vocabulary); both become 0. +inf (pi > 0 where pi_ref = 0) stays: the KL is inf.
    """
    lp = torch.log_softmax(logits, dim=-1, dtype=work)
    ref_lp = torch.log_softmax(ref_logits, dim=-1, dtype=work)
    diff = torch.sub(lp, ref_lp).nan_to_num_(nan=0.0, neginf=0.0, posinf=math.inf)
    ref_p = ref_lp.exp_() if keep_ref else None
    del ref_lp
    return lp.exp_(), diff, ref_p


class _FullKL(torch.autograd.Function):
    """Chunked exact KL over the vocabulary that saves nothing but its inputs and ``[N]``
    output: the backward recomputes each chunk's log-softmaxes (one more forward's work) and
    writes its gradient, d KL / d logits = pi * (log pi - log pi_ref - KL) and
    d KL / d ref_logits = pi_ref - pi, straight into the gradient tensor."""

    @staticmethod
    def forward(
        ctx: torch.autograd.function.FunctionCtx,
        flat: torch.Tensor,
        ref_flat: torch.Tensor,
        valid: torch.Tensor,
        chunk_size: int,
    ) -> torch.Tensor:
        work = _work_dtype(flat.dtype, ref_flat.dtype)
        out = torch.empty(flat.shape[0], dtype=work, device=flat.device)
        for start in range(0, flat.shape[0], chunk_size):
            stop = start + chunk_size
            p, diff, _ = _full_kl_chunk(flat[start:stop], ref_flat[start:stop], work)
            out[start:stop] = p.mul_(diff).sum(-1)
            del p, diff
        out = _zero_invalid_(out, valid)
        ctx.save_for_backward(flat, ref_flat, valid, out)
        ctx.chunk_size = chunk_size  # type: ignore[attr-defined]
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(
        ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, None, None]:
        flat, ref_flat, valid, kl = ctx.saved_tensors  # type: ignore[attr-defined]
        need, need_ref = ctx.needs_input_grad[:2]  # type: ignore[attr-defined]
        chunk = ctx.chunk_size  # type: ignore[attr-defined]
        g = _zero_invalid(grad.to(kl.dtype), valid)
        valid_rows = valid.cpu()
        grad_flat = torch.empty_like(flat) if need else None
        grad_ref = torch.empty_like(ref_flat) if need_ref else None
        for start in range(0, flat.shape[0], chunk):
            stop = start + chunk
            p, diff, ref_p = _full_kl_chunk(
                flat[start:stop], ref_flat[start:stop], kl.dtype, keep_ref=need_ref
            )
            rows = g[start:stop, None]
            partial = not bool(valid_rows[start:stop].all())  # rows of garbage may be NaN
            if grad_ref is not None and ref_p is not None:
                piece = ref_p.sub_(p).mul_(rows)
                if partial:
                    piece = _zero_invalid_(piece, valid[start:stop, None])
                grad_ref[start:stop] = piece
                del ref_p, piece
            if grad_flat is not None:
                piece = diff.sub_(kl[start:stop, None]).mul_(p).mul_(rows)
                if partial:
                    piece = _zero_invalid_(piece, valid[start:stop, None])
                grad_flat[start:stop] = piece
            del p, diff
        return grad_flat, grad_ref, None, None


def _full_kl_apply(
    flat: torch.Tensor, ref_flat: torch.Tensor, valid: torch.Tensor, chunk_size: int
) -> torch.Tensor:
    out: torch.Tensor = _FullKL.apply(flat, ref_flat, valid, chunk_size)  # type: ignore[no-untyped-call]
    return out


def full_kl(
    logits: torch.Tensor,
    ref_logits: torch.Tensor,
    mask: torch.Tensor,
    chunk_size: int = 1024,
    nan_policy: str = "raise",
) -> torch.Tensor:
    """Exact per-token KL(pi(.|s_t) || pi_ref(.|s_t)) over the vocabulary, ``[B, T]``.

    A low-variance monitor: its sum over a sequence is an unbiased estimate of the sequence KL.
    Computed over ``chunk_size`` tokens at a time (in float32 for half-precision inputs); a
    vocabulary slot where pi is 0 (a ``-inf`` logit, also in both models: a padded
    vocabulary) contributes 0 (the xlogy convention). Differentiable when the inputs require
    grad. Returns float32 or wider; 0 on padding.

    Memory: a few (three or four) ``[chunk_size, V]`` buffers of the work dtype, never a
    second ``[B, T, V]`` tensor, also with grad: the graph keeps only the inputs and the
    ``[B, T]`` result, and the backward recomputes each chunk (about one more forward's time)
    and writes the ``[B, T, V]`` gradient itself (inherent: as large as the logits). Measured
    at 2048 x 32000 float32 (250 MiB per input), chunk 1024: peak RSS increase 382 MiB
    forward, 635 MiB forward + backward (before: 632 and 1009 MiB; the old graph held three
    ``[B, T, V]`` float32 tensors, with the gradient 4x the logits); at 4096 positions see
    ``python benchmarks/bench_core.py --full-kl`` (benchmarks/results.md).

    ``nan_policy`` is :attr:`KLConfig.nan_policy`'s: a non-finite KL on a valid token (a NaN
    logit, or pi > 0 where pi_ref = 0) raises :class:`NonFiniteKLError` naming its row and
    column (``"raise"``) or is zeroed and counted in :func:`nonfinite_count` (``"mask"``).
    """
    if logits.shape != ref_logits.shape or logits.dim() != 3:
        raise ValueError(
            "logits and ref_logits must share one [B, T, V] shape; got "
            f"{tuple(logits.shape)} and {tuple(ref_logits.shape)}"
        )
    if mask.shape != logits.shape[:2]:
        raise ValueError(
            f"mask must be [B, T] = {tuple(logits.shape[:2])}, got {tuple(mask.shape)}"
        )
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    if nan_policy not in ("raise", "mask"):
        raise ValueError(f"nan_policy={nan_policy!r} is not valid; choose one of ['raise', 'mask']")
    b, t, v = logits.shape
    flat, ref_flat = logits.reshape(b * t, v), ref_logits.reshape(b * t, v)
    valid = _bool_mask(mask).reshape(b * t)
    out = _full_kl_apply(flat, ref_flat, valid, chunk_size)
    if _finite(out):
        return out.reshape(b, t)
    bad = valid & ~torch.isfinite(out.detach())
    n = int(bad.sum())
    if n == 0:  # only the check's own sum overflowed
        return out.reshape(b, t)
    if nan_policy == "mask":
        _count_masked(n)
        return _full_kl_apply(flat, ref_flat, valid & ~bad, chunk_size).reshape(b, t)
    row, col = divmod(int(bad.nonzero()[0]), t)
    raise NonFiniteKLError(
        f"kl_patches.core.full_kl: non-finite KL at row {row}, column {col} ({n} valid "
        f"token(s) in all; KL={float(out[row * t + col]):g}): a logit is NaN or +inf, or pi "
        "gives probability > 0 to a token whose reference logit is -inf; fix the logits, or "
        "pass nan_policy='mask' to drop such tokens (counted by "
        "kl_patches.core.nonfinite_count())"
    )
