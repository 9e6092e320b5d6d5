"""An unknown training script launched many times in one file (a sweep: ``python train.py ...
&``, ``wait``, then more), some launches with the library's trainer options, some only with the
project's own options (``custom_envs.X=...``): every launch runs the same trainer, so every one
is a launch of the library the others show. Before issue 33 the launches without the library's
options were dropped (RAGEN's train_all.sh: 69 launches, 32 reported)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches.audit import audit

SWEEP = """set -e
USE_GRPO="algorithm.adv_estimator=grpo actor_rollout_ref.actor.use_kl_loss=True"
BASE="actor_rollout_ref.actor.kl_loss_coef=0.004 env.filter_ratio=1"

python train.py --config-name _1_bandit trainer.experiment_name=a $USE_GRPO $BASE &
python train.py --config-name _2_maze trainer.experiment_name=b $USE_GRPO $BASE &
wait

python train.py --config-name _1_bandit trainer.experiment_name=c \\
    custom_envs.Bandit.env_config.lo_arm_name="Engineer" \\
    custom_envs.Bandit.env_config.hi_arm_name="Teacher"

python train.py --config-name _1_bandit trainer.experiment_name=c \\
    custom_envs.Bandit.env_config.lo_arm_name="Engineer" \\
    custom_envs.Bandit.env_config.hi_arm_name="Teacher"
"""


def test_every_launch_of_the_script_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "train_all.sh"
    path.write_text(SWEEP)
    entries = audit(path, version="verl=0.9.1")
    lines = [e.origin.rsplit(":", 1)[1] for e in entries]
    # the two identical launches at lines 9 and 13 are two runs: both are reported
    assert lines == ["5", "6", "9", "13"]
    assert [e.reading.config.placement for e in entries[:2]] == ["loss", "loss"]
    for e in entries[2:]:
        (assumed,) = [f for f in e.findings if f.code == "verl.entry_assumed"]
        assert "launch at line 5" in assumed.message, assumed.message


@pytest.mark.parametrize(
    "other",
    [
        "python eval.py --config-name _1_bandit trainer.experiment_name=a\n",  # another script
        "cd sub\npython train.py --config-name x trainer.experiment_name=a\n",  # another cwd
    ],
)
def test_only_the_same_script_from_the_same_directory_counts(tmp_path: Path, other: str) -> None:
    path = tmp_path / "run.sh"
    path.write_text(
        "python train.py algorithm.adv_estimator=grpo actor_rollout_ref.actor.use_kl_loss=True\n"
        + other
    )
    (entry,) = audit(path, version="verl=0.9.1")
    assert entry.origin.endswith(":1")
