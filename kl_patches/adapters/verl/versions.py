"""What kl-patches knows about verl itself: supported versions, recorded defaults, names.

Nothing here imports verl: the defaults of the tested release (``trainer/config/ppo_trainer.yaml``
composed by Hydra) are written down, with the estimator names, clamps and loss aggregation
modes that the translation and the reader use.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from kl_patches.adapters.delivery import env_var
from kl_patches.adapters.support import VersionSupport

__all__ = [
    "ACTOR",
    "AGG_FROM_VERL",
    "AGG_TO_VERL",
    "DEFAULTS",
    "ENV_VAR",
    "GRPO_LIKE",
    "MARKER",
    "NATIVE_CLAMPS",
    "NATIVE_NAME",
    "REWARD_TO_GO_ESTIMATORS",
    "RUNTIME_ENV_PREFIX",
    "SEQUENCE_SUM_ESTIMATORS",
    "SUPPORT",
    "SUPPORTED_RANGE",
    "TESTED_VERSIONS",
    "VERL_ESTIMATORS",
    "installed_version",
]

SUPPORT = VersionSupport(library="verl", supported=">=0.9.0,<0.10", tested=("0.9.1",))
"""Versions the patch accepts (the hook points are identical in 0.9.0 and 0.9.1) and the one
the regression tests ran against."""

TESTED_VERSIONS = SUPPORT.tested
"""verl versions whose code the adapter's regression tests ran against."""

SUPPORTED_RANGE = (">=0.9.0", "<0.10")
"""The supported range as two specifiers (kept for callers of earlier releases; see
:data:`SUPPORT`)."""

MARKER = "kl_patches"
"""Estimator name that hands a placement to the patch. Unpatched verl raises
``NotImplementedError`` on it, so a patch that did not reach a process fails loudly there."""

ENV_VAR = env_var("verl")
"""``KL_PATCHES_VERL``: JSON that tells every verl process which patch to apply."""

RUNTIME_ENV_PREFIX = "ray_kwargs.ray_init.runtime_env.env_vars."
"""Hydra path whose entries verl's ``main_ppo`` hands to ``ray.init(runtime_env=...)``."""

ACTOR = "actor_rollout_ref.actor."

DEFAULTS: dict[str, Any] = {
    "algorithm.use_kl_in_reward": False,
    "algorithm.kl_penalty": "kl",
    "algorithm.kl_ctrl.type": "fixed",
    "algorithm.kl_ctrl.kl_coef": 0.001,
    "algorithm.kl_ctrl.horizon": 10000,
    "algorithm.kl_ctrl.target_kl": 0.1,
    "algorithm.adv_estimator": "gae",
    "algorithm.norm_adv_by_std_in_grpo": True,
    "algorithm.gamma": 1.0,
    "algorithm.lam": 1.0,
    "algorithm.gdpo_reward_keys": None,
    "algorithm.rollout_correction.bypass_mode": False,
    ACTOR + "use_kl_loss": False,
    ACTOR + "kl_loss_coef": 0.001,
    ACTOR + "kl_loss_type": "low_var_kl",
    ACTOR + "loss_agg_mode": "token-mean",
    ACTOR + "ppo_epochs": 1,
    ACTOR + "ppo_mini_batch_size": 256,
    ACTOR + "policy_loss.loss_mode": "vanilla",
    "actor_rollout_ref.rollout.n": 1,
    "actor_rollout_ref.rollout.multi_turn.enable": False,
    "data.train_batch_size": 1024,
    "trainer.use_v1": True,
    RUNTIME_ENV_PREFIX + ENV_VAR: None,
}
"""verl 0.9.1 defaults (``trainer/config/ppo_trainer.yaml`` composed by Hydra) of every key read."""

VERL_ESTIMATORS = {"kl": "k1", "k1": "k1", "mse": "k2", "k2": "k2", "low_var_kl": "k3", "k3": "k3"}
"""verl estimator names KLConfig can describe, with their KLConfig estimator."""

NATIVE_NAME = {"k1": "k1", "k2": "k2", "k3": "k3"}
"""The verl name to_overrides writes for each KLConfig estimator (aliases since verl 0.4.1)."""

NATIVE_CLAMPS = {"k1": (None, None), "k2": (None, None), "k3": (20.0, 10.0)}
"""(log_ratio_clamp, kl_clamp) verl applies for each estimator (``kl_penalty_forward``)."""

AGG_FROM_VERL = {
    "token-mean": "token_mean",
    "seq-mean-token-mean": "seq_mean_token_mean",
    "seq-mean-token-sum": "sum",
    "token-sum": "sum",
    "seq-mean-token-sum-norm": "sum",
}
"""verl ``loss_agg_mode`` -> KLConfig.loss_aggregation. ``token-sum`` and
``seq-mean-token-sum-norm`` differ from ``sum`` only by a factor shared with the policy loss."""

AGG_TO_VERL = {
    "sum": "seq-mean-token-sum",
    "token_mean": "token-mean",
    "seq_mean_token_mean": "seq-mean-token-mean",
}
"""KLConfig.loss_aggregation -> the verl ``loss_agg_mode`` that aggregates the KL that way."""

GRPO_LIKE = ("grpo", "grpo_vectorized")
SEQUENCE_SUM_ESTIMATORS = (
    *GRPO_LIKE,
    "rloo",
    "rloo_vectorized",
    "reinforce_plus_plus_baseline",
    "opo",
    "gpg",
    "grpo_passk",
    "gdpo",
)
"""Advantage estimators that sum the token rewards per sequence: one penalty per sequence."""
REWARD_TO_GO_ESTIMATORS = (
    "reinforce_plus_plus",
    "remax",
    "gae",
    "optimal_token_baseline",
    "tir_optimal_token_baseline",
)
"""Advantage estimators that accumulate token rewards from t onwards (gamma = lam = 1)."""


def installed_version() -> str | None:
    """verl's installed version from package metadata (verl is not imported); None if absent."""
    try:
        return metadata.version("verl")
    except metadata.PackageNotFoundError:
        return None
