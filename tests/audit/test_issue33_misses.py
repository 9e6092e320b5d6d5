"""The issue-33 misses of the real-file evaluation, each from a file of the same shape.

* vendored verl copies taken from main between tags: the version file says ``0.1`` or
  ``0.2.0.dev`` while the copy's trainer comments the ``apply_kl_penalty`` call out (rllm) or
  gates it on ``use_kl_in_reward`` (RAGEN's snapshot), and its actor already has
  ``use_kl_loss``: the copy's code decides, not the release its version file names;
* multi-turn GRPO with both placements: verl's fully-async trainer scores every output (the
  reward KL stays whole), the v1 ``main_ppo`` trainer scores each trajectory's final output
  (the reward KL of that output stays, with the error finding for the rest);
* Python scripts that build ``GRPOConfig`` through a helper function or a subclass
  (verifiers' ``grpo_defaults(...)`` and ``class MyConfig(GRPOConfig)``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches.audit import AuditEntry, AuditError, audit
from tests.audit.repo_files import make_repo as _repo

pytestmark = pytest.mark.usefixtures("nothing_installed")


def _kl(entry: AuditEntry) -> tuple[tuple[str, float] | None, tuple[str, float] | None]:
    """(reward side, loss side) as (estimator, coef), None when off."""
    c, loss = entry.reading.config, entry.reading.loss_config
    reward = (c.estimator, c.coef) if c.has_reward else None
    if loss is not None:
        return reward, (loss.estimator, loss.coef)
    return reward, ((c.estimator, c.loss_coef_value) if c.has_loss else None)


def _codes(entry: AuditEntry) -> set[str]:
    return {f.code for f in entry.findings}


# ----------------------------------------------------------------------------- vendored verl
TRAINER_COMMENTED = """\
def apply_kl_penalty(data, kl_ctrl, kl_penalty="kl"):
    return data, {}


class RayPPOTrainer:
    def fit(self):
        for batch in self.train_dataloader:
            batch.batch["token_level_scores"] = reward_tensor
            # compute rewards. apply_kl_penalty if available
            # if not self.config.actor_rollout_ref.actor.get("use_kl_loss", False):
            #     batch, kl_metrics = apply_kl_penalty(batch, kl_ctrl=self.kl_ctrl)
            #     metrics.update(kl_metrics)
            # else:
            batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]
"""
"""rllm's vendored ``ray_trainer.py`` (version file 0.1): the reward call commented out."""

TRAINER_IN_REWARD = """\
class RayPPOTrainer:
    def fit(self):
        for batch in self.train_dataloader:
            if self.config.algorithm.use_kl_in_reward:
                batch, kl_metrics = apply_kl_penalty(batch, kl_ctrl=self.kl_ctrl_in_reward,
                                                     kl_penalty=self.config.algorithm.kl_penalty)
                metrics.update(kl_metrics)
            else:
                batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]
"""
"""A main-branch snapshot past PR #644 whose version file still says 0.2.0.dev."""

ACTOR_WITH_KL_LOSS = """\
class DataParallelPPOActor:
    def update_policy(self, data):
        if self.config.use_kl_loss:
            kl_loss = masked_mean(kld, response_mask)
            policy_loss = policy_loss + kl_loss * self.config.kl_loss_coef
"""

VERL_GRPO = """\
set -x
python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_batch_size=128 \\
    actor_rollout_ref.actor.ppo_mini_batch_size=128 \\
    actor_rollout_ref.actor.use_kl_loss=True \\
    actor_rollout_ref.actor.kl_loss_coef=0.001 \\
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \\
    algorithm.kl_ctrl.kl_coef=0.001
"""
"""rllm's deepscaler launch shape: GRPO with k3 in the loss."""

VERL_PPO_NO_LOSS = """\
python3 -m verl.trainer.main_ppo algorithm.adv_estimator=gae \\
    data.train_batch_size=128 actor_rollout_ref.actor.ppo_mini_batch_size=128 \\
    algorithm.kl_ctrl.kl_coef=0.001
"""
"""A launch that sets no KL switch: the reward KL runs only where the trainer gates it so."""


def test_a_vendored_trainer_without_the_reward_call_drops_the_reward_kl(tmp_path: Path) -> None:
    root = _repo(
        tmp_path,
        {
            "verl/version/version": "0.1\n",
            "verl/trainer/ppo/ray_trainer.py": TRAINER_COMMENTED,
            "verl/workers/actor/dp_actor.py": ACTOR_WITH_KL_LOSS,
            "scripts/deepscaler.sh": VERL_GRPO,
        },
    )
    (entry,) = audit(root / "scripts" / "deepscaler.sh")
    assert entry.version_source == "vendored"
    assert _kl(entry) == (None, ("k3", pytest.approx(0.001)))
    (found,) = [f for f in entry.findings if f.code == "verl.vendored_code"]
    # the launch's KL-loss keys already promote the 0.1 copy to 0.2's keys (which has the
    # KL loss); the reward gate is the copy's own: no call
    assert "never runs the reward KL" in found.message
    # a launch without the KL loss: verl 0.1 (no copy of the trainer to read) runs k1 in the
    # reward always; this copy never does
    ppo = {"verl/version/version": "0.1\n", "ppo.sh": VERL_PPO_NO_LOSS}
    (plain,) = audit(_repo(tmp_path / "b", ppo) / "ppo.sh")
    assert _kl(plain) == (("k1", pytest.approx(0.001)), None)
    assert "verl.vendored_code" not in _codes(plain)
    (copy,) = audit(_repo(tmp_path / "c", {**ppo, **{
        "verl/trainer/ppo/ray_trainer.py": TRAINER_COMMENTED,
        "verl/workers/actor/dp_actor.py": ACTOR_WITH_KL_LOSS,
    }}) / "ppo.sh")  # fmt: skip
    assert _kl(copy) == (None, None) and "verl.vendored_code" in _codes(copy)
    # --library-version naming the copy's own version reads its code too; another one does not
    (given,) = audit(tmp_path / "c" / "repo" / "ppo.sh", version="verl=0.1+vendored")
    assert _kl(given) == (None, None) and "verl.vendored_code" in _codes(given)
    (other,) = audit(tmp_path / "c" / "repo" / "ppo.sh", version="verl=0.3.0")
    assert _kl(other)[0] is not None and "verl.vendored_code" not in _codes(other)


def test_a_vendored_snapshot_gating_on_use_kl_in_reward_is_read_so(tmp_path: Path) -> None:
    root = _repo(
        tmp_path,
        {
            "verl/version/version": "0.2.0.dev\n",
            "verl/trainer/ppo/ray_trainer.py": TRAINER_IN_REWARD,
            "verl/workers/actor/dp_actor.py": ACTOR_WITH_KL_LOSS,
            "train.sh": VERL_PPO_NO_LOSS,
        },
    )
    (entry,) = audit(root / "train.sh")
    # verl 0.2 runs the reward KL whenever the KL loss is off; this copy only under
    # use_kl_in_reward, which the launch does not set
    assert _kl(entry) == (None, None)
    assert "verl.vendored_code" in _codes(entry)
    (release,) = audit(root / "train.sh", version="verl=0.2")
    assert _kl(release)[0] == ("k1", pytest.approx(0.001))


# ----------------------------------------------------------------------------- multi-turn GRPO
MULTI_TURN_BOTH = """\
python -m {entry} \\
    algorithm.adv_estimator=grpo \\
    algorithm.use_kl_in_reward=True \\
    algorithm.kl_penalty=kl \\
    algorithm.kl_ctrl.kl_coef=0.001 \\
    actor_rollout_ref.actor.use_kl_loss=True \\
    actor_rollout_ref.actor.kl_loss_coef=0.001 \\
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \\
    actor_rollout_ref.rollout.multi_turn.enable=True \\
    actor_rollout_ref.rollout.name=sglang
"""
"""verl's fully-async multi-turn example shape, with both placements on."""


@pytest.mark.parametrize(
    ("entry", "dropped"),
    [
        ("verl.experimental.fully_async_policy.fully_async_main", False),
        ("verl.trainer.main_ppo", True),
    ],
)
def test_multi_turn_grpo_with_both_placements_keeps_the_reward_kl(
    tmp_path: Path, entry: str, dropped: bool
) -> None:
    root = _repo(tmp_path, {"run.sh": MULTI_TURN_BOTH.format(entry=entry)})
    (found,) = audit(root / "run.sh", version="verl=0.9.1")
    assert _kl(found) == (("k1", pytest.approx(0.001)), ("k3", pytest.approx(0.001)))
    assert ("verl.multi_turn_drops_kl" in _codes(found)) is dropped


# ----------------------------------------------------------------------------- Python helpers
HELPER_SCRIPT = """\
import verifiers as vf
from trl import GRPOConfig


def grpo_defaults(run_name: str, beta: float = 0.02, **kwargs) -> GRPOConfig:
    args = GRPOConfig(output_dir=f"outputs/{run_name}", run_name=run_name, beta=beta,
                      num_generations=8, per_device_train_batch_size=8)
    args.learning_rate = 1e-6
    return args


def main():
    training_args = grpo_defaults(run_name="math", num_iterations=1)
    trainer = vf.GRPOTrainer(model="m", env=None, reward_funcs=[], args=training_args)
    trainer.train()


if __name__ == "__main__":
    main()
"""
"""verifiers' examples: a helper builds the GRPOConfig, ``vf.GRPOTrainer`` takes it."""

SUBCLASS_SCRIPT = """\
from dataclasses import dataclass, field

from trl import GRPOConfig, GRPOTrainer, TrlParser


@dataclass
class ProjectGRPOConfig(GRPOConfig):
    beta: float = field(default=0.001, metadata={"help": "KL coefficient"})
    num_iterations: int = 2
    reward_scale: float = 1.0


@dataclass
class LongerConfig(ProjectGRPOConfig):
    max_completion_length: int = 4096


args = LongerConfig(output_dir="out", learning_rate=1e-6)
trainer = GRPOTrainer(model="m", reward_funcs=[], args=args)
"""
"""A project's own GRPOConfig subclass (twice removed) with class-level KL defaults."""


def test_a_grpo_config_built_by_a_helper_is_read(tmp_path: Path) -> None:
    root = _repo(tmp_path, {"train.py": HELPER_SCRIPT})
    (entry,) = audit(root / "train.py", version="trl=1.16.0")
    # the helper's own default beta=0.02 (not TRL 1.16's 0.0), k3 in the loss
    assert _kl(entry) == (None, ("k3", pytest.approx(0.02)))
    assert entry.reading.settings.get("learning_rate") in (None, 1e-6)


def test_a_grpo_config_subclass_is_read_with_its_defaults(tmp_path: Path) -> None:
    root = _repo(tmp_path, {"train.py": SUBCLASS_SCRIPT})
    (entry,) = audit(root / "train.py", version="trl=1.16.0")
    assert _kl(entry) == (None, ("k3", pytest.approx(0.001)))
    assert entry.reading.off_policy and "num_iterations=2" in entry.reading.off_policy_reason


# ----------------------------------------------------------------------------- OpenRLHF forks
FORK_LAUNCH = """\
python3 -m openrlhf.cli.train_ppo_ray --pretrain m --advantage_estimator group_norm \\
    --n_samples_per_prompt 8 --init_kl_coef 0.0001 --rollout_batch_size 64 --train_batch_size 64
"""
"""R1-Searcher's scripts: its 0.5.5.post2 fork takes ``group_norm``, which 0.5.5.post2 refuses."""


def test_a_fork_taking_a_later_choice_is_read_as_the_release_that_has_it(tmp_path: Path) -> None:
    copy = {"openrlhf/__init__.py": '__version__ = "0.5.5.post2"\n'}
    root = _repo(tmp_path, {**copy, "scripts/train.sh": FORK_LAUNCH})
    (entry,) = audit(root / "scripts" / "train.sh")  # the vendored copy: a snapshot
    assert entry.version_source == "vendored"
    assert _kl(entry) == (("k1", pytest.approx(1e-4)), None)
    (found,) = [f for f in entry.findings if f.code == "openrlhf.version_newer_code"]
    assert "group_norm" in found.message
    with pytest.raises(AuditError, match="invalid choice: 'group_norm'"):
        audit(root / "scripts" / "train.sh", version="openrlhf=0.5.5.post2")  # the release
