"""Builders shared by the TRL adapter tests and the benchmark: trainers on the tiny model,
identical policy perturbations, one scored generation batch, loss and gradients."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from kl_patches.experiments import tiny

GROUP_PROMPTS = ["abca", "bcdb"]


def make_trainer(
    model_dir: Path,
    out_dir: Path,
    kind: str,
    patched: bool,
    kl: Any = None,
    monitor: bool = False,
    **overrides: Any,
) -> Any:
    """A native TRL trainer (``patched=False``) or the kl-patches one, on the tiny model."""
    import trl

    import kl_patches.trl as klt

    config_cls = trl.GRPOConfig if kind == "GRPO" else trl.RLOOConfig
    args = config_cls(**tiny.common_args(out_dir, **overrides))
    if patched:
        cls = klt.GRPOTrainer if kind == "GRPO" else klt.RLOOTrainer
        extra = {"kl": kl, "kl_full_monitor": monitor}
    else:
        cls = trl.GRPOTrainer if kind == "GRPO" else trl.RLOOTrainer
        extra = {}
    return cls(
        str(model_dir),
        tiny.target_reward,
        args=args,
        train_dataset=tiny.dataset(),
        processing_class=tiny.build_tokenizer(),
        **extra,
    )


def perturb(model: torch.nn.Module, seed: int = 1, scale: float = 0.3) -> None:
    """Move the policy away from the reference, identically for every model given the seed."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn(p.shape, generator=gen))


def generation_inputs(num_generations: int = 4) -> list[dict[str, str]]:
    return [{"prompt": p} for p in GROUP_PROMPTS for _ in range(num_generations)]


def scored_batch(trainer: Any, seed: int = 0, num_generations: int = 4) -> dict[str, Any]:
    """One ``_generate_and_score_completions`` batch, in train mode, with a fixed seed."""
    trainer.model.train()
    torch.manual_seed(seed)
    return trainer._generate_and_score_completions(generation_inputs(num_generations))  # type: ignore[no-any-return]


def loss_and_grads(
    trainer: Any, batch: dict[str, Any], accumulation: int = 2
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """TRL's ``_compute_loss`` on ``batch`` and the gradient of every parameter."""
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = accumulation
    params = [p for p in trainer.model.parameters() if p.requires_grad]
    loss = trainer._compute_loss(trainer.model, dict(batch))
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return loss.detach(), [
        torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)
    ]


def policy_logps(model: Any, batch: dict[str, Any], temperature: float = 1.0) -> torch.Tensor:
    """Completion log-probs from a plain forward (no TRL code): the independent reference."""
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    att = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    t = batch["completion_ids"].size(1)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=att).logits[:, -t - 1 : -1] / temperature
    logp = torch.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, batch["completion_ids"].unsqueeze(-1)).squeeze(-1)


def pair(dirs: tuple[Path, Path], kind: str, kl: Any, **overrides: Any) -> tuple[Any, Any]:
    """(native, patched) trainers whose policies carry the same perturbation."""
    native = make_trainer(*dirs, kind, patched=False, **overrides)
    patched = make_trainer(*dirs, kind, patched=True, kl=kl, **overrides)
    perturb(native.model)
    perturb(patched.model)
    return native, patched


def max_diff(a: list[Any], b: list[Any]) -> float:
    """Largest absolute elementwise difference between two lists of tensors."""
    return max(float((x - y).abs().max()) for x, y in zip(a, b, strict=True))
