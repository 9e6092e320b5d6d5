"""The entry-point facts the adapters record: consistent, found by the audit's input layer."""

from __future__ import annotations

import pytest

from kl_patches import adapters
from kl_patches.adapters.openrlhf import entries as openrlhf_entries
from kl_patches.adapters.trl import entries as trl_entries
from kl_patches.adapters.verl import entries as verl_entries
from kl_patches.audit.inputs import inputs_from_argv


def test_every_recorded_trainer_names_its_source() -> None:
    for facts in (*verl_entries.TRAINERS, *openrlhf_entries.TRAINERS):
        assert facts.source and facts.where, facts.module
        assert facts.kind in ("rl", "distillation", "dpo", "sft", "eval", "other")
        if facts.kind != "rl":
            assert facts.module in verl_entries.OTHER_ENTRIES  # not a launch
    labels = {e.label for d in adapters.descriptors() for e in d.entries}
    assert "recipe.prime.main_prime" in labels and "recipe.spin.main_spin" not in labels


def test_trainers_that_drop_the_reward_kl_are_marked() -> None:
    dropped = {t.module for t in verl_entries.TRAINERS if t.kind == "rl" and not t.reward_kl}
    assert dropped == {"recipe.prime.main_prime"}


@pytest.mark.parametrize(
    ("module", "found"),
    [
        ("recipe.newthing.main_newthing", True),
        ("recipe.x.y.train_main", True),
        ("myproj.trainer.main_ppo", True),
        ("verl.trainer.main_ppo", False),  # recorded, not a pattern match
        ("verl.trainer.main_generation", False),
        ("recipe.r1.main_eval", False),
    ],
)
def test_verl_patterns(module: str, found: bool) -> None:
    assert (verl_entries.match_entry(module) is not None) == found


def test_openrlhf_forks_and_legacy_flags() -> None:
    assert openrlhf_entries.match_entry("proj.cli.train_ppo_ray") is not None
    assert openrlhf_entries.match_entry("openrlhf.cli.train_sft") is None
    assert "use_kl_estimator_k3" in openrlhf_entries.LEGACY_FLAGS


def test_trl_python_api_and_scripts() -> None:
    api = trl_entries.PYTHON
    assert set(api.trainers.values()) == set(api.configs.values()) == {"grpo", "rloo", "ppo"}
    assert all(label.startswith("trl ") for label in trl_entries.SCRIPTS.values())
    (inp,) = inputs_from_argv(["python", "examples/scripts/ppo/ppo.py", "--kl_coef", "0.2"])
    assert inp.library == "trl" and inp.payload["trainer"] == "ppo"  # type: ignore[index]


def test_non_rl_entries_are_not_launches() -> None:
    from kl_patches.audit.inputs import _other_at

    assert "supervised" in (_other_at(["trl", "sft", "--x"], 0) or "")
    assert "distillation" in (_other_at(["-m", "openrlhf.cli.train_kd"], 0) or "")
