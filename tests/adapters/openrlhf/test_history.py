"""OpenRLHF's KL history as data: every row holds at its release and is a change there.

One test per row of ``HISTORY.changes`` (the id carries release, key and the source line of that
release), plus folds between rows for the findings the adapter depends on. Runs with torch,
packaging and pytest only (nothing imports OpenRLHF).
"""

from __future__ import annotations

import os
import re

import pytest
from packaging.version import Version

from kl_patches.adapters.history import Change
from kl_patches.adapters.openrlhf.history import HISTORY, RELEASES

os.environ.setdefault("HF_HUB_OFFLINE", "1")

_SOURCE = re.compile(r"^openrlhf/[\w./-]+\.py:\d+$")


def _row_id(change: Change) -> str:
    return f"{change.since}|{change.key}|{change.source}"


@pytest.mark.parametrize("change", HISTORY.changes, ids=_row_id)
def test_row_holds_at_its_release_and_changes_there(change: Change) -> None:
    """The fold gives the row's value at ``since``; the release before lacks it or differs."""
    assert HISTORY.at(change.since)[change.key] == change.value
    index = RELEASES.index(change.since)
    if index > 0:
        before = HISTORY.at(RELEASES[index - 1])
        assert change.key not in before or before[change.key] != change.value, (
            f"{change.key} already had {change.value!r} in {RELEASES[index - 1]}"
        )


def test_releases_are_every_pypi_release_from_050_ascending() -> None:
    """74 releases 0.5.0 .. 0.11.2 (post releases included), ascending, rows only at them."""
    assert RELEASES[0] == "0.5.0" and RELEASES[-1] == "0.11.2" and len(RELEASES) == 74
    assert list(RELEASES) == sorted(set(RELEASES), key=Version)
    assert "0.6.0.post1" in RELEASES and "0.10.1.post2" in RELEASES
    assert {c.since for c in HISTORY.changes} <= set(RELEASES)


def test_rows_are_unique_sourced_and_json_able() -> None:
    """One row per (release, key); a file:line source in the wheel; JSON-able values."""
    seen = [(c.since, c.key) for c in HISTORY.changes]
    assert len(seen) == len(set(seen))
    for c in HISTORY.changes:
        assert _SOURCE.match(c.source), c.source
        ok = c.value is None or isinstance(c.value, bool | int | float | str)
        ok = ok or (isinstance(c.value, tuple) and all(isinstance(v, str) for v in c.value))
        assert ok, (c.key, c.value)


def test_estimator_flag_spelling_across_releases() -> None:
    """--use_kl_estimator_k3 -> --kl_estimator (0.6.0.post1) -> --algo.kl.estimator (0.10.2)."""
    assert HISTORY.at("0.6.0")["flag.algo.kl.estimator"] == "use_kl_estimator_k3"
    assert HISTORY.at("0.6.0")["choices.algo.kl.estimator"] == ("k1", "k3")
    assert HISTORY.at("0.10.1.post2")["flag.algo.kl.estimator"] == "kl_estimator"
    assert HISTORY.at("0.10.2")["flag.algo.kl.estimator"] == "algo.kl.estimator"
    assert HISTORY.at("0.11.2")["default.algo.kl.estimator"] == "k1"


def test_loss_aggregation_per_era() -> None:
    """Sequence mean (0.6-0.7.1), micro-batch token mean, DP-global, then step-global."""
    assert HISTORY.at("0.5.9.post1").get("loss.aggregation") is None
    assert HISTORY.at("0.7.1.post2")["loss.aggregation"].startswith("per-sequence")
    assert HISTORY.at("0.10.2")["loss.aggregation"] == "token mean over the micro-batch"
    assert "whole optimiser step" in str(HISTORY.at("0.11.2")["loss.aggregation"])


def test_unbiased_gradient_first_in_0111() -> None:
    """The flag and its estimator path are in 0.11.1, not first in 0.11.2."""
    assert "flag.algo.kl.unbiased_gradient" not in HISTORY.at("0.11.0")
    assert HISTORY.at("0.11.1")["flag.algo.kl.unbiased_gradient"] == "algo.kl.unbiased_gradient"
    assert HISTORY.change_points("estimator.unbiased_gradient") == ("0.11.1",)


def test_value_clamp_from_086() -> None:
    """Every estimator value clamped to +-10 from 0.8.6 on, never before."""
    clamped = [v for v in RELEASES if HISTORY.at(v)["estimator.value_clamp"] == 10.0]
    assert clamped[0] == "0.8.6" and clamped[-1] == "0.11.2"
    assert clamped == list(RELEASES[RELEASES.index("0.8.6") :])
