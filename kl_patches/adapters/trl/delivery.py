"""How the TRL patch reaches every rank: each rank runs the script, so each applies it.

``accelerate launch`` (and ``torchrun``) start one process per rank, each running the user's
script (or ``python -m kl_patches.trl``), so :func:`~kl_patches.adapters.trl.apply` at the top
of the script patches every rank. For scripts that cannot be edited beyond one
``kl_patches.trl.apply()`` line, the configuration can come from the environment in the shared
wire format (:mod:`kl_patches.adapters.delivery`): ``KL_PATCHES_TRL='{"placement":"reward",
"coef":0.05}'``; the launcher exports it for the processes its trainer may start.
"""

from __future__ import annotations

import os

from kl_patches.adapters import delivery
from kl_patches.config import KLConfig

ENV_VAR = delivery.env_var("trl")
"""``KL_PATCHES_TRL``: the configuration for ranks that call ``apply()`` without one."""


def configured() -> KLConfig | None:
    """The KLConfig in :data:`ENV_VAR`, or None when it is unset; ValueError when invalid."""
    found = delivery.from_environ("trl")
    return None if found is None else found[0]


def export(config: KLConfig) -> None:
    """Put ``config`` in this process's environment (inherited by the processes it starts)."""
    os.environ[ENV_VAR] = delivery.encode(config)
