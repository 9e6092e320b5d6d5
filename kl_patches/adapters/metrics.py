"""The KL metrics every adapter logs, under one prefix in each library's own logger.

verl (its ``metrics`` dict: console, wandb, ...), OpenRLHF (its ``status`` and experience
``info``: the console and wandb/tensorboard) and TRL (``trainer._metrics``: ``log_history``,
``report_to``) log the same names wherever the kl-patches patch computes a KL term; a config that
runs on the library's own switches (no patch) logs the library's own KL metrics only.

Standard library only.
"""

from __future__ import annotations

PREFIX = "kl_patches/"
"""Shared by the three libraries."""

ACTIVE = PREFIX + "active"
"""1.0 in every step where a kl-patches KL hook ran."""
REWARD_SEQUENCE_KL = PREFIX + "reward_sequence_kl"
"""Mean over the batch of the sequence-level KL estimate the reward penalty is made from
(before the coefficient)."""
REWARD_PENALTY = PREFIX + "reward_penalty"
"""Mean over the batch of the penalty subtracted from each sequence's reward (``coef`` times
the estimate)."""
LOSS_KL = PREFIX + "loss_kl"
"""Token mean over the batch of the loss-side per-token estimator values (before the
coefficient and the aggregation)."""
IS_WEIGHT_MEAN = PREFIX + "is_weight_mean"
"""``importance_weighting="sequence"``: mean of each response's full prefix weight."""
IS_WEIGHT_MAX = PREFIX + "is_weight_max"
"""``importance_weighting="sequence"``: largest unclipped prefix weight."""
FULL_VOCAB = PREFIX + "full_vocab"
"""TRL, opt-in: the exact KL over the vocabulary summed over each completion, batch mean."""
NONFINITE_MASKED = PREFIX + "nonfinite_masked"
"""Non-finite KL values masked under ``nan_policy`` since the last read."""

ALL = (ACTIVE, REWARD_SEQUENCE_KL, REWARD_PENALTY, LOSS_KL, IS_WEIGHT_MEAN, IS_WEIGHT_MAX,
       FULL_VOCAB, NONFINITE_MASKED)  # fmt: skip
"""Every shared metric name."""
