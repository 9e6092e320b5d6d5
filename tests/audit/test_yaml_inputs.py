"""YAML inputs: Hydra defaults composed as Hydra does, cluster job files read as shell."""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches.audit.yaml_inputs import cluster_commands, compose

pytest.importorskip("yaml")


def test_defaults_order_groups_packages_and_interpolations(tmp_path: Path) -> None:
    (tmp_path / "actor").mkdir()
    (tmp_path / "actor" / "fast.yaml").write_text("ppo_epochs: 2\nlr: 1.0\n")
    (tmp_path / "base.yaml").write_text("a: 1\nb: {c: 2}\n")
    (tmp_path / "main.yaml").write_text(
        "defaults:\n  - ppo_trainer\n  - base\n  - actor@x.actor: fast\n  - _self_\n"
        "  - optional missing_ok: nothing\n"
        "a: 10\nb: {d: 3}\nref: ${b.c}\nlr_copy: x${x.actor.lr}\nenv: ${oc.env:HOME,/none}\n"
    )
    composed = compose(tmp_path / "main.yaml", library_configs=("ppo_trainer",))
    assert composed.flat == {
        "a": 10,  # _self_ after base: the file's own keys win
        "b.c": 2,
        "b.d": 3,
        "x.actor.ppo_epochs": 2,
        "x.actor.lr": 1.0,
        "ref": 2,
        "lr_copy": "x1.0",
        "env": "/none",  # the environment is not read: the default
    }
    assert composed.library == ["ppo_trainer"]
    assert [Path(f).name for f in composed.files] == ["main.yaml", "base.yaml", "fast.yaml"]


def test_unresolved_and_missing_entries_are_noted(tmp_path: Path) -> None:
    (tmp_path / "main.yaml").write_text("defaults:\n  - nowhere\nk: ${not.a.key}\nj: 1\n")
    composed = compose(tmp_path / "main.yaml")
    assert composed.flat == {"j": 1}
    assert any("nowhere" in n for n in composed.notes)
    assert any("not resolved" in n for n in composed.notes)


def test_cluster_job_files() -> None:
    job = {"envs": {"A": 1, "B": True}, "setup": "pip install x", "run": "python -m m a=$A\n"}
    assert cluster_commands(job) == ("pip install x\npython -m m a=$A\n\n", {"A": "1", "B": "true"})
    assert cluster_commands({"commands": ["cd x", "run"]}) == ("cd x\nrun\n", {})
    assert cluster_commands({"algorithm": {"x": 1}}) is None


def test_a_vendored_copys_library_config_counts_with_its_own_keys(tmp_path: Path) -> None:
    """A recipe config whose defaults name ``ppo_trainer``, found in a vendored copy (TTRL's
    verl with its own ``reward_model.reward_kwargs``): Hydra composes that file, so its keys
    are the overrides' keys. Without the copy's version file, the file is read as the
    release's (the recorded keys stand for it: a mount)."""
    config = tmp_path / "verl" / "trainer" / "config"
    config.mkdir(parents=True)
    (config / "ppo_trainer.yaml").write_text(
        "reward_model:\n  reward_kwargs:\n    mode: train\n"
        "algorithm:\n  kl_ctrl:\n    kl_coef: 0.001\n"
    )
    recipe = tmp_path / "recipe" / "config"
    recipe.mkdir(parents=True)
    (recipe / "prime.yaml").write_text(
        f"hydra:\n  searchpath:\n    - file://{config}\ndefaults:\n  - ppo_trainer\n  - _self_\n"
        "prime:\n  beta: 0.05\n"
    )
    plain = compose(recipe / "prime.yaml", library_configs=("ppo_trainer",))
    assert "reward_model.reward_kwargs.mode" not in plain.keys and plain.mounts
    (tmp_path / "verl" / "version").mkdir()
    (tmp_path / "verl" / "version" / "version").write_text("0.2.0.dev\n")
    copy = compose(recipe / "prime.yaml", library_configs=("ppo_trainer",))
    assert {"reward_model.reward_kwargs.mode", "prime.beta"} <= copy.keys and not copy.mounts
    assert copy.flat["algorithm.kl_ctrl.kl_coef"] == 0.001
