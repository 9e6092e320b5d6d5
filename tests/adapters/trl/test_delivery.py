"""TRL delivery: ``apply()`` without a config takes the one in ``KL_PATCHES_TRL`` (each rank runs
the script, so each reads it), in the shared wire format; an invalid value is a clear error."""

from __future__ import annotations

import pytest

pytest.importorskip("trl")

import kl_patches.trl as klt
from kl_patches import KLConfig
from kl_patches.adapters.trl import delivery, patch


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.delenv(delivery.ENV_VAR, raising=False)
    klt.revert()
    yield
    klt.revert()


def test_apply_without_config_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert klt.apply() == KLConfig()  # nothing configured: the default k1-in-reward
    klt.revert()
    config = KLConfig.parse("k3-in-both", coef=0.02)
    delivery.export(config)
    assert klt.apply() == config and klt.active_config() == config
    assert sorted(klt.applied()) == sorted(
        f"trl.{cls}.{name}" for cls in ("GRPOTrainer", "RLOOTrainer") for name in patch.HOOKED
    )
    explicit = KLConfig(coef=0.3)
    assert klt.apply(explicit) == explicit  # an explicit config wins over the environment


def test_invalid_environment_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(delivery.ENV_VAR, '{"placement": "sideways"}')
    with pytest.raises(ValueError, match=r"KL_PATCHES_TRL.*not a valid KLConfig.*sideways"):
        klt.apply()
    assert not klt.applied()
