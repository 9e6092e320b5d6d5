"""The report's "with kl-patches" command is printed only where the launcher takes the launch
(issue 38: every printed fix string is a change the library, or kl-patches, accepts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches.audit import audit

pytestmark = pytest.mark.usefixtures("nothing_installed")


GRPO_YAML = "beta: 0.04\nlearning_rate: 1.0e-6\n"


@pytest.mark.parametrize(
    ("version", "switch", "absent"),
    [
        ("1.16.0", "kl-patches trl grpo", ""),
        ("0.16.0", "--scale_rewards false", "--scale_rewards none"),  # a bool up to 0.21
        ("0.14.0", "kl-patches trl grpo", "--scale_rewards"),  # no such field before 0.16
        # 0.18 computes the reference log-probs after the rewards; the patch takes them on
        # TRL's own policy scoring forward (legacy_reward._policy_forced)
        ("0.18.0", "kl-patches trl grpo", ""),
        ("0.18.2", "kl-patches trl grpo", ""),
    ],
)
def test_the_trl_route_follows_the_release(
    tmp_path: Path, version: str, switch: str, absent: str
) -> None:
    path = tmp_path / "grpo.yaml"
    path.write_text(GRPO_YAML, encoding="utf-8")
    (entry,) = audit(path, library="trl", version=f"trl={version}")
    assert entry.status == "biased"
    assert switch in entry.fix_switch
    assert not absent or absent not in entry.fix_switch
    assert not any("no kl-patches route" in n for n in entry.notes)


def test_verl_outside_the_patch_support_prints_no_launcher(tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text(
        "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo "
        "actor_rollout_ref.actor.use_kl_loss=True "
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl\n",
        encoding="utf-8",
    )
    (old,) = audit(path, version="verl=0.3.0")
    assert not old.fix_switch.startswith("kl-patches verl")
    assert any("no kl-patches route" in n for n in old.notes)
    (new,) = audit(path, version="verl=0.9.1")
    assert new.fix_switch.startswith("kl-patches verl")
