"""Evaluation of the paper-shaped miniature: sampled accuracy (Pass@1) and the KL to the reference.

Like the paper (Pass@1 at temperature 1, top-p 1), completions are *sampled* from the policy at
temperature 1 with the full softmax; a completion is correct when it is exactly the answer
followed by the end token (:func:`~.paper_task.is_correct`). Accuracy is reported per group
(in domain, held-out lengths, held-out operations) with its standard error over the samples.

The KL to the reference is the sequence-level reverse KL, KL(pi || pi_ref) =
E_{y ~ pi}[sum_t log pi(y_t|s_t) - log pi_ref(y_t|s_t)], on the in-domain prompts. Two unbiased
estimates come from the same samples: ``k1`` (the sampled log-ratio summed over the completion)
and ``full`` (the exact per-position KL over the whole vocabulary summed along the sampled
prefixes, E[sum_t KL(pi(.|s_t) || pi_ref(.|s_t))], which has the same expectation and a smaller
variance). Each comes with its standard error over the samples.

Positions are counted from each sequence's first real token (``position_ids`` from the mask),
as in pre-training; the reference and the policy see the same inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from .paper_task import answer_of


@dataclass(frozen=True)
class Estimate:
    """A mean over samples and its standard error (sample std / sqrt(n))."""

    mean: float
    """The mean."""
    se: float
    """Its standard error (0 for a single sample)."""
    n: int
    """The number of samples."""

    @classmethod
    def of(cls, values: torch.Tensor) -> Estimate:
        """Mean and standard error of a 1-D tensor."""
        v = values.double().flatten()
        n = int(v.numel())
        if n == 0:
            return cls(math.nan, math.nan, 0)
        se = float(v.std(unbiased=True) / math.sqrt(n)) if n > 1 else 0.0
        return cls(float(v.mean()), se, n)

    def as_dict(self) -> dict[str, float]:
        """``{"mean": ..., "se": ..., "n": ...}``."""
        return {"mean": self.mean, "se": self.se, "n": self.n}


@dataclass
class Samples:
    """Completions sampled for a list of prompts, with everything scored on them."""

    prompts: list[str]
    """The prompts (one entry per sample)."""
    completions: list[str]
    """Decoded completions, without the end token."""
    ended: torch.Tensor
    """[N] bool: the completion ended with the end token within the length limit."""
    correct: torch.Tensor
    """[N] bool: exactly the answer, then the end token."""
    k1: torch.Tensor
    """[N] sampled sequence log-ratio sum_t log pi - log pi_ref."""
    full_kl: torch.Tensor
    """[N] sum over the completion's positions of the full-vocabulary KL(pi || pi_ref)."""
    entropy: torch.Tensor
    """[N] mean per-token entropy of pi along the completion."""


def _positions(mask: torch.Tensor) -> torch.Tensor:
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


def _log_softmax(model: Any, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    out = model(input_ids=ids, attention_mask=mask, position_ids=_positions(mask))
    return torch.log_softmax(out.logits.float(), dim=-1)


@torch.no_grad()
def sample(
    model: Any,
    ref_model: Any,
    tokenizer: Any,
    prompts: list[str],
    max_new: int,
    generator: torch.Generator,
    batch_size: int = 512,
) -> Samples:
    """Sample one completion per prompt from ``model`` at temperature 1 and score it.

    ``generator`` (a CPU generator) makes the draw reproducible. The reference is only scored.
    """
    parts = [
        _sample_batch(model, ref_model, tokenizer, prompts[i : i + batch_size], max_new, generator)
        for i in range(0, len(prompts), batch_size)
    ]
    return Samples(
        prompts=[p for s in parts for p in s.prompts],
        completions=[c for s in parts for c in s.completions],
        ended=torch.cat([s.ended for s in parts]),
        correct=torch.cat([s.correct for s in parts]),
        k1=torch.cat([s.k1 for s in parts]),
        full_kl=torch.cat([s.full_kl for s in parts]),
        entropy=torch.cat([s.entropy for s in parts]),
    )


def _sample_batch(
    model: Any,
    ref_model: Any,
    tokenizer: Any,
    prompts: list[str],
    max_new: int,
    generator: torch.Generator,
) -> Samples:
    device = next(model.parameters()).device
    enc = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left")
    ids, mask = enc["input_ids"].to(device), enc["attention_mask"].to(device)
    n, plen = ids.shape
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    done = torch.zeros(n, dtype=torch.bool, device=device)
    for _ in range(max_new):
        logits = model(input_ids=ids, attention_mask=mask, position_ids=_positions(mask)).logits
        probs = torch.softmax(logits[:, -1].float(), dim=-1)
        nxt = torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(-1).to(device)
        nxt = torch.where(done, torch.full_like(nxt, pad), nxt)
        ids = torch.cat([ids, nxt[:, None]], dim=1)
        mask = torch.cat([mask, (~done).long()[:, None]], dim=1)
        done = done | (nxt == eos)
        if bool(done.all()):
            break
    comp = ids[:, plen:]
    cmask = mask[:, plen:].bool()  # real completion tokens, the end token included
    lp = _log_softmax(model, ids, mask)[:, plen - 1 : -1]
    lq = _log_softmax(ref_model, ids, mask)[:, plen - 1 : -1]
    tok_lp = lp.gather(-1, comp[..., None]).squeeze(-1)
    tok_lq = lq.gather(-1, comp[..., None]).squeeze(-1)
    m = cmask.float()
    k1 = ((tok_lp - tok_lq) * m).sum(-1)
    full = ((lp.exp() * (lp - lq)).sum(-1) * m).sum(-1)
    ent = (-(lp.exp() * lp).sum(-1) * m).sum(-1) / m.sum(-1).clamp(min=1)
    ended = ((comp == eos) & cmask).any(-1)
    texts = []
    for row, keep in zip(comp.tolist(), cmask.tolist(), strict=True):
        toks = [t for t, k in zip(row, keep, strict=True) if k and t != eos]
        texts.append(tokenizer.decode(toks))
    correct = torch.tensor(
        [e and t == answer_of(p) for p, t, e in zip(prompts, texts, ended.tolist(), strict=True)]
    )
    return Samples(
        prompts=list(prompts),
        completions=texts,
        ended=ended.cpu(),
        correct=correct,
        k1=k1.cpu(),
        full_kl=full.cpu(),
        entropy=ent.cpu(),
    )


def evaluate(
    model: Any,
    ref_model: Any,
    tokenizer: Any,
    groups: dict[str, list[str]],
    max_new: int,
    seed: int,
    repeats: int = 1,
) -> dict[str, Any]:
    """Accuracy per group, and KL/entropy on the ``id`` group, each with its standard error.

    Every prompt is sampled ``repeats`` times. Returns ``{"acc": {group: Estimate},
    "kl_k1": Estimate, "kl_full": Estimate, "entropy": Estimate}`` (the KLs on ``id``).
    """
    was_training = model.training
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    out: dict[str, Any] = {"acc": {}}
    try:
        for group, prompts in groups.items():
            s = sample(model, ref_model, tokenizer, prompts * repeats, max_new, gen)
            out["acc"][group] = Estimate.of(s.correct.float())
            if group == "id":
                out["kl_k1"] = Estimate.of(s.k1)
                out["kl_full"] = Estimate.of(s.full_kl)
                out["entropy"] = Estimate.of(s.entropy)
    finally:
        model.train(was_training)
    return out
