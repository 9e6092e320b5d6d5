"""The TRL reader: recorded defaults equal the installed TRL's, patched trainers are read as
patched, and TRL-specific findings.
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
from kl_patches.adapters.trl import versions  # noqa: E402

TOL = 1e-6


def test_installed_defaults_match_the_written_ones() -> None:
    found = klt.installed_defaults()
    assert found["GRPO"] == versions.GRPO_DEFAULTS
    assert found["RLOO"] == versions.RLOO_DEFAULTS


def test_reader_reads_a_patched_trainer(dirs: tuple[Path, Path]) -> None:
    trainer = harness.make_trainer(*dirs, "RLOO", patched=True, kl="k3-in-loss")
    reading = klt.read(trainer)
    assert reading.config == KLConfig.parse("k3-in-loss")
    assert reading.trainer == "RLOOTrainer (kl-patches)"
    native_reading = klt.read(trainer.args)  # the args say beta=0.05: TRL's own k1-in-reward
    assert native_reading.config == KLConfig(coef=0.05)


def test_reader_findings() -> None:
    off = klt.read({"beta": 0.0})
    assert off.config.placement == "none"
    assert [f.code for f in off.findings] == ["trl.kl_off"]
    seq = klt.read({"beta": 0.04, "importance_sampling_level": "sequence", "loss_type": "grpo"})
    codes = {f.code for f in seq.findings}
    assert {"trl.sequence_ratio_on_token_kl", "trl.token_mean_loss"} <= codes
    assert klt.read({"beta": 0.04, "num_iterations": 2}).off_policy
    assert klt.read({"trainer": "rloo", "beta": 0.1}).config == KLConfig(coef=0.1)
    with pytest.raises(ValueError, match="loss_type"):
        klt.from_trl_config({"beta": 0.1, "loss_type": "ppo"})
