"""A project's Hydra config tree that holds verl's trainer config as a symlink (RAGEN's shape).

The project's ``config/`` folder has a ``base.yaml`` whose ``defaults`` list names
``ppo_trainer`` (a symlink into a verl checkout beside it) and a sibling config; the launched
config names ``base``; top-level keys feed ``${...}`` interpolations and the batch size is
``null``. Read as the checkout's own verl (before 0.5.0) the tree composes; read as a release
whose trainer config opens with config groups (0.5.0 on), Hydra cannot find those groups in the
project's folder: an error, unless the search path is widened.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches.adapters.verl.config_groups import missing_groups
from kl_patches.audit import AuditEntry, audit
from kl_patches.audit.yaml_inputs import compose

pytest.importorskip("yaml")

VERL_TRAINER = """\
data:
  train_batch_size: 1024
actor_rollout_ref:
  model:
    external_lib: null
  actor:
    ppo_mini_batch_size: 256
    ppo_epochs: 1
    use_kl_loss: false
    kl_loss_coef: 0.001
    kl_loss_type: low_var_kl
algorithm:
  kl_penalty: kl
critic:
  model:
    external_lib: ${actor_rollout_ref.model.external_lib}
"""

BASE = """\
defaults:
  - ppo_trainer
  - envs

mini: 32
actor_rollout_ref:
  actor:
    ppo_mini_batch_size: ${mini}
    use_kl_loss: true
    kl_loss_coef: 0.002
    kl_loss_type: kl
data:
  train_batch_size: null
"""


pytestmark = pytest.mark.usefixtures("nothing_installed")


def _project(tmp_path: Path, launched: str = "defaults:\n  - base\n") -> Path:
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    cfg_dir = root / "sub" / "verl" / "trainer" / "config"
    cfg_dir.mkdir(parents=True)
    (cfg_dir / "ppo_trainer.yaml").write_text(VERL_TRAINER)
    (root / "config").mkdir()
    (root / "config" / "ppo_trainer.yaml").symlink_to("../sub/verl/trainer/config/ppo_trainer.yaml")
    (root / "config" / "base.yaml").write_text(BASE)
    (root / "config" / "envs.yaml").write_text("es_manager: {n: 2}\n")
    (root / "config" / "game.yaml").write_text(launched + "trainer: {experiment_name: x}\n")
    return root


def _codes(entry: AuditEntry) -> set[str]:
    return {f.code for f in entry.findings}


def test_compose_follows_the_symlink_and_resolves_top_level_and_null_references(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path)
    composed = compose(root / "config" / "game.yaml", library_configs=("ppo_trainer",))
    flat = composed.flat
    assert flat["actor_rollout_ref.actor.ppo_mini_batch_size"] == 32  # ${mini}
    assert flat["actor_rollout_ref.actor.kl_loss_type"] == "kl"  # base.yaml over the trainer
    assert flat["data.train_batch_size"] is None
    assert flat["critic.model.external_lib"] is None  # a reference to a null key is null
    assert not any("external_lib" in n for n in composed.notes)
    assert composed.library == []  # read from the checkout's file, not the recorded defaults
    assert list(composed.linked) == ["ppo_trainer"]  # the symlinked trainer config
    assert "actor" not in composed.linked["ppo_trainer"]  # group folders of the search path


def test_read_as_the_checkout_verl_the_tree_composes_and_the_batch_size_is_undecided(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path)
    (entry,) = audit(root / "config" / "game.yaml", version="verl=0.3.0")
    assert entry.status != "error"
    assert entry.reading.config.has_loss
    assert entry.reading.config.estimator == "k1"  # kl_loss_type: kl from base.yaml
    assert entry.reading.off_policy is False  # mini 32 vs a null batch: not claimed
    assert "verl.updates_undecided" in _codes(entry)
    assert "verl.config_group_missing" not in _codes(entry)


def test_a_release_whose_trainer_config_has_groups_refuses_the_symlinked_tree(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path)
    (entry,) = audit(root / "config" / "game.yaml", version="verl=0.9.1")
    assert entry.status == "error"
    assert "verl.config_group_missing" in _codes(entry)
    (entry,) = audit(root / "config" / "game.yaml", version="verl=0.4.1")
    assert "verl.config_group_missing" not in _codes(entry)


def test_a_widened_search_path_or_the_groups_present_is_not_a_certain_refusal(
    tmp_path: Path,
) -> None:
    root = _project(
        tmp_path / "a", "defaults:\n  - base\nhydra:\n  searchpath: [pkg://verl.trainer.config]\n"
    )
    (entry,) = audit(root / "config" / "game.yaml", version="verl=0.9.1")
    assert "verl.config_group_missing" not in _codes(entry)
    root = _project(tmp_path / "b")
    (root / "config" / "actor").mkdir()  # one group of the release's list is not enough
    (entry,) = audit(root / "config" / "game.yaml", version="verl=0.9.1")
    assert "verl.config_group_missing" in _codes(entry)
    for group in missing_groups("0.9.1", {"actor"}):
        (root / "config" / group).mkdir()
    (entry,) = audit(root / "config" / "game.yaml", version="verl=0.9.1")
    assert "verl.config_group_missing" not in _codes(entry)


def test_a_shell_launch_of_the_hydra_app_composes_its_config_folder(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / "train.py").write_text(
        "import hydra\nfrom verl import DataProto\n\n\n"
        '@hydra.main(version_base=None, config_path="config", config_name="base")\n'
        "def main(config):\n    pass\n"
    )
    (root / "run.sh").write_text("python train.py --config-name game trainer.total_epochs=2\n")
    (new,) = audit(root / "run.sh", version="verl=0.9.1")
    assert "verl.config_group_missing" in _codes(new)
    (old,) = audit(root / "run.sh", version="verl=0.3.0")
    assert "verl.config_group_missing" not in _codes(old)
    assert old.reading.config.estimator == "k1" and old.reading.off_policy is False
