"""The kl-patches trainers train: short real GRPO/RLOO runs on a tiny random model, with the KL
metrics in TRL's own log.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
sys.path.insert(0, str(Path(__file__).parent))

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")

from trl_support import harness  # noqa: E402

from kl_patches import KLConfig  # noqa: E402

TOL = 1e-6


# ------------------------------------------------------------------ training
@pytest.mark.parametrize(
    "kind,kl", [("GRPO", "k1-in-reward"), ("GRPO", "k3-in-loss"), ("RLOO", "k3-in-both")]
)
def test_training_run(dirs: tuple[Path, Path], kind: str, kl: str) -> None:
    config = KLConfig.parse(kl, coef=0.05)
    extra = {"scale_rewards": "none"} if kind == "GRPO" else {}
    trainer = harness.make_trainer(*dirs, kind, patched=True, kl=config, max_steps=10, **extra)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 10
    assert all(torch.isfinite(torch.tensor(h["loss"])) for h in logs)
    after = list(trainer.model.parameters())
    assert (
        max(float((a.detach() - b).abs().max()) for a, b in zip(after, before, strict=True)) > 1e-4
    )
    if config.has_reward:
        assert all(
            "kl_patches/reward_sequence_kl" in h and "kl_patches/reward_penalty" in h for h in logs
        )
        assert any(h["kl_patches/reward_penalty"] > 0 for h in logs)
    if config.has_loss:
        assert all("kl_patches/loss_kl" in h for h in logs)
