"""The verl reader: findings for what a verl config runs, off-policy updates, and reading
without verl installed."""

from __future__ import annotations

import sys
from pathlib import Path

from kl_patches.adapters import verl as kv
from kl_patches.config import KLConfig

sys.path.insert(0, str(Path(__file__).parent))

from verl_support.configs import (
    NATIVE_BOTH,
    NATIVE_LOSS,
    NATIVE_REWARD,
    PATCHED,
)

ALL = NATIVE_LOSS + NATIVE_REWARD + NATIVE_BOTH + PATCHED


def codes(reading) -> set[str]:  # type: ignore[no-untyped-def]
    return {f.code for f in reading.findings}


def test_read_findings() -> None:
    gdpo = kv.read(["algorithm.use_kl_in_reward=True", "algorithm.adv_estimator=gdpo"])
    assert "verl.gdpo_drops_kl" in codes(gdpo)
    multi = kv.read(
        [
            "algorithm.use_kl_in_reward=True",
            "algorithm.adv_estimator=grpo",
            "actor_rollout_ref.rollout.multi_turn.enable=True",
        ]
    )
    assert {"verl.multi_turn_drops_kl", "verl.std_scaled_kl"} <= codes(multi)
    both = kv.read(
        [
            "algorithm.use_kl_in_reward=True",
            "algorithm.kl_penalty=low_var_kl",
            "actor_rollout_ref.actor.use_kl_loss=True",
            "actor_rollout_ref.actor.kl_loss_coef=0.01",
        ]
    )
    assert {
        "verl.both_switches_k3",
        "verl.mismatched_coefficients",
        "verl.token_mean_loss",
        "verl.off_policy_loss_kl",
        "verl.k3_clamp",
    } <= codes(both)
    assert both.off_policy  # verl default: ppo_mini_batch_size 256 < train_batch_size 1024
    assert both.config.placement == "both" and both.config.loss_coef == 0.01
    clean = kv.read(
        [
            *kv.to_overrides(KLConfig(coef=0.05)),
            "algorithm.adv_estimator=rloo",
            "actor_rollout_ref.actor.ppo_mini_batch_size=1024",
        ]
    )
    assert clean.findings == () and not clean.off_policy
    assert clean.config == KLConfig(coef=0.05)
    assert clean.fix == tuple(kv.to_overrides(KLConfig(coef=0.05)))
    off = kv.read([])
    assert "verl.kl_off" in codes(off) and off.library == "verl"
    assert all(f.severity in ("error", "warning", "info") for f in both.findings)


def test_off_policy_finding_unless_importance_weighted() -> None:
    plain = KLConfig.parse("k3-in-loss", coef=0.1)
    weighted = plain.replace(importance_weighting="token")
    assert "verl.off_policy_loss_kl" in codes(kv.read(kv.to_overrides(plain)))
    reading = kv.read(kv.to_overrides(weighted))
    assert reading.off_policy and "verl.off_policy_loss_kl" not in codes(reading)


def test_reader_works_without_verl() -> None:
    """from_config, read and to_overrides in a process where importing verl or hydra fails."""
    import subprocess

    code = (
        "import sys\n"
        "sys.modules.update(verl=None, hydra=None, omegaconf=None, ray=None)\n"
        "from kl_patches.adapters import verl as kv\n"
        "from kl_patches.config import KLConfig\n"
        "o = kv.to_overrides(KLConfig.parse('k2-in-loss', granularity='sequence'))\n"
        "assert kv.from_config(o).granularity == 'sequence'\n"
        "r = kv.read(['algorithm.use_kl_in_reward=True', 'algorithm.adv_estimator=gdpo'])\n"
        "assert 'verl.gdpo_drops_kl' in {f.code for f in r.findings}\n"
        "assert 'verl' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_off_policy_fix_names_the_prefix_weighted_k1_in_reward() -> None:
    """The off-policy finding's first fix is the option that is unbiased off-policy; applied, the
    finding goes away."""
    (finding,) = [
        f
        for f in kv.read(kv.to_overrides(KLConfig.parse("k3-in-loss", coef=0.1))).findings
        if f.code == "verl.off_policy_loss_kl"
    ]
    assert finding.fix is not None
    from kl_patches.adapters.verl.launch import overrides_of

    first = finding.fix.split(" or ")[0]
    assert first.startswith("kl-patches verl --kl k1-in-reward --kl.coef 0.1 ")
    assert "--kl.importance_weighting sequence -- " in first
    fixed = KLConfig.parse("k1-in-reward", coef=0.1, importance_weighting="sequence")
    words = first.split()[2:]
    assert overrides_of(words[: words.index("--") + 1]) == kv.to_overrides(fixed)
    assert "verl.off_policy_loss_kl" not in codes(kv.read(kv.to_overrides(fixed)))
