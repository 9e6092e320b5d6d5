"""Compose verl's own trainer config (``trainer/config/<name>.yaml``) with Hydra overrides.

Used by the tests, the launcher's ``--check`` and ``installed_defaults()``
to prove that the overrides kl-patches writes are accepted by the installed verl (verl's config
is strict: unknown keys under its dataclass sections fail).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any


def config_dir() -> str:
    """The installed verl's ``trainer/config`` directory (imports only the verl package)."""
    import verl

    return os.path.join(os.path.dirname(verl.__file__), "trainer", "config")


def compose(overrides: Sequence[str], config_name: str = "ppo_trainer") -> Any:
    """verl's trainer config composed with ``overrides`` (an OmegaConf DictConfig)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=config_dir(), version_base=None):
        return hydra_compose(config_name=config_name, overrides=list(overrides))
