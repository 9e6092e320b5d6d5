"""The launch-time report every launcher prints before the library starts (one shared function)."""

from __future__ import annotations

import pytest

from kl_patches.adapters.base import NativeReading
from kl_patches.adapters.launch_report import (
    LaunchReport,
    Updates,
    announce,
    coef_source,
    integer,
    lines,
)
from kl_patches.audit.verdicts import verdict_of
from kl_patches.config import KLConfig
from kl_patches.theory import verdict

ON = Updates("on-policy", "one update per batch")
OFF = Updates("off-policy", "4 updates per batch", on_policy_how="mini-batch = batch")


def _field(text: list[str], name: str) -> list[str]:
    return [line for line in text if line.lstrip().startswith(f"{name}:")]


def test_the_block_names_the_config_updates_verdict_and_where_the_coefficient_comes_from(
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = KLConfig.parse("k3-in-loss", coef=0.001)
    report = LaunchReport(
        "kl-patches verl",
        "verl",
        config,
        ON,
        coef_source=coef_source([], "verl's own default"),
        route="native options only",
        changes=("x=1: why",),
        notes=("a finding",),
    )
    announce(report)
    err = capsys.readouterr().err
    assert err.splitlines() == lines(report)
    assert err.startswith("kl-patches verl: KL regulariser for verl\n")
    assert f"KL as run:    {config}" in err
    assert "updates:      on-policy: one update per batch" in err
    v = verdict(config)
    assert f"verdict:      biased for the reverse KL ({v.gradient}), for these on-policy" in err
    # theory's advice, its KLConfig.parse(...) written as the launcher's complete command
    assert "advice:       Use kl-patches verl --kl k1-in-reward --kl.coef 0.001 -- <your " in err
    assert "KLConfig.parse" not in err and v.advice.startswith("Use KLConfig.parse(")
    assert "coef:         0.001 (the default: verl's own default)" in err
    assert "how:          native options only" in err and "also changes: x=1: why" in err
    assert err.endswith("  a finding\n")


def test_an_off_policy_run_is_not_told_its_on_policy_verdict() -> None:
    """The contradiction of issue 38: "biased ... On-policy: Keep it: this is the unbiased
    configuration" for a run that did not say whether it was off-policy."""
    config = KLConfig.parse("k1-in-reward", coef=0.001)
    text = lines(LaunchReport("x", "verl", config, OFF))
    assert _field(text, "updates") == ["  updates:      off-policy: 4 updates per batch"]
    (line,) = _field(text, "verdict")
    assert "biased for the reverse KL" in line and "off-policy updates" in line
    assert verdict(config, off_policy=True).unbiased is False
    (advice,) = _field(text, "advice")
    assert "On-policy:" not in advice and "Keep it" not in advice
    assert "--kl.importance_weighting sequence -- <your overrides>" in advice
    assert "Or make the run on-policy (mini-batch = batch)" in advice
    # on-policy the same config is unbiased and gets no advice at all
    text = lines(LaunchReport("x", "verl", config, ON))
    assert "unbiased" in _field(text, "verdict")[0] and not _field(text, "advice")


def test_unknown_updates_give_both_cases_labelled() -> None:
    config = KLConfig.parse("k1-in-reward")
    text = lines(LaunchReport("x", "verl", config, Updates("unknown", "a=None: not a number")))
    (line,) = _field(text, "verdict")
    assert "on-policy unbiased" in line and "off-policy biased" in line
    (advice,) = _field(text, "advice")
    assert advice.split(":", 1)[1].strip().startswith("if off-policy:")
    # a config biased either way says so once
    text = lines(LaunchReport("x", "verl", KLConfig.parse("k1-in-loss"), Updates("unknown")))
    assert ", on- or off-policy" in _field(text, "verdict")[0]


def test_two_estimators_take_the_audits_verdict() -> None:
    reward = KLConfig.parse("k1-in-reward", coef=0.01)
    loss = KLConfig.parse("k3-in-loss", coef=0.01)
    text = lines(LaunchReport("x", "verl", reward, ON, loss_config=loss))
    assert _field(text, "KL as run") == [f"  KL as run:    reward side {reward}"]
    assert f"loss side {loss}" in "\n".join(text)
    reading = NativeReading("verl", None, "", reward, False, loss_config=loss)
    assert f"({verdict_of(reading).gradient})" in _field(text, "verdict")[0]


def test_placement_none_and_nothing_changed() -> None:
    text = lines(LaunchReport("x", "TRL", KLConfig(placement="none"), ON))
    assert "no KL regularisation" in "\n".join(text) and not _field(text, "coef")
    assert "  also changes: nothing beyond the KL" in text


def test_updates_state_is_checked() -> None:
    with pytest.raises(ValueError, match="on-policy"):
        Updates("sometimes")


def test_integer_reads_unset_values_as_unknown() -> None:
    assert [integer(v) for v in (256, "1024", 8.0, " 16 ")] == [256, 1024, 8, 16]
    assert [integer(v) for v in (None, "", "${oc.env:BS}", True, 2.5, "null")] == [None] * 6


def test_coef_source_names_every_place_it_was_set() -> None:
    assert coef_source(["--kl.coef", "run.yaml (kl: coef)"], "x") == (
        "from --kl.coef, run.yaml (kl: coef)"
    )
