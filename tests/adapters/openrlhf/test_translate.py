"""OpenRLHF flags <-> KLConfig: native configurations, flat and dotted names, defaults, and
every flag we write or ship in a recipe checked with OpenRLHF 0.11.2's real ``train_ppo_ray``
argument parser (taken from the module's ``__main__`` block) where OpenRLHF is installed."""

from __future__ import annotations

import argparse
import re
import runpy
import shlex
from pathlib import Path

import pytest
from openrlhf_support.harness import REPO, activate

activate()

from kl_patches import KLConfig, verdict  # noqa: E402
from kl_patches.adapters.openrlhf import from_args, is_native, native_gaps, read, to_args  # noqa: E402
from kl_patches.adapters.openrlhf.translate import FLAGS, parse_settings  # noqa: E402
from kl_patches.config import all_configs  # noqa: E402
from kl_patches.openrlhf import build_argv, parse_kl_args, split_argv  # noqa: E402

RECIPES = REPO / "recipes" / "openrlhf"


def native_configs() -> list[KLConfig]:
    """Every natively expressible KLConfig (OpenRLHF's clamp written as kl_clamp=10)."""
    out = [c.replace(kl_clamp=10.0) for c in all_configs(coef=0.02)]
    return [c for c in out if is_native(c) and c.placement != "none"]


def test_native_set_is_what_openrlhf_runs() -> None:
    got = {(c.estimator, c.placement, c.reward_shape, c.loss_aggregation) for c in native_configs()}
    want = {
        (e, "reward", "reward_to_go", a)
        for e in ("k1", "k2", "k3")
        for a in ("sum", "token_mean", "seq_mean_token_mean")
    }  # aggregation is unused on the reward side
    want |= {
        (e, "loss", s, "token_mean")
        for e in ("k1", "k2", "k3")
        for s in ("sequence", "reward_to_go")
    }  # reward_shape is unused on the loss side
    assert got == want


def test_round_trip_for_every_native_config() -> None:
    for config in native_configs():
        back = from_args(to_args(config))
        assert back.estimator == config.estimator and back.placement == config.placement
        assert back.coef == config.coef and back.kl_clamp == 10.0
        assert is_native(back)


def test_releases_before_0_8_6_clamp_nothing() -> None:
    """0.8.0-0.8.5 run the estimator unclamped: an unclamped config is native there (and needs
    the patch from 0.8.6), a +-10 clamp is the gap there; flat flags either way."""
    from kl_patches.adapters.openrlhf.history import HISTORY
    from kl_patches.adapters.openrlhf.patch import needed_sides
    from kl_patches.adapters.openrlhf.versions import VALUE_CLAMP_SINCE

    assert HISTORY.change_points("estimator.value_clamp")[-1] == VALUE_CLAMP_SINCE == "0.8.6"
    unclamped = KLConfig(estimator="k2", placement="loss", coef=0.02, loss_aggregation="token_mean")
    clamped = unclamped.replace(kl_clamp=10.0)
    for version, native, patched in (("0.8.5", unclamped, clamped), ("0.8.6", clamped, unclamped)):
        assert is_native(native, version) and needed_sides(native, version) == ()
        assert not is_native(patched, version) and needed_sides(patched, version) == ("loss",)
        assert from_args(to_args(native, version), version) == native
    assert to_args(unclamped, "0.8.0")[::2] == ["--init_kl_coef", "--kl_estimator", "--use_kl_loss"]
    assert "clamps nothing before 0.8.6" in native_gaps(clamped, "0.8.0")["loss"][0]
    assert from_args([], "0.8.0").kl_clamp is None and from_args([]).kl_clamp == 10.0


def test_defaults_of_0_11_2_without_openrlhf() -> None:
    assert from_args([]) == KLConfig(
        estimator="k1", placement="reward", coef=0.01, reward_shape="reward_to_go", kl_clamp=10.0
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["--algo.kl.use_loss", "--algo.kl.estimator", "k3", "--algo.kl.init_coef", "0.001"],
        ["--use_kl_loss", "--kl_estimator", "k3", "--init_kl_coef", "0.001"],
        ["--algo.kl.use_loss", "--algo.kl.estimator=k3", "--algo.kl.init_coef=1e-3"],
    ],
    ids=["dotted", "flat", "equals"],
)
def test_dotted_flat_and_equals_spellings(argv: list[str]) -> None:
    assert from_args(argv) == KLConfig(
        estimator="k3", placement="loss", coef=0.001, loss_aggregation="token_mean", kl_clamp=10.0
    )


def test_flat_names_before_0_10_2_and_dotted_after() -> None:
    config = KLConfig.parse("k3-in-loss", coef=0.001)
    assert to_args(config, version="0.10.1.post2") == [
        "--init_kl_coef",
        "0.001",
        "--kl_estimator",
        "k3",
        "--use_kl_loss",
    ]
    assert to_args(config, version="0.10.2")[0] == "--algo.kl.init_coef"
    iw = config.replace(importance_weighting="token")
    assert "--algo.kl.unbiased_gradient" in to_args(iw, version="0.11.2")
    assert "--algo.kl.unbiased_gradient" not in to_args(iw, version="0.11.0")


def test_kl_off_and_reference_model() -> None:
    assert to_args(KLConfig(placement="none")) == ["--algo.kl.init_coef", "0"]
    assert from_args(["--algo.kl.init_coef", "0", "--algo.kl.use_loss"]).placement == "none"
    # both with coef 0 on the reward side still needs the reference model for the loss side
    args = to_args(KLConfig(placement="both", coef=0.0, loss_coef=0.01))
    assert args[:2] == ["--algo.kl.init_coef", "0.01"]


def test_strict_names_what_needs_a_patch() -> None:
    with pytest.raises(ValueError, match=r"placement='both'.*kl_clamp=None"):
        to_args(KLConfig.parse("k1-in-both"), strict=True)
    assert native_gaps(
        KLConfig.parse("k3-in-loss", loss_aggregation="token_mean", kl_clamp=10.0)
    ) == {
        "reward": (),
        "loss": (),
    }


def test_bad_values_name_the_choices() -> None:
    with pytest.raises(ValueError, match=r"\['k1', 'k2', 'k3'\]"):
        from_args(["--algo.kl.estimator", "k4"])
    with pytest.raises(ValueError, match="expects 1 value"):
        from_args(["--algo.kl.init_coef"])
    with pytest.raises(ValueError, match="takes no value"):
        from_args(["--algo.kl.use_loss=true"])


# ----------------------------------------------------------------------------- real parser
@pytest.fixture(scope="module")
def real_parser() -> argparse.ArgumentParser:
    """OpenRLHF 0.11.2's own train_ppo_ray parser, captured from its __main__ block."""
    pytest.importorskip("openrlhf.cli.train_ppo_ray")

    class Captured(Exception):
        pass

    got: dict[str, argparse.ArgumentParser] = {}

    def capture(self: argparse.ArgumentParser, *a: object, **k: object) -> None:
        got["parser"] = self
        raise Captured

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(argparse.ArgumentParser, "parse_args", capture)
        with pytest.raises(Captured):
            runpy.run_module("openrlhf.cli.train_ppo_ray", run_name="__main__")
    return got["parser"]


def test_written_defaults_are_openrlhf_0_11_2_defaults(
    real_parser: argparse.ArgumentParser,
) -> None:
    ns = vars(real_parser.parse_args([]))
    for flag in FLAGS:
        want = flag.default
        got = ns[flag.dotted]
        assert (tuple(got) if isinstance(got, list | tuple) else got) == want, flag.dotted


def test_to_args_parses_with_real_parser(real_parser: argparse.ArgumentParser) -> None:
    for config in [*native_configs(), KLConfig.parse("k1-in-both"), KLConfig(placement="none")]:
        argv = to_args(config)
        ns = vars(real_parser.parse_args(argv))
        ours, _ = parse_settings(argv)
        for key in (
            "algo.kl.init_coef",
            "algo.kl.estimator",
            "algo.kl.use_loss",
            "algo.kl.unbiased_gradient",
        ):
            assert ns[key] == ours[key], (config, key)


# ----------------------------------------------------------------------------- recipes
def launcher_argv(script: Path) -> list[str]:
    text = script.read_text().replace("\\\n", " ")
    line = next(ln for ln in text.splitlines() if "python -m kl_patches.openrlhf" in ln)
    tokens = shlex.split(line.split("python -m kl_patches.openrlhf", 1)[1], comments=True)
    return [t for t in tokens if t != "</dev/null"]


def grid_runs() -> list[tuple[str, list[str]]]:
    runs = []
    for line in (RECIPES / "grid.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, *flags = shlex.split(line)
            runs.append((name, flags))
    return runs


def recipe_cases() -> list[tuple[str, list[str]]]:
    cases = [(p.name, launcher_argv(p)) for p in sorted(RECIPES.glob("*_k1_in_reward.sh"))]
    grid = launcher_argv(RECIPES / "grid.sh")
    cases += [
        (f"grid:{name}", [*(t for t in grid if t != "$KL_FLAGS"), *flags])
        for name, flags in grid_runs()
    ]
    return cases


def test_every_recipe_is_covered() -> None:
    shipped = {p.name for p in RECIPES.iterdir()}
    assert shipped == {
        "grpo_k1_in_reward.sh",
        "reinforce_pp_k1_in_reward.sh",
        "grid.sh",
        "grid.txt",
    }
    assert len(grid_runs()) == 8
    assert "$KL_FLAGS" in launcher_argv(RECIPES / "grid.sh")


@pytest.mark.parametrize("name,argv", recipe_cases(), ids=[c[0] for c in recipe_cases()])
def test_recipe_parses(name: str, argv: list[str], real_parser: argparse.ArgumentParser) -> None:
    ours, rest = split_argv(argv)
    config = parse_kl_args(ours)
    assert config is not None
    final = build_argv(config, rest, "0.11.2")
    real_parser.parse_args(final)  # every flag exists in OpenRLHF 0.11.2
    reading = read(final)
    assert not [f for f in reading.findings if f.severity == "error"]
    assert reading.off_policy is False
    native = from_args(final)  # what OpenRLHF's flags alone run; the patch adds the rest
    assert native.placement == ("loss" if config.has_loss else "reward")
    assert native.estimator == config.estimator
    if name.endswith("k1_in_reward.sh") or name == "grid:k1-in-reward":
        assert config.short_name == "k1-in-reward" and verdict(config).unbiased
    if name.startswith("grid:") and not name.startswith("grid:openrlhf"):
        assert re.sub(r"-seq", "", name[5:]) == config.short_name
