"""A vendored verl copy is read with its own config and its own estimator names (issue 38).

``python -m verl.trainer.main_ppo`` run in a project that commits a copy of verl imports the
copy: Hydra composes the copy's ``verl/trainer/config/ppo_trainer.yaml`` (the project's own
keys are valid overrides there), and the copy's ``core_algos.kl_penalty`` decides which
estimator names run. Files of the same shape as Minimal-RL's and Search-R1's checkouts: a copy
whose version file says ``0.2.0.dev`` (read as verl 0.1, the newest release not after it) while
its code already has ``low_var_kl``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches.adapters.verl.vendored import read_code
from kl_patches.audit import AuditEntry, audit
from tests.audit.repo_files import make_repo as _repo

pytestmark = pytest.mark.usefixtures("nothing_installed")


CORE_ALGOS = """\
import torch


def kl_penalty(logprob, ref_logprob, kl_penalty) -> torch.Tensor:
    if kl_penalty == "kl":
        return logprob - ref_logprob
    if kl_penalty in ("abs",):
        return (logprob - ref_logprob).abs()
    if kl_penalty == 'low_var_kl':
        kl = ref_logprob - logprob
        return torch.clamp(torch.exp(kl) - kl - 1, min=-10, max=10)
    if kl_penalty == "full":
        raise NotImplementedError
    raise NotImplementedError
"""
"""A main-branch ``kl_penalty`` of early 2025 (``low_var_kl`` before the 0.2 release)."""

PPO_TRAINER_YAML = """\
data:
  train_batch_size: 1024
  max_turns: 4
actor_rollout_ref:
  actor:
    ppo_mini_batch_size: 256
    ppo_epochs: 1
    use_kl_loss: False
    kl_loss_coef: 0.001
    kl_loss_type: low_var_kl
  rollout:
    n: 1
algorithm:
  adv_estimator: gae
  kl_penalty: kl
  kl_ctrl:
    type: fixed
    kl_coef: 0.001
"""
"""The copy's own trainer config: ``data.max_turns`` is the project's key."""

TRAINER = """\
class RayPPOTrainer:
    def fit(self):
        for batch in self.train_dataloader:
            if not self.config.actor_rollout_ref.actor.get("use_kl_loss", False):
                batch, kl_metrics = apply_kl_penalty(batch, kl_ctrl=self.kl_ctrl)
"""

ACTOR = """\
class DataParallelPPOActor:
    def update_policy(self, data):
        if self.config.use_kl_loss:
            policy_loss = policy_loss + kl_loss * self.config.kl_loss_coef
"""

LAUNCH = """\
python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_batch_size=256 \\
    data.max_turns=2 \\
    actor_rollout_ref.actor.ppo_mini_batch_size=256 \\
    actor_rollout_ref.actor.use_kl_loss=True \\
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \\
    actor_rollout_ref.rollout.n=4
"""


def _codes(entry: AuditEntry) -> set[str]:
    return {f.code for f in entry.findings}


def test_the_copys_kl_penalty_names_are_read(tmp_path: Path) -> None:
    root = _repo(
        tmp_path,
        {"verl/version/version": "0.2.0.dev\n", "verl/trainer/ppo/core_algos.py": CORE_ALGOS},
    )
    code = read_code(str(root / "verl" / "version" / "version"))
    assert code.estimator_names == frozenset({"kl", "abs", "low_var_kl", "full"})
    assert code.estimator_where.endswith("core_algos.py:4")
    missing = read_code(str(tmp_path / "none" / "verl" / "version" / "version"))
    assert missing.estimator_names is None


def test_a_copy_with_its_config_and_names_runs_the_launch(tmp_path: Path) -> None:
    files = {
        "verl/version/version": "0.2.0.dev\n",
        "verl/trainer/ppo/ray_trainer.py": TRAINER,
        "verl/workers/actor/dp_actor.py": ACTOR,
        "train.sh": LAUNCH,
    }
    # without the copy's config and kl_penalty: verl 0.1's recorded config refuses the
    # project's key, and 0.1 has no low_var_kl
    (bare,) = audit(_repo(tmp_path / "a", files) / "train.sh")
    assert bare.reading.version == "0.2.0.dev"
    assert "verl.key_rejected" in _codes(bare)
    # a checkout with the copy's config and code: accepted, k3 in the loss from the copy
    whole = {
        **files,
        "verl/trainer/config/ppo_trainer.yaml": PPO_TRAINER_YAML,
        "verl/trainer/ppo/core_algos.py": CORE_ALGOS,
    }
    (entry,) = audit(_repo(tmp_path / "b", whole) / "train.sh")
    assert "verl.key_rejected" not in _codes(entry)
    assert "verl.unknown_estimator" not in _codes(entry)
    loss = entry.reading.loss_config or entry.reading.config
    assert (loss.estimator, loss.placement) == ("k3", "loss")
    (found,) = [f for f in entry.findings if f.code == "verl.vendored_code"]
    assert "low_var_kl" in found.message and "core_algos.py" in found.message
    # only the config: the project's key is accepted, but 0.1's names refuse low_var_kl
    (config_only,) = audit(
        _repo(tmp_path / "c", {**files, "verl/trainer/config/ppo_trainer.yaml": PPO_TRAINER_YAML})
        / "train.sh"
    )
    assert "verl.key_rejected" not in _codes(config_only)
    assert "verl.unknown_estimator" in _codes(config_only)


NESTED_LAUNCH = """\
python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_batch_size=256 \\
    data.max_turns=2 \\
    actor_rollout_ref.actor.ppo_mini_batch_size=256
"""


def test_a_nested_copy_installed_from_its_checkout_runs_its_config(tmp_path: Path) -> None:
    # rllm / DeepScaleR: the repository holds a verl checkout (verl/verl/...), installed with
    # pip install -e ./verl; the launch sits in scripts/ and runs that copy's config
    files = {
        "verl/verl/version/version": "0.1\n",
        "verl/verl/trainer/config/ppo_trainer.yaml": PPO_TRAINER_YAML,
        "scripts/train/run.sh": NESTED_LAUNCH,
    }
    (entry,) = audit(_repo(tmp_path / "a", files) / "scripts" / "train" / "run.sh")
    assert "verl.key_rejected" not in _codes(entry)
    assert any("verl/verl/trainer/config/ppo_trainer.yaml" in n for n in entry.notes)
    del files["verl/verl/trainer/config/ppo_trainer.yaml"]
    (bare,) = audit(_repo(tmp_path / "b", files) / "scripts" / "train" / "run.sh")
    assert "verl.key_rejected" in _codes(bare)


AGENT_CONFIG = """\
data:
  train_batch_size: 256
actor_rollout_ref:
  actor:
    ppo_mini_batch_size: 256
    use_kl_loss: False
  agent:
    enable_agent: False
algorithm:
  adv_estimator: gae
  kl_ctrl:
    kl_coef: 0.001
"""


def test_an_unrecorded_entry_composes_its_own_config(tmp_path: Path) -> None:
    # verl-tool: python -m verl_tool.trainer.main_ppo, whose @hydra.main(config_path="config",
    # config_name="ppo_trainer") composes verl_tool/trainer/config/ppo_trainer.yaml
    launch = (
        "python3 -m agentlib.trainer.main_ppo algorithm.adv_estimator=grpo "
        "actor_rollout_ref.agent.enable_agent=True\n"
    )
    files = {"agentlib/trainer/config/ppo_trainer.yaml": AGENT_CONFIG, "train.sh": launch}
    (entry,) = audit(_repo(tmp_path / "a", files) / "train.sh", version="verl=0.7.0")
    assert "verl.key_rejected" not in _codes(entry)
    (bare,) = audit(_repo(tmp_path / "b", {"train.sh": launch}) / "train.sh", version="verl=0.7.0")
    assert "verl.key_rejected" in _codes(bare)
