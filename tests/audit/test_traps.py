"""Findings for the field's current KL traps, each at the releases where it starts and stops.

* TRL >= 1.10.0 defaults ``use_bias_correction_kl=True`` (``grpo_config.py:966`` of 1.10.0;
  1.9.2 has ``default=False``): a GRPO config that never sets it trains k3 times pi/pi_old, a
  different gradient from the same config on earlier releases.
* ``importance_sampling_level="sequence"`` with that correction weights each token's k3 by the
  sequence ratio (TRL issue #6586), also when the correction is on only by default.
* verl ``k3+``: advertised from 0.6.0, raises NotImplementedError until 0.7.1 (the wheels'
  ``kl_penalty`` passes the name unstripped), stripped from 0.8.0.

The TRL reader runs without TRL installed; the verl cases go through the audit of a launch line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches.adapters.trl.read import read
from kl_patches.audit import audit

WEIGHTED = "trl.kl_weighted_by_default"
SEQUENCE = "trl.sequence_ratio_on_token_kl"


def _codes(source: dict[str, object], version: str) -> set[str]:
    return {f.code for f in read(source, version=version).findings}


@pytest.mark.parametrize(
    ("version", "weighted"),
    [("0.26.0", False), ("1.9.2", False), ("1.10.0", True), ("1.16.0", True)],
)
def test_importance_weighted_k3_by_default_from_1_10(version: str, weighted: bool) -> None:
    reading = read({"beta": 0.04}, version=version)
    assert (WEIGHTED in {f.code for f in reading.findings}) == weighted
    assert (reading.config.importance_weighting == "token") == weighted
    if weighted:
        (finding,) = [f for f in reading.findings if f.code == WEIGHTED]
        assert finding.severity == "warning"
        assert "from TRL 1.10.0, trl/trainer/grpo_config.py:966" in finding.message
        assert "use_bias_correction_kl=false" in finding.fix


@pytest.mark.parametrize("value", [True, False])
def test_setting_the_flag_explicitly_is_not_the_trap(value: bool) -> None:
    codes = _codes({"beta": 0.04, "use_bias_correction_kl": value}, "1.16.0")
    assert WEIGHTED not in codes


def test_no_kl_no_weighting_finding() -> None:
    assert WEIGHTED not in _codes({"beta": 0.0}, "1.16.0")


def test_sequence_level_sampling_with_the_default_correction() -> None:
    sequence = {"beta": 0.04, "importance_sampling_level": "sequence"}
    assert {WEIGHTED, SEQUENCE} <= _codes(sequence, "1.16.0")  # on by default: both
    assert SEQUENCE not in _codes(sequence, "1.9.2")  # off by default before 1.10.0
    assert SEQUENCE in _codes({**sequence, "use_bias_correction_kl": True}, "0.26.0")
    assert SEQUENCE not in _codes({**sequence, "use_bias_correction_kl": False}, "1.16.0")


@pytest.mark.parametrize(
    ("version", "crashes"),
    [("0.5.0", False), ("0.6.0", True), ("0.6.1", True), ("0.7.0", True), ("0.7.1", True),
     ("0.8.0", False), ("0.9.1", False)],
)  # fmt: skip
def test_verl_plus_estimator_crashes_from_0_6_0_to_0_7_1(
    version: str, crashes: bool, tmp_path: Path
) -> None:
    launch = tmp_path / "run.sh"
    launch.write_text(
        "python3 -m verl.trainer.main_ppo actor_rollout_ref.actor.use_kl_loss=True "
        "actor_rollout_ref.actor.kl_loss_type=k3+\n",
        encoding="utf-8",
    )
    (entry,) = audit(launch, version=f"verl={version}")
    codes = {f.code for f in entry.findings}
    assert ("verl.plus_estimator_crashes" in codes) == crashes
    if version == "0.5.0":  # before 0.6.0 '+' names are simply unknown (and raise too)
        assert "verl.unknown_estimator" in codes
