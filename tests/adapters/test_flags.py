"""The one ``--kl NAME --kl.FIELD VALUE`` syntax, generated from KLConfig's fields."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

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
    tokens = ["--kl", "k3-in-loss", "--kl.coef", "0.1", "--kl.clamp", "none"]
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


def test_help_is_plain_words_with_each_default_and_its_source() -> None:
    parser = argparse.ArgumentParser()
    own = {"coef": flags.Default(0.001, "the library's own default")}
    flags.add_arguments(parser, defaults=own)
    text = " ".join(parser.format_help().split())
    assert "``" not in text and ":func:" not in text and ":class:" not in text
    assert "(default 0.001: the library's own default)" in text
    assert "(default k1: KLConfig's default)" in text
    assert "--kl.kl_clamp" not in text  # the old spelling works but is not offered
    args = parser.parse_args(["--kl", "k1-in-reward"])
    assert flags.build(args.kl_name, flags.values_from_namespace(args), flags.base_of(own)) == (
        KLConfig.parse("k1-in-reward", coef=0.001)
    )


def test_one_spelling_per_setting_and_old_ones_warn_naming_the_users_place() -> None:
    assert flags.spec("kl_clamp").flag == "--kl.clamp"
    assert all(item.flag == flags.PREFIX + item.cli for item in flags.fields())
    assert all(not item.cli.startswith("kl_") for item in flags.fields())
    old = r"--kl\.kl_clamp is deprecated; use --kl\.clamp"
    with pytest.warns(FutureWarning, match=old) as seen:
        config = flags.config_from_tokens(["--kl", "k3-in-loss", "--kl.kl_clamp", "10"])
    assert config == KLConfig.parse("k3-in-loss", kl_clamp=10.0)
    assert seen[0].filename == flags.COMMAND_LINE  # not a line of kl-patches' own code
    parser = argparse.ArgumentParser()
    flags.add_arguments(parser)
    with pytest.warns(FutureWarning, match="use --kl.clamp"):
        values = flags.values_from_namespace(parser.parse_args(["--kl.kl_clamp", "3"]))
    assert values == {"kl_clamp": 3.0}


def test_a_yaml_kl_block_uses_the_flag_names(tmp_path: Path) -> None:
    where = str(tmp_path / "run.yaml")
    tokens = flags.tokens_from_mapping({"name": "k3-in-both", "coef": 0.1, "clamp": None}, where)
    assert flags.config_from_tokens(tokens) == KLConfig.parse("k3-in-both", coef=0.1)
    with pytest.warns(FutureWarning) as seen:
        flags.tokens_from_mapping({"kl_clamp": 5}, where, {"kl_clamp": 7})
    assert (seen[0].filename, seen[0].lineno) == (where, 7)
    assert "kl: kl_clamp is deprecated; use kl: clamp" in str(seen[0].message)
    with pytest.raises(ValueError, match=r"run\.yaml:3: kl: beta is not a KL setting; valid keys"):
        flags.tokens_from_mapping({"beta": 1}, where, {"beta": 3})


def test_switches_take_a_value_only_when_it_is_one() -> None:
    ours, rest = flags.split_argv(
        ["--kl.full_monitor", "--x", "--kl.full_monitor", "false", "--kl.coef", "1", "pos"],
        switches=("full_monitor",),
    )
    assert ours == ["--kl.full_monitor", "--kl.full_monitor", "false", "--kl.coef", "1"]
    assert rest == ["--x", "pos"]
