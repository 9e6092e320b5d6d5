"""KLConfig: validation, aliases, short names, conflicts."""

from __future__ import annotations

import pytest

from kl_patches.config import (
    ESTIMATORS,
    GRANULARITIES,
    IMPORTANCE_WEIGHTINGS,
    LOSS_AGGREGATIONS,
    PLACEMENTS,
    REWARD_SHAPES,
    KLConfig,
    all_configs,
)


def test_default_is_k1_in_reward() -> None:
    c = KLConfig()
    assert (c.estimator, c.placement, c.reward_shape, c.granularity) == (
        "k1",
        "reward",
        "sequence",
        "token",
    )
    assert c.has_reward and not c.has_loss


@pytest.mark.parametrize(
    ("alias", "canonical"), [("kl", "k1"), ("mse", "k2"), ("low_var_kl", "k3"), ("K3", "k3")]
)
def test_aliases_normalised(alias: str, canonical: str) -> None:
    assert KLConfig(estimator=alias).estimator == canonical


@pytest.mark.parametrize(
    ("field", "bad", "choices"),
    [
        ("estimator", "k4", ESTIMATORS),
        ("placement", "rewards", PLACEMENTS),
        ("granularity", "tok", GRANULARITIES),
        ("reward_shape", "rtg", REWARD_SHAPES),
        ("loss_aggregation", "mean", LOSS_AGGREGATIONS),
        ("importance_weighting", "seq", IMPORTANCE_WEIGHTINGS),
    ],
)
def test_bad_choice_names_field_value_and_choices(field: str, bad: str, choices: tuple) -> None:
    with pytest.raises(ValueError) as err:
        KLConfig(**{field: bad})
    text = str(err.value)
    assert field in text and repr(bad) in text
    for choice in choices:
        assert choice in text


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), "0.1", True])
def test_bad_coef(bad: object) -> None:
    with pytest.raises(ValueError, match="coef"):
        KLConfig(coef=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["log_ratio_clamp", "kl_clamp"])
@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "10"])
def test_bad_clamps(field: str, bad: object) -> None:
    with pytest.raises(ValueError, match=field):
        KLConfig(**{field: bad})


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"placement": "reward", "importance_weighting": "token"}, "no loss side"),
        ({"placement": "none", "importance_weighting": "token"}, "no loss side"),
        (
            {"placement": "loss", "importance_weighting": "token", "granularity": "sequence"},
            "granularity='token'",
        ),
        (
            {"placement": "reward", "granularity": "sequence", "reward_shape": "reward_to_go"},
            "reward_shape",
        ),
        ({"placement": "loss", "loss_coef": 0.1}, "loss_coef"),
    ],
)
def test_conflicts_raise(kwargs: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        KLConfig(**kwargs)


def test_parse_short_names() -> None:
    assert KLConfig.parse("k1-in-reward") == KLConfig()
    c = KLConfig.parse("k3-in-loss", coef=0.001)
    assert (c.estimator, c.placement, c.coef) == ("k3", "loss", 0.001)
    assert KLConfig.parse("low_var_kl-in-both").estimator == "k3"
    assert KLConfig.parse("k2_in_loss").placement == "loss"
    assert KLConfig.parse("none").placement == "none"
    with pytest.raises(ValueError, match="short name"):
        KLConfig.parse("k1-reward")
    with pytest.raises(ValueError, match="estimator"):
        KLConfig.parse("k9-in-loss")


def test_str_and_dict_round_trip() -> None:
    c = KLConfig.parse("k3-in-both", coef=0.1, loss_coef=0.2, loss_aggregation="token_mean")
    text = str(c)
    assert "k3-in-both" in text and "coef=0.1" in text and "loss_coef=0.2" in text
    assert KLConfig.from_dict(c.to_dict()) == c
    with pytest.raises(ValueError, match="unknown field"):
        KLConfig.from_dict({"estimatr": "k1"})
    assert str(KLConfig(placement="none")).startswith("KL off")


def test_coerce() -> None:
    assert KLConfig.coerce("k3-in-loss").placement == "loss"
    assert KLConfig.coerce({"estimator": "k2"}).estimator == "k2"
    assert KLConfig.coerce(None) == KLConfig()
    with pytest.raises(ValueError):
        KLConfig.coerce(3)  # type: ignore[arg-type]


def test_zero_coef_has_no_side() -> None:
    c = KLConfig(placement="both", coef=0.0)
    assert not c.has_reward and not c.has_loss


def test_grid_is_large_and_valid() -> None:
    grid = all_configs()
    assert len(grid) > 150
    assert len(set(grid)) == len(grid)


# ------------------------------------------------------------------ off-policy weighting
def test_sequence_weighting_is_valid_on_the_reward_side_and_both() -> None:
    for place in ("reward", "both"):
        for shape in ("sequence", "reward_to_go"):
            c = KLConfig(placement=place, importance_weighting="sequence", reward_shape=shape)
            assert c.importance_weighting == "sequence" and c.is_clip is None
    c = KLConfig(importance_weighting="sequence", is_clip=2)
    assert c.is_clip == 2.0 and isinstance(c.is_clip, float)
    assert "importance_weighting=sequence" in str(c) and "is_clip=2" in str(c)
    both = KLConfig.parse("k3-in-both", importance_weighting="sequence", is_clip=1.5)
    assert str(both).count("importance_weighting=sequence") == 1
    assert KLConfig.from_dict(both.to_dict()) == both
    assert list(both.to_dict())[-1] == "is_clip"  # appended: earlier fields keep their order


@pytest.mark.parametrize(
    ("kwargs", "needles"),
    [
        (
            {"placement": "loss", "importance_weighting": "sequence"},
            ["placement='loss'", "'reward'", "'both'", "importance_weighting='token'"],
        ),
        ({"placement": "none", "importance_weighting": "sequence"}, ["placement='none'"]),
        (
            {"importance_weighting": "sequence", "granularity": "sequence"},
            ["granularity='token'"],
        ),
        ({"is_clip": 2.0}, ["is_clip", "'sequence'"]),
        (
            {"placement": "loss", "importance_weighting": "token", "is_clip": 2.0},
            ["is_clip", "'sequence'"],
        ),
    ],
)
def test_sequence_weighting_conflicts_name_the_valid_choices(
    kwargs: dict, needles: list[str]
) -> None:
    with pytest.raises(ValueError) as err:
        KLConfig(**kwargs)
    for needle in needles:
        assert needle in str(err.value)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "2", True])
def test_bad_is_clip(bad: object) -> None:
    with pytest.raises(ValueError, match="is_clip"):
        KLConfig(importance_weighting="sequence", is_clip=bad)  # type: ignore[arg-type]


def test_grid_has_the_sequence_weighted_configs() -> None:
    grid = all_configs()
    weighted = [c for c in grid if c.importance_weighting == "sequence"]
    assert {c.placement for c in weighted} == {"reward", "both"}
    assert {c.is_clip for c in weighted} == {None, 2.0, 0.5}
    assert all(c.is_clip is None for c in grid if c.importance_weighting != "sequence")


# ------------------------------------------------------------------ numbers, policies, inert
@pytest.mark.parametrize("field", ["coef", "kl_clamp", "log_ratio_clamp"])
def test_numpy_and_torch_scalars_are_numbers(field: str) -> None:
    """Before: numpy/torch scalars were refused with a misleading 'use a finite float'."""
    np = pytest.importorskip("numpy")
    import torch

    for value in (np.float32(0.25), np.int64(2), torch.tensor(0.25), torch.tensor(2)):
        got = getattr(KLConfig(**{field: value}), field)
        assert type(got) is float and got == float(value)


@pytest.mark.parametrize("field", ["coef", "loss_coef", "kl_clamp", "is_clip"])
def test_huge_or_non_finite_numbers_are_a_one_line_error(field: str) -> None:
    """Before: 10**400 raised OverflowError from math.isfinite."""
    import torch

    base = {"placement": "both"} if field == "loss_coef" else {}
    if field == "is_clip":
        base = {"importance_weighting": "sequence"}
    for bad in (
        10**400,
        -(10**400),
        torch.tensor(float("inf")),
        torch.tensor([0.1]),
        torch.tensor(True),
    ):
        with pytest.raises(ValueError) as err:
            KLConfig(**base, **{field: bad})
        assert f"KLConfig.{field}=" in str(err.value) and "\n" not in str(err.value)


def test_nan_policy_is_a_field_with_choices() -> None:
    from kl_patches.config import FIELD_CHOICES, NAN_POLICIES

    assert KLConfig().nan_policy == "raise" and NAN_POLICIES == ("raise", "mask")
    assert FIELD_CHOICES["nan_policy"] == NAN_POLICIES
    c = KLConfig.parse("k3-in-loss", nan_policy="mask")
    assert "nan_policy=mask" in str(c) and KLConfig.from_dict(c.to_dict()) == c
    assert "nan_policy" not in str(KLConfig())
    with pytest.raises(ValueError, match=r"KLConfig.nan_policy='ignore' is not valid.*'mask'"):
        KLConfig(nan_policy="ignore")


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        (
            {"placement": "reward", "loss_aggregation": "token_mean"},
            "loss_aggregation='token_mean'",
        ),
        ({"placement": "none", "loss_aggregation": "seq_mean_token_mean"}, "loss_aggregation"),
        ({"placement": "loss", "reward_shape": "reward_to_go"}, "reward_shape='reward_to_go'"),
        ({"placement": "none", "reward_shape": "reward_to_go"}, "reward_shape"),
    ],
)
def test_options_inert_for_the_placement_warn(kwargs: dict, needle: str) -> None:
    """Before: accepted silently."""
    from kl_patches.config import InertOptionWarning

    with pytest.warns(InertOptionWarning, match=needle) as record:
        KLConfig(**kwargs)
    assert record[0].filename == __file__  # points at the caller's line
    with pytest.warns(InertOptionWarning) as record:
        KLConfig.parse("k1-in-reward").replace(loss_aggregation="token_mean")
    assert record[0].filename == __file__


def test_no_inert_warning_for_meaningful_options() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        KLConfig()
        KLConfig.parse("k3-in-both", loss_aggregation="token_mean", reward_shape="reward_to_go")
        KLConfig.parse("k3-in-loss", loss_aggregation="token_mean")
        KLConfig.parse("k1-in-reward", reward_shape="reward_to_go")
        all_configs()  # the grid includes inert options on purpose, without warnings


def test_verdict_accepts_what_apply_accepts() -> None:
    """Before: verdict('k3-in-loss') raised AttributeError."""
    from kl_patches.theory import verdict

    assert verdict("k3-in-loss") == verdict(KLConfig.parse("k3-in-loss"))
    assert verdict({"estimator": "k3", "placement": "loss"}) == verdict(
        KLConfig.parse("k3-in-loss")
    )
    assert verdict(None) == verdict(KLConfig())
    with pytest.raises(ValueError, match="short name"):
        verdict("k3-loss")
