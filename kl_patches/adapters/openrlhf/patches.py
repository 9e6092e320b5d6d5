"""Patches that make OpenRLHF 0.11.x run what its flags cannot express, with the core's maths.

Patched only where :func:`~kl_patches.adapters.openrlhf.flags.native_gaps` says the flags fall
short, per side:

reward side (module ``openrlhf.trainer.ppo_utils.experience_maker``)
    * ``compute_approx_kl`` (imported there by name): returns the per-token log-ratio instead of
      OpenRLHF's clamped estimator, so the full information reaches the next step;
    * ``RemoteExperienceMaker.compute_advantages_and_returns``: before OpenRLHF's own shaping,
      turns the log-ratios (or, under ``use_loss``, the kept reference log-probs) into the
      core's penalty. ``reward_shape="sequence"`` subtracts ``core.reward_penalty`` from the
      scalar reward, so the KL sits *inside* the group baseline (the paper's RLOO setting);
      ``"reward_to_go"`` hands ``core.kl_terms`` to OpenRLHF, which charges them per token
      after the baseline as it does natively. The coefficient is the controller's
      (``kl_ctl.value``, = ``init_coef`` unless ``--algo.kl.target`` is set).

loss side (module ``openrlhf.trainer.ray.ppo_actor``)
    * ``compute_approx_kl`` (imported there by name): ``core.loss_per_token``;
    * ``aggregate_loss`` (imported there by name): for the KL tensor only, ``core.aggregate``
      with the configured aggregation; OpenRLHF's global counts (``batch_num_tokens``,
      ``global_batch_size``) keep one mean over the optimiser step across micro-batches and
      data-parallel ranks, as OpenRLHF does for its own losses;
    * ``ActorPPOTrainer.training_step``: gives the two functions above the action mask, uses
      ``loss_coef`` when set, and refuses to run when OpenRLHF's flags would skip the KL.

Every original is kept in one registry: :func:`revert` restores exactly what was there,
applying twice equals applying once, and a missing hook point raises naming the supported
versions. Deviation from OpenRLHF on purpose: no clamps unless the config sets them.
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from kl_patches import core
from kl_patches.adapters.openrlhf.flags import native_gaps, parse_version, to_args
from kl_patches.config import KLConfig

SUPPORTED = ((0, 11, 2), (0, 12, 0))
"""Patched OpenRLHF versions: ``>= 0.11.2, < 0.12`` (0.11.2 is tested)."""
REWARD_MODULE = "openrlhf.trainer.ppo_utils.experience_maker"
LOSS_MODULE = "openrlhf.trainer.ray.ppo_actor"
MARK = "__kl_patches__"
"""Attribute set on every patched function (value: the side it belongs to)."""


@dataclass(frozen=True)
class Target:
    """One patched symbol."""

    module: str
    owner: str | None
    """Class name inside ``module``, or None for a module global."""
    attr: str
    side: str

    @property
    def name(self) -> str:
        return ".".join(p for p in (self.module, self.owner, self.attr) if p)


TARGETS: tuple[Target, ...] = (
    Target(REWARD_MODULE, None, "compute_approx_kl", "reward"),
    Target(REWARD_MODULE, "RemoteExperienceMaker", "compute_advantages_and_returns", "reward"),
    Target(LOSS_MODULE, None, "compute_approx_kl", "loss"),
    Target(LOSS_MODULE, None, "aggregate_loss", "loss"),
    Target(LOSS_MODULE, "ActorPPOTrainer", "training_step", "loss"),
)

_ORIGINALS: dict[Target, Any] = {}
_CONFIG: list[KLConfig] = []


@dataclass
class _Step:
    mask: torch.Tensor
    kl_values: torch.Tensor | None = None


_STEP: contextvars.ContextVar[_Step | None] = contextvars.ContextVar(
    "kl_patches_step", default=None
)


def installed_version() -> str:
    """The installed OpenRLHF version (raises if OpenRLHF is not installed)."""
    try:
        return importlib.metadata.version("openrlhf")
    except importlib.metadata.PackageNotFoundError as exc:
        raise RuntimeError("kl_patches: OpenRLHF is not installed (pip install openrlhf)") from exc


def check_version(version: str | None = None) -> str:
    """Raise unless ``version`` (default: the installed one) is in :data:`SUPPORTED`."""
    version = installed_version() if version is None else version
    low, high = SUPPORTED
    if not low <= parse_version(version) < high:
        raise RuntimeError(
            f"kl_patches supports OpenRLHF >= {'.'.join(map(str, low))}, < "
            f"{'.'.join(map(str, high))} (tested: 0.11.2); found {version}. Its KL hook points "
            "may differ; refusing to patch rather than silently changing the objective."
        )
    return version


def active_config() -> KLConfig | None:
    """The configuration the patches run, or None when nothing is applied."""
    return _CONFIG[0] if _CONFIG else None


def _config() -> KLConfig:
    if not _CONFIG:
        raise RuntimeError("kl_patches: an OpenRLHF patch ran without an active KLConfig")
    return _CONFIG[0]


def _owner(target: Target) -> Any:
    module = importlib.import_module(target.module)
    if target.owner is None:
        return module
    try:
        return getattr(module, target.owner)
    except AttributeError:
        raise RuntimeError(
            f"kl_patches: OpenRLHF {installed_version()} has no {target.module}.{target.owner}; "
            f"supported versions: >= 0.11.2, < 0.12"
        ) from None


def _mark(fn: Callable[..., Any], side: str, original: Any) -> Callable[..., Any]:
    setattr(fn, MARK, side)
    fn.__wrapped__ = original  # type: ignore[attr-defined]
    return fn


# --------------------------------------------------------------------------- reward side
def _reward_log_ratio(original: Any) -> Callable[..., Any]:
    @functools.wraps(original)
    def compute_approx_kl(
        log_probs: torch.Tensor,
        log_probs_base: torch.Tensor,
        log_probs_old: torch.Tensor | None = None,
        kl_estimator: str = "k1",
        unbiased_gradient: bool = False,
        **_: Any,
    ) -> torch.Tensor:
        delta = log_probs.float() - log_probs_base.float()
        delta.kl_patches_log_ratio = True  # type: ignore[attr-defined]
        return delta

    return _mark(compute_approx_kl, "reward", original)


def _reward_inputs(exp: Any) -> tuple[torch.Tensor, torch.Tensor]:
    if exp.base_action_log_probs is not None:
        return exp.action_log_probs.float(), exp.base_action_log_probs.float()
    kl = exp.kl
    if kl is not None and getattr(kl, "kl_patches_log_ratio", False):
        return kl, torch.zeros_like(kl)
    raise RuntimeError(
        "kl_patches: the reward-side KL patch is active but this experience has neither "
        "reference log-probs nor the patched log-ratio: OpenRLHF ran without a reference model "
        "(--algo.kl.init_coef 0?) or experience_maker.compute_approx_kl is not patched in this "
        f"process. Launch with the flags {to_args(_config())} via `python -m kl_patches.openrlhf`."
    )


def _reward_shaping(original: Any) -> Callable[..., Any]:
    @functools.wraps(original)
    def compute_advantages_and_returns(self: Any, experiences: list[Any]) -> list[Any]:
        config = _config()
        if not config.has_loss and self.strategy.args.algo.kl.use_loss:
            raise RuntimeError(
                f"kl_patches: {config} has no loss side, but OpenRLHF runs with "
                f"--algo.kl.use_loss, which adds its own KL loss; launch with {to_args(config)}"
            )
        if config.has_reward:
            coef = float(self.kl_ctl.value)
            if coef <= 0:
                raise RuntimeError(
                    f"kl_patches: {config} has a reward side but OpenRLHF's KL coefficient is "
                    f"{coef}; launch with {to_args(config)}"
                )
            shaped = config if coef == config.coef else config.replace(coef=coef)
            for exp in experiences:
                logp, ref = _reward_inputs(exp)
                mask = exp.action_mask
                if shaped.reward_shape == "sequence":
                    rewards = exp.rewards.to(torch.promote_types(exp.rewards.dtype, torch.float32))
                    exp.rewards = rewards - core.reward_penalty(logp, ref, mask, shaped)
                    exp.kl = torch.zeros_like(logp)
                else:
                    # OpenRLHF multiplies by kl_ctl.value and sums to go (its native path).
                    exp.kl = core.kl_terms(logp, ref, mask, shaped)
                tokens = mask.sum(-1).clamp(min=1)
                exp.info["kl"] = core.sequence_kl(logp, ref, mask, shaped) / tokens
        return original(self, experiences)

    return _mark(compute_advantages_and_returns, "reward", original)


# --------------------------------------------------------------------------- loss side
def _loss_values(original: Any) -> Callable[..., Any]:
    @functools.wraps(original)
    def compute_approx_kl(
        log_probs: torch.Tensor,
        log_probs_base: torch.Tensor,
        log_probs_old: torch.Tensor | None = None,
        kl_estimator: str = "k1",
        unbiased_gradient: bool = False,
        **_: Any,
    ) -> torch.Tensor:
        step = _STEP.get()
        if step is None:
            raise RuntimeError(
                "kl_patches: ppo_actor.compute_approx_kl was called outside "
                "ActorPPOTrainer.training_step, so the action mask is unknown"
            )
        old = None if log_probs_old is None else log_probs_old.float()
        values = core.loss_per_token(
            log_probs.float(), log_probs_base.float(), step.mask, _config(), old_logp=old
        )
        step.kl_values = values
        return values

    return _mark(compute_approx_kl, "loss", original)


def _loss_aggregate(original: Any) -> Callable[..., Any]:
    @functools.wraps(original)
    def aggregate_loss(
        loss: torch.Tensor,
        loss_mask: torch.Tensor,
        token_level_loss: bool = True,
        dp_size: int = 1,
        batch_num_tokens: Any = None,
        global_batch_size: Any = None,
    ) -> torch.Tensor:
        step = _STEP.get()
        if step is None or step.kl_values is None or loss is not step.kl_values:
            return original(
                loss, loss_mask, token_level_loss, dp_size, batch_num_tokens, global_batch_size
            )
        mode = _config().loss_aggregation
        if mode == "token_mean":
            normalizer = None if batch_num_tokens is None else batch_num_tokens / dp_size
            return core.aggregate(loss, loss_mask, mode, normalizer=normalizer)
        value = core.aggregate(loss, loss_mask, mode)
        if global_batch_size is not None:
            # The core averages over this micro-batch's rows; OpenRLHF's global sequence count
            # turns that into one mean over the optimiser step (micro-batches x DP ranks).
            value = value * (loss.shape[0] * dp_size / global_batch_size)
        return value

    return _mark(aggregate_loss, "loss", original)


def _training_step(original: Any) -> Callable[..., Any]:
    @functools.wraps(original)
    def training_step(
        self: Any, experience: Any, kl_ctl: float, step: int, loss_batch_info: Any = None
    ) -> Any:
        config = _config()
        kl_args = self.args.algo.kl
        if config.has_loss and not (kl_args.use_loss and kl_args.init_coef > 0):
            raise RuntimeError(
                f"kl_patches: {config} has a loss side, but OpenRLHF runs with use_loss="
                f"{kl_args.use_loss}, init_coef={kl_args.init_coef}, which skips the KL loss; "
                f"launch with {to_args(config)}"
            )
        if config.loss_coef is not None:
            kl_ctl = config.loss_coef_value
        token = _STEP.set(_Step(mask=experience.action_mask))
        try:
            return original(self, experience, kl_ctl, step, loss_batch_info)
        finally:
            _STEP.reset(token)

    return _mark(training_step, "loss", original)


_FACTORIES: dict[Target, Callable[[Any], Callable[..., Any]]] = {
    TARGETS[0]: _reward_log_ratio,
    TARGETS[1]: _reward_shaping,
    TARGETS[2]: _loss_values,
    TARGETS[3]: _loss_aggregate,
    TARGETS[4]: _training_step,
}


# --------------------------------------------------------------------------- registry
def needed_sides(config: KLConfig) -> tuple[str, ...]:
    """The sides whose patches ``config`` needs (empty: the flags alone run it)."""
    gaps = native_gaps(config)
    return tuple(side for side in ("reward", "loss") if gaps[side])


def apply(config: KLConfig | str | dict[str, Any], only: str | None = None) -> list[str]:
    """Patch OpenRLHF for ``config``; return the names of the patched symbols.

    Imports the target modules (``only="reward"`` or ``"loss"`` restricts to one module, as the
    Ray setup hook does after each import). Applying the same config twice is a no-op; a new
    config replaces the old one. Raises outside the supported versions or when a hook point is
    missing. Run OpenRLHF with ``to_args(config)`` as well: the patches build on those flags.
    """
    config = KLConfig.coerce(config)
    if only not in (None, "reward", "loss"):
        raise ValueError(f"only={only!r} is not valid; choose one of [None, 'reward', 'loss']")
    check_version()
    if _CONFIG and _CONFIG[0] != config:
        revert()
    if not _CONFIG:
        _CONFIG.append(config)
    sides = [s for s in needed_sides(config) if only is None or s == only]
    for target in TARGETS:
        if target.side not in sides or target in _ORIGINALS:
            continue
        owner = _owner(target)
        namespace = vars(owner)
        if target.attr not in namespace:
            raise RuntimeError(
                f"kl_patches: OpenRLHF {installed_version()} has no {target.name}; supported "
                "versions: >= 0.11.2, < 0.12"
            )
        original = namespace[target.attr]
        if getattr(original, MARK, None):
            raise RuntimeError(f"kl_patches: {target.name} is already patched outside the registry")
        _ORIGINALS[target] = original
        setattr(owner, target.attr, _FACTORIES[target](original))
    return applied()


def applied() -> list[str]:
    """Names of the symbols currently patched (checked on the live objects)."""
    out = []
    for target in _ORIGINALS:
        current = vars(_owner(target)).get(target.attr)
        if getattr(current, MARK, None) != target.side:
            raise RuntimeError(f"kl_patches: {target.name} was replaced after patching")
        out.append(target.name)
    return out


def revert() -> list[str]:
    """Restore every patched symbol to the original object; return their names."""
    restored = []
    for target, original in list(_ORIGINALS.items()):
        setattr(_owner(target), target.attr, original)
        del _ORIGINALS[target]
        restored.append(target.name)
    _CONFIG.clear()
    return restored
