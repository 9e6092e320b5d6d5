"""verl plugin: applies the kl-patches patch named in ``KL_PATCHES_VERL`` in every verl process.

Registered as the ``verl.plugins`` entry point ``kl_patches`` (verl >= 0.9.0 loads it while
``import verl`` runs, in the driver, the TaskRunner and every worker). With the variable unset
or empty it does nothing and imports nothing from verl. Ray carries the variable to its
processes through ``ray_kwargs.ray_init.runtime_env.env_vars`` (see ``to_overrides``).

Loaded during ``import verl``, the plugin does not import verl's trainer stack there: it waits
until one of the modules holding the KL code (:data:`KL_MODULES`) has been imported and no verl
module is still being imported, and applies the patch then
(:func:`~kl_patches.adapters.delivery.after_import`). A platform or
backend that another ``verl.plugins`` entry point or ``VERL_USE_EXTERNAL_MODULES`` module
registers after ours is therefore in place before the patch (and its canaries) touch verl's
device code; a process that never imports the KL code (a rollout server) is never patched.
Outside ``import verl`` (a Ray ``worker_process_setup_hook``, a direct call) it applies at once
if verl's KL modules are loaded, else on their import.

verl swallows entry-point errors at DEBUG level, so a failure is also written to stderr at
ERROR level here; a process without the patch then still fails loudly, because verl's own code
raises on the estimator name ``kl_patches``. The active patch is logged at WARNING level once
per process (verl sets logging to WARNING). The same module works as
``VERL_USE_EXTERNAL_MODULES=kl_patches.adapters.verl.plugin`` (errors propagate) and as a Ray
``worker_process_setup_hook`` (:func:`worker_setup`, which Ray's ``RAY_RUNTIME_ENV_HOOK`` adds
for releases before 0.9.0: :func:`kl_patches.adapters.verl.delivery.runtime_env_hook`).
"""

from __future__ import annotations

import logging
import sys

from kl_patches.adapters import delivery
from kl_patches.adapters.verl.delivery import PatchSpec, configured
from kl_patches.adapters.verl.versions import ENV_VAR

logger = logging.getLogger("kl_patches.verl")

KL_MODULES = ("verl.trainer.ppo.ray_trainer", "verl.workers.utils.losses")
"""The modules whose functions the patch wraps (``patch.SOURCES``): the patch is applied when
the first of them has finished importing."""

LOAD_ERROR: BaseException | None = None
"""The exception of the last failed activation in this process (None if none failed)."""

__all__ = ["KL_MODULES", "LOAD_ERROR", "configured", "setup", "worker_setup"]


def _fail(exc: BaseException) -> None:
    global LOAD_ERROR
    LOAD_ERROR = exc
    message = f"kl_patches: could not apply the verl patch from {ENV_VAR}: {exc!r}"
    logger.error(message)
    print(message, file=sys.stderr, flush=True)


def _apply(spec: PatchSpec) -> PatchSpec | None:
    try:
        from kl_patches.adapters.verl.patch import active, apply

        apply(spec)
        delivery.announce(
            "verl", str(spec.config) + (" (KL outside GRPO's std)" if spec.kl_outside_std else "")
        )
        return active()
    except BaseException as exc:
        _fail(exc)
        raise


_SCHEDULED = False
"""True once :func:`setup` found a configuration in this process (applied or waiting)."""


def setup() -> PatchSpec | None:
    """Apply the configured patch (no-op when none is configured); raise if it cannot.

    Returns the active spec, or None when nothing is configured or the patch waits for verl's
    KL modules to be imported (then it is applied right after their import, which raises if
    it cannot).
    """
    try:
        spec = configured()
    except BaseException as exc:
        _fail(exc)
        raise
    if spec is None:
        return None
    global _SCHEDULED
    _SCHEDULED = True
    if delivery.after_import(KL_MODULES, lambda: _apply(spec), settle="verl"):
        from kl_patches.adapters.verl.patch import active

        return active()
    return None


def worker_setup() -> None:
    """Ray ``worker_process_setup_hook`` (verl < 0.9, through
    :func:`~kl_patches.adapters.verl.delivery.runtime_env_hook`): the entry point's path,
    :func:`setup`, in a worker whose verl loads no entry point. Raises when ``KL_PATCHES_VERL``
    is not set (the hook is only added with it, so its absence means a broken runtime env)."""
    if configured() is None:
        raise RuntimeError(
            f"kl_patches: the verl setup hook runs in this Ray worker but {ENV_VAR} is not set; "
            "put it in the driver's environment or the job's runtime_env env_vars"
        )
    if not _SCHEDULED:  # importing this module ran setup() already when the variable was set
        setup()


setup()
