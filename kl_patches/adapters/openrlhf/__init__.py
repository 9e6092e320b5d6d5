"""OpenRLHF adapter: the uniform KL switch as ``train_ppo_ray`` flags, plus patches for the rest.

* :func:`to_args` / :func:`from_args`: KLConfig <-> OpenRLHF flags (no OpenRLHF needed);
* :func:`read`: the audit's reading of a command line, with OpenRLHF-specific findings;
* :func:`apply` / :func:`revert`: patches for what the flags cannot express (both placements,
  KL inside the group baseline, sequence-level estimators, unclamped core maths, other loss
  aggregations and coefficients); imports OpenRLHF, checks its version;
* :mod:`~kl_patches.adapters.openrlhf.hook`: delivery into Ray workers; the launcher
  ``python -m kl_patches.openrlhf`` wires it up.

Importing this package imports neither OpenRLHF nor torch; :func:`apply` does.
"""

from __future__ import annotations

from typing import Any

from kl_patches.adapters.openrlhf.flags import (
    TESTED_VERSION,
    from_args,
    is_native,
    native_gaps,
    parse_settings,
    to_args,
)
from kl_patches.adapters.openrlhf.reader import read
from kl_patches.config import KLConfig

__all__ = [
    "TESTED_VERSION",
    "active_config",
    "applied",
    "apply",
    "from_args",
    "is_native",
    "native_gaps",
    "parse_settings",
    "read",
    "revert",
    "to_args",
]


def apply(config: KLConfig | str | dict[str, Any], only: str | None = None) -> list[str]:
    """Patch OpenRLHF for ``config`` (see :func:`kl_patches.adapters.openrlhf.patches.apply`)."""
    from kl_patches.adapters.openrlhf import patches

    return patches.apply(config, only=only)


def revert() -> list[str]:
    """Undo :func:`apply`: restore every patched OpenRLHF symbol."""
    from kl_patches.adapters.openrlhf import patches

    return patches.revert()


def applied() -> list[str]:
    """Names of the OpenRLHF symbols currently patched in this process."""
    from kl_patches.adapters.openrlhf import patches

    return patches.applied()


def active_config() -> KLConfig | None:
    """The KLConfig the patches run in this process (None: not applied)."""
    from kl_patches.adapters.openrlhf import patches

    return patches.active_config()
