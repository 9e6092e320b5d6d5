"""Changes applied to a reader's payload: Hydra overrides, argv flags, config mappings."""

from __future__ import annotations

import pytest

from kl_patches.audit.fix.change import Change
from kl_patches.audit.fix.payload import apply_payload, override_key


def test_hydra_set_replaces_and_keeps_plus_prefix() -> None:
    items = ["a.b=1", "+c.d=2", "e=3"]
    out = apply_payload(
        items, [Change("set", "hydra", "c.d", "5"), Change("set", "hydra", "a.b", "9")]
    )
    assert "+c.d=5" in out and "a.b=9" in out and "e=3" in out
    assert len(out) == 3
    assert override_key("++x.y=1") == "x.y"


def test_hydra_set_adds_missing_and_unset_removes() -> None:
    out = apply_payload(
        ["a=1"], [Change("set", "hydra", "b", "True"), Change("unset", "hydra", "a")]
    )
    assert out == ["b=True"]


def test_argv_flags_set_unset_rename() -> None:
    argv = ["--init_kl_coef", "0.01", "--use_kl_loss", "--kl_estimator=k3", "--x", "1"]
    out = apply_payload(
        argv,
        [
            Change("unset", "argparse", "--use_kl_loss"),
            Change("set", "argparse", "--kl_estimator", "k1"),
            Change("rename", "argparse", "--init_kl_coef", new_key="--algo.kl.init_coef"),
        ],
    )
    assert "--use_kl_loss" not in out
    assert out[out.index("--kl_estimator") + 1] == "k1"
    assert out[out.index("--algo.kl.init_coef") + 1] == "0.01"
    assert "--init_kl_coef" not in out


def test_trl_field_is_a_flag_on_an_argv_and_a_key_in_a_mapping() -> None:
    assert apply_payload(["--beta", "0.04"], [Change("set", "trl", "beta", "0.0")]) == [
        "--beta",
        "0.0",
    ]
    tree = {"beta": 0.04}
    out = apply_payload(tree, [Change("set", "trl", "kl.coef", "0.04")])
    assert out == {"beta": 0.04, "kl": {"coef": 0.04}}
    assert tree == {"beta": 0.04}  # not mutated


@pytest.mark.parametrize(
    "value, typed", [("True", True), ("False", False), ("0.5", 0.5), ("k1", "k1")]
)
def test_mapping_values_are_typed_as_yaml_reads_them(value: str, typed: object) -> None:
    assert apply_payload({}, [Change("set", "hydra", "a.b", value)]) == {"a": {"b": typed}}
