"""A TRL GRPO run on the tiny task: the YAML config, the reward function and the environment.

The run is launched as users launch it: ``python -m kl_patches.trl grpo --config run.yaml
--kl ...`` (or TRL's own ``python -m trl.scripts.grpo --config run.yaml`` for the native
baseline), optionally under ``accelerate launch`` with two CPU ranks (gloo).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from kl_patches.experiments.tiny import TinyTask, prompts

REPO = Path(__file__).resolve().parents[3]
SITE = Path(__file__).resolve().parent / "startup"
REWARD = "tests.e2e.harness.trl.reward"


def reward(completions: list[Any], completion_ids: list[list[int]], prompts: list[Any],
           **_: Any) -> list[float]:  # fmt: skip
    """The task reward (share of the letter ``a``), recorded for the test when it records."""
    from .trl_record import record_rewards

    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    out = [t.count("a") / max(len(t), 1) for t in texts]
    record_rewards(prompts, completion_ids, out)
    return out


def write_config(task: TinyTask, folder: Path, *, steps: int = 3, beta: float = 0.0,
                 **extra: Any) -> Path:  # fmt: skip
    """The TRL YAML of a ``steps``-step GRPO run (``beta``: TRL's own k3-in-loss coefficient)."""
    folder.mkdir(parents=True, exist_ok=True)
    data = task.root / "trl_data"
    if not (data / "train.jsonl").exists():
        data.mkdir(exist_ok=True)
        with (data / "train.jsonl").open("w") as f:
            for text in prompts():
                f.write(json.dumps({"prompt": text}) + "\n")
    run: dict[str, Any] = {
        "model_name_or_path": str(task.model),
        "dataset_name": str(data),
        "reward_funcs": [REWARD],
        "output_dir": str(folder / "out"),
        "per_device_train_batch_size": 8,
        "num_generations": 4,
        "max_completion_length": 8,
        "learning_rate": 1e-2,
        "beta": beta,
        "max_steps": steps,
        "logging_steps": 1,
        "report_to": "none",
        "save_strategy": "no",
        "use_cpu": True,
        "bf16": False,
        "fp16": False,
        "gradient_checkpointing": False,
        "dataloader_num_workers": 0,
        "seed": 0,
        "disable_tqdm": True,
        **extra,
    }
    path = folder / "run.yaml"
    path.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in run.items()))
    return path


def environment(record: Path | None = None) -> dict[str, str]:
    """Offline, one thread per process, the harness importable and (with ``record``) the
    recorder installed in every process through ``startup/sitecustomize.py``."""
    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(SITE), str(REPO), *paths])
    env.update(
        HF_HUB_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        TRL_EXPERIMENTAL_SILENCE="1",
        OMP_NUM_THREADS="1",
        TOKENIZERS_PARALLELISM="false",
        KL_E2E_LIBRARY="trl",
    )
    if record is not None:
        env["KL_E2E_RECORD"] = str(record)
    return env
