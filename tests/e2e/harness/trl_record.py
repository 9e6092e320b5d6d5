"""Test-only recording hook for TRL runs: what each rank's GRPO trainer actually used.

Installed at interpreter start (``startup/sitecustomize.py``) when ``KL_E2E_RECORD`` names a
directory. Per training step one ``torch.save`` file ``loss-<rank>-<n>.pt`` holds:

* the task rewards the run's reward function returned on this rank since the last step
  (:func:`record_rewards`, with each completion's prompt and token ids);
* the inputs of ``compute_loss`` after it ran (a penalty kl-patches deferred to the loss step is
  in their advantages by then): advantages, completion ids and mask, reference and old
  log-probs, prompt ids, the token count TRL normalises by;
* the policy's output of the loss forward (a forward hook on the model: the log-probs, or the
  logits), and the loss ``compute_loss`` returned;
* the KL config kl-patches applied in the process (None without the patch) and TRL's beta.

``compute_loss`` is the one method wrapped: kl-patches hooks TRL's ``_compute_loss`` and the
other methods below it and refuses a trainer whose hooked methods are not TRL's own.
"""

from __future__ import annotations

import functools
import itertools
import os
from pathlib import Path
from typing import Any

ENV = "KL_E2E_RECORD"
_COUNTER = itertools.count()
_STATE: dict[str, Any] = {}


def _cpu(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    return value


def _save(record: dict[str, Any]) -> None:
    import torch

    folder = Path(os.environ[ENV])
    folder.mkdir(parents=True, exist_ok=True)
    rank = os.environ.get("RANK", "0")
    path = folder / f"loss-{rank}-{next(_COUNTER)}.pt"
    torch.save(record, path.with_suffix(".tmp"))
    path.with_suffix(".tmp").rename(path)


def record_rewards(
    prompts: list[Any], completion_ids: list[list[int]], rewards: list[float]
) -> None:
    """Called by the run's reward function: the task rewards of each completion (in the order
    TRL scored them on this rank)."""
    if os.environ.get(ENV):
        _STATE.setdefault("rewards", []).extend(
            (str(p), tuple(int(t) for t in c), float(r))
            for p, c, r in zip(prompts, completion_ids, rewards, strict=True)
        )


def _wrap(cls: Any) -> None:
    """Wrap ``compute_loss``, which kl-patches does not hook (its hooks run inside it)."""
    compute_loss = cls.compute_loss
    if getattr(compute_loss, "kl_e2e", False):
        return

    @functools.wraps(compute_loss)
    def wrapper(self: Any, model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        import sys

        import torch

        if not model.training:
            return compute_loss(self, model, inputs, *args, **kwargs)
        captured: list[Any] = []

        def hook(module: Any, args: Any, output: Any) -> None:
            if torch.is_grad_enabled():
                logps = getattr(output, "log_probs", None)
                captured.append(output.logits if logps is None else logps)

        handle = model.register_forward_hook(hook)
        try:
            out = compute_loss(self, model, inputs, *args, **kwargs)
        finally:
            handle.remove()
        loss = out[0] if isinstance(out, tuple) else out
        keep = inputs["completion_ids"].size(1)
        patch = sys.modules.get("kl_patches.adapters.trl.patch")
        config = getattr(self, "_kl_config", None)
        keys = ("advantages", "completion_mask", "completion_ids", "ref_per_token_logps",
                "old_per_token_logps", "prompt_ids", "num_items_in_batch")  # fmt: skip
        _save(
            {
                "step": int(self.state.global_step),
                "rank": int(os.environ.get("RANK", "0")),
                "world": int(os.environ.get("WORLD_SIZE", "1")),
                "config": None if config is None else config.to_dict(),
                "applied": None if patch is None else str(patch.active_config()),
                "beta": float(self.beta),
                "num_generations": int(self.num_generations),
                "loss_type": str(self.loss_type),
                "scale_rewards": str(self.scale_rewards),
                "loss": _cpu(loss),
                "log_prob_output": [_cpu(c[:, -keep:]) for c in captured],
                "inputs": {k: _cpu(inputs.get(k)) for k in keys},
                "rewards": list(_STATE.pop("rewards", [])),
            }
        )
        return out

    wrapper.kl_e2e = True  # type: ignore[attr-defined]
    cls.compute_loss = wrapper


def install() -> None:
    """Wrap TRL's GRPOTrainer when it is imported (only with ``KL_E2E_RECORD``)."""
    if not os.environ.get(ENV):
        return
    from kl_patches.adapters.delivery import after_import

    def wrap() -> None:
        from trl.trainer.grpo_trainer import GRPOTrainer

        _wrap(GRPOTrainer)

    after_import(["trl.trainer.grpo_trainer"], wrap)
