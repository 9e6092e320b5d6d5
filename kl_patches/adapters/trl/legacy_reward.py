"""TRL 0.14-0.26, GRPO with the KL in the reward: the penalty as one more reward function.

These releases have no hook between the rewards and the group baseline (:data:`.versions.
WHY_NOT_HOOKED`), but TRL sums the outputs of its reward functions (weight 1 for ours) *before*
its own group mean and std. So the adapter adds one reward function, ``kl_patches_penalty``,
whose value for each completion is ``-penalty`` from :func:`kl_patches.core.reward_penalty`: the
KL lands in the reward before the baseline and TRL's own code normalises it.

Where its inputs come from, in the same scoring pass:

* the reference log-probs TRL has just computed: captured from TRL's log-prob method on the
  reference model (``_get_per_token_logps`` 0.15-0.19, ``_get_per_token_logps_and_entropies``
  0.20-0.26) or, in 0.14 (a local function inside ``compute_loss``), from a forward hook on the
  reference model whose logits are reduced exactly as 0.14 reduces them;
* the sampling policy's log-probs: one extra no-grad forward of the policy with TRL's own
  arguments (TRL computes them itself only when ``num_iterations > 1``);
* TRL 0.18 (:data:`.versions.REFERENCE_IN_LOSS`) runs the reference forward only in the loss,
  after the rewards. There TRL's own policy scoring forward (grpo_trainer.py:1140-1145 in
  0.18.2, run when ``num_iterations > 1``) is forced by reading ``num_iterations`` as 2 during
  ``_generate_and_score_completions`` only, its arguments and output are captured, and the
  penalty runs the reference forward with the same arguments. Where TRL would not have run that
  forward, its ``old_per_token_logps`` is put back to None afterwards, so TRL's loss is its own;
* the completion mask: the attention mask of the completion part (0.15-0.26), or 0.14's own
  first-EOS rule.

TRL's own k3 loss term is switched off: ``beta`` stays non-zero (so TRL builds and runs the
reference model), and is set to 0 while TRL's ``compute_loss`` runs. After every training step
a callback checks that the penalty ran once per scoring pass and the loss hook ran: a patch that
did not take fails loudly.

Deviations from the 1.x hooks: only ``reward_shape="sequence"`` without importance weighting
(TRL's advantage is one number per sequence here), no loss side in the same config, a
separate reference model (no PEFT adapter), and no ``use_liger_loss`` (Liger's fused loss takes
``beta`` when the trainer is built: :func:`.legacy.check`). TRL's logged ``reward`` includes
the penalty, which it also logs as ``rewards/kl_patches_penalty``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch

from kl_patches.adapters import metrics
from kl_patches.config import KLConfig
from kl_patches.core import reward_penalty, sequence_kl

from .versions import installed_version, reference_in_loss

PENALTY_NAME = "kl_patches_penalty"
"""The reward function's name (TRL logs ``rewards/<name>``)."""

LOGPS_METHODS = ("_get_per_token_logps_and_entropies", "_get_per_token_logps")
"""TRL's log-prob method, newest name first (0.20-0.26, 0.15-0.19); 0.14 has none."""

_NOT_TAKEN = (
    "kl_patches.trl: {what} did not run during {where}, so the KL in the reward would silently "
    "be missing; TRL's internals differ from the tested release"
)


def refusal(config: KLConfig) -> str | None:
    """Why ``config`` cannot run as a reward function here (None: it can)."""
    if config.placement != "reward":
        return f"placement={config.placement!r} (only 'reward' runs as a reward function)"
    if config.reward_shape != "sequence":
        return "reward_shape='reward_to_go' (TRL's advantage is one number per sequence here)"
    if config.importance_weighting != "none":
        return f"importance_weighting={config.importance_weighting!r}"
    return None


def prepare(args: Any, reward_funcs: Any) -> Any:
    """``reward_funcs`` with the penalty function added (and ``args.reward_weights`` extended by
    1.0 when set); the function finds its trainer through :func:`bind`."""
    funcs = list(reward_funcs) if isinstance(reward_funcs, list | tuple) else [reward_funcs]
    if getattr(args, "reward_weights", None) is not None:
        args.reward_weights = [*args.reward_weights, 1.0]
    holder: list[Any] = []

    def kl_patches_penalty(*_: Any, **__: Any) -> list[float]:
        trainer = holder[0]() if holder else None
        if trainer is None:
            raise RuntimeError("kl_patches.trl: the KL penalty reward function has no trainer")
        return _penalty(trainer)

    kl_patches_penalty.kl_patches_holder = holder  # type: ignore[attr-defined]
    return [*funcs, kl_patches_penalty]


def bind(trainer: Any, config: KLConfig) -> None:
    """After TRL's ``__init__``: connect the penalty function, capture the reference
    log-probs, switch TRL's k3 term off in its loss, and add the check after each step."""
    if trainer.ref_model is None:
        raise ValueError(
            "kl_patches.trl: KL in the reward on TRL < 0.27 needs a separate reference model "
            "(no PEFT adapter): the adapter cannot tell its reference forward from the policy's"
        )
    (func,) = [f for f in trainer.reward_funcs if getattr(f, "__name__", "") == PENALTY_NAME]
    func.kl_patches_holder[:] = [weakref.ref(trainer)]
    trainer._kl_config = config
    trainer._kl_native = True
    trainer._kl_ref_calls = []
    trainer._kl_penalty_calls = 0
    trainer._kl_loss_calls = 0
    method = next((n for n in LOGPS_METHODS if hasattr(trainer, n)), None)
    trainer._kl_logps_method = method
    if method is None:  # 0.14: a local function on the reference model's forward
        trainer.ref_model.register_forward_hook(_forward_hook(trainer), with_kwargs=True)
    else:
        setattr(trainer, method, _capturing(trainer, getattr(trainer, method)))
    trainer._kl_policy_calls = []
    trainer._kl_scoring = False
    trainer._kl_policy_first = bool(reference_in_loss(installed_version()))
    if trainer._kl_policy_first:
        trainer._generate_and_score_completions = _policy_forced(
            trainer, trainer._generate_and_score_completions
        )
    trainer.compute_loss = _without_k3(trainer, trainer.compute_loss)
    trainer.add_callback(_step_check(trainer))


def _capturing(trainer: Any, call: Callable[..., Any]) -> Callable[..., Any]:
    def logps(model: Any, *args: Any, **kwargs: Any) -> Any:
        out = call(model, *args, **kwargs)
        values = out[0] if isinstance(out, tuple) else out
        if model is trainer.ref_model:
            trainer._kl_ref_calls.append((args, kwargs, values))
        elif trainer._kl_scoring:  # TRL's policy scoring forward (0.18: _policy_forced)
            trainer._kl_policy_calls.append((args, kwargs, values))
        return out

    return logps


def _policy_forced(trainer: Any, call: Callable[..., Any]) -> Callable[..., Any]:
    """TRL 0.18's ``_generate_and_score_completions`` with its policy scoring forward run
    (``num_iterations`` read as 2 during the call: grpo_trainer.py:1140 in 0.18.2, its only
    read there) and captured; afterwards ``old_per_token_logps`` is None again where TRL's own
    condition leaves it None (its ``_compute_loss`` then uses the detached log-probs of the
    loss's forward, grpo_trainer.py:1363), so the batch TRL's loss sees is its own."""

    def generate_and_score(*args: Any, **kwargs: Any) -> Any:
        own = trainer.num_iterations > 1 or (
            trainer.args.steps_per_generation > trainer.args.gradient_accumulation_steps
        )
        saved = trainer.num_iterations
        trainer._kl_policy_calls.clear()
        trainer._kl_scoring = True
        if not own:
            trainer.num_iterations = 2
        try:
            out = call(*args, **kwargs)
        finally:
            trainer.num_iterations = saved
            trainer._kl_scoring = False
        if out.get("old_per_token_logps") is None:
            raise RuntimeError(
                _NOT_TAKEN.format(what="TRL's policy scoring forward", where="scoring")
            )
        if trainer._kl_policy_calls:  # captured, but no penalty read it
            trainer._kl_policy_calls.clear()
            raise RuntimeError(
                _NOT_TAKEN.format(what="the KL penalty reward function", where="scoring")
            )
        if not own:
            out["old_per_token_logps"] = None
        return out

    return generate_and_score


def _forward_hook(trainer: Any) -> Callable[..., Any]:
    ref = weakref.ref(trainer)

    def hook(module: Any, args: Any, kwargs: Any, output: Any) -> None:
        owner = ref()
        if owner is not None:
            ids = kwargs.get("input_ids", args[0] if args else None)
            owner._kl_ref_calls.append(((ids,), dict(kwargs), output.logits))

    return hook


def _without_k3(trainer: Any, call: Callable[..., Any]) -> Callable[..., Any]:
    def compute_loss(*args: Any, **kwargs: Any) -> Any:
        trainer._kl_loss_calls += 1
        saved = trainer.beta
        trainer.beta = 0.0
        try:
            return call(*args, **kwargs)
        finally:
            trainer.beta = saved

    return compute_loss


def _logps_014(logits: torch.Tensor, ids: torch.Tensor, keep: int) -> torch.Tensor:
    """TRL 0.14's ``get_per_token_logps`` on the logits of ``model(ids, num_logits_to_keep=keep
    + 1)`` (its row-by-row log-softmax and gather, without a temperature)."""
    logits = logits[:, :-1, :]
    rows = [
        torch.gather(row.log_softmax(dim=-1), dim=1, index=tokens.unsqueeze(1)).squeeze(1)
        for row, tokens in zip(logits, ids[:, -keep:], strict=True)
    ]
    return torch.stack(rows)


def _mask_014(completion_ids: torch.Tensor, eos: int) -> torch.Tensor:
    """TRL 0.14's completion mask: every token up to and including the first EOS."""
    is_eos = completion_ids == eos
    end = torch.full((is_eos.size(0),), is_eos.size(1), dtype=torch.long, device=is_eos.device)
    end[is_eos.any(dim=1)] = is_eos.int().argmax(dim=1)[is_eos.any(dim=1)]
    positions = torch.arange(is_eos.size(1), device=is_eos.device).expand(is_eos.size(0), -1)
    return (positions <= end.unsqueeze(1)).int()


def _inputs(trainer: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(policy, ref, mask)`` of the completions TRL is scoring (local rows)."""
    if trainer._kl_policy_first:
        return _inputs_policy_first(trainer)
    if not trainer._kl_ref_calls:
        raise RuntimeError(_NOT_TAKEN.format(what="TRL's reference forward", where="scoring"))
    args, kwargs, ref = trainer._kl_ref_calls.pop()
    trainer._kl_ref_calls.clear()
    method = trainer._kl_logps_method
    with torch.no_grad():
        if method is None:
            ids = args[0]
            keep = int(kwargs["num_logits_to_keep"]) - 1  # TRL asks for one logit more
            logits = trainer.model(ids, num_logits_to_keep=keep + 1).logits
            policy = _logps_014(logits, ids, keep)
            ref = _logps_014(ref, ids, keep)
            mask = _mask_014(ids[:, -keep:], trainer.processing_class.eos_token_id)
        else:
            out = getattr(trainer, method)(trainer.model, *args, **kwargs)
            policy = out[0] if isinstance(out, tuple) else out
            attention, keep = args[1], args[2]
            mask = attention[:, -keep:]
    return policy, ref, mask


def _inputs_policy_first(trainer: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """TRL 0.18: the policy's log-probs captured on TRL's scoring forward, the reference's
    from TRL's log-prob method on the reference model with the same arguments."""
    if not trainer._kl_policy_calls:
        raise RuntimeError(_NOT_TAKEN.format(what="TRL's policy scoring forward", where="scoring"))
    args, kwargs, policy = trainer._kl_policy_calls.pop()
    trainer._kl_policy_calls.clear()
    with torch.no_grad():
        out = getattr(trainer, trainer._kl_logps_method)(trainer.ref_model, *args, **kwargs)
    trainer._kl_ref_calls.clear()
    ref = out[0] if isinstance(out, tuple) else out
    attention, keep = args[1], args[2]
    return policy, ref, attention[:, -keep:]


def _penalty(trainer: Any) -> list[float]:
    config: KLConfig = trainer._kl_config
    policy, ref, mask = _inputs(trainer)
    penalty = reward_penalty(policy, ref, mask, config)
    estimate = sequence_kl(policy, ref, mask, config)
    trainer._kl_penalty_calls += 1
    gather = trainer.accelerator.gather
    _log(trainer, metrics.REWARD_SEQUENCE_KL, float(gather(estimate.float()).mean()))
    _log(trainer, metrics.REWARD_PENALTY, float(gather(penalty.float()).mean()))
    _log(trainer, metrics.ACTIVE, 1.0)
    return [-float(v) for v in penalty]


def _log(trainer: Any, name: str, value: float) -> None:
    """TRL's metrics: one dict per mode from 0.16, one flat dict before."""
    store = trainer._metrics
    per_mode = store.get("train") if isinstance(store, dict) else None
    if isinstance(per_mode, dict):
        store = store["train" if trainer.model.training else "eval"]
    store[name].append(value)


def _step_check(trainer: Any) -> Any:
    from transformers import TrainerCallback

    ref = weakref.ref(trainer)

    class PenaltyCheck(TrainerCallback):  # type: ignore[misc]
        """After each training step: the penalty and the loss hook ran."""

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            owner = ref()
            if owner is None:
                return
            for what, count in (
                ("the KL penalty reward function", owner._kl_penalty_calls),
                ("the loss hook (compute_loss)", owner._kl_loss_calls),
            ):
                if count == 0:
                    raise RuntimeError(_NOT_TAKEN.format(what=what, where="a training step"))

    return PenaltyCheck()
