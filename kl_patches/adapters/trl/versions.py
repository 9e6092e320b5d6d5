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

from dataclasses import replace

from packaging.version import Version

from kl_patches.adapters.support import FORCE_ENV, CompatPlan, CompatStep, VersionSupport
from kl_patches.adapters.support_table import SupportRow

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
    "SWEEP_PLAN",
    "TESTED_BELOW",
    "TESTED_MIN",
    "check_version",
    "defaults_at",
    "support_rows",
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


CANARY_ONLY = (
    "canar or signature or unsloth or ms_swift or liger or version_is_in or defaults_at "
    "or known_case"
)
"""The ``-k`` selection of the compat tests that need no TRL log-prob computation: what a CPU
can check of a release in :data:`CPU_UNTESTABLE` (its canaries, signatures, foreign trainers)."""


def _reason(version: str) -> str:
    if version in CPU_UNTESTABLE:
        return "canaries, signatures and foreign-trainer checks only: " + CPU_UNTESTABLE[version]
    if version == compat.RELEASES_1X[0]:
        return "oldest release of the range"
    if version == compat.RELEASES_1X[-1]:
        return "newest release of the range"
    if version in dict(compat.CHANGE_POINTS):
        return dict(compat.CHANGE_POINTS)[version]
    earlier = [v for v in COMPAT_MATRIX if Version(v) < Version(version)]
    return f"sweep only: between change points, the surface of {earlier[-1]}"


def _steps(releases: tuple[str, ...]) -> tuple[CompatStep, ...]:
    return tuple(
        CompatStep(
            v,
            (("--no-deps", f"trl=={v}"),),
            _reason(v),
            tuple(d.test for d in compat.known_differences(v)),
            CANARY_ONLY if v in CPU_UNTESTABLE else "",
        )
        for v in releases
    )


COMPAT_PLAN = CompatPlan(
    library="trl",
    base=("trl==1.0.0", "tokenizers", "requests", "pyyaml", "pytest>=8"),
    tests=(
        "tests/adapters/trl/test_compat.py",
        "tests/adapters/trl/test_hooks.py",
        "tests/adapters/trl/test_trainers.py",
        "tests/adapters/trl/test_patch.py",
    ),
    steps=_steps(tuple(sorted({*COMPAT_MATRIX, *CPU_UNTESTABLE}, key=compat.RELEASES_1X.index))),
)
"""``nox -s compat`` for TRL: one venv from the 1.0.0 install recipe (:data:`.compat.
INSTALL_RECIPES`: its dependencies serve every 1.x release), then ``pip install --no-deps`` of
each release of :data:`COMPAT_MATRIX` and its regression, equivalence and compat tests."""

SWEEP_PLAN = replace(COMPAT_PLAN, steps=_steps(compat.RELEASES_1X))
"""``nox -s compat_sweep``: :data:`COMPAT_PLAN` on every 1.x release (23; not run by ``.ci/run``,
whose matrix has the oldest, the change points and the newest). Its last run is
:data:`.compat.SWEEP`."""

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


FOLLOWS: dict[str, str] = {
    "1.1.0": "multimodal kwargs passed through as TRL names them",
    "1.6.0": "NaN-aware advantages (before 1.6.0 TRL's own differ only for a reward of None)",
    "1.7.0": "3-tuple log-probs and the MoE aux loss left to TRL",
    "1.8.0": "quantization_config passed through positionally",
    "1.9.0": "loss-mask token count as TRL counts it",
    "1.9.1": "the token normaliser's GA / steps_per_generation factor (read by a canary)",
    "1.10.0": "luspo as a per-sequence sum (before: TRL's k3 counts padding, not reproduced)",
    "1.14.0": "no fused Liger loss to refuse any more (1.0-1.13: use_liger_kernel is refused)",
}
"""What the adapter does about each change point of :data:`.compat.CHANGE_POINTS` (the
support table's short form)."""


def _span(releases: list[str]) -> str:
    return releases[0] if len(releases) == 1 else f"{releases[0]}-{releases[-1]}"


def support_rows() -> tuple[SupportRow, ...]:
    """The TRL support table (README, docs/trl.md), one row per segment of releases that behave
    alike for the patch, from the compat data and the recorded sweep."""
    starts = [*COMPAT_MATRIX, *CPU_UNTESTABLE]
    releases = list(compat.RELEASES_1X)
    cut = sorted({releases.index(v) for v in starts})
    out = [
        SupportRow(
            "< 1.0.0",
            "GRPO: k3 in the loss; RLOO: k1 in the reward (see kl-patches audit)",
            "refused (`KL_PATCHES_FORCE=1` runs anyway, untested)",
            "refused",
        )
    ]
    for i, start in enumerate(cut):
        segment = releases[start : (cut[i + 1] if i + 1 < len(cut) else len(releases))]
        first = segment[0]
        grpo, rloo = defaults_at("GRPO", first), defaults_at("RLOO", first)
        native = (
            f"GRPO: k3 in the loss at `beta` (default {grpo['beta']})"
            + (", times pi/pi_old by default" if grpo["use_bias_correction_kl"] else "")
            + f"; RLOO: k1 summed in the reward (`beta` {rloo['beta']})"
        )
        follows = FOLLOWS.get(first, "")
        patched = "any KLConfig, GRPO and RLOO" + (f"; here: {follows}" if follows else "")
        if first in CPU_UNTESTABLE:
            tested = (
                "CI, canaries only (with the signature and foreign-trainer checks): "
                + CPU_UNTESTABLE[first].split(";")[0]
            )
        else:
            once = [v for v in segment[1:] if v in compat.SWEEP]
            tested = f"CI (`nox -s compat`): {first}"
            if once:
                tested += f"; once: {_span(once)} ({compat.SWEEP_WHEN})"
        out.append(SupportRow(_span(segment), native, patched, tested))
    out.append(
        SupportRow(
            f">= {'.'.join(map(str, TESTED_BELOW))}",
            "-",
            "runs when every behaviour canary passes, with one warning; refused otherwise",
            "canaries at `apply()`",
        )
    )
    return tuple(out)
