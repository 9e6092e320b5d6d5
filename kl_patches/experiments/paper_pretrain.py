"""Supervised pre-training of the reference model of the paper-shaped miniature.

A random Qwen2 (:func:`~.paper_task.build_model`) is trained by cross-entropy on the answer
tokens (and the end token) of the pre-training mixture of :class:`~.paper_task.Split`, with
AdamW, a linear warm-up and a cosine decay. It is stopped early on purpose (the default number
of steps): the reference is good but imperfect in domain and transfers only partly to the
held-out lengths, so RL has something to improve and the KL to the reference matters.

The trained model and its tokenizer are saved to a directory (TRL reloads the reference from
``config._name_or_path``); :func:`pretrained` caches that directory under a name derived from
the settings, so a sweep pre-trains once.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from .paper_eval import evaluate
from .paper_task import (
    PretrainSettings,
    Split,
    answer_of,
    build_model,
    build_tokenizer,
    eval_prompts,
)


def _batch(tokenizer: Any, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded ``input_ids``, ``attention_mask`` and ``labels`` (-100 outside answers)."""
    rows, labels = [], []
    for p in prompts:
        pi = tokenizer.encode(p)
        ai = [*tokenizer.encode(answer_of(p)), tokenizer.eos_token_id]
        rows.append(pi + ai)
        labels.append([-100] * len(pi) + ai)
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    lab = torch.full((len(rows), width), -100, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (r, la) in enumerate(zip(rows, labels, strict=True)):
        ids[i, : len(r)] = torch.tensor(r)
        lab[i, : len(r)] = torch.tensor(la)
        mask[i, : len(r)] = 1
    return ids, mask, lab


def lr_at(step: int, settings: PretrainSettings) -> float:
    """The learning rate of ``step`` (0-based): warm-up, then cosine decay to 10% of the peak."""
    warm = max(1, settings.steps // 20)
    if step < warm:
        return settings.lr * (step + 1) / warm
    frac = (step - warm) / max(1, settings.steps - warm)
    return settings.lr * (0.1 + 0.45 * (1 + math.cos(math.pi * frac)))


def pretrain(
    split: Split, settings: PretrainSettings, device: str = "cpu", log: Any = None
) -> tuple[Any, Any]:
    """Train the reference from scratch; returns ``(model, tokenizer)`` (model in eval mode)."""
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, settings.size, settings.seed).to(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=0.01)
    rng = random.Random(settings.seed)
    for step in range(settings.steps):
        prompts = [split.pretrain_prompt(rng) for _ in range(settings.batch_size)]
        ids, mask, lab = (t.to(device) for t in _batch(tokenizer, prompts))
        for group in opt.param_groups:
            group["lr"] = lr_at(step, settings)
        loss = model(input_ids=ids, attention_mask=mask, labels=lab).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if log is not None and (step % 250 == 0 or step == settings.steps - 1):
            log(f"pre-training step {step + 1}/{settings.steps}: loss {loss.item():.4f}")
        if settings.target_accuracy is not None and (step + 1) % CHECK_EVERY == 0:
            acc = _domain_accuracy(model, tokenizer, split, seed=step)
            if log is not None:
                log(f"pre-training step {step + 1}: in-domain accuracy {acc:.3f}")
            if acc >= settings.target_accuracy:
                break
            model.train()
    model.eval()
    return model, tokenizer


CHECK_EVERY = 50
"""Steps between the accuracy checks of ``PretrainSettings.target_accuracy``."""


def _domain_accuracy(model: Any, tokenizer: Any, split: Split, seed: int) -> float:
    """Sampled in-domain accuracy on 256 prompts drawn apart from the evaluation set."""
    prompts = {"id": eval_prompts(split, 256, seed=99)["id"]}
    res = evaluate(model, model, tokenizer, prompts, split.max_answer + 1, seed=seed)
    return float(res["acc"]["id"].mean)


def compact(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` without its None-valued fields (an option left unset keeps old keys valid)."""
    return {k: v for k, v in d.items() if v is not None}


def settings_key(split: Split, settings: PretrainSettings) -> str:
    """A short hash of everything that determines the pre-trained reference."""
    text = json.dumps(
        {"split": asdict(split), "settings": compact(asdict(settings))}, sort_keys=True
    )
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def pretrained(
    split: Split,
    settings: PretrainSettings,
    cache: Path,
    device: str = "cpu",
    log: Any = None,
) -> Path:
    """The directory of the pre-trained reference for these settings, training it if absent."""
    path = Path(cache) / f"reference-{settings_key(split, settings)}"
    if (path / "config.json").exists():
        return path
    model, tokenizer = pretrain(split, settings, device=device, log=log)
    tmp = path.with_name(path.name + ".tmp")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    tmp.rename(path)
    return path
