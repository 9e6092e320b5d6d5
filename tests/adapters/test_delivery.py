"""The shared wire format of a KLConfig in an environment variable."""

from __future__ import annotations

import json

import pytest

from kl_patches.adapters import delivery
from kl_patches.config import KLConfig, all_configs


@pytest.mark.parametrize("config", all_configs(coef=0.2)[::7], ids=str)
def test_round_trip(config: KLConfig) -> None:
    text = delivery.encode(config, {"kl_outside_std": True})
    assert delivery.decode(text, "V", ("kl_outside_std",)) == (config, {"kl_outside_std": True})


def test_compact_and_full_forms_decode_alike() -> None:
    config = KLConfig.parse("k3-in-loss", coef=0.1)
    assert json.loads(delivery.encode(config)) == {
        "estimator": "k3",
        "placement": "loss",
        "coef": 0.1,
    }
    full = json.dumps(config.to_dict())  # what an older sender wrote
    assert delivery.decode(full, "V")[0] == config


@pytest.mark.parametrize(
    ("text", "why"),
    [("{not json", "not JSON"), ("[1, 2]", "JSON object"),
     ('{"placement": "sideways"}', "sideways"), ('{"beta": 1}', "unknown field")],
)  # fmt: skip
def test_invalid_values_name_the_variable(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=f"KL_PATCHES_X.*not a valid KLConfig.*{why}"):
        delivery.decode(text, "KL_PATCHES_X")


def test_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert delivery.env_var("verl") == "KL_PATCHES_VERL"
    monkeypatch.delenv("KL_PATCHES_TRL", raising=False)
    assert delivery.from_environ("trl") is None
    monkeypatch.setenv("KL_PATCHES_TRL", "  ")
    assert delivery.from_environ("trl") is None
    monkeypatch.setenv("KL_PATCHES_TRL", delivery.encode(KLConfig(coef=0.3)))
    assert delivery.from_environ("trl") == (KLConfig(coef=0.3), {})
    with pytest.raises(ValueError, match="collides"):
        delivery.encode(KLConfig(), {"coef": 1})
