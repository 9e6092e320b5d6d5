"""How to write the overrides a verl release refuses so that it accepts them, from the recorded
key sets of every release (:mod:`.keysets`).

Hydra composes verl's trainer config in struct mode (see :mod:`.keysets`): ``key=value`` on a
key the composed config lacks fails (``Could not override``). Three of those refusals have
a rewrite, read from the release data alone:

* the key sits under a mapping that is open (empty) in this release, ``{}`` in its YAML, so
  nothing under it can be overridden but anything can be added: ``+key=value`` (Hydra's
  append, ``hydra/core/override_parser/types.py`` ``OverrideType.ADD``) adds it. verl 0.6.1's
  ``rollout.engine_kwargs.sglang`` is ``{}`` (``verl/trainer/config/rollout/rollout.yaml``
  at v0.6.1), where 0.5.0 listed ``attention_backend``;
* the key existed in an earlier release and in no release from this one on, and the release
  that dropped it added exactly one key with the same last name in the same top-level section
  whose default is of the same kind (a moved subtree: 0.8.0's ``critic.model.fsdp_config.*``
  -> ``critic.fsdp.*``): it is renamed. Several such keys, or one of another kind (0.6.1's
  ``rollout_correction.rollout_is`` is a level name where 0.6.0's ``algorithm.rollout_is``
  was a switch), leave the refusal to the user;
* the key existed in an earlier release and in no release from this one on, and the release
  that dropped it added no key of that name in that section (verl deleted it): the override
  is removed, and the change's reason says up to which release the key existed. A setting
  whose meaning moved to a key of another name (0.6.0's ``rollout_is_level``) is removed too:
  the data cannot tell that move from a deletion. Only for verl's own entry points: a
  recipe's trainer (``recipe.*``) is code outside verl that may still read the key
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
    """``append``: write it as ``+key``; ``rename``: write it as :attr:`new_key`; ``remove``:
    delete the override."""
    why: str
    """The release fact behind it, for the change's reason."""
    new_key: str | None = None
    """For ``rename``: the key the release reads instead."""


def rewrites(overrides: Any, version: str | None, context: Mapping[str, Any]) -> list[Rewrite]:
    """The rewrites of ``overrides``' plain ``key=value`` items that the release read as
    ``version`` refuses (``context`` is the reader's: entry, composed config name and keys)."""
    from .read import checked_keys, override_key, rejected_overrides
    from .semantics import semantics

    if not isinstance(overrides, (list, tuple)):
        return []
    checked = checked_keys(overrides, version, context)
    if checked is None:
        return []
    config, accepted = checked
    sem = semantics(version)
    entry = context.get("entry")
    own_entry = entry is None or str(entry).startswith("verl.")
    out: list[Rewrite] = []
    for _, item, why in rejected_overrides(list(overrides), accepted):
        prefix, key = override_key(item)
        if prefix or not why.startswith("Could not override"):
            continue
        parent = _open_parent(key, accepted, sem.release, config)
        if parent is not None:
            out.append(Rewrite(key, "append", f"{parent} is an open mapping in verl "
                               f"{sem.release} ({{}}): + adds a key under it"))  # fmt: skip
            continue
        last = _last_release_with(key, sem.release, config)
        if last is None:
            continue
        found = _candidates(key, last, config)
        if len(found) == 1 and _same_kind(key, last, found[0], sem.release, config, accepted):
            out.append(Rewrite(key, "rename", f"verl {_after(last)} renamed it (the one key "
                               f"{found[0].rsplit('.', 1)[-1]} that release added under "
                               f"{key.split('.')[0]})", found[0]))  # fmt: skip
        elif not found and own_entry:
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


def _after(release: str) -> str:
    """The recorded release that follows ``release``."""
    return RELEASES[RELEASES.index(release) + 1]


def _candidates(key: str, last: str, config: str) -> list[str]:
    """The keys the release after ``last`` added with ``key``'s last name in its top-level
    section: where a moved subtree went (0.8.0's ``critic.model.fsdp_config.*`` ->
    ``critic.fsdp.*``)."""
    gained = keys(_after(last), config) - keys(last, config)
    leaf, top = key.rsplit(".", 1)[-1], key.split(".")[0]
    return sorted(k for k in gained if k.rsplit(".", 1)[-1] == leaf and k.split(".")[0] == top)


def _same_kind(
    key: str, last: str, new: str, release: str, config: str, accepted: frozenset[str]
) -> bool:
    """True when ``new`` is in the read release and its default has the kind of ``key``'s
    (a bool stays a bool: 0.6.1's ``rollout_correction.rollout_is`` is a level name where
    0.6.0's ``rollout_is`` was a switch, so that is no rename)."""
    if new not in accepted:
        return False
    try:
        old_value, new_value = default(last, key, config), default(release, new, config)
    except KeyError:
        return False
    number = (int, float)
    if isinstance(old_value, bool) or isinstance(new_value, bool):
        return type(old_value) is type(new_value)
    if isinstance(old_value, number) and isinstance(new_value, number):
        return True
    return type(old_value) is type(new_value)


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
