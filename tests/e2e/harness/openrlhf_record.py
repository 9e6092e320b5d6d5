"""Test-only recording hook for OpenRLHF runs: what the running Ray actors actually used.

Installed in every process by ``startup/sitecustomize.py`` when ``KL_E2E_RECORD`` names a
directory. Each record is a ``torch.save`` file ``<kind>-<pid>-<n>.pt``:

* ``advantage`` (the PPOTrainer actor, around OpenRLHF's own
  ``RemoteExperienceMaker.compute_advantages_and_returns``, inside kl-patches' wrapper when the
  reward side is patched): per experience the task scores, the rewards and per-token KL that
  OpenRLHF's shaping received, the sampling and reference log-probs, the action mask, the
  prompt indices and the advantages and returns it produced, the KL coefficient;
* ``loss`` (each PolicyModelActor, around OpenRLHF's own ``ActorPPOTrainer.training_step``): the
  experience's masks and log-probs, the policy's log-probs of the training forward (a forward
  hook on the actor), the KL coefficient passed, and the status OpenRLHF returned (its ``kl``
  metric is the aggregated KL loss);
* ``forward`` (every process, OpenRLHF's ``Actor.forward`` without gradients): the sequences and
  the log-probs returned, with the pid (the reference model's process is the one that scores but
  never trains); matched to the experiences by their token ids;
* ``experience`` (the PPOTrainer actor, after ``make_experience``): each experience's sequences,
  the order the ``advantage`` record's experiences come in;
* ``process``: once per process that records, the config kl-patches applied there and which
  OpenRLHF symbols it patched (``delivery.status()``).
"""

from __future__ import annotations

import functools
import itertools
import os
from pathlib import Path
from typing import Any

ENV = "KL_E2E_RECORD"
_COUNTER = itertools.count()
_REPORTED: set[str] = set()


def _cpu(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {k: _cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cpu(v) for v in value)
    return value


def _save(kind: str, payload: dict[str, Any]) -> None:
    import torch

    folder = Path(os.environ[ENV])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{kind}-{os.getpid()}-{next(_COUNTER)}.pt"
    torch.save(payload, path.with_suffix(".tmp"))
    path.with_suffix(".tmp").rename(path)


def _report(role: str) -> None:
    if role in _REPORTED:
        return
    _REPORTED.add(role)
    import sys

    patch = sys.modules.get("kl_patches.adapters.openrlhf.patch")
    config = patch.active_config() if patch is not None else None
    from kl_patches.adapters.openrlhf import delivery

    _save(
        "process",
        {
            "role": role,
            "pid": os.getpid(),
            "config": None if config is None else config.to_dict(),
            "status": delivery.status(),
        },
    )


FIELDS = ("scores", "rewards", "kl", "action_log_probs", "base_action_log_probs", "action_mask",
          "index", "sequences")  # fmt: skip


def _wrap_advantages(cls: Any) -> None:
    original = cls.compute_advantages_and_returns
    if getattr(original, "kl_e2e", False):
        return

    @functools.wraps(original)
    def compute_advantages_and_returns(self: Any, experiences: list[Any]) -> Any:
        _report("experience_maker")
        before = [{f: _cpu(getattr(e, f, None)) for f in FIELDS} for e in experiences]
        out = original(self, experiences)
        for record, exp in zip(before, out, strict=True):
            record["advantages"] = _cpu(exp.advantages)
            record["returns"] = _cpu(exp.returns)
        _save(
            "advantage",
            {
                "experiences": before,
                "kl_coef": float(self.kl_ctl.value),
                "n_samples": int(self.strategy.args.rollout.n_samples_per_prompt),
                "estimator": str(self.strategy.args.algo.advantage.estimator),
            },
        )
        return out

    compute_advantages_and_returns.kl_e2e = True  # type: ignore[attr-defined]
    cls.compute_advantages_and_returns = compute_advantages_and_returns


def _wrap_training_step(cls: Any) -> None:
    original = cls.training_step
    if getattr(original, "kl_e2e", False):
        return

    @functools.wraps(original)
    def training_step(
        self: Any, experience: Any, kl_ctl: float, step: int, *a: Any, **k: Any
    ) -> Any:
        _report("actor")
        captured: list[Any] = []

        def hook(module: Any, args: Any, output: Any) -> None:
            captured.append(output[0] if isinstance(output, tuple) else output)

        handle = self.actor.register_forward_hook(hook)
        try:
            status = original(self, experience, kl_ctl, step, *a, **k)
        finally:
            handle.remove()
        record = {f: _cpu(getattr(experience, f, None)) for f in FIELDS}
        record.update(
            kl_ctl=float(kl_ctl),
            log_prob=_cpu(captured[0]) if captured else None,
            loss_batch_info=_cpu(a[0] if a else k.get("loss_batch_info")),
            metrics=_cpu(status.get("metrics", {})) if isinstance(status, dict) else None,
        )
        _save("loss", record)
        return status

    training_step.kl_e2e = True  # type: ignore[attr-defined]
    cls.training_step = training_step


def _wrap_model_forward(cls: Any) -> None:
    """OpenRLHF's ``Actor.forward`` (a plain class: the ``@ray.remote`` model actors hold one),
    recorded when it runs without gradients: the reference model's and the policy's scoring
    forwards."""
    original = cls.forward
    if getattr(original, "kl_e2e", False):
        return

    @functools.wraps(original)
    def forward(self: Any, sequences: Any, *args: Any, **kwargs: Any) -> Any:
        import torch

        out = original(self, sequences, *args, **kwargs)
        if not torch.is_grad_enabled():
            log_probs = out[0] if isinstance(out, tuple) else out
            _save("forward", {"pid": os.getpid(), "sequences": _cpu(sequences),
                              "log_probs": _cpu(log_probs)})  # fmt: skip
        return out

    forward.kl_e2e = True  # type: ignore[attr-defined]
    cls.forward = forward


def _wrap_make_experience(cls: Any) -> None:
    original = cls.make_experience
    if getattr(original, "kl_e2e", False):
        return

    @functools.wraps(original)
    def make_experience(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(self, *args, **kwargs)
        _save("experience", {"sequences": [_cpu(e.sequences) for e in out]})
        return out

    make_experience.kl_e2e = True  # type: ignore[attr-defined]
    cls.make_experience = make_experience


def install() -> None:
    """Wrap the recording points when their modules are imported (only with ``KL_E2E_RECORD``)."""
    if not os.environ.get(ENV):
        return
    from kl_patches.adapters.delivery import after_import

    def reward() -> None:
        from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker

        _wrap_advantages(RemoteExperienceMaker)
        _wrap_make_experience(RemoteExperienceMaker)

    def model() -> None:
        from openrlhf.models.actor import Actor

        _wrap_model_forward(Actor)

    def loss() -> None:
        from openrlhf.trainer.ray.ppo_actor import ActorPPOTrainer

        _wrap_training_step(ActorPPOTrainer)

    after_import(["openrlhf.trainer.ppo_utils.experience_maker"], reward)
    after_import(["openrlhf.trainer.ray.ppo_actor"], loss)
    after_import(["openrlhf.models.actor"], model)
