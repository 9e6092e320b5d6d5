"""``KLArguments``: the KL switch as a dataclass for ``TrlParser`` / ``HfArgumentParser``.

``TrlParser((GRPOConfig, KLArguments, ...))`` then accepts ``--kl_estimator k1 --kl_placement
reward --kl_coef 0.05`` on the command line and the same keys in a TRL YAML config
(``--config recipe.yaml``). :meth:`KLArguments.to_config` validates and returns the KLConfig.
Every field but ``kl_full_monitor`` maps one to one onto a :class:`~kl_patches.KLConfig` field
of the same name without the ``kl_`` prefix; the defaults are KLConfig's (k1 in the reward,
coef 0.05).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from kl_patches.config import KLConfig


@dataclass
class KLArguments:
    """KL regulariser options (kl-patches), one per KLConfig field."""

    kl_estimator: str = field(
        default="k1",
        metadata={"help": "Per-token KL estimator: k1 (log-ratio), k2 (half its square), k3."},
    )
    kl_placement: str = field(
        default="reward",
        metadata={"help": "Where the KL enters: reward, loss, both or none."},
    )
    kl_coef: float = field(
        default=0.05,
        metadata={"help": "beta, the KL coefficient (replaces TRL's beta)."},
    )
    kl_loss_coef: float | None = field(
        default=None,
        metadata={"help": "Loss-side coefficient for placement=both when it differs from kl_coef."},
    )
    kl_granularity: str = field(
        default="token",
        metadata={"help": "token: estimator per token, summed; sequence: on the summed log-ratio."},
    )
    kl_reward_shape: str = field(
        default="sequence",
        metadata={"help": "Reward side: sequence (one penalty per sequence) or reward_to_go."},
    )
    kl_loss_aggregation: str = field(
        default="sum",
        metadata={"help": "Loss side: sum, token_mean or seq_mean_token_mean."},
    )
    kl_importance_weighting: str = field(
        default="none",
        metadata={"help": "Loss side: none, or token (times pi/pi_old per token)."},
    )
    kl_log_ratio_clamp: float | None = field(
        default=None,
        metadata={"help": "Clamp the per-token log-ratio to [-c, c] before the estimator."},
    )
    kl_clamp: float | None = field(
        default=None,
        metadata={"help": "Clamp each per-token estimator value to [-c, c]."},
    )

    kl_full_monitor: bool = field(
        default=False,
        metadata={
            "help": "Also log kl/full_vocab, the exact KL over the vocabulary (two extra "
            "forwards per generation batch). A monitor only: not part of the KL config."
        },
    )

    def to_config(self) -> KLConfig:
        """The validated :class:`~kl_patches.KLConfig` (raises ValueError naming valid choices)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        values.pop("kl_full_monitor")
        data = {name.removeprefix("kl_"): value for name, value in values.items()}
        data["kl_clamp"] = data.pop("clamp")
        return KLConfig.from_dict(data)

    @classmethod
    def from_config(cls, config: KLConfig) -> KLArguments:
        """The arguments that reproduce ``config``."""
        data = config.to_dict()
        data["clamp"] = data.pop("kl_clamp")
        return cls(**{f"kl_{name}": value for name, value in data.items()})
