"""The hooks that put a :class:`~kl_patches.KLConfig` into TRL's GRPOTrainer and RLOOTrainer.

Each hook is a plain function ``hook(trainer, call, ...)`` where ``call`` is TRL's own method
bound to the trainer; the subclasses in :mod:`.trainers` and the in-place patch in
:mod:`.patching` both route through these functions, so the two ways in behave identically.

What changes against TRL 1.16 (and nothing else):

* TRL's ``beta`` only decides whether the reference model is built (so the PEFT "disable the
  adapter" trick and ``sync_ref_model`` keep working); its value is the KL coefficient and it is
  set to 0 while TRL's own loss runs, so TRL's k3 term (GRPO) is never added.
* Reward side: after TRL has scored a generation batch, the penalty from
  :func:`kl_patches.core.reward_penalty` is subtracted from the summed task reward *before* the
  group baseline, and the advantages are recomputed with TRL's own normalisation
  (:mod:`.advantages`). The penalty uses the sampling policy's log-probs from a forward that
  runs anyway, in this order: TRL's ``old_per_token_logps`` when it computes them; otherwise,
  inside a training step whose micro-batch is the whole generation batch
  (``steps_per_generation=1``: every group member is there), the penalty and the advantages
  are *deferred* to the loss step and computed from the detached log-probs of TRL's loss
  forward (on-policy they are the sampling policy's: TRL itself takes them as the old
  log-probs there); otherwise, when the trainer opted in (``sampling_logps``), the sampling
  engine's own log-probs (vLLM's, or a ``rollout_func``'s); only otherwise one extra no-grad
  forward of the policy with TRL's own arguments, said once in the log. The reference forward
  is never repeated. :func:`forward_counts` and :func:`penalty_sources` count what ran.
* ``importance_weighting="sequence"``: the reward side is not put in the advantages but added
  at every loss call from the current log-probs (:mod:`.offpolicy`).
* Loss side: the differentiable log-probs of TRL's single loss forward are captured and
  :func:`kl_patches.core.loss_term` is added, reduced by ``KLConfig.loss_aggregation`` and
  scaled for gradient accumulation the way TRL scales its own loss.

Deviation on purpose: RLOO's native ``beta * sum_t k1`` is discarded when a KLConfig is given
(the reward-side penalty of the KLConfig replaces it; k1-in-reward reproduces it exactly).

Every hook counts its runs per trainer; at the end of the first training step a callback
checks that each of the five ran (:data:`STEP_METHODS`) and raises naming the method otherwise,
and the user's override of it when there is one (an override that does not reach ``super()``
on the path the run took). A user override of ``_compute_loss``/``compute_loss`` sees
``inputs["advantages"]`` already penalised, except when the penalty waits for the loss forward
(deferred, above) or lives in the loss (``importance_weighting="sequence"``): then one warning
per trainer says where the advantages become final.
"""

from __future__ import annotations

import copy
import logging
import os
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch

from kl_patches.adapters import metrics
from kl_patches.config import KLConfig
from kl_patches.core import full_kl, kl_terms, loss_term, reward_penalty, sequence_kl

from . import offpolicy
from .advantages import grpo_advantages, rloo_advantages, summed_rewards
from .canaries import DETECTED
from .versions import (
    GLOBAL_TOKEN_COUNT_LOSS_TYPES,
    GRPO_DEFAULTS,
    GRPO_LOSS_AGGREGATION,
    RLOO_DEFAULTS,
)

REF_KEY = "kl_ref_per_token_logps"
"""RLOO only: batch key under which the captured reference log-probs travel to the loss."""

OLD_KEY = "kl_old_per_token_logps"
"""RLOO only: batch key under which the sampling policy's log-probs travel to the loss."""

DEFER_ROWS = "kl_deferred_rows"
"""GRPO, deferred penalty: each row's index in the gathered generation batch (``[B]``, long);
TRL shuffles rows before the loss, so the group baseline is rebuilt from it."""

DEFER_REWARDS = "kl_deferred_rewards"
"""GRPO, deferred penalty: each row's summed task reward (``[B]``), for the recomputation."""

SAMPLING_LOGPS_ENV = "KL_PATCHES_TRL_SAMPLING_LOGPS"
"""Set to 1 to let trainers built without ``kl_sampling_logps=`` use the sampling engine's
log-probs for the penalty where the extra forward would run (see :func:`init_state`)."""

LOGGER = logging.getLogger("kl_patches.trl")
"""Where the adapter says, once per trainer and reason, which source the penalty uses."""

STEP_METHODS = (
    "training_step",
    "_generate_and_score_completions",
    "_calculate_rewards",
    "_get_per_token_logps_and_entropies",
    "_compute_loss",
)
"""The hooked methods every first training step runs (scoring happens in the first step)."""

LOSS_METHODS = ("_compute_loss", "compute_loss")
"""Methods whose user override receives the batch, advantages included, before ``super()``."""

_NOT_TAKEN = (
    "kl_patches.trl: the {hook} hook did not run during {where}, so the KL regulariser would "
    "silently change. TRL's internals differ from the tested version; see "
    "kl_patches.adapters.trl.versions.SUPPORT."
)


class KLTrainerMixin:
    """Marker base of the kl-patches trainers; TRL's patched methods pass straight through for
    instances of it (their hooks already run once, in the subclass)."""

    _kl_config: KLConfig


def needs_reference(config: KLConfig) -> bool:
    """True when the config uses reference log-probs (a reward or a loss side)."""
    return config.has_reward or config.has_loss


def trl_beta(config: KLConfig) -> float:
    """The value given to TRL's ``beta``: non-zero exactly when a reference model is needed."""
    if not needs_reference(config):
        return 0.0
    return config.coef if config.has_reward else config.loss_coef_value


# ---------------------------------------------------------------------------------- construction
def prepare_args(kind: str, model: Any, args: Any, config: KLConfig) -> Any:
    """A copy of the trainer ``args`` with ``beta`` set for ``config``, after validation.

    ``kind`` is ``"GRPO"`` or ``"RLOO"``. ``args=None`` builds TRL's default config the way the
    trainer would.
    """
    import trl

    config_cls = trl.GRPOConfig if kind == "GRPO" else trl.RLOOConfig
    if args is None:
        name = model if isinstance(model, str) else model.config._name_or_path
        args = config_cls(f"{str(name).split('/')[-1]}-{kind}")
    else:
        args = copy.copy(args)
    validate(kind, args, config)
    beta = trl_beta(config)
    native_default = (GRPO_DEFAULTS if kind == "GRPO" else RLOO_DEFAULTS)["beta"]
    if args.beta not in (0.0, native_default, beta):
        warnings.warn(
            f"kl_patches.trl: {kind}Config.beta={args.beta} is replaced by the KL config "
            f"({config}); the KL coefficient is KLConfig.coef. Set beta to 0 to silence this.",
            UserWarning,
            stacklevel=4,
        )
    args.beta = beta
    return args


def validate(kind: str, args: Any, config: KLConfig) -> None:
    """Refuse settings the adapter cannot honour, naming the valid choices."""
    import trl

    # TRL 1.0-1.13 route use_liger_kernel=True to GRPOTrainer.compute_liger_loss (a fused loss
    # that never calls _compute_loss); later releases have no such path. use_liger_loss is the
    # 0.17-0.27 spelling of the same switch.
    fused = kind == "GRPO" and callable(getattr(trl.GRPOTrainer, "compute_liger_loss", None))
    for flag in ("use_liger_loss", "use_liger_kernel" if fused else ""):
        if flag and getattr(args, flag, False) is True:
            raise ValueError(
                f"kl_patches.trl: {flag}=True computes a fused GRPO loss "
                "(GRPOTrainer.compute_liger_loss) with a hard-coded k3 term that bypasses the KL "
                f"hooks; set {flag}=False"
            )
    if kind == "GRPO":
        aggregation = getattr(args, "multi_objective_aggregation", "sum_then_normalize")  # 0.29+
        if config.has_reward and aggregation != "sum_then_normalize":
            raise ValueError(
                "kl_patches.trl: KL in the reward needs multi_objective_aggregation="
                f"'sum_then_normalize' (got {aggregation!r}): with "
                "'normalize_then_sum' each reward function is normalised on its own and the KL "
                "penalty has no defined place"
            )
        if config.has_loss and args.loss_type not in GRPO_LOSS_AGGREGATION:
            raise ValueError(
                f"kl_patches.trl: loss_type={args.loss_type!r} is unknown to the adapter; choose "
                f"one of {sorted(GRPO_LOSS_AGGREGATION)}"
            )
    elif (
        config.has_reward and config.reward_shape == "reward_to_go" and not offpolicy.active(config)
    ):
        raise ValueError(
            "kl_patches.trl: RLOOTrainer's loss takes one advantage per sequence, so "
            "reward_shape='reward_to_go' cannot be expressed; use reward_shape='sequence' "
            "(same expected gradient) or GRPOTrainer"
        )


def init_state(
    trainer: Any,
    config: KLConfig,
    full_monitor: bool = False,
    sampling_logps: bool | None = None,
) -> None:
    """Attach the adapter's per-trainer state (before TRL's ``__init__`` runs).

    ``full_monitor`` logs ``kl_patches/full_vocab``, the exact KL over the vocabulary summed over
    each completion (:func:`kl_patches.core.full_kl`): a low-variance monitor that costs one extra
    policy and one extra reference forward with full logits per generation batch.

    ``sampling_logps`` (GRPO, reward side): where the penalty would otherwise need the extra
    policy forward, take the log-probs the sampling engine returned with the completions
    (``sampling_per_token_logps``: vLLM's, or a ``rollout_func``'s) instead. Caveat: they come
    from another implementation of the policy (vLLM's kernels, its precision, its
    ``logprobs_mode``), so the penalty estimates KL(sampler || ref) rather than
    KL(trainer || ref); TRL's own ``sampling/sampling_logp_difference`` metric measures the gap.
    A batch where the engine gave no log-prob for some completion token (NaN) falls back to the
    forward. ``None`` reads :data:`SAMPLING_LOGPS_ENV`.
    """
    if sampling_logps is None:
        sampling_logps = os.environ.get(SAMPLING_LOGPS_ENV, "0") not in ("", "0")
    trainer._kl_config = config
    trainer._kl_full_monitor = bool(full_monitor)
    trainer._kl_sampling_logps = bool(sampling_logps)
    trainer._kl_capture = None
    trainer._kl_rewards_per_func = None
    trainer._kl_loss_calls = 0
    trainer._kl_phase = None
    trainer._kl_in_step = False
    trainer._kl_defer = None
    trainer._kl_unresolved = 0
    trainer._kl_forwards = Counter()
    trainer._kl_sources = Counter()
    trainer._kl_said = set()
    trainer._kl_runs = Counter()
    trainer._kl_overrides = {}


def _ran(trainer: Any, name: str) -> None:
    """Count one run of hook ``name`` on this trainer (checked after the first step)."""
    runs = trainer.__dict__.get("_kl_runs")
    if runs is not None:
        runs[name] += 1


def hook_runs(trainer: Any) -> dict[str, int]:
    """Hooked method -> how many times its hook ran on this trainer."""
    return dict(trainer.__dict__.get("_kl_runs", {}))


def check_first_step(trainer: Any) -> None:
    """Raise (RuntimeError) unless every hook of :data:`STEP_METHODS` ran on ``trainer``; the
    message names the missing method and the user's override of it when there is one."""
    runs = trainer.__dict__.get("_kl_runs", {})
    missing = [name for name in STEP_METHODS if runs.get(name, 0) == 0]
    if not missing:
        return
    overrides: dict[str, str] = trainer.__dict__.get("_kl_overrides", {})
    parts = []
    for name in missing:
        own = overrides.get(name)
        if own is not None:
            parts.append(
                f"{own} overrides {name} and did not reach super().{name}() in that step, so "
                "the kl-patches hook under it never ran"
            )
        else:
            parts.append(f"TRL did not call {name} (its internals differ from the tested ones)")
    raise RuntimeError(
        "kl_patches.trl: the KL hooks did not all run in the first training step: "
        + "; ".join(parts)
        + ". The KL regulariser would silently change, so training stops here."
    )


def _user_overrides(trainer: Any, kind: str) -> dict[str, str]:
    """Hooked (and loss) methods the user's classes override -> ``module.Class.method``."""
    import trl

    from .foreign import overrides

    base = getattr(trl, f"{kind}Trainer")
    names = (*STEP_METHODS, "compute_loss")
    return {
        method: f"{klass.__module__}.{klass.__qualname__}.{method}"
        for klass, method in reversed(overrides(type(trainer), base, names))
    }


def _warn_advantages(trainer: Any, reason: str) -> None:
    """Once per trainer: where ``inputs["advantages"]`` become final, when a user override of
    the loss reads the batch before ``super()`` (``reason``: ``deferred`` or ``sequence``)."""
    overrides: dict[str, str] = trainer.__dict__.get("_kl_overrides", {})
    own = [overrides[m] for m in LOSS_METHODS if m in overrides]
    said = trainer.__dict__.setdefault("_kl_said", set())
    if not own or f"advantages:{reason}" in said:
        return
    said.add(f"advantages:{reason}")
    if reason == "deferred":
        where = (
            "the KL penalty of this batch is computed from the log-probs of TRL's own loss "
            "forward (steps_per_generation=1 saves a forward that way), so inputs['advantages'] "
            "become final inside super()._compute_loss(), after that forward: read them after "
            "super() returns (the same dict holds the final ones), or set "
            "steps_per_generation > 1 to penalise them when the batch is scored"
        )
    else:
        where = (
            "with importance_weighting='sequence' the reward-side KL is not in "
            "inputs['advantages'] at all: it is a loss term added to TRL's loss at every update, "
            "after super()._compute_loss() returns"
        )
    warnings.warn(
        f"kl_patches.trl: {', '.join(own)} receives the batch before super(): {where}.",
        UserWarning,
        stacklevel=2,
    )


def _first_step_callback(trainer: Any) -> Any:
    import weakref

    from transformers import TrainerCallback

    ref = weakref.ref(trainer)

    class FirstStepCheck(TrainerCallback):  # type: ignore[misc]
        """Checks, at the end of the first training step, that every KL hook ran."""

        done = False

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            target = ref()
            if self.done or target is None:
                return
            self.done = True
            check_first_step(target)

    return FirstStepCheck()


def use_sampling_logps(trainer: Any, enabled: bool = True) -> None:
    """Switch the ``sampling_logps`` opt-in of :func:`init_state` on an existing trainer."""
    if "_kl_config" not in getattr(trainer, "__dict__", {}):
        raise TypeError("kl_patches.trl: use_sampling_logps needs a trainer running a KL config")
    trainer._kl_sampling_logps = bool(enabled)


def forward_counts(trainer: Any) -> dict[str, int]:
    """How many model forwards this trainer ran through TRL's log-prob function, by kind.

    ``policy``: the policy (scoring, the loss, and the adapter's own forwards); ``reference``:
    the reference model (or the PEFT base, adapter disabled); ``extra``: the part of ``policy``
    the adapter added for the reward penalty; ``monitor``: the full-vocabulary monitor's model
    calls (policy and reference), not included in the others.
    """
    return dict(trainer.__dict__.get("_kl_forwards", {}))


def penalty_sources(trainer: Any) -> dict[str, int]:
    """Generation batches by where their reward penalty's policy log-probs came from.

    ``old_per_token_logps`` (TRL computed them), ``loss_forward`` (deferred to the loss step),
    ``sampling_per_token_logps`` (the sampling engine's, opted in), ``extra_forward``.
    """
    return dict(trainer.__dict__.get("_kl_sources", {}))


def after_init(trainer: Any, kind: str) -> None:
    """Checks and warnings that need the constructed trainer; adds the first-step check."""
    config: KLConfig = trainer._kl_config
    trainer._kl_overrides = _user_overrides(trainer, kind)
    trainer.add_callback(_first_step_callback(trainer))
    if offpolicy.active(config) and config.has_reward:
        _warn_advantages(trainer, "sequence")
    if trainer._kl_full_monitor and trainer.ref_model is None:
        raise ValueError(
            "kl_patches.trl: the full-vocabulary KL monitor needs a separate reference model: "
            "use a KL config with a reward or loss side (placement 'reward', 'loss' or 'both') "
            "and no PEFT adapter, or kl_full_monitor=False"
        )
    if (
        kind == "GRPO"
        and config.has_reward
        and not offpolicy.active(config)  # its KL is not in the advantages
        and trainer.scale_rewards != "none"
    ):
        warnings.warn(
            f"kl_patches.trl: KL in the reward with scale_rewards={trainer.scale_rewards!r}: "
            "GRPO divides reward minus KL by the group (or batch) std, so each group's effective "
            f"coefficient is coef/std (coef={config.coef:g}); groups with a constant task reward "
            "get a pure, unit-scaled KL signal. For the paper's objective set "
            "scale_rewards='none'.",
            UserWarning,
            stacklevel=3,
        )


# ---------------------------------------------------------------------------------- small helpers
def _mode(trainer: Any) -> str:
    return "train" if trainer.model.training else "eval"


def _log(trainer: Any, name: str, value: float) -> None:
    trainer._metrics[_mode(trainer)][name].append(value)


def _global_mean(trainer: Any, values: torch.Tensor) -> float:
    return float(trainer.accelerator.gather(values.detach().float()).nanmean().item())


def _global_token_mean(trainer: Any, values: torch.Tensor, mask: torch.Tensor) -> float:
    m = mask.float()
    stats = torch.stack([(values.detach().float() * m).sum(), m.sum()])
    total = trainer.accelerator.reduce(stats, reduction="sum")
    return float((total[0] / total[1].clamp(min=1.0)).item())


def _loss_mask(batch: dict[str, Any]) -> torch.Tensor:
    mask = batch["completion_mask"]
    return mask * batch["tool_mask"] if "tool_mask" in batch else mask


def _say_once(trainer: Any, reason: str, message: str) -> None:
    said = trainer.__dict__.setdefault("_kl_said", set())
    if reason not in said:
        said.add(reason)
        LOGGER.warning("kl_patches.trl: %s", message)


def _run_capturing(
    trainer: Any, call: Callable[..., Any], *args: Any
) -> tuple[Any, list[tuple[tuple[Any, ...], dict[str, Any], torch.Tensor]], Any]:
    """Run TRL's scoring, recording every log-prob call; count them as policy or reference."""
    trainer._kl_capture = []
    trainer._kl_rewards_per_func = None
    trainer._kl_phase = "scoring"
    try:
        out = call(*args)
    finally:
        calls = trainer._kl_capture
        trainer._kl_capture = None
        trainer._kl_phase = None
    rewards = trainer._kl_rewards_per_func
    trainer._kl_rewards_per_func = None
    ref = out.get("ref_per_token_logps") if isinstance(out, dict) else None
    for _, _, logps in calls:
        trainer._kl_forwards["reference" if logps is ref else "policy"] += 1
    return out, calls, rewards


# ---------------------------------------------------------------------------------- shared hooks
def get_logps(trainer: Any, call: Callable[..., Any], args: tuple[Any, ...], kwargs: Any) -> Any:
    """``_get_per_token_logps_and_entropies``: record arguments and log-probs while capturing;
    in the loss, count the forward and resolve a deferred reward penalty from its log-probs
    (TRL reads the advantages only after this forward)."""
    _ran(trainer, "_get_per_token_logps_and_entropies")
    out = call(*args, **kwargs)
    state = trainer.__dict__
    capture = state.get("_kl_capture")
    if capture is not None:
        capture.append((args, kwargs, out[0]))
    if state.get("_kl_phase") == "loss":
        state["_kl_forwards"]["policy"] += 1
        pending = state.get("_kl_defer")
        if pending is not None:
            state["_kl_defer"] = None
            _resolve_deferred(trainer, pending, out[0].detach())
    return out


def calculate_rewards(
    trainer: Any, call: Callable[..., Any], args: tuple[Any, ...], kwargs: Any
) -> Any:
    """``_calculate_rewards``: keep the gathered per-function rewards for the recompute."""
    _ran(trainer, "_calculate_rewards")
    rewards = call(*args, **kwargs)
    trainer._kl_rewards_per_func = rewards
    return rewards


def training_step(
    trainer: Any, call: Callable[..., Any], args: tuple[Any, ...], kwargs: Any
) -> Any:
    """``training_step``: fail loudly if TRL's loss bypassed the loss hook (fused paths) or left
    a deferred reward penalty unresolved. Marks the step, so a generation batch scored inside
    it may defer its penalty to the loss that follows."""
    _ran(trainer, "training_step")
    before = trainer._kl_loss_calls
    trainer._kl_in_step = True
    try:
        out = call(*args, **kwargs)
    finally:
        trainer._kl_in_step = False
    if needs_reference(trainer._kl_config) and trainer._kl_loss_calls == before:
        own = trainer.__dict__.get("_kl_overrides", {})
        users = [own[m] for m in LOSS_METHODS if m in own]
        if users:
            raise RuntimeError(
                f"kl_patches.trl: {', '.join(users)} did not reach super()._compute_loss() in a "
                "training step, so the kl-patches loss hook never ran and the KL regulariser "
                "would silently change; call super() on every path of the override"
            )
        raise RuntimeError(_NOT_TAKEN.format(hook="_compute_loss", where="a training step"))
    if trainer._kl_unresolved:
        trainer._kl_unresolved = 0
        raise RuntimeError(
            _NOT_TAKEN.format(
                hook="deferred reward penalty", where="the loss of the batch it was deferred to"
            )
        )
    return out


def _policy_logps_again(trainer: Any, calls: list[Any]) -> torch.Tensor:
    """The sampling policy's log-probs: one no-grad forward with TRL's last scoring arguments."""
    if not calls:
        raise RuntimeError(
            _NOT_TAKEN.format(hook="_get_per_token_logps_and_entropies", where="scoring")
        )
    args, kwargs, _ = calls[-1]
    with torch.no_grad():
        out = trainer._get_per_token_logps_and_entropies(trainer.model, *args[1:], **kwargs)
    trainer._kl_forwards["policy"] += 1
    trainer._kl_forwards["extra"] += 1
    return out[0]


def _relog_advantages(trainer: Any, advantages: torch.Tensor) -> None:
    """Replace the advantages TRL just put in its completions table with the recomputed ones."""
    logged = getattr(trainer, "_logs", {}).get("advantages")
    if logged is None:
        return
    n = min(len(logged), advantages.numel())
    for _ in range(n):
        logged.pop()
    logged.extend(advantages[advantages.numel() - n :].tolist())


_MULTIMODAL = ("pixel_values", "image_grid_thw", "pixel_attention_mask", "image_sizes")


def _log_full_kl(trainer: Any, calls: list[Any], mask: torch.Tensor) -> None:
    """``kl_patches/full_vocab``: mean over completions of sum_t KL(pi(.|s_t) || pi_ref(.|s_t))."""
    if not calls:
        raise RuntimeError(
            _NOT_TAKEN.format(hook="_get_per_token_logps_and_entropies", where="scoring")
        )
    args, kwargs, _ = calls[-1]
    if any(kwargs.get(k) is not None for k in _MULTIMODAL):
        raise ValueError("kl_patches.trl: the full-vocabulary KL monitor supports text-only models")
    ids, attention, keep = args[1], args[2], args[3]
    chunk = kwargs.get("batch_size", args[4] if len(args) > 4 else None) or ids.size(0)
    totals = []
    with torch.no_grad(), trainer.accelerator.autocast():
        for start in range(0, ids.size(0), chunk):
            rows = slice(start, start + chunk)
            logits = [
                model(input_ids=ids[rows], attention_mask=attention[rows]).logits[:, -keep - 1 : -1]
                / trainer.temperature
                for model in (trainer.model, trainer.ref_model)
            ]
            trainer._kl_forwards["monitor"] += 2
            totals.append(full_kl(logits[0], logits[1], mask[rows]).sum(-1))
    _log(trainer, metrics.FULL_VOCAB, _global_mean(trainer, torch.cat(totals)))


def _local_slice(trainer: Any, batch_size: int) -> slice:
    rank = trainer.accelerator.process_index
    return slice(rank * batch_size, (rank + 1) * batch_size)


def _log_reward_side(
    trainer: Any, config: KLConfig, policy: torch.Tensor, ref: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Sequence penalty ``[B]`` (local) for ``config``; logs the estimate and the penalty."""
    seq_config = config.replace(reward_shape="sequence")
    penalty = reward_penalty(policy, ref, mask, seq_config)
    estimate = sequence_kl(policy.detach(), ref, mask, seq_config)
    _log(trainer, metrics.REWARD_SEQUENCE_KL, _global_mean(trainer, estimate))
    _log(trainer, metrics.REWARD_PENALTY, _global_mean(trainer, penalty))
    _log(trainer, metrics.ACTIVE, 1.0)
    return penalty


# ---------------------------------------------------------------------------------- GRPO hooks
def _num_generations(trainer: Any) -> int:
    return int(
        trainer.num_generations if _mode(trainer) == "train" else trainer.num_generations_eval
    )


def _no_defer_reason(trainer: Any) -> str | None:
    """Why this generation batch cannot take its penalty from the loss forward (None: it can)."""
    if _mode(trainer) != "train" or not trainer.__dict__.get("_kl_in_step"):
        return (
            "outside a training step (evaluation, or a direct call), so no loss step of this "
            "batch is sure to follow"
        )
    spg = int(trainer.args.steps_per_generation)
    if spg != 1:
        return (
            f"steps_per_generation={spg}: each loss micro-batch holds 1/{spg} of the shuffled "
            "generation batch, so a group's members are not all in one loss step and the group "
            "baseline needs every member's penalty; steps_per_generation=1 removes the forward"
        )
    return None


def _sampler_logps(trainer: Any, out: dict[str, Any], mask: torch.Tensor) -> torch.Tensor | None:
    """The sampling engine's log-probs when opted in and complete on every rank, else None."""
    sampled = out.get("sampling_per_token_logps")
    if not trainer.__dict__.get("_kl_sampling_logps") or sampled is None:
        return None
    missing = (torch.isnan(sampled) & (mask != 0)).any().float().reshape(1)
    if float(trainer.accelerator.gather(missing).sum()) > 0:
        _say_once(
            trainer,
            "sampler-nan",
            "the sampling engine returned no log-prob (NaN) for some completion tokens; those "
            "batches take the penalty from the next source instead",
        )
        return None
    return torch.nan_to_num(sampled, nan=0.0)


def _reward_advantages(
    trainer: Any,
    config: KLConfig,
    policy: torch.Tensor,
    ref: torch.Tensor,
    mask: torch.Tensor,
    rewards: torch.Tensor,
    rows: torch.Tensor,
) -> torch.Tensor:
    """Advantages of the local rows with the penalty in the reward; logs the reward metrics.

    ``policy``, ``ref``, ``mask`` are the local rows ``rows`` (indices into the gathered
    generation batch, any order); ``rewards`` is the gathered batch's summed task reward.
    """
    penalty_local = _log_reward_side(trainer, config, policy, ref, mask)
    gathered_rows = trainer.accelerator.gather(rows)
    if not torch.equal(
        torch.sort(gathered_rows).values, torch.arange(rewards.numel(), device=rows.device)
    ):
        raise RuntimeError(
            "kl_patches.trl: the loss micro-batches of a deferred generation batch do not hold "
            "every row once; TRL's batching differs from the tested version"
        )
    penalty = torch.empty_like(rewards)
    penalty[gathered_rows] = trainer.accelerator.gather(penalty_local).to(rewards.dtype)
    advantages, scale = grpo_advantages(
        rewards, penalty, _num_generations(trainer), trainer.scale_rewards
    )
    _relog_advantages(trainer, advantages)
    advantages, scale = advantages[rows], scale[rows]
    if config.reward_shape == "reward_to_go":
        to_go = reward_penalty(policy, ref, mask, config)
        # token t: reward minus the KL of tokens t..T, same (sequence-level) baseline and scale
        advantages = advantages.unsqueeze(1) + (
            penalty_local.unsqueeze(1) - to_go
        ) / scale.unsqueeze(1)
    return advantages


def _resolve_deferred(trainer: Any, inputs: dict[str, Any], policy: torch.Tensor) -> None:
    """Loss step of a deferred batch: penalty from the loss forward's detached log-probs."""
    rows, rewards_local = inputs.pop(DEFER_ROWS), inputs.pop(DEFER_REWARDS)
    trainer._kl_unresolved = max(0, trainer._kl_unresolved - 1)
    gathered_rows = trainer.accelerator.gather(rows)
    rewards = torch.full(
        (gathered_rows.numel(),), float("nan"), dtype=rewards_local.dtype, device=rows.device
    )
    rewards[gathered_rows] = trainer.accelerator.gather(rewards_local)
    inputs["advantages"] = _reward_advantages(
        trainer,
        trainer._kl_config,
        policy,
        inputs["ref_per_token_logps"],
        _loss_mask(inputs),
        rewards,
        rows,
    )


def grpo_generate_and_score(trainer: Any, call: Callable[..., Any], inputs: Any) -> Any:
    """``_generate_and_score_completions`` with the reward-side penalty before the baseline
    (or, when the penalty can come from the loss forward, the batch marked for it)."""
    _ran(trainer, "_generate_and_score_completions")
    config: KLConfig = trainer._kl_config
    out, calls, rewards_per_func = _run_capturing(trainer, call, inputs)
    if trainer._kl_full_monitor:
        _log_full_kl(trainer, calls, _loss_mask(out))
    if not config.has_reward:
        return out
    if rewards_per_func is None:
        raise RuntimeError(_NOT_TAKEN.format(hook="_calculate_rewards", where="scoring"))
    ref = out.get("ref_per_token_logps")
    if ref is None:
        raise RuntimeError(
            "kl_patches.trl: GRPOTrainer returned no reference log-probs (is trainer.beta 0?); "
            "the KL config needs them"
        )
    mask = _loss_mask(out)
    rewards = summed_rewards(rewards_per_func, trainer.reward_weights)
    local = _local_slice(trainer, out["completion_ids"].size(0))
    rows = torch.arange(rewards.numel(), device=rewards.device)[local]
    if offpolicy.active(config):  # the reward side runs at loss time (offpolicy.py)
        penalty = trainer.accelerator.gather(offpolicy.no_penalty(mask))
        advantages, _ = grpo_advantages(
            rewards, penalty, _num_generations(trainer), trainer.scale_rewards
        )
        _relog_advantages(trainer, advantages)
        out["advantages"] = advantages[local]
        return out
    policy = out.get("old_per_token_logps")
    source = "old_per_token_logps"
    reason = None if policy is not None else _no_defer_reason(trainer)
    if policy is None and reason is None:
        _warn_advantages(trainer, "deferred")
        out[DEFER_ROWS] = rows
        out[DEFER_REWARDS] = rewards[local]
        trainer._kl_unresolved += 1
        trainer._kl_sources["loss_forward"] += 1
        return out
    if policy is None:
        policy = _sampler_logps(trainer, out, mask)
        source = "sampling_per_token_logps"
    if policy is None:
        _say_once(
            trainer,
            f"extra:{reason}",
            f"one extra no-grad policy forward per generation batch for the reward penalty: "
            f"{reason}",
        )
        policy = _policy_logps_again(trainer, calls)
        source = "extra_forward"
    trainer._kl_sources[source] += 1
    out["advantages"] = _reward_advantages(trainer, config, policy, ref, mask, rewards, rows)
    return out


def grpo_loss_scaling(
    trainer: Any, config: KLConfig, inputs: dict[str, Any]
) -> tuple[torch.Tensor | None, float]:
    """``(normalizer, divisor)`` so the KL term is scaled like TRL's own loss.

    A token mean under dapo/cispo/vespo divides by TRL's window-wide token count (which already
    includes gradient accumulation); everything else divides by the accumulation steps, as TRL
    does for its other loss types. Eval: no accumulation.
    """
    train = _mode(trainer) == "train"
    steps = trainer.current_gradient_accumulation_steps if train else 1
    if config.loss_aggregation == "token_mean" and trainer.loss_type in (
        GLOBAL_TOKEN_COUNT_LOSS_TYPES
    ):
        normalizer = inputs["num_items_in_batch"].clamp(min=1.0) / trainer.accelerator.num_processes
        if train and DETECTED.get("grpo.dapo_normaliser_ga_scaled", True):  # TRL >= 1.9.1
            normalizer = normalizer * steps / trainer.args.steps_per_generation
        return normalizer, 1.0
    return None, float(steps)


def grpo_compute_loss(trainer: Any, call: Callable[..., Any], model: Any, inputs: Any) -> Any:
    """``_compute_loss`` without TRL's k3 term, plus the KL config's loss-side term."""
    _ran(trainer, "_compute_loss")
    config: KLConfig = trainer._kl_config
    trainer._kl_loss_calls += 1
    deferred = DEFER_ROWS in inputs
    saved_beta = trainer.beta
    if needs_reference(config):
        trainer.beta = 0.0
    trainer._kl_capture = [] if config.has_loss or offpolicy.active(config) else None
    trainer._kl_defer = inputs if deferred else None
    trainer._kl_phase = "loss"
    try:
        loss = call(model, inputs)
    finally:
        trainer.beta = saved_beta
        calls = trainer._kl_capture
        trainer._kl_capture = None
        trainer._kl_phase = None
        unresolved = trainer._kl_defer is not None
        trainer._kl_defer = None
    if deferred and unresolved:
        raise RuntimeError(
            _NOT_TAKEN.format(
                hook="_get_per_token_logps_and_entropies", where="the loss (deferred penalty)"
            )
        )
    if not config.has_loss and not offpolicy.active(config):
        return loss
    if not calls:
        raise RuntimeError(
            _NOT_TAKEN.format(hook="_get_per_token_logps_and_entropies", where="the loss")
        )
    logp = calls[0][2]
    mask = _loss_mask(inputs)
    if offpolicy.active(config):
        loss = loss + offpolicy.grpo_term(trainer, config, logp, inputs, mask)
    if not config.has_loss:
        return loss
    ref = inputs["ref_per_token_logps"]
    old = inputs.get("old_per_token_logps")
    old = logp.detach() if old is None else old
    normalizer, divisor = grpo_loss_scaling(trainer, config, inputs)
    term = loss_term(logp, ref, mask, config, old_logp=old, normalizer=normalizer)
    if divisor != 1.0:
        term = term / divisor
    values = kl_terms(logp.detach(), ref, mask, config)
    _log(trainer, metrics.LOSS_KL, _global_token_mean(trainer, values, mask))
    _log(trainer, metrics.ACTIVE, 1.0)
    return loss + term


# ---------------------------------------------------------------------------------- RLOO hooks
def rloo_generate_and_score(trainer: Any, call: Callable[..., Any], inputs: Any) -> Any:
    """``_generate_and_score_completions`` with the KL config's penalty replacing TRL's k1."""
    _ran(trainer, "_generate_and_score_completions")
    config: KLConfig = trainer._kl_config
    out, calls, rewards_per_func = _run_capturing(trainer, call, inputs)
    if not needs_reference(config):
        return out
    if rewards_per_func is None or len(calls) != 2:
        raise RuntimeError(
            _NOT_TAKEN.format(hook="_calculate_rewards/_get_per_token_logps", where="scoring")
        )
    policy, ref = calls[0][2], calls[1][2]
    mask = out["completion_mask"]
    if trainer._kl_full_monitor:
        _log_full_kl(trainer, calls, mask)
    if config.has_loss or offpolicy.active(config):
        out[REF_KEY] = ref
        out[OLD_KEY] = policy
    penalty_local = (
        _log_reward_side(trainer, config, policy, ref, mask)
        if config.has_reward and not offpolicy.active(config)
        else torch.zeros(mask.size(0), device=mask.device)
    )
    penalty = trainer.accelerator.gather(penalty_local)
    num_generations = (
        trainer.num_generations if _mode(trainer) == "train" else trainer.num_generations_eval
    )
    rewards = summed_rewards(rewards_per_func, trainer.reward_weights)
    advantages = rloo_advantages(
        rewards,
        penalty,
        num_generations,
        trainer.reward_clip_range,
        trainer.normalize_advantages,
    )
    _relog_advantages(trainer, advantages)
    out["advantages"] = advantages[_local_slice(trainer, out["completion_ids"].size(0))]
    return out


def rloo_compute_loss(trainer: Any, call: Callable[..., Any], model: Any, inputs: Any) -> Any:
    """``_compute_loss`` plus the KL config's loss-side term (RLOO's loss is per sequence and
    not pre-scaled for gradient accumulation, so neither is the term)."""
    _ran(trainer, "_compute_loss")
    config: KLConfig = trainer._kl_config
    trainer._kl_loss_calls += 1
    trainer._kl_capture = [] if config.has_loss or offpolicy.active(config) else None
    trainer._kl_phase = "loss"
    try:
        loss = call(model, inputs)
    finally:
        calls = trainer._kl_capture
        trainer._kl_capture = None
        trainer._kl_phase = None
    if not config.has_loss and not offpolicy.active(config):
        return loss
    if not calls:
        raise RuntimeError(
            _NOT_TAKEN.format(hook="_get_per_token_logps_and_entropies", where="the loss")
        )
    logp = calls[0][2]
    mask = inputs["completion_mask"]
    ref, old = inputs[REF_KEY], inputs[OLD_KEY]
    if offpolicy.active(config):
        loss = loss + offpolicy.rloo_term(trainer, config, logp, ref, old, mask)
    if not config.has_loss:
        return loss
    term = loss_term(logp, ref, mask, config, old_logp=old)
    values = kl_terms(logp.detach(), ref, mask, config)
    _log(trainer, metrics.LOSS_KL, _global_token_mean(trainer, values, mask))
    _log(trainer, metrics.ACTIVE, 1.0)
    return loss + term
