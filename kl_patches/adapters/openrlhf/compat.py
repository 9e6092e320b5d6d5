"""The OpenRLHF patch surface from 0.10.0 to 0.11.2, as data: hook points and flags.

:mod:`kl_patches.adapters.openrlhf.patch` wraps ``compute_approx_kl`` where
``experience_maker`` and ``ppo_actor`` imported it by name, ``aggregate_loss`` in
``ppo_actor``, ``RemoteExperienceMaker.compute_advantages_and_returns`` and
``ActorPPOTrainer.training_step``; :mod:`~kl_patches.adapters.openrlhf.translate` reads the
``train_ppo_ray`` flags in :data:`~kl_patches.adapters.openrlhf.translate.FLAGS`. :data:`SURFACE`
was read with ``ast`` from each release's wheel (``pip download --no-deps openrlhf==V``):
defining module, line, signature text, a hash of the function's source, and every module that
imports it by name (directly or through the ``openrlhf.models`` re-export).
:data:`FLAG_SURFACE` gives, per release, the spelling and default of every flag in ``FLAGS``
(read from the ``argparse`` calls of ``cli/train_ppo_ray.py``). :data:`CHANGE_POINTS` says what
changed for the adapter and why; releases where only line numbers moved are not change points.
Also: the measured CPU install recipes (:data:`INSTALL`). Nothing here imports OpenRLHF.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Symbol:
    """One function or method the adapter relies on, as one release ships it."""

    name: str
    """Qualified name inside its module (``Class.method`` for methods)."""
    module: str
    """Module that defines it."""
    line: int
    """Line of the ``def``."""
    signature: str
    """``ast.unparse`` of the signature."""
    body_sha: str
    """First 12 hex digits of the sha256 of the function's source text (``def`` to end)."""
    importers: tuple[str, ...] = ()
    """Modules holding their own binding from ``from ... import name``."""
    attribute_users: tuple[str, ...] = ()
    """Modules that call it as ``<module object>.name``."""
    reexports: tuple[str, ...] = ()
    """Package ``__init__`` modules that re-export it."""


@dataclass(frozen=True)
class ChangePoint:
    """A release where something the adapter relies on changed."""

    release: str
    """First release with the change."""
    name: str
    """Function qualname, or ``flag:<dotted name>``."""
    fields: tuple[str, ...]
    """Which fields changed (:class:`Symbol` fields, or ``spelling`` / ``default``)."""
    reason: str
    """One line: what changed and what it means for the patch."""


@dataclass(frozen=True)
class InstallRecipe:
    """A measured CPU install that imports and runs a release's KL functions."""

    version: str
    """OpenRLHF release."""
    commands: tuple[str, ...]
    """pip commands in order (``$P`` = the venv's pip)."""
    seconds: float
    """Wall time of the whole recipe on the 2-core build VM, venv creation included."""
    size: str
    """``du -sh`` of the venv."""
    imports: tuple[str, ...]
    """Modules that imported (with the vllm/flash_attn stubs on ``PYTHONPATH``)."""
    not_importable: tuple[str, ...]
    """Modules that still fail, with the reason."""
    checks: str
    """What ran on CPU and what it gave."""


RELEASES: tuple[str, ...] = (
    "0.10.0",
    "0.10.1",
    "0.10.1.post1",
    "0.10.1.post2",
    "0.10.2",
    "0.10.3",
    "0.10.4",
    "0.11.0",
    "0.11.1",
    "0.11.2",
)
"""Every OpenRLHF release in the patch-surface range, ascending."""

TARGETS: tuple[str, ...] = (
    "compute_approx_kl",
    "RemoteExperienceMaker.compute_advantages_and_returns",
    "ActorPPOTrainer.training_step",
    "aggregate_loss",
)
"""Functions tracked per release (``aggregate_loss`` exists from 0.10.3)."""

SURFACE: dict[str, tuple[Symbol, ...]] = {
    "0.10.0": (
        Symbol(
            "compute_approx_kl",
            "openrlhf.models.utils",
            48,
            (
                "compute_approx_kl(log_probs: torch.Tensor, log_probs_base: torch.Tensor, "
                "kl_estimator: str='k1') -> torch.Tensor"
            ),
            "1f73bffe4ed1",
            importers=(
                "openrlhf.trainer.ppo_utils.experience_maker",
                "openrlhf.trainer.ray.ppo_actor",
            ),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "RemoteExperienceMaker.compute_advantages_and_returns",
            "openrlhf.trainer.ppo_utils.experience_maker",
            238,
            (
                "compute_advantages_and_returns(self, experiences: List[Experience]) -> "
                "List[Experience]"
            ),
            "78ebbc6bcda7",
            importers=("openrlhf.trainer.ppo_trainer",),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "ActorPPOTrainer.training_step",
            "openrlhf.trainer.ray.ppo_actor",
            248,
            (
                "training_step(self, experience: Experience, kl_ctl: float, step: int) -> "
                "Dict[str, float]"
            ),
            "a42c9fb27506",
            importers=(),
            attribute_users=(),
            reexports=(),
        ),
    ),
    "0.10.1": (
        Symbol(
            "compute_approx_kl",
            "openrlhf.models.utils",
            48,
            (
                "compute_approx_kl(log_probs: torch.Tensor, log_probs_base: torch.Tensor, "
                "kl_estimator: str='k1') -> torch.Tensor"
            ),
            "1f73bffe4ed1",
            importers=(
                "openrlhf.trainer.ppo_utils.experience_maker",
                "openrlhf.trainer.ray.ppo_actor",
            ),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "RemoteExperienceMaker.compute_advantages_and_returns",
            "openrlhf.trainer.ppo_utils.experience_maker",
            238,
            (
                "compute_advantages_and_returns(self, experiences: List[Experience]) -> "
                "List[Experience]"
            ),
            "78ebbc6bcda7",
            importers=("openrlhf.trainer.ppo_trainer",),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "ActorPPOTrainer.training_step",
            "openrlhf.trainer.ray.ppo_actor",
            248,
            (
                "training_step(self, experience: Experience, kl_ctl: float, step: int) -> "
                "Dict[str, float]"
            ),
            "a42c9fb27506",
            importers=(),
            attribute_users=(),
            reexports=(),
        ),
    ),
    "0.10.1.post1": (
        Symbol(
            "compute_approx_kl",
            "openrlhf.models.utils",
            48,
            (
                "compute_approx_kl(log_probs: torch.Tensor, log_probs_base: torch.Tensor, "
                "kl_estimator: str='k1') -> torch.Tensor"
            ),
            "1f73bffe4ed1",
            importers=(
                "openrlhf.trainer.ppo_utils.experience_maker",
                "openrlhf.trainer.ray.ppo_actor",
            ),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "RemoteExperienceMaker.compute_advantages_and_returns",
            "openrlhf.trainer.ppo_utils.experience_maker",
            238,
            (
                "compute_advantages_and_returns(self, experiences: List[Experience]) -> "
                "List[Experience]"
            ),
            "78ebbc6bcda7",
            importers=("openrlhf.trainer.ppo_trainer",),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "ActorPPOTrainer.training_step",
            "openrlhf.trainer.ray.ppo_actor",
            248,
            (
                "training_step(self, experience: Experience, kl_ctl: float, step: int) -> "
                "Dict[str, float]"
            ),
            "a42c9fb27506",
            importers=(),
            attribute_users=(),
            reexports=(),
        ),
    ),
    "0.10.1.post2": (
        Symbol(
            "compute_approx_kl",
            "openrlhf.models.utils",
            48,
            (
                "compute_approx_kl(log_probs: torch.Tensor, log_probs_base: torch.Tensor, "
                "kl_estimator: str='k1') -> torch.Tensor"
            ),
            "1f73bffe4ed1",
            importers=(
                "openrlhf.trainer.ppo_utils.experience_maker",
                "openrlhf.trainer.ray.ppo_actor",
            ),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "RemoteExperienceMaker.compute_advantages_and_returns",
            "openrlhf.trainer.ppo_utils.experience_maker",
            238,
            (
                "compute_advantages_and_returns(self, experiences: List[Experience]) -> "
                "List[Experience]"
            ),
            "78ebbc6bcda7",
            importers=("openrlhf.trainer.ppo_trainer",),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "ActorPPOTrainer.training_step",
            "openrlhf.trainer.ray.ppo_actor",
            248,
            (
                "training_step(self, experience: Experience, kl_ctl: float, step: int) -> "
                "Dict[str, float]"
            ),
            "a42c9fb27506",
            importers=(),
            attribute_users=(),
            reexports=(),
        ),
    ),
    "0.10.2": (
        Symbol(
            "compute_approx_kl",
            "openrlhf.models.utils",
            48,
            (
                "compute_approx_kl(log_probs: torch.Tensor, log_probs_base: torch.Tensor, "
                "kl_estimator: str='k1') -> torch.Tensor"
            ),
            "1f73bffe4ed1",
            importers=(
                "openrlhf.trainer.ppo_utils.experience_maker",
                "openrlhf.trainer.ray.ppo_actor",
            ),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "RemoteExperienceMaker.compute_advantages_and_returns",
            "openrlhf.trainer.ppo_utils.experience_maker",
            238,
            (
                "compute_advantages_and_returns(self, experiences: List[Experience]) -> "
                "List[Experience]"
            ),
            "871fa56a2e67",
            importers=("openrlhf.trainer.ppo_trainer",),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "ActorPPOTrainer.training_step",
            "openrlhf.trainer.ray.ppo_actor",
            251,
            (
                "training_step(self, experience: Experience, kl_ctl: float, step: int) -> "
                "Dict[str, float]"
            ),
            "fef224a9a565",
            importers=(),
            attribute_users=(),
            reexports=(),
        ),
    ),
    "0.10.3": (
        Symbol(
            "compute_approx_kl",
            "openrlhf.models.utils",
            48,
            (
                "compute_approx_kl(log_probs: torch.Tensor, log_probs_base: torch.Tensor, "
                "kl_estimator: str='k1') -> torch.Tensor"
            ),
            "1f73bffe4ed1",
            importers=(
                "openrlhf.trainer.ppo_utils.experience_maker",
                "openrlhf.trainer.ray.ppo_actor",
            ),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "RemoteExperienceMaker.compute_advantages_and_returns",
            "openrlhf.trainer.ppo_utils.experience_maker",
            238,
            (
                "compute_advantages_and_returns(self, experiences: List[Experience]) -> "
                "List[Experience]"
            ),
            "871fa56a2e67",
            importers=("openrlhf.trainer.ppo_trainer",),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "ActorPPOTrainer.training_step",
            "openrlhf.trainer.ray.ppo_actor",
            252,
            (
                "training_step(self, experience: Experience, kl_ctl: float, step: int) -> "
                "Dict[str, float]"
            ),
            "6827e283c257",
            importers=(),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "aggregate_loss",
            "openrlhf.models.loss",
            11,
            (
                "aggregate_loss(loss: torch.Tensor, loss_mask: torch.Tensor, "
                "token_level_loss: bool=True, dp_size: int=1, batch_num_tokens: "
                "Optional[float]=None, global_batch_size: Optional[float]=None) -> "
                "torch.Tensor"
            ),
            "54a6f49f46f1",
            importers=("openrlhf.trainer.ray.ppo_actor",),
            attribute_users=(),
            reexports=("openrlhf.models",),
        ),
    ),
    "0.10.4": (
        Symbol(
            "compute_approx_kl",
            "openrlhf.models.utils",
            48,
            (
                "compute_approx_kl(log_probs: torch.Tensor, log_probs_base: torch.Tensor, "
                "kl_estimator: str='k1') -> torch.Tensor"
            ),
            "1f73bffe4ed1",
            importers=(
                "openrlhf.trainer.ppo_utils.experience_maker",
                "openrlhf.trainer.ray.ppo_actor",
            ),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "RemoteExperienceMaker.compute_advantages_and_returns",
            "openrlhf.trainer.ppo_utils.experience_maker",
            238,
            (
                "compute_advantages_and_returns(self, experiences: List[Experience]) -> "
                "List[Experience]"
            ),
            "871fa56a2e67",
            importers=("openrlhf.trainer.ppo_trainer",),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "ActorPPOTrainer.training_step",
            "openrlhf.trainer.ray.ppo_actor",
            261,
            (
                "training_step(self, experience: Experience, kl_ctl: float, step: int, "
                "loss_batch_info: Optional[Dict]=None) -> Dict[str, float]"
            ),
            "bb3caf8842b8",
            importers=(),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "aggregate_loss",
            "openrlhf.models.loss",
            11,
            (
                "aggregate_loss(loss: torch.Tensor, loss_mask: torch.Tensor, "
                "token_level_loss: bool=True, dp_size: int=1, batch_num_tokens: "
                "Optional[float]=None, global_batch_size: Optional[float]=None) -> "
                "torch.Tensor"
            ),
            "540362359745",
            importers=("openrlhf.trainer.ray.ppo_actor",),
            attribute_users=(),
            reexports=("openrlhf.models",),
        ),
    ),
    "0.11.0": (
        Symbol(
            "compute_approx_kl",
            "openrlhf.models.utils",
            64,
            (
                "compute_approx_kl(log_probs: torch.Tensor, log_probs_base: torch.Tensor, "
                "kl_estimator: str='k1') -> torch.Tensor"
            ),
            "1f73bffe4ed1",
            importers=(
                "openrlhf.trainer.ppo_utils.experience_maker",
                "openrlhf.trainer.ray.ppo_actor",
            ),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "RemoteExperienceMaker.compute_advantages_and_returns",
            "openrlhf.trainer.ppo_utils.experience_maker",
            238,
            (
                "compute_advantages_and_returns(self, experiences: List[Experience]) -> "
                "List[Experience]"
            ),
            "871fa56a2e67",
            importers=("openrlhf.trainer.ppo_trainer",),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "ActorPPOTrainer.training_step",
            "openrlhf.trainer.ray.ppo_actor",
            261,
            (
                "training_step(self, experience: Experience, kl_ctl: float, step: int, "
                "loss_batch_info: Optional[Dict]=None) -> Dict[str, float]"
            ),
            "bb3caf8842b8",
            importers=(),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "aggregate_loss",
            "openrlhf.models.loss",
            11,
            (
                "aggregate_loss(loss: torch.Tensor, loss_mask: torch.Tensor, "
                "token_level_loss: bool=True, dp_size: int=1, batch_num_tokens: "
                "Optional[float]=None, global_batch_size: Optional[float]=None) -> "
                "torch.Tensor"
            ),
            "540362359745",
            importers=("openrlhf.trainer.ray.ppo_actor",),
            attribute_users=(),
            reexports=("openrlhf.models",),
        ),
    ),
    "0.11.1": (
        Symbol(
            "compute_approx_kl",
            "openrlhf.models.utils",
            69,
            (
                "compute_approx_kl(log_probs: torch.Tensor, log_probs_base: torch.Tensor, "
                "log_probs_old: Optional[torch.Tensor]=None, kl_estimator: str='k1', "
                "unbiased_gradient: bool=False) -> torch.Tensor"
            ),
            "170ba68806d1",
            importers=(
                "openrlhf.trainer.ppo_utils.experience_maker",
                "openrlhf.trainer.ray.ppo_actor",
            ),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "RemoteExperienceMaker.compute_advantages_and_returns",
            "openrlhf.trainer.ppo_utils.experience_maker",
            238,
            (
                "compute_advantages_and_returns(self, experiences: List[Experience]) -> "
                "List[Experience]"
            ),
            "871fa56a2e67",
            importers=("openrlhf.trainer.ppo_trainer",),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "ActorPPOTrainer.training_step",
            "openrlhf.trainer.ray.ppo_actor",
            261,
            (
                "training_step(self, experience: Experience, kl_ctl: float, step: int, "
                "loss_batch_info: Optional[Dict]=None) -> Dict[str, float]"
            ),
            "e34035ebdc79",
            importers=(),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "aggregate_loss",
            "openrlhf.models.loss",
            11,
            (
                "aggregate_loss(loss: torch.Tensor, loss_mask: torch.Tensor, "
                "token_level_loss: bool=True, dp_size: int=1, batch_num_tokens: "
                "Optional[float]=None, global_batch_size: Optional[float]=None) -> "
                "torch.Tensor"
            ),
            "540362359745",
            importers=("openrlhf.trainer.ray.ppo_actor",),
            attribute_users=(),
            reexports=("openrlhf.models",),
        ),
    ),
    "0.11.2": (
        Symbol(
            "compute_approx_kl",
            "openrlhf.models.utils",
            69,
            (
                "compute_approx_kl(log_probs: torch.Tensor, log_probs_base: torch.Tensor, "
                "log_probs_old: Optional[torch.Tensor]=None, kl_estimator: str='k1', "
                "unbiased_gradient: bool=False) -> torch.Tensor"
            ),
            "9ceed3b7ed1f",
            importers=(
                "openrlhf.trainer.ppo_utils.experience_maker",
                "openrlhf.trainer.ray.ppo_actor",
            ),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "RemoteExperienceMaker.compute_advantages_and_returns",
            "openrlhf.trainer.ppo_utils.experience_maker",
            238,
            (
                "compute_advantages_and_returns(self, experiences: List[Experience]) -> "
                "List[Experience]"
            ),
            "0c54a7efcb5d",
            importers=("openrlhf.trainer.ppo_trainer",),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "ActorPPOTrainer.training_step",
            "openrlhf.trainer.ray.ppo_actor",
            259,
            (
                "training_step(self, experience: Experience, kl_ctl: float, step: int, "
                "loss_batch_info: Optional[Dict]=None) -> Dict[str, float]"
            ),
            "783a57970a6a",
            importers=(),
            attribute_users=(),
            reexports=(),
        ),
        Symbol(
            "aggregate_loss",
            "openrlhf.models.loss",
            11,
            (
                "aggregate_loss(loss: torch.Tensor, loss_mask: torch.Tensor, "
                "token_level_loss: bool=True, dp_size: int=1, batch_num_tokens: "
                "Optional[float]=None, global_batch_size: Optional[float]=None) -> "
                "torch.Tensor"
            ),
            "540362359745",
            importers=("openrlhf.trainer.ray.ppo_actor",),
            attribute_users=(),
            reexports=("openrlhf.models",),
        ),
    ),
}

"""Per release, every tracked function that exists (read with ``ast`` from the wheel)."""

FLAG_SURFACE: dict[str, dict[str, tuple[str | None, object]]] = {
    "0.10.0": {
        "algo.kl.init_coef": ("init_kl_coef", 0.01),
        "algo.kl.estimator": ("kl_estimator", "k1"),
        "algo.kl.use_loss": ("use_kl_loss", False),
        "algo.kl.unbiased_gradient": (None, None),
        "algo.kl.target": ("kl_target", None),
        "algo.kl.horizon": ("kl_horizon", 10000),
        "algo.advantage.estimator": ("advantage_estimator", "gae"),
        "algo.advantage.gamma": ("gamma", 1),
        "algo.advantage.lambd": ("lambd", 1),
        "algo.advantage.no_std_norm": ("no_advantage_std_norm", False),
        "rollout.n_samples_per_prompt": ("n_samples_per_prompt", 1),
        "rollout.batch_size": ("rollout_batch_size", 1024),
        "train.batch_size": ("train_batch_size", 128),
        "train.max_epochs": ("max_epochs", 1),
        "train.async_enable": ("async_train", False),
        "reward.clip_range": ("reward_clip_range", (-10, 10)),
        "actor.loss_agg_mode": (None, None),
    },
    "0.10.1": {
        "algo.kl.init_coef": ("init_kl_coef", 0.01),
        "algo.kl.estimator": ("kl_estimator", "k1"),
        "algo.kl.use_loss": ("use_kl_loss", False),
        "algo.kl.unbiased_gradient": (None, None),
        "algo.kl.target": ("kl_target", None),
        "algo.kl.horizon": ("kl_horizon", 10000),
        "algo.advantage.estimator": ("advantage_estimator", "gae"),
        "algo.advantage.gamma": ("gamma", 1),
        "algo.advantage.lambd": ("lambd", 1),
        "algo.advantage.no_std_norm": ("no_advantage_std_norm", False),
        "rollout.n_samples_per_prompt": ("n_samples_per_prompt", 1),
        "rollout.batch_size": ("rollout_batch_size", 1024),
        "train.batch_size": ("train_batch_size", 128),
        "train.max_epochs": ("max_epochs", 1),
        "train.async_enable": ("async_train", False),
        "reward.clip_range": ("reward_clip_range", (-10, 10)),
        "actor.loss_agg_mode": (None, None),
    },
    "0.10.1.post1": {
        "algo.kl.init_coef": ("init_kl_coef", 0.01),
        "algo.kl.estimator": ("kl_estimator", "k1"),
        "algo.kl.use_loss": ("use_kl_loss", False),
        "algo.kl.unbiased_gradient": (None, None),
        "algo.kl.target": ("kl_target", None),
        "algo.kl.horizon": ("kl_horizon", 10000),
        "algo.advantage.estimator": ("advantage_estimator", "gae"),
        "algo.advantage.gamma": ("gamma", 1),
        "algo.advantage.lambd": ("lambd", 1),
        "algo.advantage.no_std_norm": ("no_advantage_std_norm", False),
        "rollout.n_samples_per_prompt": ("n_samples_per_prompt", 1),
        "rollout.batch_size": ("rollout_batch_size", 1024),
        "train.batch_size": ("train_batch_size", 128),
        "train.max_epochs": ("max_epochs", 1),
        "train.async_enable": ("async_train", False),
        "reward.clip_range": ("reward_clip_range", (-10, 10)),
        "actor.loss_agg_mode": (None, None),
    },
    "0.10.1.post2": {
        "algo.kl.init_coef": ("init_kl_coef", 0.01),
        "algo.kl.estimator": ("kl_estimator", "k1"),
        "algo.kl.use_loss": ("use_kl_loss", False),
        "algo.kl.unbiased_gradient": (None, None),
        "algo.kl.target": ("kl_target", None),
        "algo.kl.horizon": ("kl_horizon", 10000),
        "algo.advantage.estimator": ("advantage_estimator", "gae"),
        "algo.advantage.gamma": ("gamma", 1),
        "algo.advantage.lambd": ("lambd", 1),
        "algo.advantage.no_std_norm": ("no_advantage_std_norm", False),
        "rollout.n_samples_per_prompt": ("n_samples_per_prompt", 1),
        "rollout.batch_size": ("rollout_batch_size", 1024),
        "train.batch_size": ("train_batch_size", 128),
        "train.max_epochs": ("max_epochs", 1),
        "train.async_enable": ("async_train", False),
        "reward.clip_range": ("reward_clip_range", (-10, 10)),
        "actor.loss_agg_mode": (None, None),
    },
    "0.10.2": {
        "algo.kl.init_coef": ("algo.kl.init_coef", 0.01),
        "algo.kl.estimator": ("algo.kl.estimator", "k1"),
        "algo.kl.use_loss": ("algo.kl.use_loss", False),
        "algo.kl.unbiased_gradient": (None, None),
        "algo.kl.target": ("algo.kl.target", None),
        "algo.kl.horizon": ("algo.kl.horizon", 10000),
        "algo.advantage.estimator": ("algo.advantage.estimator", "gae"),
        "algo.advantage.gamma": ("algo.advantage.gamma", 1),
        "algo.advantage.lambd": ("algo.advantage.lambd", 1),
        "algo.advantage.no_std_norm": ("algo.advantage.no_std_norm", False),
        "rollout.n_samples_per_prompt": ("rollout.n_samples_per_prompt", 1),
        "rollout.batch_size": ("rollout.batch_size", 1024),
        "train.batch_size": ("train.batch_size", 128),
        "train.max_epochs": ("train.max_epochs", 1),
        "train.async_enable": ("train.async_enable", False),
        "reward.clip_range": ("reward.clip_range", (-10, 10)),
        "actor.loss_agg_mode": (None, None),
    },
    "0.10.3": {
        "algo.kl.init_coef": ("algo.kl.init_coef", 0.01),
        "algo.kl.estimator": ("algo.kl.estimator", "k1"),
        "algo.kl.use_loss": ("algo.kl.use_loss", False),
        "algo.kl.unbiased_gradient": (None, None),
        "algo.kl.target": ("algo.kl.target", None),
        "algo.kl.horizon": ("algo.kl.horizon", 10000),
        "algo.advantage.estimator": ("algo.advantage.estimator", "gae"),
        "algo.advantage.gamma": ("algo.advantage.gamma", 1),
        "algo.advantage.lambd": ("algo.advantage.lambd", 1),
        "algo.advantage.no_std_norm": ("algo.advantage.no_std_norm", False),
        "rollout.n_samples_per_prompt": ("rollout.n_samples_per_prompt", 1),
        "rollout.batch_size": ("rollout.batch_size", 1024),
        "train.batch_size": ("train.batch_size", 128),
        "train.max_epochs": ("train.max_epochs", 1),
        "train.async_enable": ("train.async_enable", False),
        "reward.clip_range": ("reward.clip_range", (-10, 10)),
        "actor.loss_agg_mode": (None, None),
    },
    "0.10.4": {
        "algo.kl.init_coef": ("algo.kl.init_coef", 0.01),
        "algo.kl.estimator": ("algo.kl.estimator", "k1"),
        "algo.kl.use_loss": ("algo.kl.use_loss", False),
        "algo.kl.unbiased_gradient": (None, None),
        "algo.kl.target": ("algo.kl.target", None),
        "algo.kl.horizon": ("algo.kl.horizon", 10000),
        "algo.advantage.estimator": ("algo.advantage.estimator", "gae"),
        "algo.advantage.gamma": ("algo.advantage.gamma", 1),
        "algo.advantage.lambd": ("algo.advantage.lambd", 1),
        "algo.advantage.no_std_norm": ("algo.advantage.no_std_norm", False),
        "rollout.n_samples_per_prompt": ("rollout.n_samples_per_prompt", 1),
        "rollout.batch_size": ("rollout.batch_size", 1024),
        "train.batch_size": ("train.batch_size", 128),
        "train.max_epochs": ("train.max_epochs", 1),
        "train.async_enable": ("train.async_enable", False),
        "reward.clip_range": ("reward.clip_range", (-10, 10)),
        "actor.loss_agg_mode": (None, None),
    },
    "0.11.0": {
        "algo.kl.init_coef": ("algo.kl.init_coef", 0.01),
        "algo.kl.estimator": ("algo.kl.estimator", "k1"),
        "algo.kl.use_loss": ("algo.kl.use_loss", False),
        "algo.kl.unbiased_gradient": (None, None),
        "algo.kl.target": ("algo.kl.target", None),
        "algo.kl.horizon": ("algo.kl.horizon", 10000),
        "algo.advantage.estimator": ("algo.advantage.estimator", "gae"),
        "algo.advantage.gamma": ("algo.advantage.gamma", 1),
        "algo.advantage.lambd": ("algo.advantage.lambd", 1),
        "algo.advantage.no_std_norm": ("algo.advantage.no_std_norm", False),
        "rollout.n_samples_per_prompt": ("rollout.n_samples_per_prompt", 1),
        "rollout.batch_size": ("rollout.batch_size", 1024),
        "train.batch_size": ("train.batch_size", 128),
        "train.max_epochs": ("train.max_epochs", 1),
        "train.async_enable": ("train.async_enable", False),
        "reward.clip_range": ("reward.clip_range", (-10, 10)),
        "actor.loss_agg_mode": (None, None),
    },
    "0.11.1": {
        "algo.kl.init_coef": ("algo.kl.init_coef", 0.01),
        "algo.kl.estimator": ("algo.kl.estimator", "k1"),
        "algo.kl.use_loss": ("algo.kl.use_loss", False),
        "algo.kl.unbiased_gradient": ("algo.kl.unbiased_gradient", False),
        "algo.kl.target": ("algo.kl.target", None),
        "algo.kl.horizon": ("algo.kl.horizon", 10000),
        "algo.advantage.estimator": ("algo.advantage.estimator", "gae"),
        "algo.advantage.gamma": ("algo.advantage.gamma", 1),
        "algo.advantage.lambd": ("algo.advantage.lambd", 1),
        "algo.advantage.no_std_norm": ("algo.advantage.no_std_norm", False),
        "rollout.n_samples_per_prompt": ("rollout.n_samples_per_prompt", 1),
        "rollout.batch_size": ("rollout.batch_size", 1024),
        "train.batch_size": ("train.batch_size", 128),
        "train.max_epochs": ("train.max_epochs", 1),
        "train.async_enable": ("train.async_enable", False),
        "reward.clip_range": ("reward.clip_range", (-10, 10)),
        "actor.loss_agg_mode": (None, None),
    },
    "0.11.2": {
        "algo.kl.init_coef": ("algo.kl.init_coef", 0.01),
        "algo.kl.estimator": ("algo.kl.estimator", "k1"),
        "algo.kl.use_loss": ("algo.kl.use_loss", False),
        "algo.kl.unbiased_gradient": ("algo.kl.unbiased_gradient", False),
        "algo.kl.target": ("algo.kl.target", None),
        "algo.kl.horizon": ("algo.kl.horizon", 10000),
        "algo.advantage.estimator": ("algo.advantage.estimator", "gae"),
        "algo.advantage.gamma": ("algo.advantage.gamma", 1),
        "algo.advantage.lambd": ("algo.advantage.lambd", 1),
        "algo.advantage.no_std_norm": ("algo.advantage.no_std_norm", False),
        "rollout.n_samples_per_prompt": ("rollout.n_samples_per_prompt", 1),
        "rollout.batch_size": ("rollout.batch_size", 1024),
        "train.batch_size": ("train.batch_size", 128),
        "train.max_epochs": ("train.max_epochs", 1),
        "train.async_enable": ("train.async_enable", False),
        "reward.clip_range": ("reward.clip_range", (-10, 10)),
        "actor.loss_agg_mode": ("actor.loss_agg_mode", "token-mean"),
    },
}

"""Per release: dotted flag name (as in ``translate.FLAGS``) -> (spelling in that release or None,
argparse default or None)."""

CHANGE_POINTS: tuple[ChangePoint, ...] = (
    ChangePoint(
        "0.10.2",
        "RemoteExperienceMaker.compute_advantages_and_returns",
        ("body_sha",),
        "reads args.rollout.* / args.algo.* (dotted config namespaces) instead of flat args",
    ),
    ChangePoint(
        "0.10.2",
        "ActorPPOTrainer.training_step",
        ("body_sha",),
        "reads args.algo.kl.use_loss / init_coef / estimator instead of use_kl_loss etc.",
    ),
    ChangePoint(
        "0.10.3",
        "ActorPPOTrainer.training_step",
        ("body_sha",),
        "KL loss through aggregate_loss(kl, mask, **loss_batch_info) instead of masked_mean",
    ),
    ChangePoint(
        "0.10.3",
        "aggregate_loss",
        ("module", "signature", "body_sha", "importers", "reexports"),
        "new in openrlhf.models.loss, re-exported by openrlhf.models, imported by ray.ppo_actor",
    ),
    ChangePoint(
        "0.10.4",
        "ActorPPOTrainer.training_step",
        ("signature", "body_sha"),
        "new loss_batch_info argument: ppo_train passes a step-global token count",
    ),
    ChangePoint("0.10.4", "aggregate_loss", ("body_sha",), "docstring and comment only"),
    ChangePoint(
        "0.11.1",
        "compute_approx_kl",
        ("signature", "body_sha"),
        "log_probs_old and unbiased_gradient added; kl_estimator is no longer the 3rd positional",
    ),
    ChangePoint(
        "0.11.1",
        "ActorPPOTrainer.training_step",
        ("body_sha",),
        "passes log_probs_old=old_action_log_probs and unbiased_gradient to compute_approx_kl",
    ),
    ChangePoint(
        "0.11.2",
        "compute_approx_kl",
        ("body_sha",),
        "k3 log-ratio pre-clamped at -10 (value unchanged where finite)",
    ),
    ChangePoint(
        "0.11.2",
        "RemoteExperienceMaker.compute_advantages_and_returns",
        ("body_sha",),
        "rewards cast to >= fp32; flash_reinforce; gamma forced to 1 for all but reinforce",
    ),
    ChangePoint(
        "0.11.2",
        "ActorPPOTrainer.training_step",
        ("body_sha",),
        "PolicyLoss returns 5 values (is_filter_ratio); KL block unchanged",
    ),
    ChangePoint(
        "0.10.2",
        "flag:*",
        ("spelling",),
        "every flag renamed to its dotted name; flat names no longer parse",
    ),
    ChangePoint(
        "0.11.1",
        "flag:algo.kl.unbiased_gradient",
        ("spelling", "default"),
        "new flag (default False)",
    ),
    ChangePoint(
        "0.11.2",
        "flag:actor.loss_agg_mode",
        ("spelling", "default"),
        "new flag (default token-mean); the KL loss ignores it",
    ),
)
"""What changed, release by release (0.10.0 -> 0.10.1.post2 and 0.11.0 moved nothing)."""

UNBIASED_GRADIENT_SINCE = "0.11.1"
"""First release with ``--algo.kl.unbiased_gradient`` (versions.UNBIASED_GRADIENT_SINCE agrees)."""

_CPU_TORCH = "$P install torch==2.13.0  # CPU wheel first: nothing may pull a CUDA build"
_MODULES = (
    "openrlhf.models.utils",
    "openrlhf.models.loss",
    "openrlhf.trainer.ppo_utils.experience_maker",
    "openrlhf.trainer.ray.ppo_actor",
)
_CHECKS = (
    "seed 0, lp = randn(2,5) - 2, base = lp + 0.1*noise: sum/grad-sum k1 0.37135/10.0, "
    "k2 0.03515/0.37135, k3 0.03435/0.33699; compute_reward gives (2, 5)"
)

INSTALL: tuple[InstallRecipe, ...] = (
    InstallRecipe(
        version="0.10.0",
        commands=(
            _CPU_TORCH,
            "$P install --no-deps openrlhf==0.10.0",
            "DS_BUILD_OPS=0 $P install deepspeed==0.18.9",
            "$P install transformers==5.5.3 peft ray==2.48.0 pylatexenc aiohttp torchdata pillow",
        ),
        seconds=146.9,
        size="1.4G",
        imports=_MODULES,
        not_importable=(),
        checks=_CHECKS
        + ". Needs a flash_attn stub with a dist-info (top_level.txt 'flash_attn'): with the "
        "repo's import-only stubs transformers 5.5.3 raises KeyError 'flash_attn' in "
        "is_flash_attn_2_available",
    ),
    InstallRecipe(
        version="0.10.2",
        commands=(
            _CPU_TORCH,
            "$P install --no-deps openrlhf==0.10.2",
            "DS_BUILD_OPS=0 $P install deepspeed==0.18.9",
            "$P install transformers==5.5.4 peft ray==2.48.0 pylatexenc aiohttp torchdata pillow",
        ),
        seconds=208.6,
        size="1.4G",
        imports=_MODULES,
        not_importable=(),
        checks=_CHECKS + ". Same stub caveat as 0.10.0 (transformers 5.5.4)",
    ),
    InstallRecipe(
        version="0.11.2",
        commands=(
            _CPU_TORCH,
            "$P install --no-deps openrlhf==0.11.2",
            "DS_BUILD_OPS=0 $P install deepspeed==0.19.6",
            "$P install transformers==5.15.0 peft ray==2.55.0 pylatexenc aiohttp torchdata pillow",
        ),
        seconds=212.8,
        size="1.5G",
        imports=_MODULES,
        not_importable=(),
        checks=_CHECKS + "; the repo's stubs work as they are (transformers 5.15.0). datasets is "
        "not needed for these modules (the noxfile installs it)",
    ),
)
"""Measured one at a time on the shared 2-core VM, each in a fresh venv with a warm pip cache
(deepspeed's pure-Python sdist build comes from pip's wheel cache). The 0.10.0 set was found by
adding, one at a time, the package whose absence made an import fail, starting from torch +
openrlhf --no-deps with transformers/ray/deepspeed pinned to OpenRLHF's own pins; 0.10.2 and
0.11.2 use the same set with their own pins. flash-attn and vllm are never installed: import
stubs on ``PYTHONPATH``."""
