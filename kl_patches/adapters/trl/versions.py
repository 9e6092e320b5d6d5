"""What kl-patches knows about TRL itself: the tested versions, the defaults, the loss types.

Nothing here imports TRL, so the reader (and the audit) work without TRL installed. The numbers
are those of TRL 1.16.0 (``GRPOConfig``/``RLOOConfig`` defaults checked by instantiation);
:func:`defaults_at` gives them for any 1.x release, from the patch-surface data in
:mod:`.compat`.

The patch runs on every TRL 1.x release from 1.0.0 to 1.16.x (:data:`SUPPORT`): the compat
matrix (:data:`COMPAT_MATRIX`: the oldest, every release where something the adapter touches
changed, the newest) is tested in ``nox -s compat``; 1.15.0 cannot train on a CPU
(:data:`CPU_UNTESTABLE`) and is covered there by its behaviour canaries only. A newer release is
patched when every canary passes (one warning).
"""

from __future__ import annotations

from kl_patches.adapters.support import FORCE_ENV, CompatPlan, CompatStep, VersionSupport

from . import compat

__all__ = [
    "COMPAT_MATRIX",
    "COMPAT_PLAN",
    "CPU_UNTESTABLE",
    "FORCE_ENV",
    "GLOBAL_TOKEN_COUNT_LOSS_TYPES",
    "GRPO_DEFAULTS",
    "GRPO_LOSS_AGGREGATION",
    "RLOO_DEFAULTS",
    "SUPPORT",
    "TESTED_BELOW",
    "TESTED_MIN",
    "check_version",
    "defaults_at",
]

CPU_UNTESTABLE: dict[str, str] = {
    "1.15.0": "its log-probs go only through trl.kernels' Triton kernels (no CPU fallback until "
    "1.16.0), so nothing can be trained on a CPU; the canaries, which replace the model forward, "
    "run",
}
"""TRL releases the CPU compat session cannot train, with the reason (they need a GPU job)."""

COMPAT_MATRIX: tuple[str, ...] = tuple(
    v
    for v in (compat.RELEASES_1X[0], *(r for r, _ in compat.CHANGE_POINTS), compat.RELEASES_1X[-1])
    if v not in CPU_UNTESTABLE
)
"""The releases ``nox -s compat`` tests: 1.0.0, each change point of :data:`.compat.CHANGE_POINTS`
(every release between two of them has the surface of the earlier one), 1.16.0; minus
:data:`CPU_UNTESTABLE`."""


def _reason(version: str) -> str:
    if version == compat.RELEASES_1X[0]:
        return "oldest release of the range"
    if version == compat.RELEASES_1X[-1]:
        return "newest release of the range"
    return dict(compat.CHANGE_POINTS)[version]


COMPAT_PLAN = CompatPlan(
    library="trl",
    base=("trl==1.0.0", "tokenizers", "requests", "pyyaml", "pytest>=8"),
    tests=(
        "tests/adapters/trl/test_compat.py",
        "tests/adapters/trl/test_hooks.py",
        "tests/adapters/trl/test_trainers.py",
        "tests/adapters/trl/test_patch.py",
    ),
    steps=tuple(
        CompatStep(
            v,
            (("--no-deps", f"trl=={v}"),),
            _reason(v),
            tuple(d.test for d in compat.known_differences(v)),
        )
        for v in COMPAT_MATRIX
    ),
)
"""``nox -s compat`` for TRL: one venv from the 1.0.0 install recipe (:data:`.compat.
INSTALL_RECIPES`: its dependencies serve every 1.x release), then ``pip install --no-deps`` of
each release of :data:`COMPAT_MATRIX` and its regression, equivalence and compat tests."""

SUPPORT = VersionSupport(
    library="trl",
    supported=">=1.0.0,<1.17.0",
    tested=COMPAT_MATRIX,
    legacy_force_env="KL_PATCHES_TRL_FORCE",
)
"""The TRL releases the patch accepts (the version guard; ``KL_PATCHES_FORCE=1`` overrides)."""

TESTED_MIN = (1, 0, 0)
"""Oldest TRL release the adapter is tested against (inclusive); see :data:`SUPPORT`."""

TESTED_BELOW = (1, 17, 0)
"""First TRL release the adapter is NOT tested against (exclusive); see :data:`SUPPORT`."""

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


def defaults_at(kind: str, version: str) -> dict[str, object]:
    """:data:`GRPO_DEFAULTS` or :data:`RLOO_DEFAULTS` (``kind`` ``"GRPO"``/``"RLOO"``) as TRL
    ``version`` (1.x) has them: the ``grpo.config.*``/``rloo.config.*`` rows of
    :data:`.compat.SURFACE` over the 1.16.0 values (which a test ties together)."""
    if kind not in ("GRPO", "RLOO"):
        raise ValueError(f"kind={kind!r} is not valid; choose one of ['GRPO', 'RLOO']")
    base = dict(GRPO_DEFAULTS if kind == "GRPO" else RLOO_DEFAULTS)
    prefix = f"{kind.lower()}.config."
    for key, value in compat.SURFACE.at(version).items():
        if key.startswith(prefix) and key[len(prefix) :] in base:
            base[key[len(prefix) :]] = value
    return base


def check_version(version: str, force: bool = False) -> None:
    """Raise unless ``version`` is supported (or forced: argument or ``KL_PATCHES_FORCE=1``)."""
    SUPPORT.check(version, force=force)
