"""The one ``--kl NAME --kl.FIELD VALUE`` syntax, generated from KLConfig's fields."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from kl_patches.adapters import flags
from kl_patches.config import FIELD_CHOICES, KLConfig, all_configs


def test_one_flag_per_field_with_the_docstring_as_help() -> None:
    names = [f.name for f in dataclasses.fields(KLConfig)]
    assert [s.name for s in flags.fields()] == names
    for item in flags.fields():
        assert item.help and item.help != item.name  # read from the field's docstring
        assert item.choices == FIELD_CHOICES.get(item.name, ())
    assert flags.spec("coef").kind == "float" and flags.spec("kl_clamp").kind == "optional_float"


def test_split_keeps_everything_else_in_order() -> None:
    argv = ["--algo.kl.use_loss", "--kl", "k1-in-reward", "--x", "1", "--kl.coef=0.2", "--kl-x"]
    ours, rest = flags.split_argv(argv)
    assert ours == ["--kl", "k1-in-reward", "--kl.coef=0.2"]
    assert rest == ["--algo.kl.use_loss", "--x", "1", "--kl-x"]


@pytest.mark.parametrize("config", all_configs(coef=0.3)[::5], ids=str)
def test_tokens_round_trip(config: KLConfig) -> None:
    assert flags.config_from_tokens(flags.to_tokens(config)) == config


def test_values_errors_and_conflicts() -> None:
    tokens = ["--kl", "k3-in-loss", "--kl.coef", "0.1", "--kl.kl_clamp", "none"]
    assert flags.config_from_tokens(tokens) == KLConfig.parse("k3-in-loss", coef=0.1)
    assert flags.config_from_tokens([]) is None
    assert flags.config_from_tokens([], base={"coef": 0.2}) == KLConfig(coef=0.2)
    with pytest.raises(ValueError, match=r"unknown flag --kl\.beta; valid: --kl NAME"):
        flags.config_from_tokens(["--kl.beta", "1"])
    with pytest.raises(ValueError, match="is not a number"):
        flags.config_from_tokens(["--kl.coef", "big"])
    with pytest.raises(ValueError, match="finite"):
        flags.config_from_tokens(["--kl.coef", "inf"])
    with pytest.raises(ValueError, match="needs a value"):
        flags.config_from_tokens(["--kl"])
    with pytest.raises(ValueError, match=r"sets estimator='k1'.*drop one"):
        flags.config_from_tokens(["--kl", "k1-in-reward", "--kl.estimator", "k3"])
    same = ["--kl", "k3-in-loss", "--kl.estimator", "low_var_kl"]  # an alias of the same
    assert flags.config_from_tokens(same) == KLConfig.parse("k3-in-loss")
    with pytest.raises(ValueError, match="placement"):
        flags.config_from_tokens(["--kl.placement", "sideways"])


def test_argparse_form() -> None:
    parser = argparse.ArgumentParser()
    flags.add_arguments(parser)
    args = parser.parse_args(["--kl", "k2-in-loss", "--kl.granularity", "sequence"])
    assert flags.config_from_namespace(args) == KLConfig.parse("k2-in-loss", granularity="sequence")
    assert flags.config_from_namespace(parser.parse_args([])) is None
    assert "--kl.loss_aggregation" in parser.format_help()
    with pytest.warns(FutureWarning, match="--coef is deprecated; use --kl.coef"):
        flags.deprecated("--coef", "--kl.coef")
