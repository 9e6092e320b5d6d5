"""A project config folder that holds verl's trainer config as a symlink: which releases compose.

RAGEN's ``config/base.yaml`` lists ``ppo_trainer`` in its ``defaults``, and
``config/ppo_trainer.yaml`` is a symlink to ``../verl/verl/trainer/config/ppo_trainer.yaml`` in
its verl submodule. Hydra reads the symlink's target (whatever verl release is checked out
there) as a config of the project's folder, so that file's own ``defaults`` list is looked up
in the project's search path, not in verl's config folder. Up to 0.4.x the trainer configs have
no ``defaults`` list; from 0.5.0 on they start with config groups that live in verl's folder
(verl v0.5.0 ``verl/trainer/config/ppo_trainer.yaml:12`` ``actor@actor_rollout_ref.actor:
dp_actor``, ``ppo_megatron_trainer.yaml:6`` ``actor@actor_rollout_ref.actor: megatron_actor``;
v0.9.1 ``ppo_trainer.yaml:14`` ``actor@actor_rollout_ref.actor: ${model_engine}_actor``).
Each is a required entry, so a search path without an ``actor`` group makes Hydra stop with
``MissingConfigException`` before the trainer starts (which missing group its message names
depends on Hydra's order; 0.9.1's names ``transfer_queue/transfer_queue``).

:func:`findings` says so only when it is certain: the release read is 0.5.0 or later and the
composed files add no search folder (``closed``: no ``hydra.searchpath``, no ``--config-dir``);
otherwise the symlinked file is read as it is in the checkout.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from packaging.version import InvalidVersion, Version

from kl_patches.adapters.base import Finding

__all__ = ["FIRST_WITH_GROUPS", "REQUIRED_GROUP", "findings"]

FIRST_WITH_GROUPS = Version("0.5.0")
"""The first release whose trainer configs open with a ``defaults`` list of config groups."""

REQUIRED_GROUP = "actor"
"""A group every such list requires (first group entry of both trainer configs, 0.5.0-0.9.1)."""


def findings(linked: Iterable[Mapping[str, Any]], release: str, version: str) -> list[Finding]:
    """An error for each symlinked trainer config that verl ``release`` (shown as ``version``)
    cannot compose from the project's folder (see the module docstring)."""
    try:
        if Version(release) < FIRST_WITH_GROUPS:
            return []
    except InvalidVersion:
        return []
    out: list[Finding] = []
    for link in linked:
        groups = {str(g) for g in link.get("groups", ())}
        if not link.get("closed") or REQUIRED_GROUP in groups:
            continue
        name = str(link.get("name", "ppo_trainer"))
        out.append(
            Finding(
                "verl.linked_config_rejected",
                "error",
                f"Hydra cannot compose this launch with verl {version}: {link.get('link')} is a "
                f"symlink to verl's own {name}.yaml, whose defaults list (from verl 0.5.0 on) "
                f"names config groups ({REQUIRED_GROUP}/, data/, rollout/, ...) that Hydra looks "
                "up in this project's config folder, which lacks them "
                f"(MissingConfigException: In {name!r}: Could not find ...). Keep the verl the "
                "symlink was written for, or add verl's config folder to the search path "
                "(hydra.searchpath: [pkg://verl.trainer.config]).",
            )
        )
    return out
