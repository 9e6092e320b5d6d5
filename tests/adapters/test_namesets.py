"""kl_patches.adapters.namesets: name lists and their fold over release rows."""

from __future__ import annotations

from kl_patches.adapters.namesets import expand, names_in


def test_expand_reads_parents_bare_names_and_skips_blank_lines() -> None:
    text = "\nactor: lr clip_ratio\n: beta\n\nref.fsdp: param_offload\n"
    assert expand(text) == {"actor.lr", "actor.clip_ratio", "beta", "ref.fsdp.param_offload"}


def test_names_in_replays_rows_in_version_order_up_to_the_release() -> None:
    rows = [("0.10.0", ": c", ": a"), ("0.2", ": a b", ""), ("0.9", ": d", ": b")]
    assert names_in(rows, "0.1") is None  # before the first row
    assert names_in(rows, "0.2") == {"a", "b"}
    assert names_in(rows, "0.9.5") == {"a", "d"}
    assert names_in(rows, "0.10.0") == {"c", "d"}  # 0.10 after 0.9: versions, not strings


def test_names_in_is_none_when_every_name_was_removed() -> None:
    rows = [("1.0", ": a", ""), ("2.0", "", ": a"), ("3.0", ": b", "")]
    assert names_in(rows, "1.5") == {"a"}
    assert names_in(rows, "2.0") is None
    assert names_in(rows, "3.0") == {"b"}
