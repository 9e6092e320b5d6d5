"""How to write the overrides a verl release refuses so that it accepts them, from the recorded
key sets of every release (:mod:`.keysets`).

Hydra composes verl's trainer config in struct mode (see :mod:`.keysets`): ``key=value`` on a
key the composed config lacks fails (``Could not override``). Two of those refusals have a
rewrite that keeps what the launch meant, read from the release data alone:

* the key sits under a mapping that is open (empty) in this release, ``{}`` in its YAML, so
  nothing under it can be overridden but anything can be added: ``+key=value`` (Hydra's
  append, ``hydra/core/override_parser/types.py`` ``OverrideType.ADD``) adds it. verl 0.6.1's
  ``rollout.engine_kwargs.sglang`` is ``{}`` (``verl/trainer/config/rollout/rollout.yaml``
  at v0.6.1), where 0.5.0 listed ``attention_backend``;
* the key existed in an earlier release and in no release from this one on (verl deleted it
  from its config, with no recorded successor): the override is removed, and the change's
  reason says up to which release the key existed. Only for verl's own entry
  points: a recipe's trainer (``recipe.*``) is code outside verl that may still read the key
  from the config (PRIME's ``prime_dp_rm.py`` reads ``reward_model.micro_batch_size_per_gpu``,
  which verl dropped in 0.7.1), so there the refusal stays the user's.

An entry module the release no longer ships but whose trainer another module now runs (a
rename, recorded as ``entry.successor.<module>`` in :mod:`.history`) becomes that module:
verl 0.9.0 moved ``verl.trainer.main_ppo_sync`` into the v1 trainer that
``verl.trainer.main_ppo`` runs by default (``verl/trainer/main_ppo.py:184`` at v0.9.0).

A key that only later releases have is not rewritten (the launch is written for a newer verl:
the reading, or the user's upgrade, settles it), nor one the data cannot place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from .history import RELEASES
from .keysets import default, keys

__all__ = ["Rewrite", "entry_successor", "rewrites"]


@dataclass(frozen=True)
class Rewrite:
    """One refused override and how the release accepts it."""

    key: str
    """The refused key, as the launch writes it (without prefix)."""
    action: str
    """``append``: write it as ``+key``; ``remove``: delete the override."""
    why: str
    """The release fact behind it, for the change's reason."""


def rewrites(overrides: Any, version: str | None, context: Mapping[str, Any]) -> list[Rewrite]:
    """The rewrites of ``overrides``' plain ``key=value`` items that the release read as
    ``version`` refuses (``context`` is the reader's: entry, composed config name and keys)."""
    from .read import _accepted, _checked_config, _engine_config, _override_key, rejected_overrides
    from .entries import facts
    from .semantics import semantics

    if not isinstance(overrides, (list, tuple)):
        return []
    entry = context.get("entry")
    config = _checked_config(
        entry, facts(entry) if entry else None, context.get("config_name"),
        context.get("config_check"),
    )  # fmt: skip
    sem = semantics(version)
    if config == "ppo_trainer":
        config = _engine_config(list(overrides), sem)
    if not config:
        return []
    accepted = _accepted(sem, config, tuple(context.get("config_keys") or ()))
    own_entry = entry is None or str(entry).startswith("verl.")
    out: list[Rewrite] = []
    for _, item, why in rejected_overrides(list(overrides), accepted):
        prefix, key = _override_key(item)
        if prefix or not why.startswith("Could not override"):
            continue
        parent = _open_parent(key, accepted, sem.release, config)
        if parent is not None:
            out.append(Rewrite(key, "append", f"{parent} is an open mapping in verl "
                               f"{sem.release} ({{}}): + adds a key under it"))  # fmt: skip
            continue
        last = _last_release_with(key, sem.release, config)
        if last is not None and own_entry:
            out.append(Rewrite(key, "remove", f"verl's config has it up to {last}, no "
                               f"release from {sem.release} on: deleted"))  # fmt: skip
    return out


def _open_parent(key: str, accepted: frozenset[str], release: str, config: str) -> str | None:
    """The nearest ancestor of ``key`` the config has, when it is an empty mapping."""
    parts = key.split(".")
    for n in range(len(parts) - 1, 0, -1):
        parent = ".".join(parts[:n])
        if parent not in accepted:
            continue
        try:
            value = default(release, parent, config)
        except KeyError:  # a mapping with children (no default recorded): closed
            return None
        return parent if isinstance(value, dict) and not value else None
    return None


def _last_release_with(key: str, release: str, config: str) -> str | None:
    """The last release before ``release`` whose ``config`` has ``key``, when no release from
    ``release`` on has it (None otherwise)."""
    here = Version(release)
    before = [r for r in RELEASES if Version(r) < here and key in keys(r, config)]
    later = [r for r in RELEASES if Version(r) >= here and key in keys(r, config)]
    return before[-1] if before and not later else None


def entry_successor(module: str | None, version: str | None) -> str | None:
    """The module of ``version``'s release that runs the trainer of entry ``module``, when
    that release no longer ships ``module`` (a rename); None otherwise."""
    from .history import HISTORY
    from .semantics import semantics

    if not module or not module.startswith("verl."):
        return None
    rows = HISTORY.at(semantics(version).release)
    found = rows.get("entry.successor." + module.rsplit(".", 1)[-1])
    return str(found) if found else None
