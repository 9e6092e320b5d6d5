"""Patches that make OpenRLHF 0.8-0.11 run what its flags cannot express, with the core's maths.

Patched only where :func:`~kl_patches.adapters.openrlhf.translate.native_gaps` says the flags fall
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

Every original is kept in the shared :class:`~kl_patches.adapters.patching.PatchRegistry`:
:func:`revert` restores exactly what was there, applying twice equals applying once, and a
missing hook point raises naming the supported versions. The two ``compute_approx_kl`` targets
are the names each module imported (each gets its own replacement), not the defining function.
Deviation from OpenRLHF on purpose: no clamps unless the config sets them.

Releases 0.8.0-0.11.2 differ in what the patch touches, and each difference is read from the
installed objects (:func:`resolve_targets`, :func:`kl_args`, :func:`_holds_rewards`): the flat
``args`` of 0.8.0-0.10.1 (``use_kl_loss``, ``init_kl_coef``, ``kl_estimator``) against
``args.algo.kl.*`` from 0.10.2; the scalar reward in ``info["reward"]`` on 0.8.0-0.8.2 (lowered
by the sequence penalty for the advantages, then given back its score for OpenRLHF's logs) and
in ``Experience.rewards`` from 0.8.3; the KL loss mean through ``masked_mean`` before 0.10.3 and
``aggregate_loss`` after; ``training_step``'s ``step`` (from 0.8.6) and ``loss_batch_info`` (from
0.10.4), passed on as OpenRLHF passes them; the ``compute_approx_kl`` signature of 0.11.1
(``log_probs_old``, ``unbiased_gradient``). OpenRLHF clamps the estimator values from 0.8.6 only,
so which configurations need a patch depends on the release (:func:`needed_sides`).
:func:`apply` checks the version, the signatures recorded for the tested releases
(:data:`~.versions.SIGNATURES`) and the behaviour canaries (:mod:`.canaries`) before patching.
"""

from __future__ import annotations

import contextvars
import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from kl_patches import core
from kl_patches.adapters import metrics
from kl_patches.adapters.patching import MARK, PatchRegistry, Target, serialized
from kl_patches.config import KLConfig

from . import canaries, offpolicy
from .translate import native_gaps, to_args
from .versions import SIGNATURES, SUPPORT, TESTED_VERSION, installed_version

REWARD_MODULE = "openrlhf.trainer.ppo_utils.experience_maker"
LOSS_MODULE = "openrlhf.trainer.ray.ppo_actor"

TARGETS: tuple[Target, ...] = (
    Target(REWARD_MODULE, "compute_approx_kl"),
    Target(REWARD_MODULE, "compute_advantages_and_returns", owner="RemoteExperienceMaker"),
    Target(LOSS_MODULE, "compute_approx_kl"),
    Target(LOSS_MODULE, "aggregate_loss"),
    Target(LOSS_MODULE, "training_step", owner="ActorPPOTrainer"),
)
"""Every patched symbol, in patching order."""

MEAN_BEFORE_AGGREGATE = Target(LOSS_MODULE, "masked_mean")
"""The KL loss mean of OpenRLHF 0.10.0-0.10.2 (``masked_mean(kl, action_mask)`` in
``training_step``), patched in place of ``aggregate_loss`` where that does not exist yet."""

SIDES: dict[Target, str] = {
    t: "reward" if t.module == REWARD_MODULE else "loss" for t in (*TARGETS, MEAN_BEFORE_AGGREGATE)
}
"""Which placement each target belongs to (its module holds that side's KL code)."""


def resolve_targets() -> tuple[Target, ...]:
    """:data:`TARGETS` as the installed OpenRLHF has them: ``masked_mean`` stands in for
    ``aggregate_loss`` in ``ppo_actor`` before 0.10.3 (read from the module, not the version)."""
    module = importlib.import_module(LOSS_MODULE)
    if callable(vars(module).get("aggregate_loss")):
        return TARGETS
    return tuple(MEAN_BEFORE_AGGREGATE if t == TARGETS[3] else t for t in TARGETS)


def kl_args(args: Any) -> tuple[bool, float, str]:
    """``(use_loss, init_coef, estimator)`` from OpenRLHF's parsed ``args``: ``args.algo.kl`` from
    0.10.2 on, the flat ``use_kl_loss`` / ``init_kl_coef`` / ``kl_estimator`` before."""
    kl = getattr(getattr(args, "algo", None), "kl", None)
    if kl is not None:
        return bool(kl.use_loss), float(kl.init_coef), str(getattr(kl, "estimator", "k1"))
    return (
        bool(args.use_kl_loss),
        float(args.init_kl_coef),
        str(getattr(args, "kl_estimator", "k1")),
    )


REGISTRY = PatchRegistry("openrlhf", f"supported: {SUPPORT.describe()}")
"""The originals and replacements of the patched OpenRLHF symbols."""

_CONFIG: list[KLConfig] = []

__all__ = [
    "LOSS_MODULE",
    "MARK",
    "REWARD_MODULE",
    "TARGETS",
    "active_config",
    "applied",
    "apply",
    "check_version",
    "installed_version",
    "needed_sides",
    "revert",
]


@dataclass
class _Step:
    mask: torch.Tensor
    kl_values: torch.Tensor | None = None
    old: torch.Tensor | None = None
    """The sampling policy's log-probs of the experience (``action_log_probs``): what OpenRLHF
    0.11.1+ passes to ``compute_approx_kl`` as ``log_probs_old``, and earlier releases do not."""
    offpolicy: offpolicy.Inputs | None = None
    loss_kl: torch.Tensor | None = None
    """Token mean of the loss-side per-token estimator values (the shared ``loss_kl`` metric)."""


_STEP: contextvars.ContextVar[_Step | None] = contextvars.ContextVar(
    "kl_patches_step", default=None
)


def check_version(version: str | None = None, *, force: bool = False) -> str:
    """Raise unless ``version`` (default: the installed one) is supported (see ``SUPPORT``)."""
    found = installed_version() if version is None else version
    if found is None:
        raise RuntimeError("kl_patches: OpenRLHF is not installed (pip install openrlhf)")
    return SUPPORT.check(found, force=force)


def active_config() -> KLConfig | None:
    """The configuration the patches run, or None when nothing is applied."""
    return _CONFIG[0] if _CONFIG else None


def _config() -> KLConfig:
    if not _CONFIG:
        raise RuntimeError("kl_patches: an OpenRLHF patch ran without an active KLConfig")
    return _CONFIG[0]


def _owner(target: Target) -> Any:
    return REGISTRY.holder(target)


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

    return compute_approx_kl


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
    def compute_advantages_and_returns(self: Any, experiences: list[Any], **kwargs: Any) -> Any:
        config = _config()
        scores: list[tuple[Any, Any]] = []
        if not config.has_loss and kl_args(self.strategy.args)[0]:
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
                    penalty = core.reward_penalty(logp, ref, mask, shaped)
                    if _holds_rewards(exp):
                        rewards = exp.rewards.to(
                            torch.promote_types(exp.rewards.dtype, torch.float32)
                        )
                        exp.rewards = rewards - penalty
                    else:  # 0.8.0-0.8.2: the scalar reward lives in info["reward"]
                        scores.append((exp, exp.info["reward"]))
                        exp.info["reward"] = _minus(exp.info["reward"], penalty)
                    exp.kl = torch.zeros_like(logp)
                else:
                    # OpenRLHF multiplies by kl_ctl.value and sums to go (its native path).
                    exp.kl = core.kl_terms(logp, ref, mask, shaped)
                tokens = mask.sum(-1).clamp(min=1)
                seq_kl = core.sequence_kl(logp, ref, mask, shaped)
                exp.info["kl"] = seq_kl / tokens
                exp.info[metrics.REWARD_SEQUENCE_KL] = seq_kl.detach().float()
                exp.info[metrics.REWARD_PENALTY] = coef * seq_kl.detach().float()
                exp.info[metrics.ACTIVE] = torch.ones_like(seq_kl, dtype=torch.float32)
        try:
            return original(self, experiences, **kwargs)  # **kwargs: 0.8.0-0.9.8 take them
        finally:
            for exp, score in scores:  # OpenRLHF logs info["reward"] later: the score, as native
                exp.info["reward"] = score

    return compute_advantages_and_returns


def _holds_rewards(exp: Any) -> bool:
    """Whether this release's ``Experience`` carries the scalar reward as ``rewards`` (0.8.3+)
    rather than in ``info["reward"]`` (0.8.0-0.8.2, whose dataclass has no such field)."""
    import dataclasses

    if dataclasses.is_dataclass(exp):
        return "rewards" in {f.name for f in dataclasses.fields(exp)}
    return hasattr(exp, "rewards")


def _minus(score: Any, penalty: torch.Tensor) -> torch.Tensor:
    """``info["reward"]`` (a tensor, or a list of floats) minus the per-sample penalty."""
    score = torch.as_tensor(score, device=penalty.device)
    return score.to(torch.promote_types(score.dtype, torch.float32)) - penalty


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
        if log_probs_old is None:  # OpenRLHF < 0.11.1 does not pass it
            log_probs_old = step.old
        if offpolicy.active(_config()):  # the reward side at loss time (offpolicy.py)
            values, step.offpolicy = offpolicy.loss_values(
                log_probs, log_probs_base, log_probs_old, step.mask, _config()
            )
            step.kl_values = values
            step.loss_kl = _token_mean(log_probs, log_probs_base, step.mask)
            return values
        old = None if log_probs_old is None else log_probs_old.float()
        values = core.loss_per_token(
            log_probs.float(), log_probs_base.float(), step.mask, _config(), old_logp=old
        )
        step.kl_values = values
        step.loss_kl = _token_mean(log_probs, log_probs_base, step.mask)
        return values

    return compute_approx_kl


def _token_mean(logp: torch.Tensor, ref: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Token mean of the per-token estimator values (the shared ``loss_kl`` metric)."""
    values = core.kl_terms(logp.detach().float(), ref.detach().float(), mask, _config())
    return values.sum() / mask.sum().clamp(min=1)


def _add_loss_metrics(status: Any, state: _Step) -> Any:
    """The shared loss-side metrics in the status ``training_step`` returns (token means)."""
    if state.loss_kl is None or not isinstance(status, dict) or "metrics" not in status:
        return status
    status["metrics"][metrics.LOSS_KL] = state.loss_kl
    status["weights"][metrics.LOSS_KL] = "token"
    status["metrics"][metrics.ACTIVE] = torch.ones((), dtype=torch.float32)
    status["weights"][metrics.ACTIVE] = "token"
    return status


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
        if step.offpolicy is not None:
            return offpolicy.aggregate(
                step.offpolicy, loss_mask, _config(), dp_size, batch_num_tokens, global_batch_size
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

    return aggregate_loss


def _loss_masked_mean(original: Any) -> Callable[..., Any]:
    """``ppo_actor.masked_mean`` (OpenRLHF < 0.10.3): the KL tensor only, reduced by the
    configured aggregation (OpenRLHF's own is this micro-batch's token mean)."""

    @functools.wraps(original)
    def masked_mean(tensor: torch.Tensor, mask: torch.Tensor | None, dim: Any = None) -> Any:
        step = _STEP.get()
        if (
            step is None
            or step.kl_values is None
            or tensor is not step.kl_values
            or dim is not None
            or mask is None
        ):
            return original(tensor, mask, dim)
        return core.aggregate(tensor, mask, _config().loss_aggregation)

    return masked_mean


def _training_step(original: Any) -> Callable[..., Any]:
    @functools.wraps(original)
    def training_step(self: Any, experience: Any, kl_ctl: float, *args: Any, **kwargs: Any) -> Any:
        config = _config()
        use_loss, init_coef, _ = kl_args(self.args)
        sequence = offpolicy.active(config)
        if (config.has_loss or sequence) and not (use_loss and init_coef > 0):
            side = "runs its reward-side KL in the loss" if sequence else "has a loss side"
            raise RuntimeError(
                f"kl_patches: {config} {side}, but OpenRLHF runs with use_loss="
                f"{use_loss}, init_coef={init_coef}, which skips the KL loss; "
                f"launch with {to_args(config)}"
            )
        if config.loss_coef is not None:
            kl_ctl = config.loss_coef_value
        if sequence:
            kl_ctl = offpolicy.check_coefficient(config, kl_ctl)
        state = _Step(
            mask=experience.action_mask, old=getattr(experience, "action_log_probs", None)
        )
        token = _STEP.set(state)
        try:
            # step exists from 0.8.6, loss_batch_info from 0.10.4: passed on as OpenRLHF passed them
            status = original(self, experience, kl_ctl, *args, **kwargs)
        finally:
            _STEP.reset(token)
        return _add_loss_metrics(offpolicy.add_metrics(status, state.offpolicy), state)

    return training_step


_FACTORIES: dict[Target, Callable[[Any], Callable[..., Any]]] = {
    TARGETS[0]: _reward_log_ratio,
    TARGETS[1]: _reward_shaping,
    TARGETS[2]: _loss_values,
    TARGETS[3]: _loss_aggregate,
    TARGETS[4]: _training_step,
    MEAN_BEFORE_AGGREGATE: _loss_masked_mean,
}


# --------------------------------------------------------------------------- registry
def needed_sides(config: KLConfig, version: str | None = None) -> tuple[str, ...]:
    """The sides whose patches ``config`` needs on OpenRLHF ``version`` (default: the installed
    release, else the tested one); empty: the flags alone run it."""
    gaps = native_gaps(config, version or installed_version() or TESTED_VERSION)
    return tuple(side for side in ("reward", "loss") if gaps[side])


@serialized
def apply(
    config: KLConfig | str | dict[str, Any], only: str | None = None, *, force: bool = False
) -> KLConfig:
    """Patch OpenRLHF for ``config``; returns the active config (see :func:`applied`).

    Imports the target modules (``only="reward"`` or ``"loss"`` restricts to one module, as the
    Ray setup hook does after each import). Applying the same config twice is a no-op; a new
    config replaces the old one. Raises outside the supported versions (unless ``force`` or
    ``KL_PATCHES_FORCE=1``) or when a hook point is missing. Run OpenRLHF with
    ``to_args(config)`` as well: the patches build on those flags.
    """
    config = KLConfig.coerce(config)
    if only not in (None, "reward", "loss"):
        raise ValueError(f"only={only!r} is not valid; choose one of [None, 'reward', 'loss']")
    forced = SUPPORT.forced(force)
    found = installed_version()
    if found is None:
        raise RuntimeError("kl_patches: OpenRLHF is not installed (pip install openrlhf)")
    version = SUPPORT.gate(found, force=forced)
    sides = [s for s in needed_sides(config, found) if only is None or s == only]
    targets = [t for t in resolve_targets() if SIDES[t] in sides]
    REGISTRY.check_signatures({t: SIGNATURES[_key(t)] for t in targets}, force=forced)
    SUPPORT.verify(version, force=forced, canaries=canaries.canaries())
    if _CONFIG and _CONFIG[0] != config:
        revert()
    if not _CONFIG:
        _CONFIG.append(config)
    for target in targets:
        REGISTRY.patch(target, _FACTORIES[target])
    unreached = unpatched_importers()
    if unreached:
        revert()
        raise RuntimeError(
            f"kl_patches: {unreached} import OpenRLHF's compute_approx_kl by name but are not "
            f"patched (the patch covers {REWARD_MODULE} and {LOSS_MODULE}, the only importers "
            "of 0.8.0-0.11.2), so a trainer using them would compute OpenRLHF's own KL"
        )
    return config


def unpatched_importers() -> list[str]:
    """Loaded ``openrlhf`` modules other than the two patched ones that hold the original
    ``openrlhf.models.utils.compute_approx_kl`` by name."""
    import sys

    utils = sys.modules.get("openrlhf.models.utils")
    if utils is None:
        return []
    original = vars(utils).get("compute_approx_kl")
    return sorted(
        name
        for name, module in list(sys.modules.items())
        if name.startswith("openrlhf.")
        and name not in ("openrlhf.models.utils", "openrlhf.models", REWARD_MODULE, LOSS_MODULE)
        and module is not None
        and vars(module).get("compute_approx_kl") is original
    )


def _key(target: Target) -> str:
    return f"{target.owner}.{target.attr}" if target.owner else target.attr


@serialized
def applied() -> list[str]:
    """Names of the symbols currently patched (checked on the live objects)."""
    return REGISTRY.applied()


@serialized
def revert() -> list[str]:
    """Restore every patched symbol to the original object; return their names."""
    restored = REGISTRY.revert()
    _CONFIG.clear()
    return restored
