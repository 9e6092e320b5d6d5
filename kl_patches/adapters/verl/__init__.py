"""verl adapter: the uniform KL switch as verl 0.9.1 configuration, plus patches and delivery.

* :func:`to_overrides` -- Hydra overrides that make verl run a :class:`~kl_patches.KLConfig`
  (native switches where verl has them; the ``kl_patches`` estimator name plus a runtime-env
  variable where it has not);
* :func:`from_config` / :func:`read` -- what a verl config actually runs (no verl needed);
* :func:`apply` / :func:`revert` / :func:`check` -- the in-process patch (needs verl);
* :mod:`~kl_patches.adapters.verl.plugin` -- the ``verl.plugins`` entry point that applies the
  patch in every Ray process; :mod:`~kl_patches.adapters.verl.launch` -- ``kl-patches verl``.

Importing this package does not import verl.
"""

from __future__ import annotations

from typing import Any

from kl_patches.adapters.verl.audit import read
from kl_patches.adapters.verl.native import (
    ENV_VAR,
    MARKER,
    SUPPORTED_RANGE,
    TESTED_VERSIONS,
    PatchSpec,
    from_config,
    needs_patch,
    to_overrides,
)

__all__ = [
    "ENV_VAR",
    "MARKER",
    "SUPPORTED_RANGE",
    "TESTED_VERSIONS",
    "PatchSpec",
    "active",
    "apply",
    "check",
    "from_config",
    "installed_defaults",
    "needs_patch",
    "read",
    "revert",
    "to_overrides",
]


def apply(config: Any, *, kl_outside_std: bool = False) -> PatchSpec:
    """Install the patch in this process (see :mod:`kl_patches.adapters.verl.patch`)."""
    from kl_patches.adapters.verl import patch

    return patch.apply(config, kl_outside_std=kl_outside_std)


def revert() -> None:
    """Restore every verl symbol the patch replaced."""
    from kl_patches.adapters.verl import patch

    patch.revert()


def check() -> PatchSpec:
    """Raise unless the patch is active and complete in this process."""
    from kl_patches.adapters.verl import patch

    return patch.check()


def active() -> PatchSpec | None:
    """The active patch in this process, or None."""
    from kl_patches.adapters.verl import patch

    return patch.active()


def installed_defaults() -> dict[str, Any]:
    """The KL-relevant defaults of the installed verl, read by composing its Hydra config."""
    from kl_patches.adapters.verl.hydra_config import compose
    from kl_patches.adapters.verl.native import DEFAULTS, settings_of

    cfg = compose([])
    settings = settings_of(cfg)
    return {key: settings[key] for key in DEFAULTS}
