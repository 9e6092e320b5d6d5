"""verl adapter, configuration side: to_overrides / from_config / read, and verl's real Hydra
config accepting every override kl-patches writes (verl 0.9.1's ``ppo_trainer.yaml``)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from kl_patches.adapters import verl as kv
from kl_patches.adapters.verl import translate, versions
from kl_patches.config import KLConfig, all_configs

sys.path.insert(0, str(Path(__file__).parent))

from verl_support.configs import (
    NATIVE_BOTH,
    NATIVE_LOSS,
    NATIVE_REWARD,
    PATCHED,
    composed,
    native_overrides,
    overlay,
    with_verl_clamps,
)

ALL = NATIVE_LOSS + NATIVE_REWARD + NATIVE_BOTH + PATCHED


def codes(reading) -> set[str]:  # type: ignore[no-untyped-def]
    return {f.code for f in reading.findings}


@pytest.mark.parametrize("config", NATIVE_LOSS + NATIVE_REWARD + NATIVE_BOTH, ids=str)
def test_native_configs_need_no_patch_and_read_back(config: KLConfig) -> None:
    overrides = native_overrides(config)
    assert not kv.needs_patch(config)
    assert not any(versions.MARKER in o or versions.ENV_VAR in o for o in overrides)
    # The estimator (GRPO default here) sets the reward shape; verl's default is gae.
    read = kv.from_config([*overrides, "algorithm.adv_estimator=grpo"])
    assert read == with_verl_clamps(config)


@pytest.mark.parametrize("config", PATCHED, ids=str)
def test_patched_configs_carry_marker_and_env(config: KLConfig) -> None:
    overrides = kv.to_overrides(config)
    assert kv.needs_patch(config)
    assert any(o.endswith(f"={versions.MARKER}") for o in overrides)
    assert kv.from_config(overrides) == config


def test_placement_none_and_verl_defaults() -> None:
    assert kv.from_config([]).placement == "none"
    assert kv.to_overrides(KLConfig(placement="none")) == [
        "algorithm.use_kl_in_reward=False",
        "actor_rollout_ref.actor.use_kl_loss=False",
    ]
    # verl's shipped GRPO examples: k3 (low_var_kl) in the loss, token-mean.
    grpo = kv.from_config(
        ["actor_rollout_ref.actor.use_kl_loss=True", "actor_rollout_ref.actor.kl_loss_coef=0.001"]
    )
    assert grpo == KLConfig(
        estimator="k3",
        placement="loss",
        coef=0.001,
        loss_aggregation="token_mean",
        log_ratio_clamp=20.0,
        kl_clamp=10.0,
    )


def test_reward_shape_follows_advantage_estimator() -> None:
    base = ["algorithm.use_kl_in_reward=True"]
    assert kv.from_config(base).reward_shape == "reward_to_go"  # default gae
    for adv, shape in [
        ("grpo", "sequence"),
        ("rloo", "sequence"),
        ("reinforce_plus_plus", "reward_to_go"),
    ]:
        assert kv.from_config([*base, f"algorithm.adv_estimator={adv}"]).reward_shape == shape


def test_sources_dict_yaml_and_omegaconf(tmp_path) -> None:  # type: ignore[no-untyped-def]
    nested = {
        "algorithm": {
            "use_kl_in_reward": True,
            "kl_penalty": "k1",
            "adv_estimator": "rloo",
            "kl_ctrl": {"kl_coef": 0.05},
        }
    }
    expected = KLConfig(estimator="k1", placement="reward", coef=0.05)
    assert kv.from_config(nested) == expected
    text = "algorithm:\n  use_kl_in_reward: true\n  kl_penalty: k1\n  adv_estimator: rloo\n"
    text += "  kl_ctrl:\n    kl_coef: 0.05\n"
    assert kv.from_config(text) == expected
    path = tmp_path / "run.yaml"
    path.write_text(text)
    assert kv.from_config(str(path)) == expected
    from omegaconf import OmegaConf

    assert kv.from_config(OmegaConf.create(nested)) == expected


def test_plus_names_read_as_k2_in_loss_and_base_in_reward() -> None:
    loss = kv.from_config(
        ["actor_rollout_ref.actor.use_kl_loss=True", "actor_rollout_ref.actor.kl_loss_type=k3+"]
    )
    assert loss.estimator == "k2" and loss.kl_clamp is None
    reward = kv.from_config(["algorithm.use_kl_in_reward=True", "algorithm.kl_penalty=k3+"])
    assert reward.estimator == "k3"


@pytest.mark.parametrize("name", ["abs", "full", "my_estimator"])
def test_unknown_estimators_raise_naming_valid_ones(name: str) -> None:
    with pytest.raises(ValueError, match="low_var_kl"):
        kv.from_config(["algorithm.use_kl_in_reward=True", f"algorithm.kl_penalty={name}"])
    reading = kv.read(["algorithm.use_kl_in_reward=True", f"algorithm.kl_penalty={name}"])
    assert "verl.unknown_estimator" in codes(reading)
    assert reading.config.placement == "none"


def test_marker_without_patch_config_is_an_error() -> None:
    with pytest.raises(ValueError, match=versions.ENV_VAR):
        kv.from_config(
            [
                "actor_rollout_ref.actor.use_kl_loss=True",
                f"actor_rollout_ref.actor.kl_loss_type={versions.MARKER}",
            ]
        )


def test_kl_outside_std_validation() -> None:
    with pytest.raises(ValueError, match="reward side"):
        kv.to_overrides(KLConfig.parse("k3-in-loss"), kl_outside_std=True)
    overrides = kv.to_overrides(KLConfig(coef=0.1), kl_outside_std=True)
    spec = translate.patch_spec_of(translate.settings_of(overrides))
    assert spec is not None and spec.kl_outside_std and spec.config == KLConfig(coef=0.1)
    grpo = [*overrides, "algorithm.adv_estimator=grpo"]
    assert {"verl.kl_patches_patch"} == codes(kv.read(grpo))
    native_grpo = [*kv.to_overrides(KLConfig(coef=0.1)), "algorithm.adv_estimator=grpo"]
    assert "verl.std_scaled_kl" in codes(kv.read(native_grpo))
    assert "verl.std_scaled_kl" not in codes(
        kv.read([*native_grpo, "algorithm.norm_adv_by_std_in_grpo=False"])
    )
    # verl's compute_advantage does not pass the flag to grpo_vectorized: the std stays
    vectorized = [
        *kv.to_overrides(KLConfig(coef=0.1)),
        "algorithm.adv_estimator=grpo_vectorized",
        "algorithm.norm_adv_by_std_in_grpo=False",
    ]
    found = {f.code: f for f in kv.read(vectorized).findings}
    assert "grpo_vectorized is not passed" in found["verl.std_scaled_kl"].message
    assert {"verl.kl_patches_patch"} == codes(
        kv.read([*overrides, "algorithm.adv_estimator=grpo_vectorized"])
    )


# ----------------------------------------------------------------------------- real verl config


FULL_COMPOSE = (NATIVE_LOSS[0], NATIVE_REWARD[0], NATIVE_BOTH[0], PATCHED[0])


@pytest.mark.parametrize(
    ("config", "full"), [(c, c in FULL_COMPOSE) for c in ALL], ids=lambda v: str(v)
)
def test_verl_hydra_accepts_overrides(config: KLConfig, full: bool) -> None:
    """A full Hydra compose for one config of each kind, the faster overlay for the others."""
    cfg = (composed if full else overlay)(native_overrides(config))
    assert kv.from_config(cfg) == (
        config
        if kv.needs_patch(config)
        else with_verl_clamps(
            config.replace(reward_shape="reward_to_go") if config.has_reward else config
        )
    )


def test_written_down_defaults_match_installed_verl() -> None:
    assert kv.installed_defaults() == versions.DEFAULTS


def test_every_valid_klconfig_composes() -> None:
    """All KLConfig combinations (native or patched, prefix importance weights included) give
    overrides verl's config accepts."""
    seen: set[tuple[str, ...]] = set()
    for config in all_configs(coef=0.1):
        overrides = kv.to_overrides(config)
        # One composition per override shape: numbers and the JSON payload vary only values.
        shape = tuple(re.sub(r"=[0-9.e-]+$|='\{.*\}'$", "=V", o) for o in overrides)
        if shape not in seen:
            seen.add(shape)
            assert kv.from_config(overlay(overrides)) == kv.from_config(overrides)
    assert len(seen) > 20


def test_unknown_key_is_rejected_by_verl_config() -> None:
    """The check above can fail: verl's config refuses keys it does not know."""
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException):
        overlay(["actor_rollout_ref.actor.kl_placement=reward"])


@pytest.mark.parametrize("config", [NATIVE_LOSS[0], PATCHED[0], PATCHED[1]], ids=str)
def test_actor_dataclass_accepts_loss_overrides(config: KLConfig) -> None:
    """verl turns the actor section into a frozen dataclass that validates loss_agg_mode."""
    from verl.utils.config import omega_conf_to_dataclass

    micro = ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4"]
    patched = kv.needs_patch(config)
    overrides = kv.to_overrides(config) if patched else native_overrides(config)
    actor = omega_conf_to_dataclass(overlay([*overrides, *micro]).actor_rollout_ref.actor)
    assert actor.use_kl_loss and actor.kl_loss_coef == config.loss_coef_value
    if patched:  # the patch aggregates the KL: the policy loss keeps verl's mode
        assert actor.loss_agg_mode == "token-mean"
    else:
        assert actor.loss_agg_mode == versions.AGG_TO_VERL[config.loss_aggregation]


AGG = "actor_rollout_ref.actor.loss_agg_mode"


@pytest.mark.parametrize("aggregation", ["sum", "token_mean", "seq_mean_token_mean"])
def test_loss_only_leaves_the_policy_aggregation_alone(aggregation: str) -> None:
    """verl shares loss_agg_mode between its policy loss and its KL loss: a loss-only config
    never sets it; one the user's mode would aggregate differently runs through the patch,
    which aggregates the KL itself."""
    config = KLConfig(estimator="k3", placement="loss", coef=0.1, loss_aggregation=aggregation)
    mode = versions.AGG_TO_VERL[aggregation]
    for user in (None, "token-mean", "seq-mean-token-sum", "seq-mean-token-mean"):
        overrides = kv.to_overrides(config, policy_loss_agg_mode=user)
        assert not any(o.startswith(AGG) for o in overrides)
        patched = any(o.endswith(f"={versions.MARKER}") for o in overrides)
        assert patched == (mode != (user or "token-mean")), (user, overrides)
        assert translate.policy_aggregation_changed(config, user) is None


@pytest.mark.parametrize("aggregation", ["sum", "token_mean", "seq_mean_token_mean"])
def test_both_aggregates_the_policy_loss_like_the_kl(aggregation: str) -> None:
    """Placement both: the reward KL reaches the gradient through the policy loss, so the policy
    loss is aggregated like the loss-side KL (set only when it differs from the user's)."""
    config = KLConfig(estimator="k1", placement="both", coef=0.1, loss_aggregation=aggregation)
    mode = versions.AGG_TO_VERL[aggregation]
    for user in (None, "token-mean", "seq-mean-token-sum"):
        overrides = kv.to_overrides(config, policy_loss_agg_mode=user)
        set_here = [o for o in overrides if o.startswith(AGG)]
        if mode == (user or "token-mean"):
            assert set_here == [] and translate.policy_aggregation_changed(config, user) is None
        else:
            assert set_here == [f"{AGG}={mode}"]
            assert translate.policy_aggregation_changed(config, user) == mode
