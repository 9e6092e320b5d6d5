"""The shared per-version data model: ``History.at`` folds changes in PEP 440 order, and
``change_points`` lists where a value changes (on small hand-made histories)."""

from __future__ import annotations

import os

from kl_patches.adapters.history import Change, History

os.environ.setdefault("HF_HUB_OFFLINE", "1")


# ------------------------------------------------------------------------------- History itself
def test_at_orders_pre_and_post_releases_by_pep440() -> None:
    history = History(
        "demo",
        ("0.9.0", "1.0.0rc1", "1.0.0", "1.0.0.post1"),
        (
            Change("1.0.0.post1", "k", "post", "x.py:1"),
            Change("1.0.0", "k", "final", "x.py:1"),
            Change("1.0.0rc1", "k", "rc", "x.py:1"),
            Change("0.9.0", "k", "old", "x.py:1"),
        ),
    )
    assert "k" not in history.at("0.8.9")
    assert history.at("0.10.0")["k"] == "old"  # 0.10 > 0.9, though "0.10" < "0.9" as text
    assert history.at("1.0.0.dev0")["k"] == "old"  # dev < rc < final < post
    assert history.at("1.0.0rc1")["k"] == "rc"
    assert history.at("1.0.0")["k"] == "final"
    assert history.at("1.0.0.post1")["k"] == "post"
    assert history.at("2")["k"] == "post"


def test_at_leaves_out_keys_before_their_first_change_and_keeps_none() -> None:
    history = History(
        "demo",
        ("1.0", "2.0", "3.0"),
        (
            Change("1.0", "a", 1, "x.py:1"),
            Change("2.0", "b", True, "x.py:2"),
            Change("3.0", "b", None, "x.py:0"),
        ),
    )
    assert history.at("1.0") == {"a": 1}
    assert history.at("2.5") == {"a": 1, "b": True}
    assert history.at("3.0") == {"a": 1, "b": None}  # removed, not unknown
    assert history.at("0.1") == {}


def test_at_does_not_depend_on_row_order() -> None:
    rows = (
        Change("1.0", "a", "x", "x.py:1"),
        Change("2.0", "a", "y", "x.py:1"),
        Change("1.5", "b", ("p", "q"), "x.py:1"),
    )
    forward = History("demo", ("1.0", "1.5", "2.0"), rows)
    backward = History("demo", ("1.0", "1.5", "2.0"), rows[::-1])
    for version in ("1.0", "1.5", "2.0"):
        assert forward.at(version) == backward.at(version)
    assert forward.at("2.0") == {"a": "y", "b": ("p", "q")}


def test_change_points_lists_releases_where_a_value_changes() -> None:
    rows = (
        Change("0.1", "grpo.a", 1, "x.py:1"),
        Change("0.3", "grpo.a", 2, "x.py:1"),
        Change("0.4", "grpo_extra.b", "x", "x.py:1"),
        Change("0.5", "grpo.a", 2, "x.py:1"),  # same value again: no change
        Change("0.6", "grpo.a", None, "x.py:0"),  # removal is a change
    )
    history = History("demo", ("0.5", "0.1", "0.2", "0.3", "0.4", "0.6"), rows)  # unsorted
    assert history.change_points() == ("0.3", "0.4", "0.6")  # the first release is no change
    assert history.change_points("grpo.") == ("0.3", "0.6")  # "grpo_extra.b" is another prefix
    assert history.change_points("grpo_extra") == ("0.4",)
    assert history.change_points("ppo.") == ()


def test_change_points_counts_a_revert() -> None:
    rows = (
        Change("1.0", "k", "a", "x.py:1"),
        Change("2.0", "k", "b", "x.py:1"),
        Change("3.0", "k", "a", "x.py:1"),
    )
    assert History("demo", ("1.0", "2.0", "3.0"), rows).change_points() == ("2.0", "3.0")
