"""kl_patches.theory: Table 1 names, verdict fields, docs in sync."""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches.config import KLConfig, all_configs
from kl_patches.theory import table1_markdown, verdict

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("config", "gradient", "unbiased"),
    [
        (KLConfig.parse("k1-in-reward"), "reverse_kl", True),
        (KLConfig.parse("k1-in-reward", reward_shape="reward_to_go"), "reverse_kl", True),
        (KLConfig.parse("k1-in-loss"), "zero", False),
        (KLConfig.parse("k3-in-loss"), "forward_kl_token", False),
        (KLConfig.parse("k3-in-reward"), "reverse_minus_forward_token", False),
        (KLConfig.parse("k3-in-both"), "reverse_kl", True),
        (KLConfig.parse("k1-in-both"), "reverse_kl", True),
        (KLConfig.parse("k3-in-both", loss_aggregation="token_mean"), "mixed", False),
        (KLConfig.parse("k1-in-both", loss_aggregation="token_mean"), "reverse_kl", True),
        (KLConfig.parse("k3-in-both", loss_coef=0.01), "mixed", False),
        (KLConfig.parse("k2-in-loss"), "reverse_kl_partial", False),
        (KLConfig.parse("k2-in-loss", granularity="sequence"), "reverse_kl", True),
        (KLConfig.parse("k3-in-loss", importance_weighting="token"), "reverse_kl_partial", False),
        (
            KLConfig.parse("k3-in-loss", loss_aggregation="token_mean"),
            "forward_kl_token_length_normalised",
            False,
        ),
        (KLConfig.parse("k3-in-loss", granularity="sequence"), "forward_kl", False),
        (KLConfig(placement="none"), "zero", False),
        (KLConfig(coef=0.0), "zero", False),
    ],
)
def test_table1(config: KLConfig, gradient: str, unbiased: bool) -> None:
    v = verdict(config)
    assert (v.gradient, v.unbiased) == (gradient, unbiased)
    assert v.explanation and v.advice


def test_off_policy_never_unbiased() -> None:
    v = verdict(KLConfig(), off_policy=True)
    assert not v.unbiased and not v.on_policy
    assert any("Off-policy" in c for c in v.caveats)


def test_every_config_has_a_verdict() -> None:
    for cfg in all_configs():
        v = verdict(cfg)
        assert v.gradient and v.explanation and v.advice
        if v.unbiased:
            assert [t.basis for t in v.terms] == ["reverse_kl"]
        if not v.unbiased and cfg.coef > 0 and cfg.placement != "none":
            assert "k1-in-reward" in v.advice or "loss_coef" in v.advice


def test_docs_index_has_generated_table1() -> None:
    text = (ROOT / "docs" / "index.md").read_text()
    assert table1_markdown() in text, "regenerate docs/index.md: python -m kl_patches.docs_gen"


# ------------------------------------------------------------------ off-policy verdicts
_SEQ = {"importance_weighting": "sequence"}


@pytest.mark.parametrize(
    ("config", "gradient", "unbiased"),
    [
        (KLConfig.parse("k1-in-reward", **_SEQ), "reverse_kl", True),
        (KLConfig.parse("k1-in-reward", reward_shape="reward_to_go", **_SEQ), "reverse_kl", True),
        (KLConfig.parse("k3-in-both", **_SEQ), "reverse_kl", True),
        (KLConfig.parse("k1-in-both", **_SEQ), "reverse_kl", True),
        (KLConfig.parse("k3-in-reward", **_SEQ), "reverse_minus_forward_token", False),
        (KLConfig.parse("k3-in-both", loss_coef=0.01, **_SEQ), "mixed", False),
        (KLConfig.parse("k1-in-reward", is_clip=2.0, **_SEQ), "reverse_kl_clipped", False),
        (KLConfig.parse("k3-in-both", is_clip=1.0, **_SEQ), "reverse_kl_clipped", False),
        (KLConfig.parse("k1-in-reward"), "reverse_kl", False),
        (KLConfig.parse("k3-in-both"), "reverse_kl", False),
        (KLConfig.parse("k3-in-both", importance_weighting="token"), "mixed", False),
        (KLConfig.parse("k3-in-loss", importance_weighting="token"), "reverse_kl_partial", False),
    ],
)
def test_off_policy_verdicts(config: KLConfig, gradient: str, unbiased: bool) -> None:
    v = verdict(config, off_policy=True)
    assert (v.gradient, v.unbiased, v.on_policy) == (gradient, unbiased, False)
    assert v.explanation and v.advice and v.caveats
    if config.importance_weighting != "sequence":
        assert any("importance_weighting='sequence'" in c for c in v.caveats)
        assert "importance_weighting='sequence'" in v.advice


def test_clipped_verdict_names_the_bias() -> None:
    v = verdict(KLConfig.parse("k1-in-reward", is_clip=2.0, **_SEQ), off_policy=True)
    assert "min(pi, 2 * mu)" in v.explanation and "attenuates" in v.explanation
    assert "past-token terms" in v.explanation  # reward_shape 'sequence' adds that bias
    rtg = KLConfig.parse("k1-in-reward", is_clip=2.0, reward_shape="reward_to_go", **_SEQ)
    assert "past-token terms" not in verdict(rtg, off_policy=True).explanation
    assert "is_clip=None" in v.advice


def test_sequence_weighting_keeps_the_on_policy_verdict() -> None:
    """On-policy every prefix weight is 1: the verdict is the unweighted twin's (is_clip >= 1),
    or that one scaled by is_clip (< 1)."""
    for cfg in all_configs():
        if cfg.importance_weighting != "sequence":
            continue
        twin = verdict(cfg.replace(importance_weighting="none", is_clip=None))
        v = verdict(cfg)
        if cfg.is_clip is None or cfg.is_clip >= 1:
            assert (v.gradient, v.unbiased, v.terms) == (twin.gradient, twin.unbiased, twin.terms)
        else:
            assert not v.unbiased and any("< 1" in c for c in v.caveats)
            assert [t.coef for t in v.terms] == pytest.approx(
                [cfg.is_clip * t.coef for t in twin.terms]
            )
