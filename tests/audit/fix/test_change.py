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


def test_an_entry_point_to_the_library_module_is_a_module_switch() -> None:
    """An entry-point change to one dotted module not of kl-patches switches the library's
    own module (a release's rename); the launcher's words are not a module switch."""
    rename = Change("entry_point", "hydra", "verl.trainer.main_ppo_sync", "verl.trainer.main_ppo")
    launcher = Change(
        "entry_point", "hydra", "verl.trainer.main_ppo",
        "kl_patches.adapters.verl.launch --kl k1-in-reward --kl.coef 0.001 --",
    )  # fmt: skip
    assert rename.module_switch and not launcher.module_switch
    assert not Change("set", "hydra", "a.b", "verl.trainer.main_ppo").module_switch
