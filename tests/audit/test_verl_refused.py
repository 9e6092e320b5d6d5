"""The verl fix writer on launches their own release refuses (kl_patches/adapters/verl/refused.py):
a key under an open mapping gets ``+``, a key verl removed is deleted (verl's own entry points
only), a renamed entry module becomes the release's module. Synthetic launches of the shapes
of verl's own examples, read against the recorded key sets of each release."""

from __future__ import annotations

from pathlib import Path

from kl_patches.adapters.verl.refused import entry_successor, rewrites
from kl_patches.audit.fix.apply import fix_file, summary
from kl_patches.audit.run import audit

SGLANG = "actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend"
GRAD_OFFLOAD = "actor_rollout_ref.actor.fsdp_config.grad_offload"


def _errors(path: Path, version: str) -> set[str]:
    return {f.code for e in audit(str(path), version=version) for f in e.findings
            if f.severity == "error"}  # fmt: skip


def test_a_key_under_an_open_mapping_is_added_with_a_plus(tmp_path: Path) -> None:
    """0.6.1's ``engine_kwargs.sglang`` is ``{}`` (0.5.0 listed attention_backend): Hydra
    refuses ``key=v`` under it and accepts ``+key=v``; the fix writes the ``+`` in place, next
    to its KL fix, and the re-audit has no error left."""
    path = tmp_path / "run.sh"
    path.write_text(
        "python3 -m verl.trainer.main_ppo \\\n"
        "    algorithm.adv_estimator=rloo \\\n"
        f"    {SGLANG}=triton \\\n"
        "    actor_rollout_ref.actor.use_kl_loss=True \\\n"
        "    actor_rollout_ref.actor.kl_loss_coef=0.001\n"
    )
    assert "verl.key_rejected" in _errors(path, "verl=0.6.1")
    fix = fix_file(path, versions={"verl": "0.6.1"})
    assert fix.problems == [] and fix.changed
    assert fix.new_text.splitlines()[2] == f"    +{SGLANG}=triton \\"
    (entry,) = fix.after
    assert not [f for f in entry.findings if f.severity == "error"]
    assert (entry.reading.config.estimator, entry.reading.config.placement) == ("k1", "reward")


def test_a_closed_mapping_gets_no_plus() -> None:
    """Under a mapping with recorded children (``algorithm``) nothing is appended: a typo
    stays the user's (0.6.1 has no such key and never had one)."""
    assert rewrites(["algorithm.no_such_key=1"], "0.6.1", {}) == []


def test_a_key_verl_removed_is_deleted_with_the_release_in_its_reason(tmp_path: Path) -> None:
    """verl 0.3 dropped ``fsdp_config.grad_offload`` (0.2.x had it; no later release has it):
    verl's own 0.3 example still passes it and 0.3 refuses the launch. The fix deletes the
    override, says up to which release the key existed, and the re-audit has no refusal."""
    path = tmp_path / "run.sh"
    path.write_text(
        "python3 -m verl.trainer.main_ppo \\\n"
        "    algorithm.adv_estimator=rloo \\\n"
        f"    {GRAD_OFFLOAD}=False \\\n"
        "    actor_rollout_ref.actor.use_kl_loss=True \\\n"
        "    actor_rollout_ref.actor.kl_loss_coef=0.001 \\\n"
        "    data.train_batch_size=256 actor_rollout_ref.actor.ppo_mini_batch_size=256\n"
    )
    assert "verl.key_rejected" in _errors(path, "verl=0.3.0.post1")
    fix = fix_file(path, versions={"verl": "0.3.0.post1"})
    assert fix.problems == [] and fix.changed
    assert GRAD_OFFLOAD not in fix.new_text
    assert "    algorithm.adv_estimator=rloo \\" in fix.new_text.splitlines()
    (entry,) = fix.after
    assert "verl.key_rejected" not in {f.code for f in entry.findings}
    assert any(f"unset {GRAD_OFFLOAD}" in ln and "up to 0.2.0.post2" in ln for ln in summary(fix))


def test_a_key_only_later_releases_have_is_not_removed() -> None:
    """``trainer.use_v1`` is new in 0.9.0: on 0.6.1 the launch is written for a newer verl,
    so it is not deleted (the reading or an upgrade settles it); read as 0.3 the removed
    key is deleted."""
    assert rewrites(["trainer.use_v1=True"], "0.6.1", {}) == []
    (found,) = rewrites([f"{GRAD_OFFLOAD}=False"], "0.3.0.post1", {})
    assert (found.key, found.action) == (GRAD_OFFLOAD, "remove")


def test_a_recipe_trainer_keeps_a_key_verl_removed() -> None:
    """A recipe's trainer is code outside verl that may read the key itself (PRIME reads
    ``reward_model.micro_batch_size_per_gpu``, dropped from verl's config in 0.7.1): no
    deletion there; verl's own entry point gets it."""
    key = "reward_model.micro_batch_size_per_gpu=1"
    context = {"config_name": "ppo_trainer"}
    assert rewrites([key], "0.7.1", {**context, "entry": "recipe.mine.main_mine"}) == []
    (found,) = rewrites([key], "0.7.1", {**context, "entry": "verl.trainer.main_ppo"})
    assert found.action == "remove"


def test_a_renamed_entry_module_becomes_the_release_module(tmp_path: Path) -> None:
    """verl 0.9.0 moved ``main_ppo_sync`` into the v1 trainer ``main_ppo`` runs by default:
    the launch written for 0.8.0's module fails on 0.9.0 (No module named ...); the fix
    switches the module after ``-m`` and the re-audit reads main_ppo with no error."""
    path = tmp_path / "run.sh"
    path.write_text(
        "python3 -m verl.trainer.main_ppo_sync \\\n"
        "    algorithm.adv_estimator=remax \\\n"
        "    algorithm.use_kl_in_reward=True \\\n"
        "    algorithm.kl_ctrl.kl_coef=0.001 \\\n"
        "    algorithm.kl_penalty=kl\n"
    )
    assert "verl.entry_not_in_version" in _errors(path, "verl=0.9.0")
    fix = fix_file(path, versions={"verl": "0.9.0"})
    assert fix.problems == [] and fix.changed
    assert fix.new_text.splitlines()[0] == "python3 -m verl.trainer.main_ppo \\"
    (entry,) = fix.after
    assert not [f for f in entry.findings if f.severity == "error"]
    assert any("switch verl.trainer.main_ppo_sync -> verl.trainer.main_ppo" in ln
               for ln in summary(fix))  # fmt: skip


def test_an_entry_module_the_release_ships_is_kept() -> None:
    """0.8.0 ships main_ppo_sync: no successor there; nor for a module verl never renamed."""
    assert entry_successor("verl.trainer.main_ppo_sync", "0.8.0") is None
    assert entry_successor("verl.trainer.main_ppo_sync", "0.9.0") == "verl.trainer.main_ppo"
    assert entry_successor("verl.trainer.main_generation", "0.9.0") is None


def test_a_moved_key_is_renamed_and_a_changed_kind_is_left(tmp_path: Path) -> None:
    """0.8.0 moved ``critic.model.fsdp_config.*`` to ``critic.fsdp.*``: a 0.7.1 launch read
    as 0.8.0 gets the new name (the value kept), with the release in the change's reason.
    0.6.1's ``rollout_correction.rollout_is`` is a level where 0.6.0's ``algorithm.rollout_is``
    was a switch: same last name, another kind, so no rename (the refusal stays)."""
    path = tmp_path / "run.sh"
    path.write_text(
        "python3 -m verl.trainer.main_ppo \\\n"
        "    algorithm.adv_estimator=gae \\\n"
        "    critic.model.fsdp_config.forward_prefetch=True \\\n"
        "    algorithm.use_kl_in_reward=True algorithm.kl_ctrl.kl_coef=0.001\n"
    )
    assert "verl.key_rejected" in _errors(path, "verl=0.8.0")
    fix = fix_file(path, versions={"verl": "0.8.0"})
    assert fix.problems == [] and fix.changed
    assert fix.new_text.splitlines()[2] == "    critic.fsdp.forward_prefetch=True \\"
    (entry,) = fix.after
    assert "verl.key_rejected" not in {f.code for f in entry.findings}
    assert any("verl 0.8.0 renamed it" in ln for ln in summary(fix))
    assert rewrites(["algorithm.rollout_is=True"], "0.6.1", {}) == []
