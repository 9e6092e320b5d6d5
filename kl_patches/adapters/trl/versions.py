"""What kl-patches knows about TRL itself: the tested versions, the defaults, the loss types.

Nothing here imports TRL, so the reader (and the audit) work without TRL installed. The numbers
are those of TRL 1.16.0 (``GRPOConfig``/``RLOOConfig`` defaults checked by instantiation);
:func:`defaults_at` gives them for any 1.x release, from the patch-surface data in
:mod:`.compat`.

TRL 0.14-0.26 (:data:`NATIVE_ONLY`) lack hook points the 1.x hooks use (:data:`WHY_NOT_HOOKED`):
there a KL config TRL expresses natively runs through its own ``beta`` (GRPO: k3 in the loss,
aggregated like its ``loss_type``; RLOO from 0.22: k1 summed in the reward), GRPO's KL in the
reward runs as one more reward function, and any other config is refused with the reason
(:mod:`.legacy`, :mod:`.legacy_reward`). From 0.27.0
(:data:`HOOKS_FROM`) the 1.x hooks apply unchanged.

The patch runs on every TRL 1.x release from 1.0.0 to 1.16.x (:data:`SUPPORT`): the compat
matrix (:data:`COMPAT_MATRIX`: the oldest, every release where something the adapter touches
changed, the newest) is tested in ``nox -s compat``; 1.15.0 cannot train on a CPU
(:data:`CPU_UNTESTABLE`) and is covered there by its behaviour canaries only. A newer release is
patched when every canary passes (one warning).
"""

from __future__ import annotations

from collections.abc import Iterable
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
    "installed_version",
    "support_rows",
]

HOOKS_FROM = "0.27.0"
"""First TRL release the hooks of :mod:`.hooks` patch (GRPOTrainer and RLOOTrainer)."""

ONLINE_RLOO_FROM = "0.22.0"
"""First TRL release whose RLOOTrainer is the online one (``beta``, k1 summed in the reward);
before it RLOOTrainer is the PPO-style trainer (``kl_coef``), which the adapter does not patch."""

NATIVE_ONLY = ">=0.14.0,<0.27.0"
"""The TRL releases patched without the hooks (:mod:`.legacy`)."""

WHY_NOT_HOOKED: tuple[tuple[str, str, str], ...] = (
    (
        "0.14.0",
        "0.15.2",
        "generation, log-probs, rewards, advantages and the loss run in one method "
        "(GRPOTrainer.compute_loss in 0.14; _prepare_inputs and compute_loss in 0.15) with no hook "
        "point between them",
    ),
    (
        "0.16.0",
        "0.17.0",
        "the rewards are summed and normalised inline in _generate_and_score_completions (no "
        "_calculate_rewards before 0.19), so a reward-side penalty has no hook before the baseline",
    ),
    (
        "0.18.0",
        "0.18.2",
        "the rewards are summed and normalised inline in _generate_and_score_completions (no "
        "_calculate_rewards before 0.19), and the reference log-probs are computed in the loss, "
        "after the rewards",
    ),
    (
        "0.19.0",
        "0.19.1",
        "log-probs come from _get_per_token_logps, which returns a tensor (no "
        "_get_per_token_logps_and_entropies before 0.20)",
    ),
    (
        "0.20.0",
        "0.25.1",
        "generation runs inline in _generate_and_score_completions (no _generate before 0.26), so "
        "the scoring canary cannot run TRL's scoring on a stand-in, and GRPOTrainer.training_step "
        "is transformers' own (TRL defines it from 0.26): not patched yet",
    ),
    (
        "0.26.0",
        "0.26.2",
        "trl.trainer.utils.nanstd takes no dim, so the hooks' group-std recompute cannot call it, "
        "and the scoring canaries fail on these releases (measured): not patched yet",
    ),
)
"""``(first, last, why)``: why the releases ``first``-``last`` cannot take the hooks."""


def installed_version() -> str:
    """The installed TRL's version: ``trl.__version__``, or the distribution's metadata where
    that is not a version (TRL 0.22.0 reads a ``VERSION`` file its wheel does not install and
    says ``"unknown"``)."""
    import trl
    from packaging.version import InvalidVersion

    try:
        Version(str(trl.__version__))
    except InvalidVersion:
        return SUPPORT.installed() or str(trl.__version__)
    return str(trl.__version__)


REFERENCE_IN_LOSS: tuple[tuple[str, str, str], ...] = (
    (
        "0.18.0",
        "0.18.2",
        "TRL 0.18 computes the reference log-probs in _compute_loss, after the rewards "
        "(grpo_trainer.py:1283-1293 in 0.18.2), and the policy's own before the rewards only "
        "when num_iterations > 1 or steps_per_generation > gradient_accumulation_steps "
        "(grpo_trainer.py:1140-1145); num_iterations is read nowhere else in "
        "_generate_and_score_completions (the same in 0.18.0 and 0.18.1)",
    ),
)
"""``(first, last, why)``: releases of :data:`NATIVE_ONLY` where GRPO's KL in the reward runs
through TRL's own policy scoring forward, forced for the scoring call only (:mod:`.legacy_reward`,
``_policy_forced``), instead of the reference forward TRL runs before the rewards elsewhere."""


def reference_in_loss(version: str) -> str | None:
    """Why TRL ``version`` has no reference forward before the rewards (None: it has one, or
    the hooks run there)."""
    for first, last, why in REFERENCE_IN_LOSS:
        if Version(first) <= Version(version) <= Version(last):
            return why
    return None


def patch_mode(version: str) -> str:
    """``"native"`` (``beta`` and the penalty reward function, :mod:`.legacy`) or ``"hooks"``
    (:mod:`.hooks`) for TRL ``version``."""
    from packaging.specifiers import SpecifierSet

    native = SpecifierSet(NATIVE_ONLY).contains(version, prereleases=True)
    return "native" if native else "hooks"


def why_not_hooked(version: str) -> str:
    """Why TRL ``version`` (in :data:`NATIVE_ONLY`) cannot take the hooks."""
    for first, last, why in WHY_NOT_HOOKED:
        if Version(first) <= Version(version) <= Version(last):
            return why
    raise KeyError(f"TRL {version} is patched with the hooks; nothing is missing")


def online_rloo(version: str) -> bool:
    """True when TRL ``version``'s RLOOTrainer is the online one (from :data:`ONLINE_RLOO_FROM`)."""
    return Version(version) >= Version(ONLINE_RLOO_FROM)


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


COMPAT_MATRIX_0X: tuple[str, ...] = ("0.29.1", "0.23.0", "0.19.0", "0.18.2", "0.16.0", "0.14.0")
"""The 0.x releases ``nox -s compat`` tests, newest first (the order they are installed): the
newest 0.x (the hooks) and one release of each segment of :data:`WHY_NOT_HOOKED` but 0.26
(0.14.0, oldest; 0.16.0; 0.18.2, the KL reward function on TRL's policy scoring forward,
:data:`REFERENCE_IN_LOSS`; 0.19.0, the ``beta`` default change to 0.0; 0.23.0). 0.27.0, the
oldest release the hooks patch, was tested once (:data:`ONCE_0X`): a hooks step costs the CI
about 2.5 min (its install and 58 tests), a ``beta``/reward-function step about 1 min."""

ONCE_0X: dict[str, str] = {
    "0.15.2": "15 passed, 3 skipped (tests/adapters/trl/test_legacy.py: no scored batch to "
    "share, no forced forward; transformers 4.51.3)",
    "0.17.0": "17 passed, 1 skipped (test_legacy.py: no forced forward; 4.51.3)",
    "0.18.0": "18 passed (test_legacy.py: the KL reward function on TRL's policy scoring "
    "forward; 4.51.3)",
    "0.18.1": "18 passed (test_legacy.py, as 0.18.0; 4.51.3)",
    "0.20.0": "12 passed (test_legacy.py, 4.56.2)",
    "0.22.0": "12 passed (test_legacy.py, 4.56.2)",
    "0.25.1": "12 passed (test_legacy.py, 4.56.2)",
    "0.26.2": "17 passed, 1 skipped (test_legacy.py: no forced forward; 4.56.2)",
    "0.27.0": "57 passed, 1 deselected (luspo, a known difference; 4.56.2)",
    "0.28.0": "57 passed, 1 deselected (luspo, a known difference; 4.56.2)",
}
"""0.x release -> result of its compat tests run once here (2026-12-07, transformers 4.56.2
unless the entry names 4.51.3), outside :data:`COMPAT_MATRIX_0X`."""

PINS_0X: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "0.29.1",
        (
            "transformers==4.56.2",
            "huggingface_hub>=0.34,<1.0",
            "tokenizers>=0.22,<0.23",
            "datasets==5.0.1",
            "rich",
        ),
    ),
    ("0.18.2", ("transformers==4.51.3", "tokenizers>=0.21,<0.22")),
)
"""``(newest release served, pins)``, newest first: each 0.x step installs (with their
dependencies) the pins of the last group whose newest release is at or above it (measured):
transformers 4.56.2 (TRL 0.29 needs >= 4.56.2) with huggingface_hub 0.36, tokenizers 0.22,
datasets 5.0.1 and the 1.x steps' accelerate serves 0.19-0.29; TRL 0.16 (its
``_get_train_sampler(self)``) cannot train under 4.56.2, which passes the dataset, so the
releases up to 0.18.2 run on 4.51.3 (TRL 0.14-0.18 accept it; 0.19 needs >= 4.51); 0.14-0.17
import ``rich``, which no later TRL needs. See :data:`.compat.INSTALL_RECIPES`."""

NATIVE_TESTS: tuple[str, ...] = ("tests/adapters/trl/test_legacy.py",)
"""What a release of :data:`NATIVE_ONLY` is tested with (its ``beta`` patch against TRL's own
loss, a k1-in-reward run, the refusals)."""


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


def _reason_0x(version: str) -> str:
    if patch_mode(version) == "native":
        return "no hooks: " + why_not_hooked(version)
    if version == HOOKS_FROM:
        return "oldest release the hooks patch"
    if version == compat.RELEASES_0X[-1]:
        return "newest 0.x release"
    return "the hooks, as 0.27.0-0.29.1"


def _pins(version: str) -> tuple[str, ...]:
    """The :data:`PINS_0X` group serving 0.x ``version``."""
    return [pins for newest, pins in PINS_0X if Version(version) <= Version(newest)][-1]


def _steps_0x(releases: tuple[str, ...]) -> tuple[CompatStep, ...]:
    """Steps for 0.x ``releases``: each installs its pins (a no-op when they are already
    there, about 3 s) and then the release, so a step is the same in the matrix and the sweep."""
    return tuple(
        CompatStep(
            v,
            (_pins(v), ("--no-deps", f"trl=={v}")),
            _reason_0x(v) if v in COMPAT_MATRIX_0X else "sweep only: " + _reason_0x(v),
            tuple(d.test for d in compat.known_differences(v)),
            tests=NATIVE_TESTS if patch_mode(v) == "native" else (),
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
    steps=_steps(tuple(sorted({*COMPAT_MATRIX, *CPU_UNTESTABLE}, key=compat.RELEASES_1X.index)))
    + _steps_0x(COMPAT_MATRIX_0X),
)
"""``nox -s compat`` for TRL: one venv from the 1.0.0 install recipe (:data:`.compat.
INSTALL_RECIPES`: its dependencies serve every 1.x release), then ``pip install --no-deps`` of
each release of :data:`COMPAT_MATRIX` and its regression, equivalence and compat tests; then
:data:`PINS_0X` and each release of :data:`COMPAT_MATRIX_0X` (:data:`NATIVE_TESTS` for the
releases patched through ``beta`` only)."""

SWEEP_RELEASES: tuple[str, ...] = compat.RELEASES_1X + tuple(reversed(compat.RELEASES_0X))
"""Every release of the range in the order the sweep installs them (1.x, then 0.x newest
first, so each transformers pin of :data:`PINS_0X` is installed once)."""

SWEEP_PLAN = replace(
    COMPAT_PLAN, steps=_steps(compat.RELEASES_1X) + _steps_0x(tuple(reversed(compat.RELEASES_0X)))
)
"""``nox -s compat_sweep``: :data:`COMPAT_PLAN` on every 1.x release (23; not run by ``.ci/run``,
whose matrix has the oldest, the change points and the newest). Its last run is
:data:`.compat.SWEEP`."""

SUPPORT = VersionSupport(
    library="trl",
    supported=">=0.14.0,<1.17.0",
    tested=tuple(sorted((*COMPAT_MATRIX_0X, *COMPAT_MATRIX), key=Version)),
    legacy_force_env="KL_PATCHES_TRL_FORCE",
)
"""The TRL releases the patch accepts (the version guard; ``KL_PATCHES_FORCE=1`` overrides)."""

TESTED_MIN = (0, 14, 0)
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


ABSENT_MEANS: dict[str, object] = {
    "loss_type": "grpo",
    "use_bias_correction_kl": False,
    "importance_sampling_level": "token",
    "multi_objective_aggregation": "sum_then_normalize",
    "scale_rewards": "group",
    "num_iterations": 1,
    "steps_per_generation": None,
    "vllm_importance_sampling_correction": False,
    "sync_ref_model": False,
}
"""What a GRPOConfig option an older release does not have yet means there: 0.14-0.16 have no
``loss_type`` and reduce like ``"grpo"``; nothing before 0.26 weights k3 by pi/pi_old; before
0.29 rewards are summed then normalised; 0.14-0.15 always divide by the group std."""


def unscaled_value(version: str) -> str:
    """GRPOConfig's ``scale_rewards`` value for "no std scaling" as TRL ``version``'s parser
    takes it: ``false`` where the field is a bool (0.16-0.21: ``scale_rewards: bool = True``,
    grpo_config.py:428 in 0.18.0; TrlParser refuses ``none`` there), ``none`` where it is a
    string (0.22 on: ``"group"``, ``"batch"`` or ``"none"``) or unrecorded."""
    from packaging.version import InvalidVersion

    from kl_patches.adapters.releases import recording

    try:
        field = (
            recording("kl_patches.adapters.trl").at(version).entry("GRPOConfig", "scale_rewards")
        )
    except (ValueError, KeyError, InvalidVersion):
        field = None
    return "false" if field is not None and isinstance(field["default"], bool) else "none"


def _recorded_defaults(kind: str, version: str, base: dict[str, object]) -> dict[str, object]:
    from kl_patches.adapters.releases import recording

    release = recording("kl_patches.adapters.trl").at(version)
    out = {}
    for key, fallback in base.items():
        entry = release.entry(f"{kind}Config", key)
        out[key] = entry["default"] if entry is not None else ABSENT_MEANS.get(key, fallback)
    return out


def defaults_at(kind: str, version: str) -> dict[str, object]:
    """:data:`GRPO_DEFAULTS` or :data:`RLOO_DEFAULTS` (``kind`` ``"GRPO"``/``"RLOO"``) as TRL
    ``version`` has them: for 1.x the ``grpo.config.*``/``rloo.config.*`` rows of
    :data:`.compat.SURFACE` over the 1.16.0 values (which a test ties together); for 0.x the
    recorded ``GRPOConfig``/``RLOOConfig`` defaults (``data/<release>.json``), an option the
    release lacks read as :data:`ABSENT_MEANS` says."""
    if kind not in ("GRPO", "RLOO"):
        raise ValueError(f"kind={kind!r} is not valid; choose one of ['GRPO', 'RLOO']")
    base = dict(GRPO_DEFAULTS if kind == "GRPO" else RLOO_DEFAULTS)
    if Version(version) < Version(compat.RELEASES_1X[0]):
        return _recorded_defaults(kind, version, base)
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


def _default_0x(config: str, field: str, release: str) -> object:
    from kl_patches.adapters.releases import recording

    entry = recording("kl_patches.adapters.trl").at(release).entry(config, field)
    return None if entry is None else entry["default"]


def _tested_0x(first: str, last: str) -> str:
    def within(releases: Iterable[str]) -> list[str]:
        found = [v for v in releases if Version(first) <= Version(v) <= Version(last)]
        return sorted(found, key=Version)

    parts = []
    if within(COMPAT_MATRIX_0X):
        parts.append(f"CI (`nox -s compat`): {', '.join(within(COMPAT_MATRIX_0X))}")
    if within(ONCE_0X):
        parts.append(f"once: {', '.join(within(ONCE_0X))} (2026-12-07)")
    return "; ".join(parts) or "-"


def _rows_0x() -> list[SupportRow]:
    """One row per segment of :data:`WHY_NOT_HOOKED`, then the 0.x releases the hooks patch."""
    rows = []
    last_0x = compat.RELEASES_0X[-1]
    for first, last, why in WHY_NOT_HOOKED:
        beta = _default_0x("GRPOConfig", "beta", first)
        loss = _default_0x("GRPOConfig", "loss_type", first)
        rloo = (
            f"; RLOO (from {ONLINE_RLOO_FROM}): k1 summed in the reward (`beta` "
            f"{_default_0x('RLOOConfig', 'beta', ONLINE_RLOO_FROM)})"
            if Version(last) >= Version(ONLINE_RLOO_FROM)
            else "; RLOO: PPO-style trainer (`kl_coef`), not patched"
        )
        native = (
            f"GRPO: k3 in the loss at `beta` (default {beta}), "
            + (
                f"reduced like `loss_type` (default {loss})"
                if loss
                else "a per-sequence token mean"
            )
            + rloo
        )
        reward = (
            "GRPO: KL in the reward (sequence-level, as one more reward function"
            + (
                "; the reference log-probs taken on TRL's own policy scoring forward"
                if reference_in_loss(first)
                else ""
            )
            + ") and what `beta` runs"
        )
        patched = f"{reward}; RLOO: what `beta` runs; anything else refused ({why})"
        rows.append(SupportRow(f"{first}-{last}", native, patched, _tested_0x(first, last)))
    grpo_beta = _default_0x("GRPOConfig", "beta", HOOKS_FROM)
    rows.append(
        SupportRow(
            f"{HOOKS_FROM}-{last_0x}",
            f"GRPO: k3 in the loss at `beta` (default {grpo_beta}), times pi/pi_old with "
            "`use_bias_correction_kl` (default False); RLOO: k1 summed in the reward (`beta` "
            f"{_default_0x('RLOOConfig', 'beta', HOOKS_FROM)})",
            "any KLConfig, GRPO and RLOO (the 1.x hooks)",
            _tested_0x(HOOKS_FROM, last_0x),
        )
    )
    return rows


def support_rows() -> tuple[SupportRow, ...]:
    """The TRL support table (README, docs/trl.md), one row per segment of releases that behave
    alike for the patch, from the compat data and the recorded sweep."""
    starts = [*COMPAT_MATRIX, *CPU_UNTESTABLE]
    releases = list(compat.RELEASES_1X)
    cut = sorted({releases.index(v) for v in starts})
    out = [
        SupportRow(
            "< 0.14.0",
            "no GRPOTrainer; RLOOTrainer is the PPO-style one (`kl_coef`)",
            "refused (`KL_PATCHES_FORCE=1` runs anyway, untested)",
            "refused",
        ),
        *_rows_0x(),
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
