"""Theory's verdict for a reading whose two placements use different estimators.

:func:`kl_patches.theory.verdict` takes one :class:`~kl_patches.config.KLConfig`, which has one
estimator for both placements. A library can run one estimator in the reward and another in the
loss (verl's two independent switches); its reading then carries the loss side apart
(:attr:`~kl_patches.adapters.base.NativeReading.loss_config`), and :func:`verdict_of` adds the
reward side's expected-gradient terms to the loss side's, term by term, as theory's own
``expected_terms`` merges the two sides of one config.
"""

from __future__ import annotations

from kl_patches.adapters.base import NativeReading
from kl_patches.config import KLConfig
from kl_patches.theory import Term, Verdict, _name, describe, verdict

__all__ = ["describe_reading", "reward_side", "verdict_of"]


def reward_side(reading: NativeReading) -> KLConfig:
    """The reward side of a two-sided reading as a config of its own (the loss side's
    aggregation is left out: it has no meaning on the reward side)."""
    return reading.config.replace(placement="reward", loss_coef=None, loss_aggregation="sum")


def describe_reading(reading: NativeReading) -> str:
    """``theory.describe`` of the reading; both sides when they use different estimators."""
    if reading.loss_config is None:
        return describe(reading.config)
    return f"{describe(reward_side(reading))} + {describe(reading.loss_config)}"


def _merge(terms: list[Term]) -> tuple[Term, ...]:
    merged: dict[tuple[str, bool], float] = {}
    sides: dict[tuple[str, bool], set[str]] = {}
    for t in terms:
        key = (t.basis, t.length_normalised)
        merged[key] = merged.get(key, 0.0) + t.coef
        sides.setdefault(key, set()).add(t.side)
    scale = max((abs(t.coef) for t in terms), default=0.0)
    out = [
        Term(b, c, n, "both" if len(sides[(b, n)]) > 1 else next(iter(sides[(b, n)])))
        for (b, n), c in merged.items()
        if abs(c) > 1e-12 * scale
    ]
    return tuple(sorted(out, key=lambda t: (t.basis, t.length_normalised)))


def verdict_of(reading: NativeReading, off_policy: bool = False) -> Verdict:
    """Theory's verdict for the reading: ``verdict(config)`` for one estimator, else the
    reward side's and the loss side's terms combined (unbiased only if they add up to
    ``coef * reverse_kl`` alone, on-policy)."""
    if reading.loss_config is None:
        return verdict(reading.config, off_policy=off_policy)
    reward_cfg = reward_side(reading)
    loss_cfg = reading.loss_config
    vr = verdict(reward_cfg, off_policy=off_policy)
    vl = verdict(loss_cfg, off_policy=off_policy)
    terms = _merge([*vr.terms, *vl.terms])
    name = _name(terms)
    exact = (
        not off_policy
        and len(terms) == 1
        and terms[0].basis == "reverse_kl"
        and not terms[0].length_normalised
        and abs(terms[0].coef - reward_cfg.coef) <= 1e-12 * max(reward_cfg.coef, 1e-300)
    )
    together = ", ".join(
        f"{t.coef:+g}*{t.basis}{'/length' if t.length_normalised else ''}" for t in terms
    )
    explanation = (
        f"Two estimators: the reward side ({describe(reward_cfg)}) follows {vr.gradient}, the "
        f"loss side ({describe(loss_cfg)}) follows {vl.gradient}; together "
        f"{together or 'zero'}."
    )
    coef = reward_cfg.coef if reward_cfg.coef > 0 else 0.05
    advice = (
        "Keep it: the two sides add up to the reverse-KL gradient."
        if exact
        else f"Use KLConfig.parse('k1-in-reward', coef={coef:g}) (or one estimator on both "
        "sides with one coefficient and a token sum)."
    )
    caveats = tuple(dict.fromkeys([*vr.caveats, *vl.caveats]))
    return Verdict(
        unbiased=exact,
        gradient=name,
        explanation=explanation,
        advice=advice,
        terms=terms,
        on_policy=not off_policy,
        caveats=caveats,
    )
