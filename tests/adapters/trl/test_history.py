"""TRL's KL history as data, and the History fold it is built on.

Each row of ``kl_patches.adapters.trl.history.HISTORY`` must hold from its release on and must
change something against the release before (the test id carries the row's ``source``). The fold
(:meth:`History.at`) and :meth:`History.change_points` are checked on small hand-made histories:
PEP 440 ordering with pre- and post-releases, keys missing before their first change, ``None``
for a removed feature. The evidence tables are re-read against real wheels when
``KL_PATCHES_TRL_WHEELS`` points at unpacked releases (``<dir>/<version>/trl/...``); against a
fake tree otherwise. Needs only torch and packaging (no TRL).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from kl_patches.adapters.history import Change, History
from kl_patches.adapters.trl.history import (
    ANCHORS,
    BEFORE,
    EVIDENCE,
    HISTORY,
    RELEASES,
    check_sources,
)
from kl_patches.adapters.trl.versions import GRPO_DEFAULTS, GRPO_LOSS_AGGREGATION, RLOO_DEFAULTS

os.environ.setdefault("HF_HUB_OFFLINE", "1")

_MISSING = object()
_WHEELS = os.environ.get("KL_PATCHES_TRL_WHEELS", "")


def _before(version: str) -> str | None:
    index = RELEASES.index(version)
    return RELEASES[index - 1] if index else None


# ------------------------------------------------------------------------------- the TRL rows
@pytest.mark.parametrize("row", HISTORY.changes, ids=lambda c: f"{c.key}@{c.since}[{c.source}]")
def test_row_holds_from_its_release_and_not_before(row: Change) -> None:
    """The fold gives the row's value at ``since``; the release before had another (or none)."""
    assert HISTORY.at(row.since)[row.key] == row.value
    before = _before(row.since)
    if before is not None:
        assert HISTORY.at(before).get(row.key, _MISSING) != row.value


def test_releases_are_every_final_release_in_order() -> None:
    from packaging.version import Version

    versions = [Version(v) for v in RELEASES]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    assert (RELEASES[0], RELEASES[-1]) == ("0.14.0", "1.16.0")
    assert not any(v.is_prerelease or v.is_devrelease for v in versions)
    assert HISTORY.releases == RELEASES and HISTORY.library == "trl"
    assert len(RELEASES) == 54  # PyPI: 0.14.0 ... 1.16.0, 1.0.0rc1 left out


def test_rows_are_well_formed() -> None:
    seen: set[tuple[str, str]] = set()
    for row in HISTORY.changes:
        ident = (row.key, row.since)
        assert ident not in seen, ident
        seen.add(ident)
        assert row.since in RELEASES
        assert re.fullmatch(r"(grpo|rloo|ppo)\.[a-z0-9_.]+", row.key), row.key
        assert re.fullmatch(r"trl/[\w/]+\.py:\d+", row.source), row.source
        if row.source.endswith(":0"):
            assert row.value is None, "a path:0 source marks a removal"
        assert "\n" not in row.note
        value = row.value
        assert value is None or isinstance(value, bool | int | float | str | tuple), value
        if isinstance(value, tuple):
            assert all(isinstance(item, str) for item in value)
        json.dumps(value)


def test_evidence_tables_cover_the_rows() -> None:
    rows = {(row.key, row.since) for row in HISTORY.changes}
    assert set(EVIDENCE) == rows
    assert set(ANCHORS) <= rows and set(BEFORE) <= rows
    for pattern in [*EVIDENCE.values(), *ANCHORS.values()]:
        re.compile(pattern)
    for ident, (mode, regex, use_anchor) in BEFORE.items():
        assert mode in ("present", "absent") and isinstance(use_anchor, bool), ident
        re.compile(regex)
        assert ident[1] != RELEASES[0], "the first release has no release before it"


def test_newest_release_matches_the_adapter_defaults() -> None:
    """native.py (TRL 1.16 defaults, checked there by instantiation) and the history agree."""
    now = HISTORY.at("1.16.0")
    grpo = {
        "beta": "grpo.beta_default",
        "use_bias_correction_kl": "grpo.use_bias_correction_kl_default",
        "loss_type": "grpo.loss_type_default",
        "scale_rewards": "grpo.scale_rewards_default",
        "multi_objective_aggregation": "grpo.multi_objective_aggregation_default",
        "importance_sampling_level": "grpo.importance_sampling_level_default",
        "num_iterations": "grpo.num_iterations_default",
        "steps_per_generation": "grpo.steps_per_generation_default",
        "vllm_importance_sampling_correction": "grpo.vllm_importance_sampling_correction_default",
        "max_completion_length": "grpo.max_completion_length_default",
        "temperature": "grpo.temperature_default",
        "sync_ref_model": "grpo.sync_ref_model_default",
    }
    for field, key in grpo.items():
        assert now[key] == GRPO_DEFAULTS[field], field
    rloo = {
        "beta": "rloo.kl_coef_default",
        "num_iterations": "rloo.update_epochs_default",
        "temperature": "rloo.temperature_default",
        "sync_ref_model": "rloo.sync_ref_model_default",
    }
    for field, key in rloo.items():
        assert now[key] == RLOO_DEFAULTS[field], field
    assert now["rloo.kl_coef_name"] == "beta"


def test_newest_release_matches_the_adapter_loss_aggregation() -> None:
    """Every 1.16 loss type reduces k3 the way native.GRPO_LOSS_AGGREGATION says."""
    now = HISTORY.at("1.16.0")
    same = {
        "seq_mean_token_mean": "seq_mean_token_mean",
        "token_mean_local": "token_mean",
        "token_mean_global": "token_mean",
        "sum_over_B_max_completion_length": "sum",
        "seq_sum_mean": "sum",
    }
    loss_types = now["grpo.loss_types"]
    assert isinstance(loss_types, tuple) and set(loss_types) == set(GRPO_LOSS_AGGREGATION)
    for loss_type, aggregation in GRPO_LOSS_AGGREGATION.items():
        assert same[str(now[f"grpo.kl_aggregation.{loss_type}"])] == aggregation, loss_type


def test_an_old_pin_reads_differently() -> None:
    """open-r1 pins trl 0.18.0: KL on at 0.04, bnpo token mean, no importance weight on k3."""
    old = HISTORY.at("0.18.0")
    assert old["grpo.beta_default"] == 0.04
    assert old["grpo.loss_type_default"] == "bnpo"
    assert old["grpo.kl_ratio_weight"] == "none"
    assert "grpo.use_bias_correction_kl_default" not in old
    assert HISTORY.change_points("grpo.beta_default") == ("0.19.0",)  # reading.py's "since 0.19"
    assert HISTORY.at("0.14.0")["grpo.kl_aggregation.default"] == "seq_mean_token_mean"
    assert HISTORY.at("1.13.0")["ppo.module"] is None


# ------------------------------------------------------------------------------- check_sources
def _write(root: Path, version: str, path: str, lines: list[str]) -> None:
    file = root / version / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _tiny(source: str, value: object = 0.0) -> History:
    return History(
        "trl", ("0.18.2", "0.19.0"), (Change("0.19.0", "grpo.beta_default", value, source),)
    )


_EVIDENCE = {("grpo.beta_default", "0.19.0"): r"default=0\.0[,)]"}
_ANCHORS = {("grpo.beta_default", "0.19.0"): r"^    beta: "}
_BEFORE = {("grpo.beta_default", "0.19.0"): ("present", r"default=0\.04[,)]", True)}
_CONFIG = "trl/trainer/grpo_config.py"


def _tree(root: Path, new_default: str = "0.0", old_default: str = "0.04") -> None:
    head = ["class GRPOConfig:", "    temperature: float = field(", "        default=0.0,", "    )"]
    beta = ["    beta: float = field("]
    _write(root, "0.19.0", _CONFIG, [*head, *beta, f"        default={new_default},", "    )"])
    _write(root, "0.18.2", _CONFIG, [*head, *beta, f"        default={old_default},", "    )"])


def test_check_sources_accepts_a_right_row(tmp_path: Path) -> None:
    _tree(tmp_path)
    tiny = _tiny(f"{_CONFIG}:6")
    assert check_sources(tmp_path, tiny, _EVIDENCE, _ANCHORS, _BEFORE) == []


def test_check_sources_reports_a_wrong_line(tmp_path: Path) -> None:
    _tree(tmp_path)
    # line 3 matches the regex but lies before the anchor (it is temperature's default)
    problems = check_sources(tmp_path, _tiny(f"{_CONFIG}:3"), _EVIDENCE, _ANCHORS, _BEFORE)
    assert len(problems) == 1 and "anchor" in problems[0]
    problems = check_sources(tmp_path, _tiny(f"{_CONFIG}:5"), _EVIDENCE, _ANCHORS, _BEFORE)
    assert len(problems) == 1 and "does not match" in problems[0]


def test_check_sources_reports_a_wrong_since(tmp_path: Path) -> None:
    _tree(tmp_path, old_default="0.0")  # the release before already had 0.0
    problems = check_sources(tmp_path, _tiny(f"{_CONFIG}:6"), _EVIDENCE, _ANCHORS, _BEFORE)
    assert len(problems) == 1 and "should be present" in problems[0]


def test_check_sources_reports_a_removal_that_is_still_there(tmp_path: Path) -> None:
    _tree(tmp_path)
    removal = _tiny(f"{_CONFIG}:0", value=None)
    assert check_sources(tmp_path, removal, _EVIDENCE, _ANCHORS, {}) != []
    (tmp_path / "0.19.0" / _CONFIG).unlink()
    assert check_sources(tmp_path, removal, _EVIDENCE, _ANCHORS, {}) == []


def test_check_sources_reports_a_row_without_evidence(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert check_sources(tmp_path, _tiny(f"{_CONFIG}:6"), {}, {}, {}) == [
        "('grpo.beta_default', '0.19.0'): no evidence recorded"
    ]


@pytest.mark.wheels  # selected by nox -s record_check, deselected elsewhere
def test_every_row_against_the_released_wheels() -> None:
    assert _WHEELS, "set KL_PATCHES_TRL_WHEELS to unpacked trl wheels (nox -s record_check)"
    assert check_sources(_WHEELS) == []
