"""apply/revert patch TRL's own trainer classes in place and restore every symbol; the version
guard.
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

import kl_patches.trl as klt  # noqa: E402
from kl_patches import KLConfig  # noqa: E402
from kl_patches.adapters.trl import patch, versions  # noqa: E402

TOL = 1e-6


# ------------------------------------------------------------------ apply / revert
def test_apply_revert_restores_every_symbol(dirs: tuple[Path, Path]) -> None:
    classes = (trl.GRPOTrainer, trl.RLOOTrainer)
    before = {(c, n): c.__dict__.get(n) for c in classes for n in patch.HOOKED}
    klt.apply("k3-in-loss")
    patched_once = {(c, n): c.__dict__.get(n) for c in classes for n in patch.HOOKED}
    klt.apply("k1-in-reward")  # twice == once, with the newer config
    try:
        assert {(c, n): c.__dict__.get(n) for c in classes for n in patch.HOOKED} == patched_once
        assert all(patched_once[k] is not before[k] for k in before)
        assert klt.active_config() == KLConfig()
        trainer = harness.make_trainer(*dirs, "GRPO", patched=False, scale_rewards="none")
        assert trainer._kl_config == KLConfig() and trainer.beta == 0.05
        harness.perturb(trainer.model)
        batch = harness.scored_batch(trainer, seed=2)
        assert "kl/k1_reward" in trainer._metrics["train"]
        assert "ref_per_token_logps" in batch
    finally:
        klt.revert()
    assert {(c, n): c.__dict__.get(n) for c in classes for n in patch.HOOKED} == before
    assert not klt.is_applied() and klt.active_config() is None
    plain = harness.make_trainer(*dirs, "GRPO", patched=False)
    assert "_kl_config" not in plain.__dict__ and plain.beta == 0.0


def test_version_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trl, "__version__", "1.17.0")
    monkeypatch.delenv(versions.FORCE_ENV, raising=False)
    monkeypatch.delenv(versions.SUPPORT.legacy_force_env, raising=False)
    with pytest.raises(RuntimeError, match=r"trl>=1\.16\.0,<1\.17\.0"):
        klt.apply("k1-in-reward")
    assert not klt.is_applied()
    klt.apply("k1-in-reward", force=True)
    klt.revert()
