"""Inputs in the exact form verl 0.9.1's functions take them, built from plain tensors.

``Rollout`` holds the per-token log-probs of a small batch of responses with ragged lengths
(every row has at least one valid token), grouped by prompt (``uid``), with a task score on the
last valid token. ``to_dataproto`` gives what ``apply_kl_penalty`` / ``compute_advantage`` read
in the TaskRunner; ``ppo_loss_inputs`` gives ``(model_output, data)`` as an actor worker hands
them to ``ppo_loss`` (padded TensorDict, log-probs flattened over prompt + response).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class Rollout:
    """A batch of B responses, T tokens at most, in groups of ``group`` per prompt."""

    logp: torch.Tensor
    """Current policy log-probs ``[B, T]`` (a leaf that requires grad)."""
    old_logp: torch.Tensor
    """Behaviour policy log-probs ``[B, T]``."""
    ref_logp: torch.Tensor
    """Reference policy log-probs ``[B, T]``."""
    mask: torch.Tensor
    """Valid response tokens, bool ``[B, T]``."""
    score: torch.Tensor
    """Task reward per response ``[B]``."""
    uid: np.ndarray
    """Prompt id per response (object array), as verl's ``non_tensor_batch['uid']``."""

    @property
    def token_scores(self) -> torch.Tensor:
        """The score on each row's last valid token, as verl's reward manager writes it."""
        return last_token(self.score, self.mask)


def last_token(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``[B]`` -> ``[B, T]`` with each value on the row's last valid token."""
    lengths = mask.long().sum(-1)
    out = torch.zeros(mask.shape, dtype=values.dtype)
    out[torch.arange(mask.shape[0]), lengths - 1] = values
    return out


def make_rollout(
    batch: int = 8, length: int = 7, group: int = 4, seed: int = 0, spread: float = 1.0
) -> Rollout:
    """Random log-probs (float64 would hide float32 issues: verl runs float32) and ragged masks."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, length + 1, (batch,), generator=g)
    lengths[0] = length
    mask = torch.arange(length)[None, :] < lengths[:, None]
    old = -torch.rand(batch, length, generator=g) * 2 - 0.05
    ref = old + spread * torch.randn(batch, length, generator=g)
    logp = (old + 0.3 * torch.randn(batch, length, generator=g)).requires_grad_()
    score = torch.randn(batch, generator=g)
    uid = np.array([f"p{i // group}" for i in range(batch)], dtype=object)
    return Rollout(logp, old, ref, mask, score, uid)


def to_dataproto(r: Rollout, values: torch.Tensor | None = None):  # type: ignore[no-untyped-def]
    """verl DataProto with the fields the TaskRunner has before ``apply_kl_penalty``."""
    from verl.protocol import DataProto

    rows, length = r.mask.shape
    tensors = {
        # verl 0.4.x's apply_kl_penalty slices its mask from these (response_mask from 0.5.0)
        "responses": torch.ones(rows, length, dtype=torch.long),
        "attention_mask": torch.cat([torch.ones(rows, 2), r.mask.float()], dim=1).long(),
        "response_mask": r.mask.float(),
        "token_level_scores": r.token_scores,
        "old_log_probs": r.old_logp,
        "ref_log_prob": r.ref_logp,
        "values": torch.zeros_like(r.old_logp) if values is None else values,
    }
    return DataProto.from_dict(tensors=tensors, non_tensors={"uid": r.uid.copy()})


def ppo_loss_inputs(
    r: Rollout,
    advantages: torch.Tensor,
    rows: slice = slice(None),
    dp_size: int = 1,
    global_counts: bool = True,
):  # type: ignore[no-untyped-def]
    """``(model_output, data)`` for ``verl.workers.utils.losses.ppo_loss`` on ``rows``.

    ``global_counts``: pass the whole batch's token and sequence counts (what verl's engine
    does for micro-batches); otherwise ``None``, so verl normalises by the micro-batch.
    """
    from verl.utils import tensordict_utils as tu

    logp, mask = r.logp[rows], r.mask[rows]
    b, t = mask.shape
    prompt = 2
    pieces = []
    for i in range(b):
        n = int(mask[i].sum())
        pieces += [torch.zeros(prompt - 1), logp[i, :n], torch.zeros(1)]
    flat = torch.cat(pieces)
    attention = torch.cat([torch.ones(b, prompt, dtype=torch.long), mask.long()], dim=1)
    tensors = {
        "prompts": torch.ones(b, prompt, dtype=torch.long),
        "responses": torch.ones(b, t, dtype=torch.long),
        "attention_mask": attention,
        "response_mask": mask.float(),
        "old_log_probs": r.old_logp[rows],
        "ref_log_prob": r.ref_logp[rows],
        "advantages": advantages[rows],
    }
    non_tensors = {
        "dp_size": dp_size,
        "batch_num_tokens": int(r.mask.sum()) if global_counts else None,
        "global_batch_size": r.mask.shape[0] if global_counts else None,
    }
    return {"log_probs": flat}, tu.get_tensordict(tensors, non_tensors)


def actor_config(**overrides):  # type: ignore[no-untyped-def]
    """verl's ``ActorConfig`` as the worker builds it (FSDP strategy, fields from overrides)."""
    from verl.workers.config import ActorConfig

    fields = {
        "strategy": "fsdp",
        "ppo_mini_batch_size": 8,
        "ppo_micro_batch_size_per_gpu": 8,
        "rollout_n": 1,
    }
    fields.update(overrides)
    return ActorConfig(**fields)
