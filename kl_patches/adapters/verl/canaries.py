"""Behaviour canaries for the verl adapter: verl's own KL functions on tiny synthetic batches.

The translation (:mod:`.translate`) and the reader (:mod:`.read`) rely on what verl computes for
each estimator name, and the patch (:mod:`.patch`) on how ``apply_kl_penalty`` writes the reward
and on the GRPO estimator it re-uses. Each :class:`~kl_patches.adapters.support.Canary` calls
the real function (the original when verl is patched) and compares it with the formula the
adapter writes down:

* ``core_algos.kl_penalty(name)`` is the estimator :data:`~.versions.VERL_ESTIMATORS` says, with
  the clamps of :data:`~.versions.NATIVE_CLAMPS`, and raises ``NotImplementedError`` on the
  marker name (which is how a process without the patch fails loudly);
* ``core_algos.agg_loss`` aggregates as :data:`~.versions.AGG_FROM_VERL` says;
* ``apply_kl_penalty`` writes ``token_level_rewards = scores - beta * kl_penalty * mask`` (the
  mask is ``response_mask`` from 0.5.0, the response part of ``attention_mask`` in 0.4.x: the
  synthetic batch has both, equal);
* ``core_algos.compute_grpo_outcome_advantage`` without the std is the sequence score minus its
  group mean, on every valid token (the ``kl_outside_std`` path adds it);
* for a config whose loss side needs the patch, ``workers.utils.losses.ppo_loss`` adds no KL when
  ``use_kl_loss`` is off and returns verl's ``Metric`` objects (the loss wrapper's interface).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import torch

from kl_patches.adapters.patching import is_replacement
from kl_patches.adapters.support import Canary

from .versions import AGG_FROM_VERL, MARKER, NATIVE_CLAMPS, VERL_ESTIMATORS

TOL = 1e-6
"""Absolute tolerance of every comparison (float32 on a handful of numbers)."""


def original(module: str, name: str) -> Callable[..., Any]:
    """verl's own ``module.name`` (the registry's original when kl-patches replaced it)."""
    function = getattr(importlib.import_module(module), name)
    while is_replacement(function):
        function = function.__wrapped__
    return function  # type: ignore[no-any-return]


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a.float(), b.float(), atol=TOL, rtol=0.0))


def _fmt(x: torch.Tensor) -> str:
    return "[" + ", ".join(f"{v:.6g}" for v in x.detach().flatten().tolist()) + "]"


B, T = 4, 3
MASK = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1]], dtype=torch.float32)
UID = ("a", "a", "b", "b")


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    """(logp, ref): log-ratios from -0.8 to 0.8, plus one of 25 that hits both k3 clamps."""
    gen = torch.Generator().manual_seed(4321)
    logp = -0.2 - torch.rand(B, T, generator=gen)
    ref = logp + 0.8 * (2 * torch.rand(B, T, generator=gen) - 1)
    ref[3, 2] = logp[3, 2] + 25.0
    return logp, ref


def estimator(name: str, logp: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """The value the adapter assumes for verl estimator ``name`` (with verl's clamps)."""
    kind = VERL_ESTIMATORS[name]
    delta = logp - ref
    if kind == "k1":
        return delta
    if kind == "k2":
        return 0.5 * delta.square()
    ratio_clamp, value_clamp = NATIVE_CLAMPS["k3"]
    assert ratio_clamp is not None and value_clamp is not None
    r = (-delta).clamp(-ratio_clamp, ratio_clamp)
    return (r.exp() - r - 1).clamp(-value_clamp, value_clamp)


def _probe_kl_penalty() -> str | None:
    kl_penalty = original("verl.trainer.ppo.core_algos", "kl_penalty")
    logp, ref = _batch()
    for name in VERL_ESTIMATORS:
        got = kl_penalty(logp, ref, kl_penalty=name)
        want = estimator(name, logp, ref)
        if not _close(got, want):
            return f"{_fmt(got)} for {name!r}, not the {VERL_ESTIMATORS[name]} values {_fmt(want)}"
    try:
        kl_penalty(logp, ref, kl_penalty=MARKER)
    except NotImplementedError:
        return None
    return f"a value for the name {MARKER!r} instead of raising NotImplementedError"


def _probe_agg_loss() -> str | None:
    agg_loss = original("verl.trainer.ppo.core_algos", "agg_loss")
    logp, ref = _batch()
    values = logp - ref
    sums = (values * MASK).sum(-1)
    want = {
        "token_mean": sums.sum() / MASK.sum(),
        "sum": sums.mean(),
        "seq_mean_token_mean": (sums / MASK.sum(-1)).mean(),
    }
    for mode in ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean"):
        got = agg_loss(loss_mat=values, loss_mask=MASK, loss_agg_mode=mode)
        expected = want[AGG_FROM_VERL[mode]]
        if not _close(got, expected):
            kind = AGG_FROM_VERL[mode]
            return f"{float(got):.6g} for {mode!r}, not the {kind} {float(expected):.6g}"
    return None


def _dataproto(logp: torch.Tensor, ref: torch.Tensor, scores: torch.Tensor) -> Any:
    import numpy as np
    from verl.protocol import DataProto

    prompt = torch.ones(B, 2)
    tensors = {
        "responses": torch.ones(B, T, dtype=torch.long),  # verl 0.4.x slices masks to its width
        "attention_mask": torch.cat([prompt, MASK], dim=1).long(),
        "response_mask": MASK.clone(),
        "token_level_scores": scores,
        "old_log_probs": logp.clone(),
        "ref_log_prob": ref.clone(),
    }
    return DataProto.from_dict(tensors=tensors, non_tensors={"uid": np.array(UID, dtype=object)})


def _probe_apply_kl_penalty() -> str | None:
    from verl.trainer.ppo import core_algos

    apply_kl_penalty = original("verl.trainer.ppo.ray_trainer", "apply_kl_penalty")
    logp, ref = _batch()
    scores = torch.zeros(B, T)
    scores[torch.arange(B), MASK.sum(-1).long() - 1] = torch.tensor([1.0, 0.0, 0.5, 2.0])
    beta = 0.1
    for name in ("kl", "low_var_kl"):
        data, _ = apply_kl_penalty(
            _dataproto(logp, ref, scores.clone()), core_algos.FixedKLController(beta), name
        )
        got = data.batch["token_level_rewards"]
        want = scores - beta * estimator(name, logp, ref) * MASK
        if not _close(got, want):
            return f"token_level_rewards {_fmt(got)} for {name!r}, not {_fmt(want)}"
    return None


def _probe_grpo_outcome() -> str | None:
    import numpy as np

    grpo = original("verl.trainer.ppo.core_algos", "compute_grpo_outcome_advantage")
    rewards = torch.zeros(B, T)
    score = torch.tensor([1.0, 0.0, 0.5, 2.0])
    rewards[torch.arange(B), MASK.sum(-1).long() - 1] = score
    got, _ = grpo(
        token_level_rewards=rewards,
        response_mask=MASK.clone(),
        index=np.array(UID, dtype=object),
        norm_adv_by_std_in_grpo=False,
    )
    centred = score - torch.tensor([0.5, 0.5, 1.25, 1.25])
    want = centred[:, None] * MASK
    if not _close(got, want):
        return (
            f"advantages {_fmt(got)} without the std, not the score minus its group mean "
            f"{_fmt(want)}"
        )
    return None


def _probe_ppo_loss() -> str | None:
    from verl.utils import tensordict_utils as tu
    from verl.workers.config import ActorConfig

    ppo_loss = original("verl.workers.utils.losses", "ppo_loss")
    logp, ref = _batch()
    mask = MASK.bool()
    prompt = 2
    pieces = []
    for i in range(B):
        n = int(mask[i].sum())
        pieces += [torch.zeros(prompt - 1), logp[i, :n], torch.zeros(1)]
    tensors = {
        "prompts": torch.ones(B, prompt, dtype=torch.long),
        "responses": torch.ones(B, T, dtype=torch.long),
        "attention_mask": torch.cat([torch.ones(B, prompt, dtype=torch.long), mask.long()], 1),
        "response_mask": MASK.clone(),
        "old_log_probs": logp.clone(),
        "ref_log_prob": ref.clone(),
        "advantages": torch.tensor([0.5, -1.0, 0.25, 1.5])[:, None] * MASK,
    }
    non_tensors = {"dp_size": 1, "batch_num_tokens": int(MASK.sum()), "global_batch_size": B}
    fields = {"strategy": "fsdp", "ppo_mini_batch_size": B, "ppo_micro_batch_size_per_gpu": B}
    results = {}
    for use_kl in (False, True):
        config = ActorConfig(
            **fields, rollout_n=1, use_kl_loss=use_kl, kl_loss_type="k1", kl_loss_coef=0.5
        )
        data = tu.get_tensordict(dict(tensors), dict(non_tensors))
        results[use_kl] = ppo_loss(config, {"log_probs": torch.cat(pieces)}, data)
    (plain, metrics), (with_kl, _) = results[False], results[True]
    if not hasattr(metrics.get("actor/pg_loss"), "aggregation"):
        return (
            f"metrics['actor/pg_loss'] = {metrics.get('actor/pg_loss')!r}, not a verl Metric "
            "(verl < 0.8 computes the KL loss in its legacy actor; the loss patch needs 0.8+)"
        )
    # on-policy (old = current): the ratio is 1, so vanilla PPO is -A per token, token-mean
    policy = -(tensors["advantages"] * MASK).sum() / MASK.sum()
    if not _close(plain, policy):
        return (
            f"a loss of {float(plain):.6g} with use_kl_loss off, where the policy term alone is "
            f"{float(policy):.6g}"
        )
    want = 0.5 * ((logp - ref) * MASK).sum() / MASK.sum()
    if not _close(with_kl - plain, want):
        return (
            f"a KL loss of {float(with_kl - plain):.6g}, not 0.5 * token-mean k1 {float(want):.6g}"
        )
    return None


def canaries(loss_patch: bool = False) -> tuple[Canary, ...]:
    """The verl canaries; ``loss_patch`` adds ``ppo_loss`` (a config whose loss side needs the
    patch)."""
    found: tuple[Canary, ...] = (
        Canary(
            "verl.trainer.ppo.core_algos.kl_penalty",
            "kl/k1 = log-ratio, mse/k2 = half its square, low_var_kl/k3 = Schulman's k3 with the "
            f"log-ratio clamped to 20 and the value to 10, NotImplementedError for {MARKER!r}",
            _probe_kl_penalty,
        ),
        Canary(
            "verl.trainer.ppo.core_algos.agg_loss",
            "token-mean over all valid tokens, seq-mean-token-sum and seq-mean-token-mean over "
            "sequences",
            _probe_agg_loss,
        ),
        Canary(
            "verl.trainer.ppo.ray_trainer.apply_kl_penalty",
            "token_level_rewards = token_level_scores - kl_coef * kl_penalty * response_mask",
            _probe_apply_kl_penalty,
        ),
        Canary(
            "verl.trainer.ppo.core_algos.compute_grpo_outcome_advantage",
            "without the std: the sequence score minus its group mean, on every valid token",
            _probe_grpo_outcome,
        ),
    )
    if loss_patch:
        found += (
            Canary(
                "verl.workers.utils.losses.ppo_loss",
                "no KL term when use_kl_loss is off, kl_loss_coef * agg_loss(kl_penalty) when "
                "on, metrics as verl Metric objects",
                _probe_ppo_loss,
            ),
        )
    return found
