"""The uniform switch: :class:`KLConfig`, one description of a KL regulariser for every library.

A KL regulariser in RL fine-tuning is fixed by an *estimator* of the per-token KL (k1, k2, k3),
a *placement* (subtracted from the reward, where it reaches the gradient through the score
function, or added to the loss, where it is differentiated path-wise), a coefficient ``coef``
(beta) and a handful of options that change the gradient (granularity, reward shape, loss
aggregation, importance weighting). This module holds only that description and its parsing;
the maths is in :mod:`kl_patches.core` and the verdict on it in :mod:`kl_patches.theory`.

Library aliases are accepted for the estimator (verl/OpenRLHF: ``kl`` -> k1, ``mse`` -> k2,
``low_var_kl`` -> k3) and normalised, so ``KLConfig(estimator="low_var_kl").estimator == "k3"``.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
import warnings
from dataclasses import dataclass
from typing import Any

ESTIMATORS = ("k1", "k2", "k3")
ESTIMATOR_ALIASES = {
    "k1": "k1",
    "kl": "k1",
    "log_ratio": "k1",
    "k2": "k2",
    "mse": "k2",
    "k3": "k3",
    "low_var_kl": "k3",
}
PLACEMENTS = ("reward", "loss", "both", "none")
GRANULARITIES = ("token", "sequence")
REWARD_SHAPES = ("sequence", "reward_to_go")
LOSS_AGGREGATIONS = ("sum", "token_mean", "seq_mean_token_mean")
IMPORTANCE_WEIGHTINGS = ("none", "token", "sequence")
NAN_POLICIES = ("raise", "mask")


class InertOptionWarning(UserWarning):
    """A KLConfig option that has no effect with the configuration's placement (it is ignored)."""


_SHORT_NAME = re.compile(r"^(?P<est>[a-z0-9_]+)-in-(?P<place>reward|loss|both)$")


def _choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"KLConfig.{name}={value!r} is not valid; choose one of {list(choices)}")
    return value


def _real(value: object) -> float | None:
    """``value`` as a finite Python float, or None when it is not a real number.

    Accepts int and float and the 0-dimensional numbers of numpy and torch (anything with
    ``.item()`` and an empty shape whose item is an int or a float); bools are not numbers
    here. An int too large for a float (OverflowError) and a non-finite value give None.
    """
    if isinstance(value, bool):
        return None
    if not isinstance(value, (int, float)):
        shape = getattr(value, "shape", None)
        item = getattr(value, "item", None)
        if shape is None or tuple(shape) != () or not callable(item):
            return None
        try:
            value = item()
        except (TypeError, ValueError, RuntimeError):
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _optional_positive(name: str, value: object) -> float | None:
    if value is None:
        return None
    number = _real(value)
    if number is None or number <= 0:
        raise ValueError(f"KLConfig.{name}={value!r} is not valid; use None or a finite float > 0")
    return number


def _coef(name: str, value: object) -> float:
    number = _real(value)
    if number is None or number < 0:
        raise ValueError(f"KLConfig.{name}={value!r} is not valid; use a finite float >= 0")
    return number


def _caller_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside this module and the
    dataclass machinery (``KLConfig(...)``, ``parse``, ``replace`` all land on the user's line)."""
    here = (__file__, dataclasses.__file__, "<string>")
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename in here:
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


@dataclass(frozen=True)
class KLConfig:
    """One KL regulariser: estimator x placement x coefficient, and the options that change it.

    The default is the paper's recommendation: k1 in the reward, one scalar per sequence,
    ``coef=0.05``. Construct with keywords or from a short name with :meth:`parse`.
    """

    estimator: str = "k1"
    """Per-token KL estimator, with delta = log pi - log pi_ref and r = pi_ref / pi:
    ``k1`` = delta, ``k2`` = delta^2 / 2, ``k3`` = r - 1 - log r. Aliases ``kl``, ``mse`` and
    ``low_var_kl`` are normalised to k1, k2 and k3."""

    placement: str = "reward"
    """Where the estimate enters: ``reward`` (detached, subtracted from the reward),
    ``loss`` (added to the loss and differentiated), ``both`` (same estimator in both places),
    or ``none`` (no KL regularisation)."""

    coef: float = 0.05
    """beta: the KL coefficient of the objective E[R] - beta * KL; used for the reward side and,
    unless ``loss_coef`` is set, for the loss side too."""

    loss_coef: float | None = None
    """Loss-side coefficient when it differs from ``coef`` (libraries with two coefficients);
    None means ``coef``. Only an equal coefficient makes the two placements together unbiased."""

    granularity: str = "token"
    """``token``: the estimator is applied to each token's log-ratio and summed over the
    sequence; ``sequence``: it is applied once to the sequence log-ratio sum (makes k2 exact)."""

    reward_shape: str = "sequence"
    """Reward side only. ``sequence``: one scalar penalty per sequence (the sequence KL);
    ``reward_to_go``: token t is charged the KL of tokens t..T (same expectation, less variance)."""

    loss_aggregation: str = "sum"
    """Loss side only. ``sum``: per-sequence token sum, mean over sequences (the paper's
    objective); ``token_mean``: mean over every valid token of the batch (verl's token-mean,
    TRL's dapo/bnpo); ``seq_mean_token_mean``: mean over each sequence's tokens, then over
    sequences (TRL's grpo loss, verl's seq-mean-token-mean)."""

    importance_weighting: str = "none"
    """For updates on samples from an older (behaviour) policy mu. ``token``: loss side only;
    multiplies each token's loss-side term by pi / pi_old (differentiable); needs old log-probs.
    ``sequence``: per-decision importance sampling for placement ``reward`` or ``both``: the KL
    term of token u is weighted by the detached prefix weight W_{1:u} = prod_{s<=u} pi(y_s|s_s) /
    mu(y_s|s_s), on the reward side (a per-token penalty, :func:`kl_patches.core.reward_penalty`
    with ``behaviour_logp``) and on the loss side of ``both``; the off-policy expected gradient
    then equals the on-policy one at the current policy. Needs the behaviour log-probs and,
    on the reward side, the current policy's log-probs at every update."""

    log_ratio_clamp: float | None = None
    """Library-compatible numerics: clamp the per-token log-ratio to [-c, c] before the
    estimator (verl clamps k3's to 20). None: no clamp (the exact maths)."""

    kl_clamp: float | None = None
    """Library-compatible numerics: clamp each per-token estimator value to [-c, c]
    (verl k3 and every OpenRLHF estimator use 10). None: no clamp (the exact maths)."""

    nan_policy: str = "raise"
    """What a non-finite input log-probability or KL term on a valid token does (a ``-inf``
    reference log-prob, a NaN, k3's ``exp`` overflowing the dtype). ``raise`` (default): a
    :class:`kl_patches.core.NonFiniteKLError` naming the first such token's row and column.
    ``mask``: such tokens are dropped like padding (value and gradient 0) and counted in
    :func:`kl_patches.core.nonfinite_count`, which the adapters log. A result that overflows
    its dtype after the masking (a sum, a half-precision output) raises under both."""

    is_clip: float | None = None
    """Only with ``importance_weighting="sequence"``: cap each prefix weight W_{1:u} (the
    cumulative product, not the per-token ratios) from above at ``is_clip``, min(W_{1:u}, c);
    weights below c are untouched. Bounds the variance at the price of a bias wherever
    pi(y_{1:u}) > c * mu(y_{1:u}). None: unclipped (unbiased). A value below 1 also scales the
    on-policy gradient by that value (every on-policy weight is 1)."""

    def __post_init__(self) -> None:
        est = self.estimator
        if not isinstance(est, str) or est.lower() not in ESTIMATOR_ALIASES:
            raise ValueError(
                f"KLConfig.estimator={est!r} is not valid; choose one of {list(ESTIMATORS)} "
                f"(aliases: {sorted(k for k in ESTIMATOR_ALIASES if k not in ESTIMATORS)})"
            )
        object.__setattr__(self, "estimator", ESTIMATOR_ALIASES[est.lower()])
        _choice("placement", self.placement, PLACEMENTS)
        object.__setattr__(self, "coef", _coef("coef", self.coef))
        if self.loss_coef is not None:
            object.__setattr__(self, "loss_coef", _coef("loss_coef", self.loss_coef))
        _choice("granularity", self.granularity, GRANULARITIES)
        _choice("reward_shape", self.reward_shape, REWARD_SHAPES)
        _choice("loss_aggregation", self.loss_aggregation, LOSS_AGGREGATIONS)
        _choice("importance_weighting", self.importance_weighting, IMPORTANCE_WEIGHTINGS)
        object.__setattr__(
            self, "log_ratio_clamp", _optional_positive("log_ratio_clamp", self.log_ratio_clamp)
        )
        object.__setattr__(self, "kl_clamp", _optional_positive("kl_clamp", self.kl_clamp))
        object.__setattr__(self, "is_clip", _optional_positive("is_clip", self.is_clip))
        _choice("nan_policy", self.nan_policy, NAN_POLICIES)
        self._check_conflicts()
        self._check_sequence_weighting()
        self._warn_inert()

    def _warn_inert(self) -> None:
        """Warn about side-specific options set on a configuration without that side."""
        inert = []
        if self.placement in ("reward", "none") and self.loss_aggregation != "sum":
            inert.append(("loss_aggregation", self.loss_aggregation, "loss"))
        if self.placement in ("loss", "none") and self.reward_shape != "sequence":
            inert.append(("reward_shape", self.reward_shape, "reward"))
        for name, value, side in inert:
            warnings.warn(
                f"KLConfig.{name}={value!r} has no effect with placement={self.placement!r} "
                f"(no {side} side) and is ignored; drop it, or choose placement 'both' or "
                f"'{side}'",
                InertOptionWarning,
                stacklevel=_caller_stacklevel(),
            )

    def _check_conflicts(self) -> None:
        if self.importance_weighting == "token" and self.placement not in ("loss", "both"):
            raise ValueError(
                f"KLConfig.importance_weighting={self.importance_weighting!r} weights the "
                f"loss-side term, but placement={self.placement!r} has no loss side; use "
                "placement 'loss' or 'both', or importance_weighting='none'"
            )
        if self.importance_weighting == "token" and self.granularity == "sequence":
            raise ValueError(
                "KLConfig.importance_weighting='token' needs granularity='token' (a sequence-level "
                "estimate has no per-token term to weight); choose granularity 'token'"
            )
        if (
            self.reward_shape == "reward_to_go"
            and self.granularity == "sequence"
            and self.placement in ("reward", "both")
        ):
            raise ValueError(
                "KLConfig.reward_shape='reward_to_go' needs granularity='token' (a sequence-level "
                "estimate is one value per sequence); choose reward_shape 'sequence'"
            )
        if self.loss_coef is not None and self.placement != "both":
            raise ValueError(
                f"KLConfig.loss_coef={self.loss_coef!r} only applies to placement='both' (got "
                f"placement={self.placement!r}); set coef instead"
            )

    def _check_sequence_weighting(self) -> None:
        if self.is_clip is not None and self.importance_weighting != "sequence":
            raise ValueError(
                f"KLConfig.is_clip={self.is_clip!r} caps the prefix weights of "
                f"importance_weighting='sequence', but importance_weighting="
                f"{self.importance_weighting!r}; choose importance_weighting 'sequence' or "
                "is_clip=None"
            )
        if self.importance_weighting != "sequence":
            return
        if self.placement not in ("reward", "both"):
            raise ValueError(
                f"KLConfig.importance_weighting='sequence' weights the reward side (and the loss "
                f"side of 'both'), but placement={self.placement!r}; choose placement 'reward' "
                "or 'both' (for a loss-only KL, importance_weighting='token' weights each "
                "token's own term), or importance_weighting='none'"
            )
        if self.granularity == "sequence":
            raise ValueError(
                "KLConfig.importance_weighting='sequence' needs granularity='token' (prefix "
                "weights multiply per-token terms; an estimator of the summed log-ratio has "
                "none); choose granularity 'token'"
            )

    # ------------------------------------------------------------------ derived views
    @property
    def has_reward(self) -> bool:
        """True when a penalty is subtracted from the reward (and coef > 0)."""
        return self.placement in ("reward", "both") and self.coef > 0

    @property
    def has_loss(self) -> bool:
        """True when a term is added to the loss (and its coefficient > 0)."""
        return self.placement in ("loss", "both") and self.loss_coef_value > 0

    @property
    def loss_coef_value(self) -> float:
        """The loss-side coefficient actually used."""
        return self.coef if self.loss_coef is None else self.loss_coef

    @property
    def short_name(self) -> str:
        """``k1-in-reward`` style name (estimator and placement only)."""
        if self.placement == "none":
            return "none"
        return f"{self.estimator}-in-{self.placement}"

    # ------------------------------------------------------------------ construction
    @classmethod
    def parse(cls, name: str, **overrides: Any) -> KLConfig:
        """Build from a short name: ``k1-in-reward``, ``k3-in-loss``, ``k3-in-both``, ``none``.

        Aliases work in the estimator slot (``low_var_kl-in-loss``). Keyword overrides set
        the other fields, e.g. ``KLConfig.parse("k1-in-reward", coef=0.1)``.
        """
        if not isinstance(name, str):
            raise ValueError(
                f"KLConfig.parse: expected a string such as 'k1-in-reward', got {name!r}"
            )
        text = name.strip().lower().replace("_in_", "-in-")
        if text == "none":
            return cls(placement="none", **overrides)
        m = _SHORT_NAME.match(text)
        if m is None:
            raise ValueError(
                f"KLConfig.parse: {name!r} is not a short name; use '<estimator>-in-<placement>' "
                f"with estimator in {list(ESTIMATORS)} and placement in {list(PLACEMENTS[:3])}, "
                "or 'none'"
            )
        return cls(estimator=m["est"], placement=m["place"], **overrides)

    @classmethod
    def coerce(cls, value: KLConfig | str | dict[str, Any] | None) -> KLConfig:
        """Accept a KLConfig, a short name or a dict (as adapters receive from users)."""
        if value is None:
            return cls()
        if isinstance(value, KLConfig):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        if isinstance(value, dict):
            return cls.from_dict(value)
        raise ValueError(f"expected a KLConfig, a short name or a dict, got {type(value).__name__}")

    def replace(self, **changes: Any) -> KLConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every field (JSON-serialisable)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KLConfig:
        """Inverse of :meth:`to_dict`; unknown keys raise naming the valid ones."""
        valid = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(valid))
        if unknown:
            raise ValueError(f"KLConfig: unknown field(s) {unknown}; valid fields are {valid}")
        return cls(**data)

    def __str__(self) -> str:
        if self.placement == "none":
            return "KL off (placement=none)"
        parts = [f"{self.short_name}", f"coef={self.coef:g}"]
        if self.loss_coef is not None:
            parts.append(f"loss_coef={self.loss_coef:g}")
        parts.append(f"granularity={self.granularity}")
        if self.placement in ("reward", "both"):
            parts.append(f"reward_shape={self.reward_shape}")
        if self.placement in ("loss", "both"):
            parts.append(f"loss_aggregation={self.loss_aggregation}")
            if self.importance_weighting != "none":
                parts.append(f"importance_weighting={self.importance_weighting}")
        elif self.importance_weighting == "sequence":
            parts.append("importance_weighting=sequence")
        if self.is_clip is not None:
            parts.append(f"is_clip={self.is_clip:g}")
        if self.log_ratio_clamp is not None:
            parts.append(f"log_ratio_clamp={self.log_ratio_clamp:g}")
        if self.kl_clamp is not None:
            parts.append(f"kl_clamp={self.kl_clamp:g}")
        if self.nan_policy != "raise":
            parts.append(f"nan_policy={self.nan_policy}")
        return ", ".join(parts)


ALL_CONFIGS_IS_CLIPS = (2.0, 0.5)
"""The ``is_clip`` values :func:`all_configs` adds to the unclipped sequence-weighted configs:
one that never binds on-policy (every weight is 1) and one that does (it scales by 0.5)."""


def all_configs(coef: float = 0.1) -> list[KLConfig]:
    """Every combination of the gradient-relevant options KLConfig accepts (clamps off).

    Used by tests and by ``kl-patches bias``; conflicting combinations are left out. Options
    inert for the placement are part of the grid (no :class:`InertOptionWarning` is issued).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InertOptionWarning)
        return _all_configs(coef)


def _all_configs(coef: float) -> list[KLConfig]:
    out: list[KLConfig] = []
    for est in ESTIMATORS:
        for place in PLACEMENTS:
            for gran in GRANULARITIES:
                for shape in REWARD_SHAPES:
                    for agg in LOSS_AGGREGATIONS:
                        for iw in IMPORTANCE_WEIGHTINGS:
                            for loss_coef in (None, coef * 0.5):
                                for clip in (None, *ALL_CONFIGS_IS_CLIPS):
                                    try:
                                        out.append(
                                            KLConfig(
                                                estimator=est,
                                                placement=place,
                                                coef=coef,
                                                loss_coef=loss_coef,
                                                granularity=gran,
                                                reward_shape=shape,
                                                loss_aggregation=agg,
                                                importance_weighting=iw,
                                                is_clip=clip,
                                            )
                                        )
                                    except ValueError:
                                        continue
    return out


FIELD_CHOICES: dict[str, tuple[str, ...]] = {
    "estimator": ESTIMATORS,
    "placement": PLACEMENTS,
    "granularity": GRANULARITIES,
    "reward_shape": REWARD_SHAPES,
    "loss_aggregation": LOSS_AGGREGATIONS,
    "importance_weighting": IMPORTANCE_WEIGHTINGS,
    "nan_policy": NAN_POLICIES,
}
"""The valid values of each text field of :class:`KLConfig` (the command-line syntax and the
TRL arguments are generated from the fields and these choices)."""
