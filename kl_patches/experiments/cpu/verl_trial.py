"""verl's CPU trial: the Hydra overrides, the environment and the log reader of a short run.

:func:`overrides` gives verl's own config for a GRPO run of ``steps`` steps of the tiny chat
model (:func:`kl_patches.experiments.tiny.build`) on one CPU process: FSDP2, float32, eager
attention, the ``hfcpu`` rollout, the console logger, no validation or checkpoints.
:func:`environment` is the process environment that makes verl load :mod:`.verl_platform` in
every process (``VERL_USE_EXTERNAL_MODULES``). The launch line is the user's:
``kl-patches verl --kl ... -- <overrides>``. :func:`logged` reads verl's console logger.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from kl_patches.experiments.tiny import TinyTask

PROG = "kl-patches verl"
"""How the launcher names itself in its KL block."""
MODULE = "kl_patches.experiments.cpu.verl_platform"
"""Loaded by verl in every process of the trial (``VERL_USE_EXTERNAL_MODULES``)."""
BUILD_ENV: dict[str, str] = {}
"""Set in the process that builds the tiny model (nothing for verl)."""
FP32 = "{param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}"
IMPORTS = {
    "verl": "verl==0.9.1 (pip install --no-deps verl==0.9.1: its own requirements pull CUDA)",
    "ray": "ray",
    "hydra": "hydra-core",
    "omegaconf": "omegaconf",
    "tensordict": "tensordict",
    "transformers": "transformers",
    "datasets": "datasets",
    "pandas": "pandas",
    "codetiming": "codetiming",
    "torchdata": "torchdata",
    "aiohttp": "aiohttp",
    "fastapi": "fastapi",
    "uvicorn": "uvicorn",
    "peft": "peft",
    "cachetools": "cachetools",
    "PIL": "pillow",
    "transfer_queue": "TransferQueue",
}
"""Module a CPU run of verl 0.9.1 imports -> what to install for it."""
INSTALL = (
    "pip install --no-deps verl==0.9.1 && pip install 'tensordict>=0.8,<=0.10.0,!=0.9.0' "
    "'ray>=2.41' 'transformers>=5.5.3,<5.11,!=5.6.0' omegaconf hydra-core numpy codetiming "
    "datasets pandas pillow torchdata uvicorn fastapi peft cachetools 'TransferQueue>=0.1.10' "
    "aiohttp (after pip install torch==2.13.0, the CPU wheel)"
)
"""The CPU install of verl 0.9.1 (what ``nox -s verl`` installs, plus the trainer's aiohttp)."""
SECONDS = (100, 8)
"""Seconds of a run on two cores: start-up (Ray, the workers, the models), then per step."""


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


def environment(module: str = MODULE, base: dict[str, str] | None = None) -> dict[str, str]:
    """The process environment of a CPU run (Ray's local cluster passes it to every worker):
    ``module`` (which must install :mod:`.verl_platform`) first in ``VERL_USE_EXTERNAL_MODULES``,
    the ``cpu`` platform, offline, one thread per process."""
    env = dict(os.environ if base is None else base)
    modules = [m for m in env.get("VERL_USE_EXTERNAL_MODULES", "").split(",") if m]
    if module not in modules:
        modules.insert(0, module)
    env["VERL_USE_EXTERNAL_MODULES"] = ",".join(modules)
    env["VERL_PLATFORM"] = "cpu"
    env.update(
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        RAY_DEDUP_LOGS="0",
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
    )
    return env


STEP = re.compile(r"step:(\d+) - (.*)")
"""A line of verl's console logger: ``step:N - key:value - key:value ...``."""


def logged_line(line: str) -> tuple[int, dict[str, str]] | None:
    """One console-logger line as (step, {metric: value text}); None for any other line."""
    found = STEP.search(line)
    if not found:
        return None
    items = (part.split(":", 1) for part in found.group(2).split(" - ") if ":" in part)
    return int(found.group(1)), {k.strip(): v.strip() for k, v in items}


def logged(output: str) -> dict[int, dict[str, str]]:
    """verl's console logger lines of a run's output: step -> {metric: value text}."""
    steps: dict[int, dict[str, str]] = {}
    for line in output.splitlines():
        found = logged_line(line)
        if found is not None:
            steps[found[0]] = found[1]
    return steps


def command(kl: list[str], task: TinyTask, folder: Path, steps: int, python: str) -> list[str]:
    """``kl-patches verl <kl flags> -- <overrides>`` (as ``python -m kl_patches verl ...``, so
    that it is this interpreter's); verl writes nothing to keep, so ``folder`` is unused."""
    del folder
    return [python, "-m", "kl_patches", "verl", *kl, "--", *overrides(task, steps=steps)]
