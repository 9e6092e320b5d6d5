"""What kl-patches knows about TRL itself: the tested versions, the defaults, the loss types.

Nothing here imports TRL, so the reader (and the audit) work without TRL installed. The numbers
are those of TRL 1.16.0 (``GRPOConfig``/``RLOOConfig`` defaults checked by instantiation).
"""

from __future__ import annotations

import os

TESTED_MIN = (1, 16, 0)
"""Oldest TRL release the adapter is tested against (inclusive)."""

TESTED_BELOW = (1, 17, 0)
"""First TRL release the adapter is NOT tested against (exclusive upper bound)."""

FORCE_ENV = "KL_PATCHES_TRL_FORCE"
"""Environment variable that, when set to 1, lets the adapter run on an untested TRL version."""

GRPO_DEFAULTS: dict[str, object] = {
    "beta": 0.0,
    "use_bias_correction_kl": True,
    "loss_type": "dapo",
    "scale_rewards": "group",
    "multi_objective_aggregation": "sum_then_normalize",
    "importance_sampling_level": "token",
    "num_iterations": 1,
    "steps_per_generation": None,
    "gradient_accumulation_steps": 1,
    "use_vllm": False,
    "vllm_importance_sampling_correction": True,
    "max_completion_length": 512,
    "temperature": 1.0,
    "sync_ref_model": False,
}
"""GRPOConfig defaults of TRL 1.16.0 that matter for the KL regulariser."""

RLOO_DEFAULTS: dict[str, object] = {
    "beta": 0.05,
    "normalize_advantages": False,
    "reward_clip_range": None,
    "num_iterations": 1,
    "steps_per_generation": None,
    "gradient_accumulation_steps": 1,
    "use_vllm": False,
    "temperature": 1.0,
    "sync_ref_model": False,
}
"""RLOOConfig defaults of TRL 1.16.0 that matter for the KL regulariser."""

GRPO_LOSS_AGGREGATION: dict[str, str] = {
    "grpo": "seq_mean_token_mean",
    "sapo": "seq_mean_token_mean",
    "bnpo": "token_mean",
    "dapo": "token_mean",
    "cispo": "token_mean",
    "vespo": "token_mean",
    "dr_grpo": "sum",
    "luspo": "sum",
}
"""How GRPOTrainer 1.16 reduces its per-token loss (and so its k3 term), per ``loss_type``.

``dr_grpo`` divides the token sum by the constant ``B * max_completion_length``: a per-sequence
sum whose coefficient is ``beta / max_completion_length``."""

GLOBAL_TOKEN_COUNT_LOSS_TYPES = ("dapo", "cispo", "vespo")
"""Loss types whose token mean divides by the token count of the whole accumulation window
(``num_items_in_batch``) rather than the micro-batch's own count."""


def parse_version(text: str) -> tuple[int, int, int]:
    """``"1.16.0"`` -> ``(1, 16, 0)``; pre/dev suffixes are ignored."""
    parts: list[int] = []
    for piece in text.split(".")[:3]:
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        parts.append(int(digits) if digits else 0)
    while len(parts) < 3:
        parts.append(0)
    return parts[0], parts[1], parts[2]


def check_version(version: str, force: bool = False) -> None:
    """Raise if ``version`` is outside the tested range, unless forced (argument or env var)."""
    v = parse_version(version)
    if TESTED_MIN <= v < TESTED_BELOW:
        return
    if force or os.environ.get(FORCE_ENV, "") == "1":
        return
    lo = ".".join(map(str, TESTED_MIN))
    hi = ".".join(map(str, TESTED_BELOW))
    raise RuntimeError(
        f"kl_patches.trl is tested with trl>={lo},<{hi}, but trl {version} is installed. "
        f"Install a tested version (pip install 'trl>={lo},<{hi}'), or set {FORCE_ENV}=1 "
        "(or pass force=True) to run anyway; the regression tests in tests/adapters/test_trl*.py "
        "then tell you whether the patch still matches TRL."
    )
