"""The change model refuses malformed edits with the valid choices named."""

from __future__ import annotations

import pytest

from kl_patches.audit.fix import Change, ChangeSet


def test_a_change_names_valid_actions_and_namespaces() -> None:
    with pytest.raises(ValueError, match="valid: set, unset, rename, entry_point"):
        Change("toggle", "hydra", "algorithm.use_kl_in_reward")
    with pytest.raises(ValueError, match="valid: hydra, argparse, trl"):
        Change("set", "yaml", "beta", "0.0")
    with pytest.raises(ValueError, match="needs a value"):
        Change("set", "trl", "beta")
    with pytest.raises(ValueError, match="rename"):
        Change("set", "trl", "beta", "0.0", new_key="kl_coef")


def test_a_change_set_edits_each_key_once_and_has_a_known_label() -> None:
    one = Change("set", "hydra", "algorithm.use_kl_in_reward", "True")
    with pytest.raises(ValueError, match="each key once"):
        ChangeSet((one, Change("unset", "hydra", "algorithm.use_kl_in_reward")), "native")
    with pytest.raises(ValueError, match="valid: native, with kl-patches"):
        ChangeSet((one,), "maybe")
    assert ChangeSet((one,), "native").changes == (one,)
