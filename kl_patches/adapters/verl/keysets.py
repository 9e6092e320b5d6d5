"""Every key of verl's trainer configs in each release (Hydra refuses the others).

verl composes its trainer config with Hydra in struct mode: an override ``a.b=v`` whose key the
composed config does not have fails (``Could not override 'a.b'``), ``+a.b=v`` on a key that it
has fails too (``Could not append to config. An item is already at 'a.b'``), ``++a.b=v`` always
works. So a launch written for one release can be refused by another, and which keys exist is
part of what a release means. For each recorded release this module gives every key path
(mappings and leaves) of the composed ``verl/trainer/config/ppo_trainer.yaml`` and
``ppo_megatron_trainer.yaml`` (with their ``defaults`` lists), and each leaf's default.

Source: the data files ``data/<release>.json``, written by ``python -m kl_patches.dev record
verl V`` from each release's files: the config folder composed with hydra-core
(``initialize_config_dir(<release>/verl/trainer/config)``, ``compose(config_name=NAME)``),
every node walked, interpolations left unresolved; ``record --check`` re-reads them.
``tests/adapters/verl/test_keysets.py`` composes the installed release's ``ppo_trainer`` config
and checks that its key paths are exactly the data's for that release.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from kl_patches.adapters.releases import Recording, recording

from .history import RELEASES

__all__ = ["CONFIGS", "RELEASES", "data", "default", "keys", "releases_accepting"]

CONFIGS = ("ppo_trainer", "ppo_megatron_trainer")
"""The trainer configs recorded (``--config-name``; ``ppo_trainer`` is main_ppo's default)."""


def data() -> Recording:
    """Every recorded verl release (``data/<release>.json``)."""
    return recording("kl_patches.adapters.verl")


def _check(config: str) -> None:
    if config not in CONFIGS:
        raise ValueError(f"config={config!r} is not recorded; choose one of {list(CONFIGS)}")


@cache
def keys(release: str, config: str = "ppo_trainer") -> frozenset[str]:
    """Every key path of ``config`` composed in ``release`` (a recorded release).

    ValueError for a release or config that is not recorded."""
    _check(config)
    return data().names(release, config) or frozenset()


_NO_DEFAULT = object()


def default(release: str, key: str, config: str = "ppo_trainer") -> Any:
    """The composed default of leaf ``key`` in ``release`` (interpolations as text).
    KeyError when the release's config has no such leaf."""
    _check(config)
    entry = data().at(release).entry(config, key)
    value = _NO_DEFAULT if entry is None else entry.get("default", _NO_DEFAULT)
    if value is _NO_DEFAULT:
        raise KeyError(f"verl {release} {config} has no leaf {key!r}")
    return value


def releases_accepting(
    keys_: set[str] | frozenset[str], config: str = "ppo_trainer"
) -> tuple[str, ...]:
    """The recorded releases whose ``config`` has every key path of ``keys_``, ascending."""
    _check(config)
    return data().releases_accepting(keys_, (config,))
