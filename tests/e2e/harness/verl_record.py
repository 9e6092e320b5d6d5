"""Test-only recording hook for verl runs: what the running processes actually used, per step.

Active when ``KL_E2E_RECORD`` names a directory (the test sets it; Ray carries it to every
process). Each record is a ``torch.save`` file named ``<kind>-<pid>-<n>.pt``:

* ``batch``: in the TaskRunner, the batch the actor update receives (both trainers'
  ``_update_actor``): scores, token rewards, old and reference log-probs, response mask, group
  ids, advantages;
* ``loss``: in the actor worker, each training call of the loss function the worker was given
  (whatever ``ppo_loss`` the patch left there): the policy's log-probs, the batch fields and
  global counts it read, the loss it returned and its metrics;
* ``process``: once per process that records, the KL config kl-patches applied there (None
  when the patch is not active) and the role.

Wrapping the trainer methods and the worker's ``set_loss_fn`` touches no symbol that
kl-patches patches, so both stack without knowing of each other.
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


def _dir() -> Path | None:
    text = os.environ.get(ENV, "")
    return Path(text) if text else None


def _save(kind: str, payload: dict[str, Any]) -> None:
    import torch

    folder = _dir()
    if folder is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{kind}-{os.getpid()}-{next(_COUNTER)}.pt"
    tmp = path.with_suffix(".tmp")
    torch.save(payload, tmp)
    tmp.rename(path)


def _report(role: str) -> None:
    """Record once per process which KL config kl-patches applied here."""
    if role in _REPORTED:
        return
    _REPORTED.add(role)
    import sys

    patch = sys.modules.get("kl_patches.adapters.verl.patch")
    spec = patch.active() if patch is not None else None
    _save(
        "process",
        {
            "role": role,
            "pid": os.getpid(),
            "spec": None if spec is None else spec.to_json(),
            "env": os.environ.get("KL_PATCHES_VERL"),
        },
    )


def _cpu(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    return value


BATCH_FIELDS = (
    "token_level_scores",
    "token_level_rewards",
    "old_log_probs",
    "ref_log_prob",
    "response_mask",
    "advantages",
)


def _record_dataproto(batch: Any, step: int) -> None:
    fields = {k: _cpu(batch.batch[k]) for k in BATCH_FIELDS if k in batch.batch.keys()}  # noqa: SIM118 (TensorDict has no `in`)
    uid = batch.non_tensor_batch.get("uid")
    _save("batch", {"step": step, **fields, "uid": None if uid is None else list(uid)})


def _record_v1(trainer: Any, batch: Any) -> None:
    import transfer_queue as tq

    wanted = ["rm_scores", "token_level_rewards", "old_log_probs", "ref_log_prob",
              "response_mask", "advantages", "uid"]  # fmt: skip
    data = None
    for fields in (wanted, [f for f in wanted if f != "token_level_rewards"]):
        try:
            data = tq.kv_batch_get(
                keys=batch.keys, partition_id=batch.partition_id, select_fields=fields
            )
            break
        except Exception:  # token_level_rewards is only written with the reward KL
            continue
    if data is None:
        raise RuntimeError("kl_e2e: could not read the batch back from TransferQueue")
    from verl.protocol import DataProto

    batch_td = DataProto(batch=data.to_padded_tensor()).batch  # as PPOTrainer._compute_advantage
    uid = batch_td.pop("uid").tolist() if "uid" in batch_td.keys() else None  # noqa: SIM118 (TensorDict has no `in`)
    out = {k: _cpu(batch_td[k]) for k in batch_td.keys()}  # noqa: SIM118 (TensorDict has no `in`)
    out["token_level_scores"] = out.pop("rm_scores")
    out["uid"] = None if uid is None else [str(u) for u in uid]
    _save("batch", {"step": int(trainer.global_steps), **out})


def _wrap_update_actor(cls: Any, v1: bool) -> None:
    original = cls._update_actor
    if getattr(original, "kl_e2e", False):
        return

    @functools.wraps(original)
    def _update_actor(self: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
        _report("task_runner")
        if v1:
            _record_v1(self, batch)
        else:
            _record_dataproto(batch, int(self.global_steps))
        return original(self, batch, *args, **kwargs)

    _update_actor.kl_e2e = True  # type: ignore[attr-defined]
    cls._update_actor = _update_actor


def _metric(value: Any) -> Any:
    """A verl ``Metric`` (its values) or a plain number, as plain CPU data."""
    values = getattr(value, "values", None)
    if isinstance(values, list):
        return [_cpu(v) for v in values]
    return _cpu(value)


class _RecordingLoss:
    """The worker's loss function, recorded on each training call."""

    def __init__(self, loss_fn: Any) -> None:
        self.loss_fn = loss_fn

    def __call__(self, model_output: Any, data: Any, dp_group: Any = None) -> Any:
        import torch
        from verl.workers.utils.padding import no_padding_2_padding

        loss, metrics = self.loss_fn(model_output=model_output, data=data, dp_group=dp_group)
        if torch.is_grad_enabled():
            _report("actor")
            fields = [f for f in ("response_mask", "old_log_probs", "advantages", "ref_log_prob")
                      if f in data.keys()]  # fmt: skip  # noqa: SIM118
            padded = data.select(*fields).to_padded_tensor()
            record = {k: _cpu(padded[k]) for k in fields}
            record["log_prob"] = _cpu(no_padding_2_padding(model_output["log_probs"], data))
            for key in ("dp_size", "batch_num_tokens", "global_batch_size"):
                value = data[key] if key in data.keys() else None  # noqa: SIM118 (TensorDict has no `in`)
                record[key] = value.item() if isinstance(value, torch.Tensor) else value
            record["loss"] = _cpu(loss)
            record["metrics"] = {k: _metric(v) for k, v in metrics.items()}
            config = getattr(self.loss_fn, "keywords", {}).get("config")
            if config is not None:
                record["config"] = {
                    k: getattr(config, k, None)
                    for k in ("use_kl_loss", "kl_loss_type", "kl_loss_coef", "loss_agg_mode")
                }
            _save("loss", record)
        return loss, metrics


def _wrap_set_loss_fn() -> None:
    from verl.workers.engine_workers import TrainingWorker

    original = TrainingWorker.set_loss_fn
    if getattr(original, "kl_e2e", False):
        return

    @functools.wraps(original)
    def set_loss_fn(self: Any, loss_fn: Any) -> Any:
        return original(self, _RecordingLoss(loss_fn))

    set_loss_fn.kl_e2e = True  # type: ignore[attr-defined]
    TrainingWorker.set_loss_fn = set_loss_fn


def install() -> None:
    """Wrap the recording points when their modules are imported (only with ``KL_E2E_RECORD``)."""
    if _dir() is None:
        return
    from kl_patches.adapters.delivery import after_import

    def v1() -> None:
        from verl.trainer.ppo.v1.trainer_base import PPOTrainer

        _wrap_update_actor(PPOTrainer, v1=True)

    def legacy() -> None:
        from verl.trainer.ppo.ray_trainer import RayPPOTrainer

        _wrap_update_actor(RayPPOTrainer, v1=False)

    after_import(["verl.trainer.ppo.v1.trainer_base"], v1)
    after_import(["verl.trainer.ppo.ray_trainer"], legacy)
    after_import(["verl.workers.engine_workers"], _wrap_set_loss_fn)
