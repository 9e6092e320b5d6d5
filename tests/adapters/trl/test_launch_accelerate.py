"""The patch is active on every rank of a 2-process ``accelerate launch`` CPU (gloo) run.  Runs the
real launcher (``python -m kl_patches.trl grpo --config run.yaml``) under ``accelerate launch
--multi_gpu --num_processes 2`` (torchrun; with no GPU, accelerate runs MULTI_CPU with the gloo
backend; ``--cpu`` would start a single process): TRL's own GRPO script, a local JSONL dataset,
the tiny model and a reward function imported by dotted path. Each rank prints its KL config and
the number of times each hook ran; both ranks must report k1-in-reward and non-zero hook counts,
and the launcher exits non-zero if a rank's hooks never ran.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
pytest.importorskip("trl")
pytest.importorskip("accelerate")

from trl_support import tiny


def _launch(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired as err:
        tail = err.stderr.decode(errors="replace") if isinstance(err.stderr, bytes) else ""
        return subprocess.CompletedProcess(cmd, -9, "", f"timed out after 240 s\n{tail}")


def test_two_rank_accelerate_launch(tmp_path: Path) -> None:
    model_dir = tiny.build_model_dir(tmp_path / "model")
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    with open(data_dir / "train.jsonl", "w") as f:
        for prompt in tiny.PROMPTS * 2:
            f.write(json.dumps({"prompt": prompt}) + "\n")
    run = {
        "model_name_or_path": str(model_dir),
        "dataset_name": str(data_dir),
        "reward_funcs": ["trl_support.tiny.target_reward"],
        "kl_estimator": "k1",
        "kl_placement": "reward",
        "kl_coef": 0.05,
        "scale_rewards": "none",
        **tiny.common_args(tmp_path / "out", per_device_train_batch_size=4, max_steps=2),
    }
    config = tmp_path / "run.yaml"
    config.write_text("\n".join(f"{k}: {json.dumps(v)}" for k, v in run.items()) + "\n")
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        OMP_NUM_THREADS="1",
        PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]),
    )
    cmd = [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
        "-m", "kl_patches.trl", "grpo", "--config", str(config),
    ]  # fmt: skip
    proc = _launch(cmd, env)
    if proc.returncode != 0:
        # Known CPU flake (about 1 run in 5 here): the 2-rank gloo job sometimes hangs or dies
        # after training. One retry, loudly; a second failure fails the test.
        warnings.warn(
            f"2-rank accelerate run failed once, retrying: {proc.stderr[-2000:]}", stacklevel=1
        )
        proc = _launch(cmd, env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    reports = re.findall(
        r"kl_patches\.trl rank (\d)/2: (k1-in-reward, coef=0\.05).*?hook calls (\{.*\})",
        proc.stderr,
    )
    assert sorted(r[0] for r in reports) == ["0", "1"], proc.stderr[-4000:]
    for _, _, calls in reports:
        counts = eval(calls, {})  # a dict literal printed by the launcher
        assert counts["__init__"] == 1
        assert counts["_generate_and_score_completions"] >= 1
        assert counts["_calculate_rewards"] >= 1
        assert counts["_compute_loss"] >= 2
