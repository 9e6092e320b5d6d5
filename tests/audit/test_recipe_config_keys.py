"""Overrides checked against a recipe's own Hydra config, as verl's composition checks them.

A recipe (``recipe/<name>/config/<name>_trainer.yaml``) or a project config starts from a
``defaults`` list naming verl's ``ppo_trainer``/``ppo_megatron_trainer`` and adds its own keys;
Hydra sets struct mode on the composed result, so an override of a key that neither the
recipe's files nor the release's trainer config has is refused. The audit composes the recipe's
files from the checkout and takes the library config's keys from the release it reads: the same
launch is refused by one release and accepted by another. Without the recipe's files nothing is
checked (the audit cannot see which keys the recipe adds).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches.audit import AuditEntry, audit
from kl_patches.audit.yaml_inputs import compose

pytest.importorskip("yaml")


pytestmark = pytest.mark.usefixtures("nothing_installed")


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


# ----------------------------------------------------------------------------- composition
def test_compose_separates_the_projects_keys_from_the_library_config(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "verl/trainer/config/ppo_trainer.yaml": "defaults:\n  - actor@actor: dp\n"
            "algorithm: {kl_penalty: kl}\n",
            "proj/config/group/opt.yaml": "lr: 1.0\n",
            "proj/config/main.yaml": "hydra:\n  searchpath:\n    - file://verl/trainer/config\n"
            "defaults:\n  - ppo_trainer\n  - group@x.y: opt\n  - _self_\n"
            "mine: {threshold: 0.1, kwargs: {}}\n",
        },
    )
    composed = compose(tmp_path / "proj/config/main.yaml", library_configs=("ppo_trainer",))
    # the checkout's copy of the library config still gives its values ...
    assert composed.flat["algorithm.kl_penalty"] == "kl"
    # ... but its keys are the release's (recorded), so they are not the project's own
    assert composed.keys == {"x", "x.y", "x.y.lr", "mine", "mine.threshold", "mine.kwargs"}
    assert composed.mounts == [("ppo_trainer", "")]
    assert composed.complete  # the library file's own missing group does not count


def test_compose_marks_a_missing_defaults_entry_incomplete(tmp_path: Path) -> None:
    _write(tmp_path, {"main.yaml": "defaults:\n  - ppo_megatron_trainer\n  - nowhere\na: 1\n"})
    composed = compose(
        tmp_path / "main.yaml", library_configs=("ppo_trainer", "ppo_megatron_trainer")
    )
    assert composed.mounts == [("ppo_megatron_trainer", "")]
    assert composed.keys == {"a"}
    assert not composed.complete


def test_a_symlinked_library_config_is_the_library_s(tmp_path: Path) -> None:
    """A project's ``config/ppo_trainer.yaml`` that links into its verl copy (RAGEN's shape)."""
    _write(tmp_path, {"verl/verl/trainer/config/ppo_trainer.yaml": "algorithm: {a: 1}\n"})
    _write(tmp_path, {"config/base.yaml": "defaults:\n  - ppo_trainer\nown: 1\n"})
    link = tmp_path / "config/ppo_trainer.yaml"
    link.symlink_to("../verl/verl/trainer/config/ppo_trainer.yaml")
    composed = compose(tmp_path / "config/base.yaml", library_configs=("ppo_trainer",))
    assert composed.flat == {"algorithm.a": 1, "own": 1}
    assert composed.keys == {"own"} and composed.mounts == [("ppo_trainer", "")]


# ----------------------------------------------------------------------------- the audit
RECIPE_CONFIG = """\
hydra:
  searchpath:
    - file://verl/trainer/config

defaults:
  - ppo_megatron_trainer
  - _self_

my_algo:
  threshold: 0.1

reward_model:
  reward_kwargs: {}
"""

LAUNCH = """\
#!/bin/bash
python3 -m recipe.my_algo.main_my_algo \\
    --config-path=config \\
    --config-name='my_trainer.yaml' \\
    algorithm.adv_estimator=grpo \\
    actor_rollout_ref.actor.use_kl_loss=True \\
    actor_rollout_ref.actor.kl_loss_coef=0.01 \\
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \\
    actor_rollout_ref.actor.megatron.grad_offload=True \\
    my_algo.threshold=0.2 \\
    {extra}
"""


def _recipe(tmp_path: Path, extra: str = "", config: bool = True) -> Path:
    files = {"recipe/my_algo/run.sh": LAUNCH.format(extra=extra)}
    if config:
        files["recipe/my_algo/config/my_trainer.yaml"] = RECIPE_CONFIG
    return _write(tmp_path, files) / "recipe/my_algo/run.sh"


def _refused(entry: AuditEntry) -> str:
    return " ".join(f.message for f in entry.findings if f.code == "verl.key_rejected")


def test_a_key_the_release_dropped_is_refused_under_the_recipe_config(tmp_path: Path) -> None:
    """verl 0.9.1's ppo_megatron_trainer has no ``actor.megatron.grad_offload``; 0.6.1's has."""
    launch = _recipe(tmp_path)
    (newest,) = audit(launch, version="verl=0.9.1")
    assert "'actor_rollout_ref.actor.megatron.grad_offload'" in _refused(newest)
    assert "my_algo.threshold" not in _refused(newest)  # the recipe's own key
    assert newest.status == "error"
    (older,) = audit(launch, version="verl=0.6.1")
    assert _refused(older) == ""
    assert older.status != "error"


def test_a_key_the_recipe_config_lacks_is_refused(tmp_path: Path) -> None:
    """Under a mapping the recipe leaves empty, and a sibling it does not declare."""
    launch = _recipe(
        tmp_path, "reward_model.reward_kwargs.n_samples=4 my_algo.upper=0.9 +my_algo.lower=0.1"
    )
    (entry,) = audit(launch, version="verl=0.6.1")
    refused = _refused(entry)
    assert "'reward_model.reward_kwargs.n_samples'" in refused
    assert "'my_algo.upper'" in refused
    assert "my_algo.lower" not in refused  # '+' adds a key the config lacks
    # a '+' on a key the recipe has is refused too
    (again,) = audit(_recipe(tmp_path / "b", "+my_algo.threshold=0.3"), version="verl=0.6.1")
    assert "An item is already at 'my_algo.threshold'" in _refused(again)


def test_without_the_recipe_config_no_key_is_checked(tmp_path: Path) -> None:
    """The audit cannot see the recipe's keys: it says so and refuses nothing."""
    (entry,) = audit(_recipe(tmp_path, "my_algo.upper=0.9", config=False), version="verl=0.9.1")
    assert _refused(entry) == ""
    assert "config_not_found" in {f.code for f in entry.findings}


# ----------------------------------------------------------------------------- linked configs
PROJECT_BASE = """\
defaults:
  - ppo_trainer # a symbolic link into the verl submodule
  - envs

actor_rollout_ref:
  actor:
    ppo_mini_batch_size: 32
"""


def _project(tmp_path: Path, groups: tuple[str, ...] = ()) -> Path:
    """A project config folder (``config/``) linking ``ppo_trainer.yaml`` into its verl copy
    (absent here: the audit never needs the target), with a launch config on top."""
    root = _write(
        tmp_path,
        {
            "config/base.yaml": PROJECT_BASE,
            "config/envs.yaml": "es_manager: {size: 8}\n",
            "config/sokoban.yaml": "defaults:\n  - base\n\ntrainer:\n  experiment_name: s\n",
        },
    )
    (root / "config/ppo_trainer.yaml").symlink_to("../verl/verl/trainer/config/ppo_trainer.yaml")
    for group in groups:
        (root / "config" / group).mkdir()
    return root / "config/sokoban.yaml"


def test_a_linked_trainer_config_with_groups_the_folder_lacks_is_refused(tmp_path: Path) -> None:
    """verl 0.9.1's ppo_trainer.yaml composes groups (actor/, ..., transfer_queue/) that the
    project's folder lacks: Hydra fails; 0.4.1's has no defaults list and composes."""
    config = _project(tmp_path)
    (newest,) = audit(config, version="verl=0.9.1")
    (found,) = [f for f in newest.findings if f.code == "verl.config_group_missing"]
    assert "transfer_queue" in found.message and "actor" in found.message
    assert newest.status == "error" and newest.refused
    (old,) = audit(config, version="verl=0.4.1")
    assert "verl.config_group_missing" not in {f.code for f in old.findings}
    assert not old.refused


def test_a_linked_trainer_config_whose_groups_are_there_composes(tmp_path: Path) -> None:
    """The same folder holding 0.6.1's group folders composes under 0.6.1, not under 0.9.1."""
    v061 = ("actor", "data", "ref", "rollout", "model", "critic", "reward_model", "algorithm")
    config = _project(tmp_path, v061)
    (entry,) = audit(config, version="verl=0.6.1")
    assert "verl.config_group_missing" not in {f.code for f in entry.findings}
    (newest,) = audit(config, version="verl=0.9.1")
    (found,) = [f for f in newest.findings if f.code == "verl.config_group_missing"]
    assert "groups model_engine, reward, distillation, transfer_queue through" in found.message


def test_verl_s_own_megatron_config_is_checked_with_its_keys(tmp_path: Path) -> None:
    """``--config-name='ppo_megatron_trainer.yaml'`` (with the suffix) on ``main_ppo``: the
    release's megatron config decides, whether or not the checkout holds verl's config folder."""
    launch = LAUNCH.replace("recipe.my_algo.main_my_algo", "verl.trainer.main_ppo")
    launch = launch.replace("my_trainer.yaml", "ppo_megatron_trainer.yaml")
    path = _write(tmp_path, {"run.sh": launch.format(extra="")}) / "run.sh"
    (newest,) = audit(path, version="verl=0.9.1")
    refused = _refused(newest)
    assert "'actor_rollout_ref.actor.megatron.grad_offload'" in refused
    assert "'my_algo.threshold'" in refused  # no recipe config here: not a key of verl's
    (older,) = audit(path, version="verl=0.6.1")
    assert "megatron.grad_offload" not in _refused(older)
    assert "'my_algo.threshold'" in _refused(older)
