"""verl adapter: the uniform KL switch as verl 0.9.1 configuration, plus patches and delivery.

* :func:`to_overrides` -- Hydra overrides that make verl run a :class:`~kl_patches.KLConfig`
  (native switches where verl has them; the ``kl_patches`` estimator name plus a runtime-env
  variable where it has not);
* :func:`from_config` / :func:`read` -- what a verl config actually runs (no verl needed);
* :func:`apply` / :func:`revert` / :func:`applied` / :func:`active_config` -- the in-process
  patch (needs verl); :func:`check` and :func:`active` give the :class:`PatchSpec` in use;
* :mod:`~kl_patches.adapters.verl.plugin` -- the ``verl.plugins`` entry point that applies the
  patch in every Ray process; :mod:`~kl_patches.adapters.verl.launch` -- ``kl-patches verl``.

Importing this package does not import verl.
"""

from __future__ import annotations

from typing import Any

from kl_patches.adapters.verl.delivery import PatchSpec
from kl_patches.adapters.verl.read import installed_defaults, read
from kl_patches.adapters.verl.translate import from_config, needs_patch, to_overrides
from kl_patches.adapters.verl.versions import (
    ENV_VAR,
    MARKER,
    SUPPORT,
    SUPPORTED_RANGE,
    TESTED_VERSIONS,
)
from kl_patches.config import KLConfig

__all__ = [
    "ENV_VAR",
    "MARKER",
    "SUPPORT",
    "SUPPORTED_RANGE",
    "TESTED_VERSIONS",
    "PatchSpec",
    "active",
    "active_config",
    "applied",
    "apply",
    "check",
    "from_config",
    "installed_defaults",
    "needs_patch",
    "read",
    "revert",
    "to_overrides",
]


def apply(config: Any, *, kl_outside_std: bool = False) -> KLConfig:
    """Install the patch in this process (see :mod:`kl_patches.adapters.verl.patch`)."""
    from kl_patches.adapters.verl import patch

    return patch.apply(config, kl_outside_std=kl_outside_std)


def revert() -> None:
    """Restore every verl symbol the patch replaced."""
    from kl_patches.adapters.verl import patch

    patch.revert()


def applied() -> list[str]:
    """The patched verl functions, checked on the live modules (empty when not applied)."""
    from kl_patches.adapters.verl import patch

    return patch.applied()


def active_config() -> KLConfig | None:
    """The KLConfig the patch runs in this process, or None."""
    from kl_patches.adapters.verl import patch

    return patch.active_config()


def check() -> PatchSpec:
    """Raise unless the patch is active and complete in this process."""
    from kl_patches.adapters.verl import patch

    return patch.check()


def active() -> PatchSpec | None:
    """The active patch in this process, or None."""
    from kl_patches.adapters.verl import patch

    return patch.active()
