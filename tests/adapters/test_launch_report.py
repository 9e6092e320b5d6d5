"""The KL block every launcher prints before the library starts (one shared function)."""

from __future__ import annotations

import pytest

from kl_patches.adapters.launch_report import LaunchReport, announce, coef_source, lines
from kl_patches.config import KLConfig
from kl_patches.theory import verdict


def test_the_block_names_the_config_its_verdict_and_where_the_coefficient_comes_from(
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = KLConfig.parse("k3-in-loss", coef=0.001)
    report = LaunchReport(
        "kl-patches verl",
        "verl",
        config,
        coef_source=coef_source([], "verl's own default"),
        route="native options only",
        notes=("a finding",),
    )
    announce(report)
    err = capsys.readouterr().err
    assert err.splitlines() == lines(report)
    assert err.startswith("kl-patches verl: KL regulariser for verl\n")
    assert f"config:    {config}" in err
    assert f"verdict:   biased for the reverse KL ({verdict(config).gradient}, on-policy" in err
    assert "advice:" in err and "coef:      0.001 (the default: verl's own default)" in err
    assert "how:       native options only" in err and err.endswith("  a finding\n")


def test_unbiased_off_policy_and_off() -> None:
    given = coef_source(["--kl.coef"], "x")
    text = "\n".join(lines(LaunchReport("x", "TRL", KLConfig(), coef_source=given)))
    assert "unbiased for the reverse KL" in text and "advice" not in text
    text = "\n".join(lines(LaunchReport("x", "TRL", KLConfig(), off_policy=True)))
    assert "biased for the reverse KL" in text and "off-policy updates" in text
    text = "\n".join(lines(LaunchReport("x", "TRL", KLConfig(placement="none"))))
    assert "no KL regularisation" in text and "coef:" not in text


def test_coef_source_names_every_place_it_was_set() -> None:
    assert coef_source(["--kl.coef", "run.yaml (kl: coef)"], "x") == (
        "from --kl.coef, run.yaml (kl: coef)"
    )
