"""verl's KL history as data: every row holds at its release and is a change there.

One test per row of ``HISTORY.changes`` (the id carries release, key and the source line of that
release), plus the fold and change-point logic of the shared data model on a hand-built history.
Runs with torch, packaging and pytest only (nothing imports verl).
"""

from __future__ import annotations

import os
import re

import pytest
from packaging.version import Version

from kl_patches.adapters.history import Change, History
from kl_patches.adapters.verl.history import HISTORY, RELEASES

os.environ.setdefault("HF_HUB_OFFLINE", "1")

_SOURCE = re.compile(r"^[\w./-]+:\d+( \(git tag v[\w.]+\))?$")


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


def test_releases_are_every_pypi_release_ascending() -> None:
    """16 releases 0.1 .. 0.9.1, strictly ascending in PEP 440 order, rows only at them."""
    assert RELEASES[0] == "0.1" and RELEASES[-1] == "0.9.1" and len(RELEASES) == 16
    assert list(RELEASES) == sorted(set(RELEASES), key=Version)
    assert {c.since for c in HISTORY.changes} <= set(RELEASES)


def test_rows_are_unique_sourced_and_json_able() -> None:
    """One row per (release, key); a file:line source; values of the JSON-able kinds."""
    seen = [(c.since, c.key) for c in HISTORY.changes]
    assert len(seen) == len(set(seen))
    for c in HISTORY.changes:
        assert _SOURCE.match(c.source), c.source
        ok = c.value is None or isinstance(c.value, bool | int | float | str)
        ok = ok or (isinstance(c.value, tuple) and all(isinstance(v, str) for v in c.value))
        assert ok, (c.key, c.value)
        assert "\n" not in c.note


def test_reward_gate_before_and_after_use_kl_in_reward() -> None:
    """The fold between rows: 0.3.0.post1 still gates on use_kl_loss; 0.5.0 on the new switch."""
    assert HISTORY.at("0.1")["reward.gate"] == "always"
    assert HISTORY.at("0.3.0.post1")["reward.gate"] == "not actor_rollout_ref.actor.use_kl_loss"
    assert "default.algorithm.use_kl_in_reward" not in HISTORY.at("0.3.0.post1")
    assert HISTORY.at("0.5.0")["reward.gate"] == "algorithm.use_kl_in_reward"
    assert HISTORY.at("0.9.1")["default.algorithm.use_kl_in_reward"] is False


def test_plus_names_crash_from_060_until_080() -> None:
    """Every release of 0.6.x and 0.7.x folds to the crashing '+' behaviour."""
    crashing = [
        v for v in RELEASES if HISTORY.at(v)["estimator.plus_suffix"] == "advertised_but_raises"
    ]
    assert crashing == ["0.6.0", "0.6.1", "0.7.0", "0.7.1"]


def test_change_points_of_the_shared_model_on_a_small_history() -> None:
    """Hand-built: a key appears at 1.0, changes at 1.2, another appears at 1.10."""
    small = History(
        library="demo",
        releases=("1.0", "1.1", "1.2", "1.2.post1", "1.10"),
        changes=(
            Change("1.0", "a.x", 1, "m.py:1"),
            Change("1.2", "a.x", 2, "m.py:2"),
            Change("1.10", "b.y", "on", "m.py:3"),
        ),
    )
    assert small.at("0.9") == {}
    assert small.at("1.1") == {"a.x": 1}
    assert small.at("1.2.post1") == {"a.x": 2}
    assert small.at("1.10") == {"a.x": 2, "b.y": "on"}  # 1.10 > 1.2 (PEP 440, not string order)
    # Whether the first release counts (keys appear there) is left open between the copies of
    # the data model; every later release counts exactly when a value changes.
    assert small.change_points()[-2:] == ("1.2", "1.10")
    assert set(small.change_points()) - {"1.0"} == {"1.2", "1.10"}
    assert small.change_points("b.") == ("1.10",)
    assert small.change_points("a.")[-1:] == ("1.2",)


def test_verl_change_points_cover_the_known_milestones() -> None:
    """The releases the brief names as turning points are change points of the right keys."""
    assert "0.4.0" in HISTORY.change_points("reward.gate")
    assert "0.8.0" in HISTORY.change_points("estimator.plus_suffix")
    assert "0.8.0" in HISTORY.change_points("loss.aggregation")
    assert HISTORY.change_points("default.trainer.use_v1") == ("0.9.0",)
