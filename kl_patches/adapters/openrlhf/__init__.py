"""OpenRLHF adapter: the uniform KL switch as ``train_ppo_ray`` flags, plus patches for the rest.

* :func:`to_args` / :func:`from_args`: KLConfig <-> OpenRLHF flags (no OpenRLHF needed);
* :func:`read`: the audit's reading of a command line, with OpenRLHF-specific findings;
* :func:`apply` / :func:`revert` / :func:`applied` / :func:`active_config`: patches for what
  the flags cannot express (both placements, KL inside the group baseline, sequence-level
  estimators, unclamped core maths, other loss aggregations and coefficients); imports
  OpenRLHF, checks its version;
* :mod:`~kl_patches.adapters.openrlhf.delivery`: delivery into Ray workers; the launcher
  ``python -m kl_patches.openrlhf`` (:mod:`~kl_patches.adapters.openrlhf.launch`) wires it up.

Importing this package imports neither OpenRLHF nor torch; :func:`apply` does.
"""

from __future__ import annotations

from typing import Any

from kl_patches.adapters.openrlhf.read import read
from kl_patches.adapters.openrlhf.translate import (
    from_args,
    is_native,
    native_gaps,
    parse_settings,
    to_args,
)
from kl_patches.adapters.openrlhf.versions import SUPPORT, TESTED_VERSION
from kl_patches.config import KLConfig

__all__ = [
    "SUPPORT",
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


def apply(config: KLConfig | str | dict[str, Any], only: str | None = None) -> KLConfig:
    """Patch OpenRLHF for ``config`` (see :func:`kl_patches.adapters.openrlhf.patch.apply`)."""
    from kl_patches.adapters.openrlhf import patch

    return patch.apply(config, only=only)


def revert() -> list[str]:
    """Undo :func:`apply`: restore every patched OpenRLHF symbol; returns their names."""
    from kl_patches.adapters.openrlhf import patch

    return patch.revert()


def applied() -> list[str]:
    """Names of the OpenRLHF symbols currently patched in this process (checked live)."""
    from kl_patches.adapters.openrlhf import patch

    return patch.applied()


def active_config() -> KLConfig | None:
    """The KLConfig the patches run in this process (None: not applied)."""
    from kl_patches.adapters.openrlhf import patch

    return patch.active_config()
