"""verl plugin: applies the kl-patches patch named in ``KL_PATCHES_VERL`` in every verl process.

Registered as the ``verl.plugins`` entry point ``kl_patches`` (verl >= 0.9.0 loads it while
``import verl`` runs, in the driver, the TaskRunner and every worker). With the variable unset
or empty it does nothing and imports nothing from verl. Ray carries the variable to its
processes through ``ray_kwargs.ray_init.runtime_env.env_vars`` (see ``to_overrides``).

verl swallows entry-point errors at DEBUG level, so a failure is also written to stderr at
ERROR level here; a process without the patch then still fails loudly, because verl's own code
raises on the estimator name ``kl_patches``. The same module works as
``VERL_USE_EXTERNAL_MODULES=kl_patches.adapters.verl.plugin`` (errors propagate) and as a Ray
``worker_process_setup_hook`` (:func:`setup`).
"""

from __future__ import annotations

import logging
import os
import sys

from kl_patches.adapters.verl.delivery import PatchSpec, configured
from kl_patches.adapters.verl.versions import ENV_VAR

logger = logging.getLogger("kl_patches.verl")

LOAD_ERROR: BaseException | None = None
"""The exception of the last failed activation in this process (None if none failed)."""

__all__ = ["LOAD_ERROR", "configured", "setup"]


def setup() -> PatchSpec | None:
    """Apply the configured patch (no-op when none is configured); raise if it cannot."""
    global LOAD_ERROR
    try:
        spec = configured()
        if spec is None:
            return None
        from kl_patches.adapters.verl.patch import active, apply

        apply(spec)
        logger.info("kl_patches: verl patch active in pid %d: %s", os.getpid(), spec)
        return active()
    except BaseException as exc:
        LOAD_ERROR = exc
        message = f"kl_patches: could not apply the verl patch from {ENV_VAR}: {exc!r}"
        logger.error(message)
        print(message, file=sys.stderr, flush=True)
        raise


setup()
