"""Which gradient a KL configuration really follows: Table 1 of the paper, as code.

On-policy, a KL configuration's expected gradient is a linear combination of a few *basis*
gradients (per unit coefficient, in the direction that decreases the penalty). With
delta_t = log pi(y_t|s_t) - log pi_ref(y_t|s_t), r_t = exp(-delta_t), grad_t = grad log pi(y_t|s_t),
S = sum_t delta_t:

  reverse_kl          E[S * sum_t grad_t]              = grad KL(pi || pi_ref), the objective's
  forward_kl          grad KL(pi_ref || pi), sequence level  = E[(1 - exp(-S)) sum_t grad_t]
  forward_kl_token    E[sum_t (1 - r_t) grad_t]
                      = sum_t E_s grad KL(pi_ref(.|s_t) || pi(.|s_t))
  reverse_kl_partial  E[sum_t delta_t grad_t]
                      = sum_t E_s grad KL(pi(.|s_t) || pi_ref(.|s_t))
                      (each token's own term, without its effect on later tokens)
  k2_score            E[(sum_t delta_t^2 / 2) sum_t grad_t]   (score part of grad E[sum_t k2_t])
  k2_sequence_score   E[(S^2 / 2) sum_t grad_t]               (score part of grad E[S^2 / 2])
  k2_own_score        E[sum_t (delta_t^2 / 2) grad_t]         (own-token score part of k2)

The reward side contributes the score-function term of its estimator, the loss side the
path-wise term (times pi/pi_old's gradient when importance weighted). Loss terms aggregated by a
token mean are scaled by 1/length ("length-normalised"). :mod:`kl_patches.oracle` computes every
basis independently by exact enumeration and the tests check that each configuration's exact
expected gradient, built from :mod:`kl_patches.core`, equals the combination named here.

Clamps (``log_ratio_clamp``, ``kl_clamp``) are ignored by the algebra: they bias only where they
fire, and the verdict says so in a caveat.

Off-policy (samples from a behaviour policy mu): with ``importance_weighting="sequence"`` every
term of token u carries the prefix weight W_{1:u} = pi(y_{1:u}) / mu(y_{1:u}), and since the
term depends on y_{1:u} only, E_mu[W_{1:u} * term] = E_pi[term]: the off-policy expected gradient
is the on-policy one at the current policy, the same basis terms. With ``is_clip=c`` the weight
is min(W_{1:u}, c), so the expectation runs under the sub-probability min(pi, c * mu) on prefixes
instead of pi. ``none`` and ``token`` weighting have no such identity off-policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kl_patches.config import KLConfig

BASES = (
    "reverse_kl",
    "forward_kl",
    "forward_kl_token",
    "reverse_kl_partial",
    "k2_score",
    "k2_sequence_score",
    "k2_own_score",
)


@dataclass(frozen=True)
class Term:
    """One basis gradient with its coefficient in a configuration's expected gradient."""

    basis: str
    """One of :data:`BASES`."""
    coef: float
    """Multiplier of the basis gradient (already includes the config's coefficient)."""
    length_normalised: bool = False
    """True when the term is divided by the sequence length (token-mean aggregation)."""
    side: str = "reward"
    """``reward`` or ``loss``: which placement produced it (for explanations)."""


@dataclass(frozen=True)
class Verdict:
    """What a configuration's gradient is, for the sequence-level reverse KL objective."""

    unbiased: bool
    """True when the expected gradient is exactly coef * grad KL(pi || pi_ref): on-policy, or,
    when the verdict was asked with ``off_policy=True``, under samples from a behaviour policy."""
    gradient: str
    """Short name of the expected gradient, e.g. ``reverse_kl``, ``zero``, ``forward_kl_token``."""
    explanation: str
    """One or two plain sentences with the formula."""
    advice: str
    """The unbiased configuration to use instead (or why this one is fine)."""
    terms: tuple[Term, ...]
    """The expected gradient as basis terms (merged, zeros dropped), checked by the oracle."""
    on_policy: bool = True
    """False when the verdict was asked for off-policy updates."""
    caveats: tuple[str, ...] = ()
    """Secondary remarks (clamps, aggregation, off-policy)."""


# ----------------------------------------------------------------------------- algebra
_REWARD_SIDE = {
    ("k1", "token"): (("reverse_kl", 1.0),),
    ("k2", "token"): (("k2_score", 1.0),),
    ("k3", "token"): (("reverse_kl", 1.0), ("forward_kl_token", -1.0)),
    ("k1", "sequence"): (("reverse_kl", 1.0),),
    ("k2", "sequence"): (("k2_sequence_score", 1.0),),
    ("k3", "sequence"): (("reverse_kl", 1.0), ("forward_kl", -1.0)),
}
_LOSS_SIDE = {
    ("k1", "token", "none"): (),
    ("k2", "token", "none"): (("reverse_kl_partial", 1.0),),
    ("k3", "token", "none"): (("forward_kl_token", 1.0),),
    ("k1", "token", "token"): (("reverse_kl_partial", 1.0),),
    ("k2", "token", "token"): (("k2_own_score", 1.0), ("reverse_kl_partial", 1.0)),
    ("k3", "token", "token"): (("reverse_kl_partial", 1.0),),
    # detached prefix weights are all 1 on-policy: the same path-wise terms as unweighted
    ("k1", "token", "sequence"): (),
    ("k2", "token", "sequence"): (("reverse_kl_partial", 1.0),),
    ("k3", "token", "sequence"): (("forward_kl_token", 1.0),),
    ("k1", "sequence", "none"): (),
    ("k2", "sequence", "none"): (("reverse_kl", 1.0),),
    ("k3", "sequence", "none"): (("forward_kl", 1.0),),
}


def expected_terms(config: KLConfig) -> tuple[Term, ...]:
    """The on-policy expected gradient of ``config`` as merged basis terms.

    For ``importance_weighting="sequence"`` these are also the off-policy expected terms when
    ``is_clip`` is None (see the module docstring). On-policy every prefix weight is 1, so an
    ``is_clip`` below 1 scales every term by ``is_clip``.
    """
    raw: list[Term] = []
    scale = 1.0
    if config.importance_weighting == "sequence" and config.is_clip is not None:
        scale = min(1.0, config.is_clip)
    if config.has_reward:
        for basis, w in _REWARD_SIDE[(config.estimator, config.granularity)]:
            raw.append(Term(basis, w * config.coef * scale, False, "reward"))
    if config.has_loss:
        normalised = config.loss_aggregation != "sum"
        key = (config.estimator, config.granularity, config.importance_weighting)
        for basis, w in _LOSS_SIDE[key]:
            raw.append(Term(basis, w * config.loss_coef_value * scale, normalised, "loss"))
    merged: dict[tuple[str, bool], float] = {}
    sides: dict[tuple[str, bool], set[str]] = {}
    for t in raw:
        k = (t.basis, t.length_normalised)
        merged[k] = merged.get(k, 0.0) + t.coef
        sides.setdefault(k, set()).add(t.side)
    scale = max((abs(t.coef) for t in raw), default=0.0)
    out = []
    for (basis, normalised), c in merged.items():
        if abs(c) <= 1e-12 * scale:
            continue
        side = (
            "both"
            if len(sides[(basis, normalised)]) > 1
            else next(iter(sides[(basis, normalised)]))
        )
        out.append(Term(basis, c, normalised, side))
    return tuple(sorted(out, key=lambda t: (BASES.index(t.basis), t.length_normalised)))


_NAMES: dict[frozenset[tuple[str, int]], str] = {
    frozenset({("reverse_kl", 1)}): "reverse_kl",
    frozenset({("forward_kl", 1)}): "forward_kl",
    frozenset({("forward_kl_token", 1)}): "forward_kl_token",
    frozenset({("reverse_kl_partial", 1)}): "reverse_kl_partial",
    frozenset({("reverse_kl", 1), ("forward_kl_token", -1)}): "reverse_minus_forward_token",
    frozenset({("reverse_kl", 1), ("forward_kl", -1)}): "reverse_minus_forward",
    frozenset({("k2_score", 1)}): "k2_score",
    frozenset({("k2_sequence_score", 1)}): "k2_sequence_score",
    frozenset({("k2_score", 1), ("reverse_kl_partial", 1)}): "k2_value",
    frozenset({("k2_sequence_score", 1), ("reverse_kl", 1)}): "k2_sequence_value",
    frozenset({("k2_own_score", 1), ("reverse_kl_partial", 1)}): "k2_importance_weighted",
}

_EXPLAIN = {
    "zero": "No KL gradient at all: the policy is not held near the reference.",
    "reverse_kl": (
        "Expected gradient coef * E[(sum_t delta_t) * sum_t grad log pi_t] = "
        "coef * grad KL(pi || pi_ref): the sequence-level reverse KL of the objective."
    ),
    "forward_kl": (
        "Expected gradient E[(1 - pi_ref(y)/pi(y)) grad log pi(y)] = grad KL(pi_ref || pi): the "
        "sequence-level forward KL (mode-covering), not the objective's reverse KL."
    ),
    "forward_kl_token": (
        "Expected gradient E[sum_t (1 - r_t) grad log pi_t] = sum_t grad KL(pi_ref(.|s_t) || "
        "pi(.|s_t)): a token-level forward KL on on-policy prefixes; stable near pi_ref but "
        "not the objective's reverse KL."
    ),
    "reverse_kl_partial": (
        "Expected gradient E[sum_t delta_t grad log pi_t]: each token's own reverse-KL term "
        "only; the effect of token t on later tokens (sum_{t'>t} delta_t') is dropped, a "
        "partial gradient."
    ),
    "reverse_minus_forward_token": (
        "Expected gradient grad KL(pi || pi_ref) - sum_t grad KL(pi_ref(.|s_t) || pi(.|s_t)): "
        "the control variate r_t - 1 correlates with the score, and near pi_ref the two terms "
        "cancel, so the regulariser almost vanishes (collapse-prone)."
    ),
    "reverse_minus_forward": (
        "Expected gradient grad KL(pi || pi_ref) - grad KL(pi_ref || pi) at sequence level: "
        "near pi_ref the two cancel and the regulariser almost vanishes."
    ),
    "k2_score": (
        "Expected gradient E[(sum_t delta_t^2 / 2) grad log pi(y)]: the score part of the "
        "gradient of the biased k2 value; not the reverse-KL gradient."
    ),
    "k2_sequence_score": (
        "Expected gradient E[(S^2 / 2) grad log pi(y)] with S = sum_t delta_t: the score part "
        "of the k2 value's gradient; not the reverse-KL gradient."
    ),
    "k2_value": (
        "Expected gradient grad E[sum_t delta_t^2 / 2]: the gradient of the expected k2 value, "
        "a biased (second-order) KL surrogate."
    ),
    "k2_sequence_value": (
        "Expected gradient grad E[S^2 / 2]: the gradient of the expected sequence k2 value, a "
        "biased KL surrogate."
    ),
    "k2_importance_weighted": (
        "Expected gradient E[sum_t (delta_t + delta_t^2 / 2) grad log pi_t]: k2 times a "
        "differentiable importance ratio adds the k2 value's score to the partial gradient."
    ),
    "mixed": "A combination of basis gradients that is not the reverse-KL gradient.",
}

_OFF_POLICY = (
    "Off-policy (several updates per batch, or asynchronous rollouts): no placement gives an "
    "unbiased sequence-level reverse-KL gradient; importance_weighting='token' repairs only each "
    "token's own term."
)
_OFF_POLICY_FIX = (
    "importance_weighting='sequence' (per-decision prefix weights pi(y_1..u)/mu(y_1..u) on the "
    "reward side, and on the loss side of 'both') keeps the on-policy verdict off-policy, so "
    "k1 in the reward is unbiased with it."
)
_OFF_POLICY_SEQUENCE = (
    "Off-policy with importance_weighting='sequence': each term of token u is weighted by the "
    "detached prefix weight W_1..u = prod_{s<=u} pi(y_s|s_s)/mu(y_s|s_s), so its expectation under "
    "the behaviour policy mu equals its expectation under pi; the expected gradient is the "
    "on-policy one at the current policy. Needs mu > 0 wherever pi > 0, the current policy's "
    "log-probs at every update, and the penalty form that matches the trainer (trainer_ratio). "
    "The variance grows with the spread of the weights."
)


def _clip_bias(config: KLConfig) -> str:
    c = f"{config.is_clip:g}"
    past = (
        " With reward_shape='sequence' the past-token terms W_1..t * sum_{u<t} k_u, zero-mean only "
        "under exact weights, no longer cancel either."
        if config.has_reward and config.reward_shape == "sequence"
        else ""
    )
    return (
        f"Biased off-policy: is_clip={c} caps each prefix weight at {c}, so every term of a "
        f"prefix y_1..u with pi(y_1..u) > {c} * mu(y_1..u) is counted with weight "
        f"{c} * mu(y_1..u) instead of pi(y_1..u): the expectation runs under min(pi, {c} * mu) on "
        f"prefixes, which attenuates the terms of prefixes the current policy prefers over the "
        f"behaviour policy by more than {c}x (mostly long prefixes, where the weights compound) "
        f"and drops nothing else. Exact where no prefix weight exceeds {c}.{past}"
    )


def _name(terms: tuple[Term, ...]) -> str:
    if not terms:
        return "zero"
    normalised = {t.length_normalised for t in terms}
    if len(normalised) > 1:
        return "mixed"
    unit = abs(terms[0].coef)
    if any(abs(abs(t.coef) - unit) > 1e-9 * unit for t in terms):
        return "mixed"
    key = frozenset((t.basis, 1 if t.coef > 0 else -1) for t in terms)
    name = _NAMES.get(key, "mixed")
    if normalised == {True} and name != "mixed":
        name += "_length_normalised"
    return name


def recommended(coef: float = 0.05) -> KLConfig:
    """The unbiased default: k1 in the reward, one scalar per sequence."""
    return KLConfig(estimator="k1", placement="reward", coef=coef)


def verdict(config: KLConfig | str | dict[str, Any] | None, *, off_policy: bool = False) -> Verdict:
    """Which gradient ``config`` follows for E[R] - coef * KL(pi || pi_ref).

    ``config`` is anything the adapters' ``apply()`` accepts (:meth:`KLConfig.coerce`): a
    KLConfig, a short name such as ``"k3-in-loss"``, a dict of fields, or None (the default).
    ``off_policy=True`` describes updates on samples from an older policy (PPO epochs > 1,
    several mini-batches per batch, asynchronous rollouts). Then only
    ``importance_weighting="sequence"`` without ``is_clip`` keeps its on-policy verdict
    (unbiased when that is); clipped, it is biased and the explanation names the bias;
    ``none`` and ``token`` weighting are never unbiased off-policy.
    """
    config = KLConfig.coerce(config)
    terms = expected_terms(config)
    name = _name(terms)
    prefix_weighted = config.importance_weighting == "sequence"
    clipped_off_policy = (
        off_policy
        and prefix_weighted
        and config.is_clip is not None
        and (config.has_reward or config.has_loss)
    )
    exact = (
        config.coef > 0
        and len(terms) == 1
        and terms[0].basis == "reverse_kl"
        and not terms[0].length_normalised
        and abs(terms[0].coef - config.coef) <= 1e-12 * config.coef
    )
    caveats: list[str] = []
    if config.log_ratio_clamp is not None or config.kl_clamp is not None:
        caveats.append(
            "Clamps change the estimator wherever they fire (large per-token log-ratios); "
            "log how often they do."
        )
    if config.has_loss and config.loss_aggregation != "sum":
        caveats.append(
            f"loss_aggregation={config.loss_aggregation!r} divides the loss-side KL by the "
            "response length: a length-normalised KL; use 'sum' for the paper's objective."
        )
    if off_policy and prefix_weighted:
        caveats.append(_OFF_POLICY_SEQUENCE)
    elif off_policy:
        caveats.append(_OFF_POLICY + " " + _OFF_POLICY_FIX)
    if prefix_weighted and config.is_clip is not None and config.is_clip < 1:
        caveats.append(
            f"is_clip={config.is_clip:g} < 1 caps even the on-policy weights (all 1): every term "
            f"is scaled by {config.is_clip:g}."
        )

    if config.placement == "none" or (not config.has_reward and not config.has_loss):
        explanation = (
            "KL regularisation is off (placement none or coefficient 0). " + _EXPLAIN["zero"]
        )
    else:
        explanation = _EXPLAIN.get(name.removesuffix("_length_normalised"), _EXPLAIN["mixed"])
        if name.endswith("_length_normalised"):
            explanation += " Divided by the response length (token-mean loss aggregation)."
        if name == "mixed":
            explanation += " Terms: " + ", ".join(
                f"{t.coef:+g}*{t.basis}{'/length' if t.length_normalised else ''}" for t in terms
            )
    if clipped_off_policy:
        explanation += " " + _clip_bias(config)
        name += "_clipped"
    advice = _advice(config, name, exact)
    if off_policy and not (prefix_weighted and exact and not clipped_off_policy):
        advice = _off_policy_advice(config, clipped_off_policy, advice)
    unbiased_off_policy = prefix_weighted and config.is_clip is None
    return Verdict(
        unbiased=exact and (not off_policy or unbiased_off_policy),
        gradient=name,
        explanation=explanation,
        advice=advice,
        terms=terms,
        on_policy=not off_policy,
        caveats=tuple(caveats),
    )


def _advice(config: KLConfig, name: str, exact: bool) -> str:
    coef = config.coef if config.coef > 0 else 0.05
    fix = f"KLConfig.parse('k1-in-reward', coef={coef:g})"
    if exact:
        if config.short_name == "k1-in-reward":
            return "Keep it: this is the unbiased configuration the paper recommends."
        return (
            "Unbiased as configured. k1-in-reward is the simplest unbiased choice with the "
            f"lowest variance: {fix}."
        )
    if config.placement == "both" and config.loss_coef is not None:
        return f"Use one coefficient for both placements (loss_coef=None), or {fix}."
    if config.placement == "both" and config.loss_aggregation != "sum":
        return f"Aggregate the loss side with loss_aggregation='sum', or use {fix}."
    if config.estimator == "k2" and config.placement == "loss" and config.granularity == "token":
        return (
            f"Use {fix}, or k2 on the sequence log-ratio: KLConfig.parse('k2-in-loss', "
            f"granularity='sequence', coef={coef:g})."
        )
    return f"Use {fix} (or the same estimator in both places with one coefficient and a sum)."


def _off_policy_advice(config: KLConfig, clipped: bool, on_policy_advice: str) -> str:
    coef = config.coef if config.coef > 0 else 0.05
    fix = f"KLConfig.parse('k1-in-reward', coef={coef:g}, importance_weighting='sequence')"
    if clipped:
        return (
            "Set is_clip=None for an unbiased gradient (higher variance), or keep the clip and "
            f"accept its bias. On-policy: {on_policy_advice}"
        )
    return (
        f"Off-policy, use {fix} with the behaviour policy's log-probs "
        "(core.reward_penalty(..., behaviour_logp=...), recomputed at every update). "
        f"On-policy: {on_policy_advice}"
    )


def table1(coef: float = 1.0) -> list[tuple[KLConfig, Verdict]]:
    """The paper's grid (plus k2 and both-placement rows) with their verdicts."""
    rows = [
        KLConfig(estimator=e, placement=p, coef=coef)
        for e in ("k1", "k3")
        for p in ("reward", "loss", "both")
    ]
    rows += [
        KLConfig(estimator="k2", placement="loss", coef=coef),
        KLConfig(estimator="k2", placement="loss", coef=coef, granularity="sequence"),
        KLConfig(estimator="k3", placement="loss", coef=coef, importance_weighting="token"),
        KLConfig(estimator="k3", placement="loss", coef=coef, loss_aggregation="token_mean"),
    ]
    return [(c, verdict(c)) for c in rows]


def describe(config: KLConfig) -> str:
    """A short label for tables: the short name plus the options that differ from defaults."""
    label = config.short_name
    extras = []
    if config.granularity != "token":
        extras.append(f"{config.granularity} granularity")
    if config.has_loss and config.loss_aggregation != "sum":
        extras.append(config.loss_aggregation)
    if config.importance_weighting == "token":
        extras.append("importance-weighted")
    if config.importance_weighting == "sequence":
        extras.append("prefix-weighted")
    if config.is_clip is not None:
        extras.append(f"is_clip={config.is_clip:g}")
    if config.loss_coef is not None:
        extras.append(f"loss_coef={config.loss_coef:g}")
    return label + (f" ({', '.join(extras)})" if extras else "")


def table1_markdown() -> str:
    """Table 1 as Markdown, for docs/index.md (a test keeps the docs in sync)."""
    lines = [
        "| configuration | expected gradient | unbiased for the sequence reverse KL |",
        "|---|---|---|",
    ]
    for cfg, v in table1():
        lines.append(f"| {describe(cfg)} | `{v.gradient}` | {'yes' if v.unbiased else 'no'} |")
    return "\n".join(lines)
