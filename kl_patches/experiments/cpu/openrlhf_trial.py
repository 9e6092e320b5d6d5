"""OpenRLHF's CPU trial: the ``train_ppo_ray`` flags, the environment and the log reader.

:func:`flags` gives OpenRLHF's own flags for a GRPO-style run (``group_norm``) of ``steps``
global steps of the tiny chat model (:func:`kl_patches.experiments.tiny.build`): one vLLM
stand-in engine, actor and reference on one logical GPU each, DeepSpeed ZeRO-0, eager attention,
gloo weight sync, the reward file as a remote reward function. :func:`environment` puts the
stand-ins (:mod:`.stand_ins`) and the CPU shims (:mod:`.openrlhf_shims`, through
``startup/sitecustomize.py``) in every process. The launch line is the user's:
``python -m kl_patches.openrlhf <flags> --kl ...``. :func:`logged` reads OpenRLHF's log.
"""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

from kl_patches.experiments.tiny import TinyTask

PROG = "kl_patches.openrlhf"
"""How the launcher names itself in its KL block."""
HERE = Path(__file__).resolve().parent
STAND_INS = HERE / "stand_ins"
"""On ``PYTHONPATH``: ``vllm`` and ``flash_attn`` stand-ins."""
STARTUP = HERE / "startup"
"""On ``PYTHONPATH``: the ``sitecustomize`` that installs the CPU shims in every process."""
TRIAL_VAR = "KL_PATCHES_CPU_TRIAL"
"""Set to ``openrlhf`` in the trial's processes: the start-up hook acts only then."""
BUILD_ENV = {"DS_ACCELERATOR": "cpu"}
"""Set in the process that builds the tiny model (after :func:`environment` is taken):
transformers imports DeepSpeed there, which otherwise prints its guess of the accelerator."""
RESOURCES = {"CPU": 16, "GPU": 4}
"""Logical resources of the local Ray cluster (every OpenRLHF actor asks for a GPU)."""
IMPORTS = {
    "openrlhf": "openrlhf==0.11.2 (pip install --no-deps openrlhf==0.11.2: its own requirements "
    "build flash-attn and vllm, which need CUDA)",
    "deepspeed": "deepspeed==0.19.6 (DS_BUILD_OPS=0 pip install deepspeed==0.19.6)",
    "ray": "ray",
    "transformers": "transformers",
    "datasets": "datasets",
    "peft": "peft",
    "torchdata": "torchdata",
    "pylatexenc": "pylatexenc",
    "aiohttp": "aiohttp",
    "einops": "einops",
    "PIL": "pillow",
}
"""Module a CPU run of OpenRLHF 0.11.2 imports -> what to install for it."""
INSTALL = (
    "pip install --no-deps openrlhf==0.11.2 && DS_BUILD_OPS=0 pip install deepspeed==0.19.6 && "
    "pip install transformers==5.15.0 peft ray==2.55.0 pylatexenc torchdata aiohttp pillow "
    "datasets einops (after pip install torch==2.13.0, the CPU wheel)"
)
"""The CPU install of OpenRLHF 0.11.2 (what ``nox -s openrlhf`` installs)."""
SECONDS = (50, 4)
"""Seconds of a run on two cores: start-up (Ray, the actors, DeepSpeed), then per step."""


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


def environment(startup: Path = STARTUP, base: dict[str, str] | None = None) -> dict[str, str]:
    """The stand-ins, the start-up hook (``startup``: a folder whose ``sitecustomize`` installs
    :mod:`.openrlhf_shims`), logical GPUs for Ray, offline, one thread per process."""
    env = dict(os.environ if base is None else base)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(startup), str(STAND_INS), *paths])
    env.update(
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
        RAY_DEDUP_LOGS="0",
        RAY_OVERRIDE_RESOURCES=json.dumps(RESOURCES),
    )
    env[TRIAL_VAR] = "openrlhf"
    return env


STEP = re.compile(r"Global step (\d+): (\{.*\})")
"""OpenRLHF's log line of one global step's metrics (a Python dict)."""


def logged_line(line: str) -> tuple[int, dict[str, object]] | None:
    """One ``Global step N: {...}`` line as (step, metrics); None for any other line."""
    found = STEP.search(line)
    if not found:
        return None
    try:
        values = ast.literal_eval(found.group(2))
    except (ValueError, SyntaxError):
        return None
    return int(found.group(1)), dict(values)


def logged(output: str) -> dict[int, dict[str, object]]:
    """OpenRLHF's per-step metrics in a run's output: step -> {metric: value}."""
    steps: dict[int, dict[str, object]] = {}
    for line in output.splitlines():
        found = logged_line(line)
        if found is not None:
            steps[found[0]] = found[1]
    return steps


def command(kl: list[str], task: TinyTask, folder: Path, steps: int, python: str) -> list[str]:
    """``python -m kl_patches.openrlhf <flags> <kl flags>``, OpenRLHF's outputs in ``folder``."""
    return [python, "-m", "kl_patches.openrlhf", *flags(task, folder, steps=steps), *kl]
