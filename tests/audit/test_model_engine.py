"""``model_engine=megatron`` on a verl 0.8+ command line composes the megatron actor, ref and
critic (ppo_trainer.yaml's ``model_engine`` group): their keys are valid overrides (issue 38)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches.audit import audit

pytestmark = pytest.mark.usefixtures("nothing_installed")


LAUNCH = """\
python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    actor_rollout_ref.actor.use_kl_loss=True \\
    actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2 \\
    {engine}
"""


@pytest.mark.parametrize(
    ("version", "engine", "refused"),
    [
        ("0.9.0", "model_engine=megatron", False),  # the megatron actor's keys compose
        ("0.9.0", "model_engine=dp", True),  # the FSDP actor has no megatron section
        ("0.9.0", "", True),
        ("0.7.0", "model_engine=megatron", True),  # no model_engine group before 0.8.0
    ],
)
def test_model_engine_picks_the_keys(
    tmp_path: Path, version: str, engine: str, refused: bool
) -> None:
    path = tmp_path / "run.sh"
    path.write_text(LAUNCH.format(engine=engine), encoding="utf-8")
    (entry,) = audit(path, version=f"verl={version}")
    rejected = [f for f in entry.findings if f.code == "verl.key_rejected"]
    assert bool(rejected) is refused
    if refused:
        assert "megatron.tensor_model_parallel_size" in rejected[0].message


def test_an_unrecorded_engine_is_not_checked(tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text(LAUNCH.format(engine="model_engine=veomni"), encoding="utf-8")
    (entry,) = audit(path, version="verl=0.9.0")
    assert "verl.key_rejected" not in {f.code for f in entry.findings}
