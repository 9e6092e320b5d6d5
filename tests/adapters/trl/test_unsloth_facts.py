"""unsloth's GRPO KL as data, and the reading of unsloth launches (no unsloth needed).

The rows themselves are checked against the released wheels in ``nox -s unsloth``
(``test_unsloth.py``); here: their shape, what they fold to, the evidence checker on a made-up
tree, and what the TRL reader makes of launches that import unsloth.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from kl_patches.adapters.trl import read, unsloth_facts
from kl_patches.config import KLConfig
from kl_patches.theory import verdict

NEWEST_TRL = "1.15.0"


def test_every_row_cites_a_line_and_has_evidence() -> None:
    rows = unsloth_facts.rows()
    assert len(rows) >= 20
    for row in rows:
        path, _, line = row.source.rpartition(":")
        assert path.startswith(("unsloth/", "unsloth_zoo/")) and int(line) > 0, row
        assert row.evidence and row.before and Version(row.before) < Version(row.since), row
        assert row.package in unsloth_facts.PACKAGES and row.note, row


def test_folded_facts_of_the_newest_releases() -> None:
    zoo = unsloth_facts.facts("unsloth_zoo")
    assert zoo["grpo.kl_estimator"] == "k3" and zoo["grpo.kl_placement"] == "loss"
    assert zoo["grpo.bias_correction_read"] is True
    assert (zoo["grpo.log_ratio_clamp"], zoo["grpo.kl_clamp"]) == (20.0, 10.0)
    assert zoo["cpu_backend"] is True
    rel = unsloth_facts.facts("unsloth")
    assert rel["grpo.beta_default"] == "by_loss_type"
    assert rel["grpo.loss_type_default"] == "dapo_from_trl_0.22"
    assert unsloth_facts.trl_pin() == ("2026.10.9", "trl!=0.19.0,<=1.15.0,>=0.18.2")


@pytest.mark.parametrize(
    ("release", "beta", "forced", "bnpo"),
    [
        ("2025.6.4", "trl", False, False),
        ("2025.6.5", 0.001, True, True),
        ("2025.10.12", 0.001, True, False),
        ("2025.11.4", 0.001, False, False),
        ("2026.9.12", "by_loss_type", False, False),
    ],
)
def test_folded_facts_by_release(release: str, beta: object, forced: bool, bnpo: bool) -> None:
    rel = unsloth_facts.facts("unsloth", release)
    assert rel["grpo.beta_default"] == beta
    assert rel["grpo.dapo_forces_beta_zero"] is forced
    assert rel["grpo.dapo_runs_bnpo"] is bnpo


def _settings(**given: object) -> dict[str, object]:
    base: dict[str, object] = {
        "beta": 0.0,
        "loss_type": "dapo",
        "use_bias_correction_kl": True,
        "max_completion_length": 512,
    }
    return {**base, **given}


@pytest.mark.parametrize(
    ("given", "release", "trl", "loss_type", "beta"),
    [
        ({}, None, NEWEST_TRL, "dapo", 0.0),  # 2026.9.12+: TRL's dapo, no KL
        ({}, None, "0.21.0", "bnpo", 0.001),  # before TRL 0.22: bnpo at 0.001
        ({"loss_type": "bnpo"}, None, NEWEST_TRL, "bnpo", 0.001),
        ({"loss_type": "dr_grpo"}, None, NEWEST_TRL, "dr_grpo", 0.0),
        ({"beta": 0.04}, None, NEWEST_TRL, "dapo", 0.04),
        ({}, "2026.9.11", NEWEST_TRL, "bnpo", 0.001),  # the previous defaults
        # TRL's default loss_type dapo, which 2025.6.5-2025.10.11 rewrite to bnpo with beta 0
        ({}, "2025.8.10", NEWEST_TRL, "bnpo", 0.0),
        ({}, "2025.2.15", NEWEST_TRL, "dapo", 0.0),  # TRL's defaults
        ({"loss_type": "dapo", "beta": 0.04}, "2025.7.1", NEWEST_TRL, "bnpo", 0.0),
        ({"loss_type": "dapo", "beta": 0.04}, "2025.10.12", NEWEST_TRL, "dapo", 0.0),
        ({"loss_type": "dapo", "beta": 0.04}, "2025.11.4", NEWEST_TRL, "dapo", 0.04),
    ],
)
def test_resolve_settings_applies_unsloths_defaults(
    given: dict[str, object], release: str | None, trl: str, loss_type: str, beta: float
) -> None:
    s = unsloth_facts.resolve_settings(_settings(**given), frozenset(given), trl, release)
    assert (s["loss_type"], s["beta"]) == (loss_type, beta)


def test_resolve_settings_keeps_a_config_objects_values() -> None:
    s = unsloth_facts.resolve_settings(_settings(), None, NEWEST_TRL)
    assert (s["loss_type"], s["beta"]) == ("dapo", 0.0)


@pytest.mark.parametrize(("zoo", "read_flag"), [("2026.9.2", False), ("2026.9.3", True)])
def test_bias_correction_is_read_from_zoo_2026_9_3(zoo: str, read_flag: bool) -> None:
    s = unsloth_facts.resolve_settings(
        _settings(beta=0.04), frozenset({"beta"}), NEWEST_TRL, zoo=zoo
    )
    assert s["use_bias_correction_kl"] is read_flag
    config = unsloth_facts.native_config(0.04, "bnpo", use_bias_correction_kl=True, zoo=zoo)
    assert config.importance_weighting == ("token" if read_flag else "none")


@pytest.mark.parametrize(
    ("zoo", "clamps"), [("2026.9.7", (None, None)), ("2026.9.8", (20.0, 10.0))]
)
def test_clamps_from_zoo_2026_9_8(zoo: str, clamps: tuple[object, object]) -> None:
    config = unsloth_facts.native_config(0.04, "grpo", zoo=zoo)
    assert (config.log_ratio_clamp, config.kl_clamp) == clamps


def test_native_config_per_loss_type() -> None:
    assert unsloth_facts.native_config(0.0, "bnpo").placement == "none"
    dr = unsloth_facts.native_config(0.04, "dr_grpo", max_completion_length=200)
    assert (dr.coef, dr.loss_aggregation, dr.estimator) == (pytest.approx(0.0002), "sum", "k3")
    assert unsloth_facts.native_config(0.04, "grpo").loss_aggregation == "seq_mean_token_mean"
    assert unsloth_facts.native_config(0.04, "dapo").loss_aggregation == "token_mean"
    with pytest.raises(ValueError, match="choose one of"):
        unsloth_facts.native_config(0.04, "ppo")


# --------------------------------------------------------------------------- evidence checker
def _write(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _row(since: str, key: str, line: int, before: str, gone: str = "") -> unsloth_facts.Row:
    return unsloth_facts.Row(
        since, key, 1, f"pkg/f.py:{line}", package="unsloth", before=before,
        evidence=r"new = 1", gone=gone,
    )  # fmt: skip


def test_check_sources_finds_wrong_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = (
        _row("2.0", "a", 2, "1.0"),  # right
        _row("2.0", "b", 1, "1.0"),  # wrong line
        _row("3.0", "c", 2, "2.0"),  # the release before already shows it
        _row("2.0", "d", 2, "1.0", gone=r"old = 0"),  # right, with what it replaced
        _row("4.0", "e", 2, "2.0"),  # no wheel
    )
    monkeypatch.setattr(unsloth_facts, "rows", lambda: rows)
    _write(tmp_path, "unsloth-1.0/pkg/f.py", "x\nold = 0\n")
    _write(tmp_path, "unsloth-2.0/pkg/f.py", "x\nnew = 1\n")
    _write(tmp_path, "unsloth-3.0/pkg/f.py", "x\nnew = 1\n")
    problems = unsloth_facts.check_sources(tmp_path)
    assert len(problems) == 3, problems
    assert "unsloth 2.0 b=1: pkg/f.py:1 does not match" in problems[0]
    assert "unsloth 3.0 c=1: 2.0 already shows" in problems[1]
    assert "unsloth 4.0 e=1" in problems[2] and "missing" in problems[2]


# --------------------------------------------------------------------------- the reading
def _read(payload: dict[str, object], version: str = NEWEST_TRL) -> object:
    return read(payload, version=version, patchers=("unsloth",))


def test_unsloth_notebook_without_beta_trains_a_kl() -> None:
    """The common notebook: loss_type set, beta left out. TRL alone: no KL; unsloth: 0.001."""
    payload = {"loss_type": "bnpo", "max_completion_length": 512}
    plain = read(payload, version=NEWEST_TRL)
    assert plain.config.placement == "none"
    reading = _read(payload)
    assert reading.trainer.endswith("(unsloth)")  # type: ignore[attr-defined]
    config: KLConfig = reading.config  # type: ignore[attr-defined]
    assert (config.short_name, config.coef) == ("k3-in-loss", 0.001)
    assert (config.log_ratio_clamp, config.kl_clamp) == (20.0, 10.0)
    assert config.importance_weighting == "token"  # TRL 1.15's default, read by zoo 2026.10.9
    codes = {f.code for f in reading.findings}  # type: ignore[attr-defined]
    assert {"trl.unsloth_loss", "trl.unsloth_kl", "trl.unsloth_default_beta"} <= codes
    assert "trl.unsloth_default_loss_type" not in codes
    fixes = {f.code: f.fix for f in reading.findings}  # type: ignore[attr-defined]
    assert "kl_patches.adapters.trl.unsloth.apply" in fixes["trl.unsloth_kl"]
    assert "'k2-in-loss', granularity='sequence', coef=0.001" in fixes["trl.unsloth_kl"]
    assert reading.fix == ("loss_type=dr_grpo",)  # type: ignore[attr-defined]


def test_unsloth_defaults_without_loss_type_or_beta() -> None:
    # TRL 0.21 defaults to bnpo like unsloth, but to beta 0.0 where unsloth has 0.001
    reading = _read({}, version="0.21.0")
    codes = {f.code for f in reading.findings}  # type: ignore[attr-defined]
    assert "trl.unsloth_default_beta" in codes and "trl.unsloth_default_loss_type" not in codes
    assert reading.config.coef == 0.001  # type: ignore[attr-defined]
    assert reading.config.loss_aggregation == "token_mean"  # type: ignore[attr-defined]
    # unsloth 2025.9.1-2026.9.11 default to bnpo where TRL >= 0.22 has dapo
    settings = _settings()
    resolved = unsloth_facts.resolve_settings(settings, frozenset(), NEWEST_TRL, "2026.9.11")
    found = unsloth_facts.findings(settings, resolved, frozenset(), NEWEST_TRL, "2026.9.11")
    by_code = {f.code: f for f in found}
    assert {"trl.unsloth_default_loss_type", "trl.unsloth_default_beta"} <= set(by_code)
    assert (
        "unsloth 2025.9.1 unsloth/models/rl.py:535"
        in by_code["trl.unsloth_default_loss_type"].message
    )


def test_unsloth_reading_keeps_explicit_settings() -> None:
    reading = _read({"beta": 0.04, "loss_type": "dr_grpo", "max_completion_length": 200})
    config: KLConfig = reading.config  # type: ignore[attr-defined]
    assert config.coef == pytest.approx(0.0002) and config.loss_aggregation == "sum"
    codes = {f.code for f in reading.findings}  # type: ignore[attr-defined]
    assert not any(c.startswith("trl.unsloth_default") for c in codes)
    assert reading.fix == ()  # type: ignore[attr-defined]  # already the nearest native setting
    assert verdict(config).gradient == "reverse_kl_partial"


def test_unsloth_trl_outside_its_pin() -> None:
    reading = _read({"beta": 0.04}, version="1.16.0")
    codes = {f.code for f in reading.findings}  # type: ignore[attr-defined]
    assert "trl.unsloth_trl_outside_pin" in codes
    inside = _read({"beta": 0.04})
    assert "trl.unsloth_trl_outside_pin" not in {f.code for f in inside.findings}  # type: ignore[attr-defined]


def test_findings_for_older_releases() -> None:
    settings = _settings(loss_type="dapo", beta=0.04)
    given = frozenset({"loss_type", "beta"})
    resolved = unsloth_facts.resolve_settings(settings, given, NEWEST_TRL, "2025.7.1", "2026.9.2")
    found = unsloth_facts.findings(settings, resolved, given, NEWEST_TRL, "2025.7.1", "2026.9.2")
    assert "trl.unsloth_dapo_drops_kl" in {f.code for f in found}
    settings = _settings(loss_type="bnpo", beta=0.04)
    resolved = unsloth_facts.resolve_settings(settings, given, NEWEST_TRL, zoo="2026.9.2")
    found = unsloth_facts.findings(settings, resolved, given, NEWEST_TRL, zoo="2026.9.2")
    ignored = [f for f in found if f.code == "trl.unsloth_ignores_bias_correction"]
    assert ignored and "unsloth_zoo 2026.9.2" in ignored[0].message


def test_rloo_is_not_read_as_unsloth() -> None:
    reading = read({"trainer": "rloo", "beta": 0.05}, version=NEWEST_TRL, patchers=("unsloth",))
    assert not reading.trainer.endswith("(unsloth)")
    assert reading.config.short_name == "k1-in-reward"
