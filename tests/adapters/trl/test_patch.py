"""apply/revert patch TRL's own trainer classes in place and restore every symbol; a trainer
built under apply keeps its config after revert; the version guard (tested range, above it with
the canaries).
"""

from __future__ import annotations

import os
import sys
import warnings
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
from kl_patches.adapters.support import UntestedVersionWarning  # noqa: E402
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
        assert "kl_patches/reward_sequence_kl" in trainer._metrics["train"]
        assert "ref_per_token_logps" in batch
    finally:
        klt.revert()
    assert {(c, n): c.__dict__.get(n) for c in classes for n in patch.HOOKED} == before
    assert not klt.is_applied() and klt.active_config() is None
    plain = harness.make_trainer(*dirs, "GRPO", patched=False)
    assert "_kl_config" not in plain.__dict__ and plain.beta == 0.0


def test_version_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below the tested range, or a pre-release: refused (forced: runs). Above it (1.17.0) the
    canaries decide: they pass here, so the patch runs with one warning (issue 14; this test
    expected a refusal of 1.17.0 before the range and the canaries existed)."""
    monkeypatch.delenv(versions.FORCE_ENV, raising=False)
    monkeypatch.delenv(versions.SUPPORT.legacy_force_env, raising=False)
    for refused in ("0.13.2", "1.17.0rc1"):
        monkeypatch.setattr(trl, "__version__", refused)
        with pytest.raises(RuntimeError, match=r"trl>=0\.14\.0,<1\.17\.0"):
            klt.apply("k1-in-reward")
        assert not klt.is_applied()
        klt.apply("k1-in-reward", force=True)
        klt.revert()
    monkeypatch.setattr(trl, "__version__", "1.17.0")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        klt.apply("k1-in-reward")
    try:
        untested = [w for w in caught if issubclass(w.category, UntestedVersionWarning)]
        assert len(untested) == 1 and "every behaviour canary passed" in str(untested[0].message)
        assert klt.is_applied()
    finally:
        klt.revert()


def test_trainer_built_under_apply_keeps_its_config_after_revert(dirs: tuple[Path, Path]) -> None:
    """Issue 15: the trainer was given beta=coef for TRL's reference model; after revert() it ran
    TRL's own k3-in-loss at that beta. It keeps running k1-in-reward now."""
    klt.apply(KLConfig(coef=0.05))
    try:
        trainer = harness.make_trainer(*dirs, "GRPO", patched=False, scale_rewards="none")
    finally:
        klt.revert()
    assert not klt.is_applied() and trainer.beta == 0.05
    assert isinstance(trainer, trl.GRPOTrainer) and type(trainer).__name__ == "GRPOTrainer"
    harness.perturb(trainer.model)
    batch = harness.scored_batch(trainer, seed=3)
    assert trainer._metrics["train"]["kl_patches/reward_sequence_kl"], (
        "the reward-side hook did not run"
    )
    loss, grads = harness.loss_and_grads(trainer, batch)
    trainer.beta = 0.0  # TRL's own loss without its k3 term: what k1-in-reward's loss must be
    loss_0, grads_0 = harness.loss_and_grads(trainer, batch)
    assert abs(float(loss - loss_0)) < TOL and harness.max_diff(grads, grads_0) < TOL
    trainer.beta = 0.05
    native = harness.make_trainer(*dirs, "GRPO", patched=False, beta=0.05)
    harness.perturb(native.model)
    loss_k3, _ = harness.loss_and_grads(native, batch)  # TRL's k3 at beta=0.05 differs
    assert abs(float(loss_k3 - loss)) > 1e3 * TOL
