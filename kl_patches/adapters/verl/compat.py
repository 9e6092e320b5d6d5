"""The verl patch surface from 0.4.0 to 0.9.1, as data: where each wrapped function lives.

:mod:`kl_patches.adapters.verl.patch` wraps ``apply_kl_penalty`` and ``compute_advantage``
(``trainer/ppo/ray_trainer.py``) and ``ppo_loss`` (``workers/utils/losses.py``); the KL itself
goes through ``kl_penalty`` / ``kl_penalty_forward`` and ``agg_loss`` (``core_algos.py``). A
wrapper on a defining module does not reach a module that did ``from ... import name``, so
each release's by-name importers are listed too. :data:`SURFACE` comes from the recorded
``data/<release>.json`` (``python -m kl_patches.dev record verl V`` reads each release with
``ast``): defining module, line, signature text, a hash of the function's source and every
module that imports it by name at top level.
:data:`CHANGE_POINTS` says, per release, what changed for the adapter and why; releases where
only line numbers moved are not change points.

Also here: which code computes the KL loss by default (:data:`DEFAULT_LOSS_SITE`), the open
upstream move of ``apply_kl_penalty`` / ``compute_advantage`` into ``trainer_utils.py``
(:data:`PENDING_TRAINER_UTILS`), and the measured CPU install recipes (:data:`INSTALL`).
Nothing here imports verl.
"""

from __future__ import annotations

from dataclasses import dataclass

from kl_patches.adapters.releases import recording as recording_of
from kl_patches.adapters.surface import ChangePoint, InstallRecipe, Symbol

from . import recording

RELEASES: tuple[str, ...] = (
    "0.4.0", "0.4.1", "0.5.0", "0.6.0", "0.6.1", "0.7.0", "0.7.1", "0.8.0", "0.9.0", "0.9.1",
)  # fmt: skip
"""Every verl release in the patch-surface range, ascending."""

TARGETS: tuple[str, ...] = recording.PATCH_TARGETS
"""Functions tracked per release (:mod:`.recording` lists them)."""


def _surface() -> dict[str, tuple[Symbol, ...]]:
    data = recording_of("kl_patches.adapters.verl")
    out: dict[str, tuple[Symbol, ...]] = {}
    for release in RELEASES:
        record = data.at(release)
        out[release] = tuple(s for s in (record.symbol(n) for n in TARGETS) if s is not None)
    return out


SURFACE: dict[str, tuple[Symbol, ...]] = _surface()
"""Per release of :data:`RELEASES`, every tracked function that release defines (from the
recorded ``data/<release>.json``: ``python -m kl_patches.dev record verl V`` reads it with
``ast``): ``ppo_loss`` from 0.6.0 (``workers.roles.utils.losses``, which no trainer selects for
the actor, until 0.7.0), ``kl_penalty_forward`` from 0.6.0."""


CHANGE_POINTS: tuple[ChangePoint, ...] = (
    ChangePoint(
        "0.4.1",
        "compute_advantage",
        ("signature", "body_sha"),
        "config=None replaces **kwargs (PF-PPO options read from config); estimators other than "
        "GAE and GRPO through get_adv_estimator_fn",
    ),
    ChangePoint(
        "0.4.1",
        "kl_penalty",
        ("body_sha",),
        "k3 clamps the log-ratio to +-20 before exp (0.4.0: NaN gradient past about 88)",
    ),
    ChangePoint(
        "0.5.0",
        "apply_kl_penalty",
        ("signature", "body_sha"),
        "multi_turn removed: the mask is batch['response_mask'], not sliced from "
        "attention_mask / loss_mask",
    ),
    ChangePoint(
        "0.5.0",
        "compute_advantage",
        ("signature", "body_sha"),
        "multi_turn removed (GRPO on response_mask); typed, config: AlgoConfig",
    ),
    ChangePoint("0.6.0", "apply_kl_penalty", ("body_sha",), "docstring only"),
    ChangePoint(
        "0.6.0",
        "compute_advantage",
        ("body_sha",),
        "PF-PPO options read with config.pf_ppo.get(...)",
    ),
    ChangePoint(
        "0.6.0",
        "ppo_loss",
        ("module", "signature", "body_sha", "importers"),
        "workers.roles.utils.losses.ppo_loss (new engine; main_ppo never selects it for the actor)",
    ),
    ChangePoint(
        "0.6.0",
        "agg_loss",
        ("importers",),
        "workers.roles.utils.losses imports it",
    ),
    ChangePoint(
        "0.6.0",
        "kl_penalty",
        ("body_sha", "importers"),
        "dispatches to kl_penalty_forward with the unstripped name ('+' names raise); "
        "workers.roles.utils.losses imports it",
    ),
    ChangePoint(
        "0.6.0",
        "kl_penalty_forward",
        ("module", "signature", "body_sha"),
        "the estimators, looked up in core_algos' globals at call time",
    ),
    ChangePoint(
        "0.6.1",
        "ppo_loss",
        ("body_sha",),
        "the unused new-engine loss changes",
    ),
    ChangePoint(
        "0.6.1",
        "agg_loss",
        ("body_sha",),
        "seq-mean-token-sum / seq-mean-token-mean leave fully masked rows out of the mean",
    ),
    ChangePoint(
        "0.7.0",
        "ppo_loss",
        ("module", "body_sha", "importers"),
        "moved to workers.utils.losses, imported by engine_workers "
        "(trainer.use_legacy_worker_impl=disable)",
    ),
    ChangePoint(
        "0.7.0",
        "agg_loss",
        ("signature", "body_sha", "importers"),
        "dp_size, batch_num_tokens, global_batch_size, loss_scale_factor for global counts",
    ),
    ChangePoint(
        "0.7.0",
        "kl_penalty",
        ("importers",),
        "workers.utils.losses imports it (roles.utils.losses gone)",
    ),
    ChangePoint(
        "0.7.1",
        "apply_kl_penalty",
        ("importers",),
        "experimental.separation.ray_trainer (base of one-step-off and fully-async) imports it",
    ),
    ChangePoint(
        "0.7.1",
        "compute_advantage",
        ("body_sha", "importers"),
        "GDPO and optimal-token-baseline kwargs; experimental.separation imports it by name",
    ),
    ChangePoint(
        "0.7.1",
        "ppo_loss",
        ("body_sha",),
        "metrics become Metric objects, log-probs unpadded by no_padding_2_padding; KL unchanged",
    ),
    ChangePoint(
        "0.7.1",
        "agg_loss",
        ("body_sha", "importers"),
        "seq-mean-token-sum-norm becomes a global seq mean / loss_scale_factor; dp_size>1 needs "
        "global counts",
    ),
    ChangePoint("0.7.1", "kl_penalty", ("body_sha",), "docstring typos only"),
    ChangePoint(
        "0.8.0",
        "apply_kl_penalty",
        ("importers",),
        "trainer.main_ppo_sync imports it by name",
    ),
    ChangePoint(
        "0.8.0",
        "compute_advantage",
        ("body_sha", "importers"),
        "optimal token baseline also gets old_log_probs; trainer.main_ppo_sync imports it",
    ),
    ChangePoint(
        "0.8.0",
        "ppo_loss",
        ("body_sha", "importers"),
        "the only KL-loss site now (legacy actors removed); data padded via select(...); "
        "distillation.losses imports it",
    ),
    ChangePoint(
        "0.8.0",
        "agg_loss",
        ("importers",),
        "dp_actor/megatron_actor gone; distillation.losses and main_ppo_sync import it",
    ),
    ChangePoint(
        "0.8.0",
        "kl_penalty",
        ("body_sha", "importers"),
        "'+' suffix stripped before kl_penalty_forward (PR #6058); importers: losses, "
        "distillation.losses",
    ),
    ChangePoint(
        "0.9.0",
        "apply_kl_penalty",
        ("importers",),
        "main_ppo_sync removed; v1.trainer_base (the default trainer) imports it by name",
    ),
    ChangePoint(
        "0.9.0",
        "compute_advantage",
        ("importers",),
        "main_ppo_sync removed; v1.utils (multi-trajectory GRPO) imports it by name",
    ),
    ChangePoint(
        "0.9.0",
        "agg_loss",
        ("body_sha", "importers"),
        "token-sum mode added; v1.trainer_base imports it",
    ),
)
"""What changed, release by release (0.9.0 -> 0.9.1 moved only line numbers)."""

_LEGACY_FSDP = "verl.workers.actor.dp_actor / megatron_actor (legacy fsdp/megatron workers)"
DEFAULT_LOSS_SITE: dict[str, str] = {
    "0.4.0": _LEGACY_FSDP,
    "0.4.1": _LEGACY_FSDP,
    "0.5.0": "verl.workers.actor.dp_actor / megatron_actor (trainer.use_legacy_worker_impl=auto)",
    "0.6.0": "verl.workers.actor.dp_actor / megatron_actor (trainer.use_legacy_worker_impl=auto)",
    "0.6.1": "verl.workers.actor.dp_actor / megatron_actor (trainer.use_legacy_worker_impl=auto)",
    "0.7.0": "verl.workers.actor.dp_actor / megatron_actor (trainer.use_legacy_worker_impl=auto)",
    "0.7.1": "verl.workers.actor.dp_actor / megatron_actor (trainer.use_legacy_worker_impl=auto)",
    "0.8.0": "verl.workers.utils.losses.ppo_loss",
    "0.9.0": "verl.workers.utils.losses.ppo_loss",
    "0.9.1": "verl.workers.utils.losses.ppo_loss",
}
"""Code that adds the KL loss in a default launch. Before 0.8.0 a wrapper on ``ppo_loss`` does
not reach it: the legacy actors call their by-name ``kl_penalty`` and ``agg_loss``."""


@dataclass(frozen=True)
class PendingMove:
    """An upstream change, not in any release, that moves wrapped functions."""

    pr: int
    """verl-project/verl pull request."""
    ref: str
    """Git ref that holds it."""
    commit: str
    """Commit read."""
    state: str
    """Whether it is merged, as seen in the mirror."""
    symbols: tuple[Symbol, ...]
    """The moved functions at that commit."""


PENDING_TRAINER_UTILS = PendingMove(
    pr=7237,
    ref="refs/pull/7237/head",
    commit="741245d2dbbe76d53f74cfb412f252f2b486c9c3",
    state=(
        "open: not an ancestor of main 1dda039b9 (2026-08-22, version 0.10.0.dev); "
        "refs/pull/7237/merge rebuilt 2026-08-23; based on main of 2026-08-03 (0.9.0.dev)"
    ),
    symbols=(
        Symbol(
            "apply_kl_penalty",
            "verl.trainer.ppo.trainer_utils",
            30,
            (
                "apply_kl_penalty(data: DataProto, kl_ctrl: core_algos.AdaptiveKLController, "
                "kl_penalty='kl')"
            ),
            "0946098380ac",
            importers=(
                "verl.experimental.separation.ray_trainer",
                "verl.trainer.ppo.ray_trainer",
                "verl.trainer.ppo.v1.trainer_base",
            ),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "compute_advantage",
            "verl.trainer.ppo.trainer_utils",
            139,
            (
                "compute_advantage(data: DataProto, adv_estimator: AdvantageEstimator, gamma: "
                "float=1.0, lam: float=1.0, num_repeat: int=1, norm_adv_by_std_in_grpo: "
                "bool=True, config: Optional[AlgoConfig]=None) -> DataProto"
            ),
            "c410e5ba6e5b",
            importers=(
                "verl.experimental.separation.ray_trainer",
                "verl.trainer.ppo.ray_trainer",
                "verl.trainer.ppo.v1.utils",
            ),
            attribute_users=(),
            reexports=(),
        ),
    ),
)
"""PR #7237 ("move shared PPO helpers out of ray trainer"): ``apply_kl_penalty`` and
``compute_advantage`` defined in ``verl.trainer.ppo.trainer_utils`` with unchanged bodies (one
comment differs); ``ray_trainer``, ``v1.trainer_base``, ``v1.utils`` and
``experimental.separation.ray_trainer`` import them from there by name, so a patch on
``ray_trainer`` alone would reach none of the trainers."""

_CPU_TORCH = "$P install torch==2.13.0  # CPU wheel first: nothing may pull a CUDA build"

INSTALL: tuple[InstallRecipe, ...] = (
    InstallRecipe(
        version="0.7.0",
        commands=(
            _CPU_TORCH,
            "$P install --no-deps verl==0.7.0",
            '$P install "numpy<2" packaging "ray>=2.41" "tensordict>=0.8,<=0.10.0,!=0.9.0" '
            'omegaconf "transformers<5" codetiming torchdata peft datasets '
            '"huggingface-hub<1.0" "pyarrow>=19,<22" pillow',
        ),
        seconds=162.6,
        size="1.7G",
        imports=(
            "verl.trainer.ppo.core_algos",
            "verl.trainer.ppo.ray_trainer",
            "verl.workers.actor.dp_actor",
            "verl.workers.utils.losses",
            "verl.workers.engine_workers",
        ),
        not_importable=(),
        checks=(
            "kl_penalty+agg_loss token-mean grad sums k1 1.0, k2 -0.17449, k3 -1.21283; "
            "'k3+' raises NotImplementedError; apply_kl_penalty(k1, beta 0.1) sums to "
            "score - 0.1*sum k1; compute_advantage(grpo) runs. Resolved: transformers 4.57.6, "
            "huggingface_hub 0.36.2, numpy 1.26.4, pyarrow 21.0.0, ray 2.60.0, tensordict 0.10.0"
        ),
    ),
    InstallRecipe(
        version="0.8.0",
        commands=(
            _CPU_TORCH,
            "$P install --no-deps verl==0.8.0",
            '$P install packaging "numpy<2" "ray>=2.41" "tensordict>=0.8,<=0.10.0,!=0.9.0" '
            'omegaconf hydra-core transformers codetiming torchdata datasets "pyarrow>=19,<22" '
            "pillow peft cachetools uvicorn fastapi",
        ),
        seconds=154.7,
        size="1.7G",
        imports=(
            "verl.trainer.ppo.core_algos",
            "verl.trainer.ppo.ray_trainer",
            "verl.workers.utils.losses",
            "verl.workers.engine_workers",
            "verl.trainer.main_ppo_sync",
        ),
        not_importable=(),
        checks=(
            "same grad sums as 0.7.0; 'k3+' value 1.6348 (= k3), grad -0.17449 (= k2); "
            "apply_kl_penalty/compute_advantage as 0.7.0. main_ppo_sync imports but prints "
            "'Please install TQ' (TransferQueue==0.1.6, only needed to run it). Resolved: "
            "transformers 5.24.0, huggingface_hub 1.33.0, numpy 1.26.4"
        ),
    ),
    InstallRecipe(
        version="0.9.1",
        commands=(
            _CPU_TORCH,
            "$P install --no-deps verl==0.9.1",
            '$P install "tensordict>=0.8,<=0.10.0,!=0.9.0" "ray>=2.41" '
            '"transformers>=5.5.3,<5.11,!=5.6.0" omegaconf hydra-core numpy packaging '
            "codetiming datasets pillow torchdata uvicorn fastapi peft cachetools "
            '"TransferQueue>=0.1.10" pyyaml',
        ),
        seconds=166.1,
        size="1.8G",
        imports=(
            "verl.trainer.ppo.core_algos",
            "verl.trainer.ppo.ray_trainer",
            "verl.workers.utils.losses",
            "verl.workers.engine_workers",
            "verl.trainer.ppo.v1.trainer_base",
            "verl.trainer.main_ppo",
        ),
        not_importable=(),
        checks=(
            "noxfile's VERL_CPU_DEPS; same numbers as 0.8.0 ('k3+' = k3 value, k2 gradient). "
            "Resolved: transformers 5.10.4, numpy 2.4.6, ray 2.60.0, tensordict 0.10.0"
        ),
    ),
)
"""Measured one at a time on the 2-core VM, each in a fresh venv with a warm pip cache (the
discovery run for 0.8.0, one package per step, took 296 s). The 0.7.0 and 0.8.0 sets were found
by adding, one at a time, the package whose absence made an import fail, starting from torch +
verl --no-deps, and pinning what broke an import (0.7.0: transformers<5, then
huggingface-hub<1.0 and pyarrow<22 because of numpy<2); 0.9.1 is the noxfile's set."""
