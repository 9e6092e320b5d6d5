"""What kl-patches knows about verl itself: supported versions, recorded defaults, names.

Nothing here imports verl: the defaults of the tested release (``trainer/config/ppo_trainer.yaml``
composed by Hydra) are written down, with the estimator names, clamps and loss aggregation
modes that the translation and the reader use.

The patch runs on verl 0.4.0-0.9.x (:data:`SUPPORT`). The compat session tests the oldest
release, every release where the patch's own path changes (:data:`CHANGE_POINTS`) and the
newest (:data:`COMPAT_MATRIX`); the releases whose recorded surface changed without changing
that path (:data:`SURFACE_ONLY`) are tested by ``nox -s compat_sweep`` (:data:`SWEEP_PLAN`). A
newer release is patched when every behaviour canary passes (one warning). Before 0.8.0 the KL
loss is computed by verl's legacy actor, so there only the reward side can be patched
(:data:`LOSS_PATCH`); before 0.4.0 there is no ``algorithm.use_kl_in_reward`` (the reward KL is
tied to ``use_kl_loss``), which the support table gives as the reason for refusing them.
"""

from __future__ import annotations

from dataclasses import replace
from importlib import metadata
from typing import Any

from packaging.version import Version

from kl_patches.adapters.delivery import env_var
from kl_patches.adapters.support import CompatPlan, CompatStep, VersionSupport
from kl_patches.adapters.support_table import SupportRow

__all__ = [
    "ACTOR",
    "AGG_FROM_VERL",
    "AGG_TO_VERL",
    "CHANGE_POINTS",
    "COMPAT_MATRIX",
    "COMPAT_PLAN",
    "DEFAULTS",
    "ENV_VAR",
    "GRPO_LIKE",
    "LOSS_PATCH",
    "MARKER",
    "NATIVE_CLAMPS",
    "NATIVE_NAME",
    "REWARD_TO_GO_ESTIMATORS",
    "RUNTIME_ENV_PREFIX",
    "SEQUENCE_SUM_ESTIMATORS",
    "SIGNATURES",
    "SUPPORT",
    "SUPPORTED_RANGE",
    "SURFACE_ONLY",
    "SWEEP_PLAN",
    "TESTED_VERSIONS",
    "VERL_ESTIMATORS",
    "installed_version",
    "support_rows",
]

RELEASES: tuple[str, ...] = (
    "0.4.0", "0.4.1", "0.5.0", "0.6.0", "0.6.1", "0.7.0", "0.7.1", "0.8.0", "0.9.0", "0.9.1",
)  # fmt: skip
"""Every verl release of the supported range, ascending."""

CHANGE_POINTS: tuple[tuple[str, str], ...] = (
    (
        "0.5.0",
        "apply_kl_penalty reads batch['response_mask'] (0.4.x: the response part of "
        "attention_mask, loss_mask with its multi_turn argument); compute_advantage loses "
        "multi_turn and takes config: AlgoConfig",
    ),
    (
        "0.6.0",
        "kl_penalty dispatches to kl_penalty_forward ('+' names advertised, they crash until "
        "0.8.0); ray_kwargs.ray_init.runtime_env reaches ray.init, VERL_USE_EXTERNAL_MODULES "
        "imports the plugin in every verl process",
    ),
    (
        "0.7.0",
        "workers.utils.losses.ppo_loss (the engine loss, selected by "
        "trainer.use_legacy_worker_impl=disable) exists beside the legacy actor; the patch "
        "wraps it",
    ),
    (
        "0.7.1",
        "agg_loss: seq-mean-token-sum-norm becomes a global sequence mean over loss_scale_factor",
    ),
    (
        "0.8.0",
        "the legacy actors (workers/actor/dp_actor.py, megatron_actor.py) are gone: "
        "workers.utils.losses.ppo_loss is the only KL-loss site (padded inputs through "
        "no_padding_2_padding, verl Metric objects); kl_penalty strips the '+' suffix; "
        "trainer.main_ppo_sync imports apply_kl_penalty and compute_advantage by name",
    ),
    (
        "0.9.0",
        "trainer.ppo.v1.trainer_base (the default trainer) and v1.utils import apply_kl_penalty "
        "and compute_advantage by name (main_ppo_sync gone); the verl.plugins entry point",
    ),
)
"""Releases after 0.4.0 where the patch's own path changed, with the reason (read from each
release's wheel; 0.9.1 moves only line numbers)."""

SURFACE_ONLY: tuple[tuple[str, str], ...] = (
    (
        "0.4.1",
        "compute_advantage takes config=None instead of **kwargs (the wrapper passes arguments "
        "on as given); k3 clamps the log-ratio to +-20 before exp (0.4.0: only the value to "
        "+-10, a NaN gradient past a log-ratio of about 88 in float32, same values)",
    ),
    (
        "0.6.1",
        "agg_loss's seq-mean modes leave fully masked rows out of the mean (the legacy actor's "
        "native KL loss); workers.roles.utils.losses.ppo_loss, which no trainer selects for the "
        "actor, changes",
    ),
)
"""Releases whose recorded surface changed (``compat.CHANGE_POINTS``) without changing the
patch's own path: tested by ``nox -s compat_sweep``, with the reason."""

COMPAT_MATRIX: tuple[str, ...] = (RELEASES[0], *(r for r, _ in CHANGE_POINTS), RELEASES[-1])
"""The releases ``nox -s compat`` tests: the oldest, every change point, the newest."""

SUPPORT = VersionSupport(library="verl", supported=">=0.4.0,<0.10", tested=COMPAT_MATRIX)
"""Versions the patch accepts and those the compat session tests (``KL_PATCHES_FORCE=1``
overrides; a newer release passes with one warning when the canaries pass)."""

LOSS_PATCH = ">=0.8.0"
"""Releases where a loss side that needs the patch runs: before 0.8.0 the legacy actor computes
the KL loss itself (the patch refuses such configs there; native loss estimators work). Its
``kl_penalty`` sees neither the mask nor the behaviour log-probs, so the core's sequence-level
or importance-weighted terms cannot be put there by wrapping it alone."""

SIGNATURES: dict[str, tuple[str, ...]] = {
    "apply_kl_penalty": (
        "apply_kl_penalty(data: DataProto, kl_ctrl: core_algos.AdaptiveKLController, "
        "kl_penalty='kl', multi_turn=False)",
        "apply_kl_penalty(data: DataProto, kl_ctrl: core_algos.AdaptiveKLController, "
        "kl_penalty='kl')",
    ),
    "compute_advantage": (
        "compute_advantage(data: DataProto, adv_estimator, gamma=1.0, lam=1.0, num_repeat=1, "
        "multi_turn=False, norm_adv_by_std_in_grpo=True, **kwargs)",
        "compute_advantage(data: DataProto, adv_estimator, gamma=1.0, lam=1.0, num_repeat=1, "
        "multi_turn=False, norm_adv_by_std_in_grpo=True, config=None)",
        "compute_advantage(data: DataProto, adv_estimator: AdvantageEstimator, gamma: "
        "float=1.0, lam: float=1.0, num_repeat: int=1, norm_adv_by_std_in_grpo: bool=True, "
        "config: Optional[AlgoConfig]=None) -> DataProto",
    ),
    "ppo_loss": ("ppo_loss(config: ActorConfig, model_output, data: TensorDict, dp_group=None)",),
}
"""The signatures of each wrapped function in the releases 0.4.0-0.9.1 (read with ``ast`` from
each wheel: apply_kl_penalty loses ``multi_turn`` in 0.5.0, compute_advantage changes in 0.4.1
and 0.5.0, ppo_loss exists from 0.7.0); the patch refuses another call shape."""

_PINS_07 = ("numpy<2", "transformers<5", "huggingface-hub<1.0", "pyarrow>=19,<22")
_PINS_08 = ("transformers>=5.5.3,<5.11,!=5.6.0", "huggingface-hub>=1.0")

_SEP = "verl.experimental.separation.ray_trainer"
IMPORTERS: dict[str, tuple[tuple[str, str], ...]] = {
    **dict.fromkeys(("0.4.0", "0.4.1", "0.5.0", "0.6.0", "0.6.1"), ()),
    "0.7.0": (("verl.workers.engine_workers", "ppo_loss"),),
    "0.7.1": (
        (_SEP, "apply_kl_penalty"),
        (_SEP, "compute_advantage"),
        ("verl.workers.engine_workers", "ppo_loss"),
    ),
    "0.8.0": (
        (_SEP, "apply_kl_penalty"),
        ("verl.trainer.main_ppo_sync", "apply_kl_penalty"),
        (_SEP, "compute_advantage"),
        ("verl.trainer.main_ppo_sync", "compute_advantage"),
        ("verl.trainer.distillation.losses", "ppo_loss"),
        ("verl.workers.engine_workers", "ppo_loss"),
    ),
    "0.9.0": (
        (_SEP, "apply_kl_penalty"),
        ("verl.trainer.ppo.v1.trainer_base", "apply_kl_penalty"),
        (_SEP, "compute_advantage"),
        ("verl.trainer.ppo.v1.utils", "compute_advantage"),
        ("verl.trainer.distillation.losses", "ppo_loss"),
        ("verl.workers.engine_workers", "ppo_loss"),
    ),
}
IMPORTERS["0.9.1"] = IMPORTERS["0.9.0"]
"""Per release: the modules that import a wrapped function by name at top level (read with
``ast`` from each wheel). The patch does not rely on the list (it propagates to every loaded
module holding the original); the compat tests check that each of them gets the wrapper."""

LEGACY_ACTOR_DESELECT: tuple[str, ...] = (
    "tests/adapters/verl/test_regression.py::test_straight_through_names_take_k2_gradient",
    "tests/adapters/verl/test_patch.py::test_apply_patches_every_importer_and_revert_restores_all",
    "tests/adapters/verl/test_patch.py::test_wrapper_without_active_config_raises",
    "tests/adapters/verl/test_patch.py::test_plugin_setup_from_environment",
    "tests/adapters/verl/test_patch.py::test_patched_ppo_loss_is_core_loss_term",
    "tests/adapters/verl/test_patch.py::test_native_loss_unchanged_while_patch_active",
    "tests/adapters/verl/test_patch.py::test_coefficient_mismatch_raises",
    "tests/adapters/verl/test_patch.py::test_patched_path_matches_verl_where_verl_expresses_it",
    "tests/adapters/verl/test_patch.py::test_marker_ppo_loss_pads_the_log_probs_once",
)
"""Tests (node-id prefixes) that assume verl 0.8+ and are deselected on 0.7.x: the '+' estimator
names crash in 0.7 (``kl_penalty_forward`` gets the name with its '+'), and every test that
applies a loss side needing the patch meets the legacy-actor refusal. ``test_compat.py``
asserts both on 0.7.x."""

NO_ENGINE_LOSS_DESELECT: tuple[str, ...] = (
    *LEGACY_ACTOR_DESELECT,
    "tests/adapters/verl/test_regression.py::test_ppo_loss_kl_equals_core",
    "tests/adapters/verl/test_patch.py::test_marker_fails_loudly_in_the_engine_loss_without_patch",
)
"""Deselected on verl 0.4-0.6, which has no ``workers.utils.losses.ppo_loss`` (its legacy actor
adds the KL loss through ``kl_penalty`` + ``agg_loss``, whose regression tests run there):
``test_compat.py`` asserts the refusal of a loss side needing the patch and the reward side."""

RAY_HOOK_TEST = "tests/adapters/verl/test_delivery_hook.py"
"""The Ray worker test of the ``RAY_RUNTIME_ENV_HOOK`` route: run on the oldest release only
(a local Ray cluster costs about 20 s; ``nox -s verl`` runs it on the newest)."""

_PINS_04 = ("tensordict==0.6.2", "setuptools<80")  # verl 0.4 imports pkg_resources
_PINS_05 = ("tensordict>=0.8,<=0.9.1,!=0.9.0",)

_STEPS: dict[str, CompatStep] = {
    "0.4.0": CompatStep(
        "0.4.0",
        (("--no-deps", "verl==0.4.0"), (*_PINS_04, "openai")),  # ray_trainer -> async_server
        "oldest release of the range: apply_kl_penalty and compute_advantage take multi_turn",
        NO_ENGINE_LOSS_DESELECT,
    ),
    "0.4.1": CompatStep(
        "0.4.1",
        (("--no-deps", "verl==0.4.1"), _PINS_04),
        "sweep only: " + dict(SURFACE_ONLY)["0.4.1"],
        NO_ENGINE_LOSS_DESELECT,
    ),
    "0.5.0": CompatStep(
        "0.5.0",
        (("--no-deps", "verl==0.5.0"), _PINS_05),
        dict(CHANGE_POINTS)["0.5.0"],
        NO_ENGINE_LOSS_DESELECT,
    ),
    "0.6.0": CompatStep(
        "0.6.0",
        (("--no-deps", "verl==0.6.0"),),
        dict(CHANGE_POINTS)["0.6.0"],
        NO_ENGINE_LOSS_DESELECT,
    ),
    "0.6.1": CompatStep(
        "0.6.1",
        (("--no-deps", "verl==0.6.1"),),
        "sweep only: " + dict(SURFACE_ONLY)["0.6.1"],
        NO_ENGINE_LOSS_DESELECT,
    ),
    "0.7.0": CompatStep(
        "0.7.0",
        (("--no-deps", "verl==0.7.0"), _PINS_07),
        dict(CHANGE_POINTS)["0.7.0"],
        LEGACY_ACTOR_DESELECT,
    ),
    "0.7.1": CompatStep(
        "0.7.1",
        (("--no-deps", "verl==0.7.1"), _PINS_07),
        dict(CHANGE_POINTS)["0.7.1"],
        LEGACY_ACTOR_DESELECT,
    ),
    "0.8.0": CompatStep(
        "0.8.0",
        (("--no-deps", "verl==0.8.0"), _PINS_08),
        dict(CHANGE_POINTS)["0.8.0"],
        (LEGACY_ACTOR_DESELECT[1],),  # lists 0.9's importers; test_compat checks 0.8.0's
    ),
    "0.9.0": CompatStep(
        "0.9.0",
        (("--no-deps", "verl==0.9.0"), ("TransferQueue>=0.1.10",)),
        dict(CHANGE_POINTS)["0.9.0"],
    ),
    "0.9.1": CompatStep("0.9.1", (("--no-deps", "verl==0.9.1"),), "newest release of the range"),
}

COMPAT_PLAN = CompatPlan(
    library="verl",
    base=(
        *_PINS_07,
        "packaging",
        "ray>=2.41",
        "tensordict>=0.8,<=0.10.0,!=0.9.0",
        "omegaconf",
        "hydra-core",
        "codetiming",
        "torchdata",
        "peft",
        "datasets",
        "pillow",
        "cachetools",
        "uvicorn",
        "fastapi",
        "pyyaml",
        "pytest>=8",
    ),
    tests=(
        "tests/adapters/verl/test_compat.py",
        "tests/adapters/verl/test_regression.py",
        "tests/adapters/verl/test_patch.py",
        RAY_HOOK_TEST,
    ),
    steps=tuple(
        _STEPS[v]
        if v == RELEASES[0]
        else replace(_STEPS[v], deselect=(*_STEPS[v].deselect, RAY_HOOK_TEST))
        for v in COMPAT_MATRIX
    ),
)
"""``nox -s compat`` for verl: one venv from the 0.7.0 CPU recipe (verl --no-deps and what its
KL, trainer and worker modules import), switched in place, each release with its own pins:
0.4.x tensordict 0.6.2 (and a setuptools that still has ``pkg_resources``), 0.5.0 tensordict
<= 0.9.1, 0.8.0 transformers 5.x."""

SWEEP_PLAN = replace(
    COMPAT_PLAN,
    steps=tuple(
        _STEPS[v]
        if v == RELEASES[0]
        else replace(_STEPS[v], deselect=(*_STEPS[v].deselect, RAY_HOOK_TEST))
        for v in RELEASES
    ),
)
"""``nox -s compat_sweep``: every release of the range (the matrix and :data:`SURFACE_ONLY`)."""

TESTED_VERSIONS = SUPPORT.tested
"""verl versions whose code the adapter's regression tests ran against."""

SUPPORTED_RANGE = (">=0.4.0", "<0.10")
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


SWEEP: dict[str, str] = {}
"""Release -> result of the compat tests run once against it (the :data:`SURFACE_ONLY` releases,
by ``nox -s compat_sweep``), recorded by hand from that run."""

SWEEP_WHEN = ""
"""When :data:`SWEEP` was measured."""

PLUGINS_SINCE = "0.9.0"
"""First release that loads the ``verl.plugins`` entry point (``verl/__init__.py``); before it the
patch reaches Ray workers through Ray's ``RAY_RUNTIME_ENV_HOOK`` (:mod:`.delivery`)."""

REFUSED_BEFORE = (
    "no `algorithm.use_kl_in_reward`: the reward KL runs (k1, `kl_ctrl.kl_coef`) whenever "
    "`actor.use_kl_loss` is off, 0.1 always; the KL loss is a micro-batch token mean without "
    "`loss_agg_mode`. `kl-patches audit` reads these launches; the patch refuses them"
)
"""Why verl < 0.4.0 is refused (verl/trainer/ppo/ray_trainer.py:917 in 0.2, :882 in 0.3.x)."""


def support_rows() -> tuple[SupportRow, ...]:
    """The verl support table (README, docs/verl.md): one row per segment of releases that
    starts at a compat-matrix release, from the range, the change points, :data:`LOSS_PATCH`
    and the sweep's results."""
    from packaging.specifiers import SpecifierSet

    reasons = dict(CHANGE_POINTS)
    out = [
        SupportRow(
            "< 0.4.0", REFUSED_BEFORE, "refused (`KL_PATCHES_FORCE=1` runs anyway)", "refused"
        )
    ]
    starts = [RELEASES.index(v) for v in COMPAT_MATRIX]
    for i, start in enumerate(starts):
        segment = RELEASES[start : (starts[i + 1] if i + 1 < len(starts) else len(RELEASES))]
        first = segment[0]
        native = (
            "k1/k2/k3 in the reward (`use_kl_in_reward`, per token) or the loss (`use_kl_loss`, "
            "through `loss_agg_mode`), k3 clamped"
        )
        if Version(first) < Version("0.8.0"):
            native += "; the loss KL in the legacy actor (`dp_actor`), per micro-batch"
        if Version("0.6.0") <= Version(first) < Version("0.8.0"):
            native += "; `+` names crash (NotImplementedError)"
        if SpecifierSet(LOSS_PATCH).contains(first):
            patched = "any KLConfig"
        else:
            patched = (
                "reward side: any KLConfig; a loss side that needs the patch is refused (the "
                "legacy actor computes the KL loss); native loss estimators work"
            )
        if first in reasons:
            patched += f"; here: {reasons[first].split(';')[0]}"
        patched += "; workers: " + (
            "the `verl.plugins` entry point"
            if Version(first) >= Version(PLUGINS_SINCE)
            else "`RAY_RUNTIME_ENV_HOOK` (set by `kl-patches verl`)"
        )
        once = [v for v in segment[1:] if v in SWEEP]
        tested = "CI (`nox -s compat`)"
        if once:
            tested += f"; once: {', '.join(once)} ({SWEEP_WHEN})"
        elif segment[1:]:
            tested += f"; {', '.join(segment[1:])}: `nox -s compat_sweep`"
        span = first if len(segment) == 1 else f"{first}-{segment[-1]}"
        out.append(SupportRow(span, native, patched, tested))
    out.append(
        SupportRow(
            ">= 0.10.0",
            "-",
            "runs when every behaviour canary passes, with one warning; refused otherwise "
            "(pre-releases such as 0.10.0rc1: refused)",
            "canaries at `apply()`",
        )
    )
    return tuple(out)
