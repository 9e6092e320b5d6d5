"""Estimator and placement maths: every KL number an adapter puts into a reward or a loss.

Pure torch. Inputs are per-token log-probabilities of the sampled tokens, shaped ``[B, T]``,
with a ``mask`` (bool or 0/1) of valid tokens; padding never contributes, whatever value the
log-probabilities hold there. Any float dtype and any device work; results keep the input dtype.

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
"""

from __future__ import annotations

import math

import torch

from kl_patches.config import KLConfig

__all__ = [
    "aggregate",
    "estimate",
    "full_kl",
    "importance_weighted_penalty",
    "kl_terms",
    "log_ratio",
    "loss_per_token",
    "loss_term",
    "on_last_token",
    "per_token_kl",
    "prefix_log_weights",
    "reward_penalty",
    "sequence_kl",
]


def _bool_mask(mask: torch.Tensor) -> torch.Tensor:
    return mask if mask.dtype == torch.bool else mask != 0


def _check_shapes(logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor) -> None:
    if logp.dim() != 2:
        raise ValueError(f"log-probabilities must be [B, T]; got shape {tuple(logp.shape)}")
    if ref_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(
            "logp, ref_logp and mask must share one [B, T] shape; got "
            f"{tuple(logp.shape)}, {tuple(ref_logp.shape)}, {tuple(mask.shape)}"
        )


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


def log_ratio(logp: torch.Tensor, ref_logp: torch.Tensor, config: KLConfig) -> torch.Tensor:
    """delta = logp - ref_logp, clamped to ``config.log_ratio_clamp`` when set."""
    return _clamp(logp - ref_logp, config.log_ratio_clamp)


def kl_terms(
    logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor, config: KLConfig
) -> torch.Tensor:
    """Per-token estimator values ``[B, T]``, differentiable through ``logp``; 0 on padding.

    The granularity is not used here: these are always the per-token values.
    """
    _check_shapes(logp, ref_logp, mask)
    m = _bool_mask(mask)
    delta = torch.where(m, log_ratio(logp, ref_logp, config), torch.zeros_like(logp))
    values = _clamp(estimate(delta, config.estimator), config.kl_clamp)
    return torch.where(m, values, torch.zeros_like(values))


def sequence_kl(
    logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor, config: KLConfig
) -> torch.Tensor:
    """Sequence-level estimate ``[B]`` under ``config.granularity``.

    ``token``: sum over the sequence of the per-token values; ``sequence``: the estimator of the
    summed log-ratio S = sum_t delta_t (``kl_clamp`` then bounds the sequence value).
    """
    if config.granularity == "token":
        return kl_terms(logp, ref_logp, mask, config).sum(-1)
    _check_shapes(logp, ref_logp, mask)
    m = _bool_mask(mask)
    delta = torch.where(m, log_ratio(logp, ref_logp, config), torch.zeros_like(logp))
    return _clamp(estimate(delta.sum(-1), config.estimator), config.kl_clamp)


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
        if behaviour_logp.shape != logp.shape:
            raise ValueError(
                f"behaviour_logp shape {tuple(behaviour_logp.shape)} differs from logp "
                f"{tuple(logp.shape)}"
            )
        logp = behaviour_logp
    _check_shapes(logp, ref_logp, mask)
    logp, ref_logp = logp.detach(), ref_logp.detach()
    if config.reward_shape == "reward_to_go":
        if not config.has_reward:
            return torch.zeros_like(logp)
        terms = kl_terms(logp, ref_logp, mask, config)
        to_go = terms.flip(-1).cumsum(-1).flip(-1)
        m = _bool_mask(mask)
        return config.coef * torch.where(m, to_go, torch.zeros_like(to_go))
    if not config.has_reward:
        return torch.zeros(logp.shape[0], dtype=logp.dtype, device=logp.device)
    return config.coef * sequence_kl(logp, ref_logp, mask, config)


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
    """
    _check_shapes(logp, behaviour_logp, mask)
    m = _bool_mask(mask)
    work = torch.promote_types(logp.dtype, torch.float32)
    step = torch.where(
        m, logp.detach().to(work) - behaviour_logp.detach().to(work), torch.zeros((), dtype=work)
    )
    log_w = step.cumsum(-1)
    if is_clip is not None:
        log_w = log_w.clamp(max=math.log(is_clip))
    return torch.where(m, log_w, torch.zeros_like(log_w)).to(logp.dtype)


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
    Computed in float32 or wider; returned in ``logp``'s dtype.
    """
    if config.importance_weighting != "sequence":
        raise ValueError(
            "importance_weighted_penalty is for importance_weighting='sequence'; got "
            f"importance_weighting={config.importance_weighting!r} (use reward_penalty)"
        )
    _check_shapes(logp, ref_logp, mask)
    if behaviour_logp.shape != logp.shape:
        raise ValueError(
            f"behaviour_logp shape {tuple(behaviour_logp.shape)} differs from logp "
            f"{tuple(logp.shape)}"
        )
    if ratio_logp is not None and ratio_logp.shape != logp.shape:
        raise ValueError(
            f"ratio_logp shape {tuple(ratio_logp.shape)} differs from logp {tuple(logp.shape)}"
        )
    if not config.has_reward:
        return torch.zeros_like(logp).detach()
    m = _bool_mask(mask)
    work = torch.promote_types(logp.dtype, torch.float32)
    lp = logp.detach().to(work)
    terms = kl_terms(lp, ref_logp.detach().to(work), mask, config)
    log_w = prefix_log_weights(lp, behaviour_logp.to(work), mask, config.is_clip)
    zero = torch.zeros((), dtype=work)
    weighted = torch.where(m, torch.exp(log_w) * terms, zero)
    penalty = weighted.flip(-1).cumsum(-1).flip(-1)
    if config.reward_shape == "sequence":
        past = terms.cumsum(-1) - terms
        penalty = penalty + torch.where(m, torch.exp(log_w) * past, zero)
    if trainer_ratio:
        denom = behaviour_logp if ratio_logp is None else ratio_logp
        log_ratio_t = torch.where(m, lp - denom.detach().to(work), zero)
        penalty = penalty * torch.exp(-log_ratio_t)
    return (config.coef * torch.where(m, penalty, zero)).to(logp.dtype)


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

    Detached; a row with no valid token gives 0.
    """
    seq = sequence_kl(logp.detach(), ref_logp.detach(), mask, config)
    return seq / _bool_mask(mask).sum(-1).clamp(min=1)


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
    aggregation treats it as one term per sequence.
    """
    if config.granularity == "sequence":
        seq = sequence_kl(logp, ref_logp, mask, config)
        return on_last_token(seq, mask)
    terms = kl_terms(logp, ref_logp, mask, config)
    if config.importance_weighting == "sequence":
        return _prefix_weighted_loss_terms(terms, logp, mask, config, old_logp)
    if config.importance_weighting == "token":
        if old_logp is None:
            raise ValueError(
                "importance_weighting='token' needs old_logp (the sampling policy's log-probs)"
            )
        if old_logp.shape != logp.shape:
            raise ValueError(
                f"old_logp shape {tuple(old_logp.shape)} differs from logp {tuple(logp.shape)}"
            )
        m = _bool_mask(mask)
        log_w = torch.where(m, logp - old_logp.detach(), torch.zeros_like(logp))
        terms = torch.exp(log_w) * terms
    return terms


def _prefix_weighted_loss_terms(
    terms: torch.Tensor,
    logp: torch.Tensor,
    mask: torch.Tensor,
    config: KLConfig,
    old_logp: torch.Tensor | None,
) -> torch.Tensor:
    """Loss side of ``importance_weighting="sequence"``: each term times its detached W_{1:u}.

    E_mu[sum_u W_{1:u} grad k_u] = E_pi[sum_u grad k_u]: the path-wise term of the on-policy
    loss side, so reward + loss with one coefficient stays unbiased off-policy.
    """
    if old_logp is None:
        raise ValueError(
            "importance_weighting='sequence' needs old_logp (the behaviour policy's log-probs) "
            "for the loss side's prefix weights"
        )
    if old_logp.shape != logp.shape:
        raise ValueError(
            f"old_logp shape {tuple(old_logp.shape)} differs from logp {tuple(logp.shape)}"
        )
    log_w = prefix_log_weights(logp, old_logp, mask, config.is_clip)
    m = _bool_mask(mask)
    return torch.where(m, torch.exp(log_w) * terms, torch.zeros_like(terms))


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
    """
    m = _bool_mask(mask)
    masked = torch.where(m, values, torch.zeros_like(values))
    rows = values.shape[0] if num_sequences is None else num_sequences
    if mode == "sum":
        return masked.sum() / rows
    if mode == "token_mean":
        denom = m.sum().clamp(min=1) if normalizer is None else normalizer
        return masked.sum() / denom
    if mode == "seq_mean_token_mean":
        per_row = masked.sum(-1) / m.sum(-1).clamp(min=1)
        return per_row.mean() if num_sequences is None else per_row.sum() / num_sequences
    raise ValueError(
        f"loss_aggregation={mode!r} is not valid; choose one of "
        "['sum', 'token_mean', 'seq_mean_token_mean']"
    )


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

    ``normalizer`` and ``num_sequences`` are :func:`aggregate`'s. A zero that stays connected to
    ``logp`` when the config has no loss side.
    """
    _check_shapes(logp, ref_logp, mask)
    if not config.has_loss:
        m = _bool_mask(mask)
        return torch.where(m, logp, torch.zeros_like(logp)).sum() * 0.0
    values = loss_per_token(logp, ref_logp, mask, config, old_logp)
    return config.loss_coef_value * aggregate(
        values, mask, config.loss_aggregation, normalizer=normalizer, num_sequences=num_sequences
    )


def full_kl(
    logits: torch.Tensor,
    ref_logits: torch.Tensor,
    mask: torch.Tensor,
    chunk_size: int = 1024,
) -> torch.Tensor:
    """Exact per-token KL(pi(.|s_t) || pi_ref(.|s_t)) over the vocabulary, ``[B, T]``.

    A low-variance monitor: its sum over a sequence is an unbiased estimate of the sequence KL.
    Computed over ``chunk_size`` tokens at a time (in float32 for half-precision inputs), so the
    extra memory is a few ``[chunk_size, V]`` buffers, never a second ``[B, T, V]`` tensor.
    Differentiable when the inputs require grad. Returns float32 or wider; 0 on padding.
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
    b, t, v = logits.shape
    work_dtype = torch.promote_types(logits.dtype, torch.float32)
    flat, ref_flat = logits.reshape(b * t, v), ref_logits.reshape(b * t, v)
    m = _bool_mask(mask).reshape(b * t)
    pieces = []
    for start in range(0, b * t, chunk_size):
        lp = torch.log_softmax(flat[start : start + chunk_size].to(work_dtype), dim=-1)
        ref_lp = torch.log_softmax(ref_flat[start : start + chunk_size].to(work_dtype), dim=-1)
        pieces.append((lp.exp() * (lp - ref_lp)).sum(-1))
    out = torch.cat(pieces) if pieces else flat.new_zeros(0, dtype=work_dtype)
    return torch.where(m, out, torch.zeros_like(out)).reshape(b, t)
