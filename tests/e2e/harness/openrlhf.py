"""An OpenRLHF run on the tiny task: ``train_ppo_ray`` flags and the environment of a CPU run.

:func:`flags` gives OpenRLHF's own flags for a 3-global-step GRPO-style run (``group_norm``)
of the tiny model: one vLLM stand-in engine, actor and reference on one logical GPU each,
DeepSpeed ZeRO-0, eager attention, gloo weight sync, the reward file as a remote reward
function; :func:`environment` puts the stand-ins and the CPU shims in every process. The user's
launch line is then ``python -m kl_patches.openrlhf <flags> --kl ...``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .tiny import TinyTask

REPO = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
STUBS = (
    HERE / "openrlhf_stubs",  # the working vllm stand-in
    REPO / "tests" / "adapters" / "openrlhf" / "openrlhf_support" / "stubs",  # flash_attn
)
RESOURCES = {"CPU": 16, "GPU": 4}
"""Logical resources of the local Ray cluster (every OpenRLHF actor asks for a GPU)."""


def flags(task: TinyTask, folder: Path, *, steps: int = 3) -> list[str]:
    """OpenRLHF flags for ``steps`` global steps (4 prompts x 2 samples each) on ``task``."""
    return [
        "--actor.model_name_or_path", str(task.model),
        "--reward.remote_url", str(task.reward),
        "--data.prompt_dataset", str(task.jsonl),
        "--data.input_key", "prompt",
        "--data.label_key", "label",
        "--data.apply_chat_template",
        "--data.max_samples", str(4 * steps),
        "--data.max_len", "64",
        "--rollout.max_new_tokens", "8",
        "--rollout.batch_size", "4",
        "--rollout.n_samples_per_prompt", "2",
        "--rollout.micro_batch_size", "8",
        "--train.batch_size", "8",
        "--train.micro_batch_size", "8",
        "--train.max_epochs", "1",
        "--train.num_episodes", "1",
        "--train.seed", "0",
        "--actor.num_nodes", "1",
        "--actor.num_gpus_per_node", "1",
        "--ref.num_nodes", "1",
        "--ref.num_gpus_per_node", "1",
        "--vllm.num_engines", "1",
        "--vllm.tensor_parallel_size", "1",
        "--vllm.sync_backend", "gloo",
        "--ds.zero_stage", "0",
        "--ds.attn_implementation", "eager",
        "--actor.adam.lr", "1e-3",
        "--algo.advantage.estimator", "group_norm",
        "--ckpt.path", str(folder / "ckpt"),
        "--ckpt.output_dir", str(folder / "out"),
        "--ckpt.save_steps", "-1",
        "--logger.logging_steps", "1",
        "--eval.steps", "-1",
    ]  # fmt: skip


def environment(record: Path | None = None) -> dict[str, str]:
    """The stand-ins, the CPU shims (``startup/sitecustomize.py``) and logical GPUs for Ray."""
    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    extra = [str(HERE / "startup"), *(str(s) for s in STUBS), str(REPO)]
    env["PYTHONPATH"] = os.pathsep.join([*extra, *paths])
    env.update(
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
        RAY_DEDUP_LOGS="0",
        RAY_OVERRIDE_RESOURCES=json.dumps(RESOURCES),
        KL_E2E_LIBRARY="openrlhf",
    )
    if record is not None:
        env["KL_E2E_RECORD"] = str(record)
    return env
