"""A verl run on the tiny task: the Hydra overrides and environment a CPU run needs.

:func:`overrides` gives verl's own config for a 3-step GRPO run of the tiny model on one CPU
process (FSDP2, float32, eager attention, the ``hfcpu`` rollout, console logger, no
validation or checkpoints); :func:`environment` the variables that load
:mod:`.verl_cpu` in every verl process. The user's launch line is then
``kl-patches verl --kl ... -- <overrides>``.
"""

from __future__ import annotations

import os
from pathlib import Path

from .tiny import TinyTask

EXTERNAL_MODULE = "tests.e2e.harness.verl_cpu"
"""Loaded by verl in every process (``VERL_USE_EXTERNAL_MODULES``)."""
FP32 = "{param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}"
REPO = Path(__file__).resolve().parents[3]


def overrides(task: TinyTask, *, steps: int = 3, trainer: str = "v1") -> list[str]:
    """verl overrides for a ``steps``-step GRPO run on ``task`` (``trainer``: v1 or legacy)."""
    if trainer not in ("v1", "legacy"):
        raise ValueError(f"trainer must be 'v1' or 'legacy', got {trainer!r}")
    arr = "actor_rollout_ref"
    out = [
        "algorithm.adv_estimator=grpo",
        f"data.train_files={task.parquet}",
        f"data.val_files={task.parquet}",
        "data.train_batch_size=4",
        "data.max_prompt_length=32",
        "data.max_response_length=8",
        "data.dataloader_num_workers=0",
        f"{arr}.model.path={task.model}",
        f"{arr}.model.use_remove_padding=False",
        f"{arr}.model.enable_gradient_checkpointing=False",
        f"+{arr}.model.override_config.attn_implementation=eager",
        f"{arr}.actor.strategy=fsdp2",
        f"{arr}.ref.strategy=fsdp2",
        f"{arr}.actor.use_torch_compile=False",
        f"{arr}.actor.fsdp_config.dtype=float32",
        f"{arr}.ref.fsdp_config.dtype=float32",
        f"+{arr}.actor.fsdp_config.mixed_precision={FP32}",  # else FSDP computes in bf16
        f"+{arr}.ref.fsdp_config.mixed_precision={FP32}",
        f"{arr}.actor.optim.lr=1e-3",
        f"{arr}.actor.ppo_mini_batch_size=4",
        f"{arr}.actor.ppo_micro_batch_size_per_gpu=8",
        f"{arr}.rollout.log_prob_micro_batch_size_per_gpu=8",
        f"{arr}.ref.log_prob_micro_batch_size_per_gpu=8",
        f"{arr}.rollout.name=hfcpu",
        f"{arr}.rollout.n=2",
        f"{arr}.rollout.tensor_model_parallel_size=1",
        f"{arr}.rollout.agent.num_workers=1",
        "reward.num_workers=1",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",  # one process, not 8
        f"reward.custom_reward_function.path={task.reward}",
        "reward.custom_reward_function.name=compute_score",
        "trainer.device=cpu",
        "trainer.n_gpus_per_node=1",
        "trainer.nnodes=1",
        "trainer.logger=[console]",
        "trainer.val_before_train=False",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
        "trainer.total_epochs=1",
        f"trainer.total_training_steps={steps}",
        "ray_kwargs.ray_init.num_cpus=16",
        "+ray_kwargs.ray_init.num_gpus=1",
    ]
    if trainer == "legacy":
        out.append("trainer.use_v1=False")
    return out


def environment(record: Path | None = None) -> dict[str, str]:
    """The process environment of a CPU run (Ray's local cluster passes it to every worker)."""
    env = dict(os.environ)
    modules = [m for m in env.get("VERL_USE_EXTERNAL_MODULES", "").split(",") if m]
    if EXTERNAL_MODULE not in modules:
        modules.insert(0, EXTERNAL_MODULE)
    env["VERL_USE_EXTERNAL_MODULES"] = ",".join(modules)
    env["VERL_PLATFORM"] = "cpu"
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(REPO) not in paths:
        paths.insert(0, str(REPO))
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        RAY_DEDUP_LOGS="0",
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
    )
    if record is not None:
        env["KL_E2E_RECORD"] = str(record)
    return env
