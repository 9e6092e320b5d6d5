"""The recorded verl config keys against the installed release's composed Hydra config."""

from __future__ import annotations

from typing import Any

import pytest

from kl_patches.adapters.verl import keysets
from kl_patches.adapters.verl.versions import SUPPORT


def _paths(node: Any, prefix: str = "") -> set[str]:
    from omegaconf import DictConfig

    out: set[str] = set()
    if isinstance(node, DictConfig):
        for key in node:
            path = f"{prefix}.{key}" if prefix else str(key)
            out.add(path)
            out |= _paths(node._get_node(key), path)
    return out


@pytest.mark.parametrize("config", ["ppo_trainer"])
def test_installed_config_keys_match_the_data(config: str) -> None:
    from kl_patches.adapters.verl.hydra_config import compose

    version = SUPPORT.installed()
    assert version in keysets.RELEASES, version
    composed = _paths(compose([], config_name=config))
    recorded = set(keysets.keys(version, config))
    assert recorded == composed, (
        sorted(recorded - composed)[:10],
        sorted(composed - recorded)[:10],
    )
