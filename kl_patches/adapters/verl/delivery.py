"""How the verl patch reaches every process: a :class:`PatchSpec` in ``KL_PATCHES_VERL``.

verl runs the reward-side KL in its TaskRunner process and the loss-side KL in the actor
workers, all Ray processes that import verl from scratch. The configuration travels as the
shared wire format (:mod:`kl_patches.adapters.delivery`) in ``KL_PATCHES_VERL``, carried into
every Ray process by ``ray_kwargs.ray_init.runtime_env.env_vars`` (see
:func:`~kl_patches.adapters.verl.translate.to_overrides`); the ``verl.plugins`` entry point
(:mod:`~kl_patches.adapters.verl.plugin`) reads it while ``import verl`` runs and applies the
patch.

Releases before 0.9.0 load no entry point, and 0.4-0.5 ignore ``ray_kwargs``: there Ray's own
``RAY_RUNTIME_ENV_HOOK`` (:func:`runtime_env_hook`) adds a ``worker_process_setup_hook``
(:func:`kl_patches.adapters.verl.plugin.worker_setup`) and the variable to whatever runtime env
verl passes to ``ray.init``, so every worker patches verl's KL modules when it imports them, the
way the entry point does. From 0.6.0
``VERL_USE_EXTERNAL_MODULES=kl_patches.adapters.verl.plugin`` is another route.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kl_patches.adapters import delivery
from kl_patches.config import KLConfig

from .versions import ENV_VAR

OPTIONS = ("kl_outside_std",)
"""Adapter options carried beside the KLConfig fields."""


@dataclass(frozen=True)
class PatchSpec:
    """What the verl patch must do beyond verl's switches (carried by :data:`ENV_VAR`)."""

    config: KLConfig
    """The KLConfig to run."""
    kl_outside_std: bool = False
    """GRPO only: subtract the group-centred KL penalty after the std normalisation instead of
    inside the score, so 1/std scales the task reward but not the KL."""

    def to_json(self) -> str:
        """Compact JSON for the environment variable (the shared wire format)."""
        options = {"kl_outside_std": True} if self.kl_outside_std else {}
        return delivery.encode(self.config, options)

    @classmethod
    def from_json(cls, text: str) -> PatchSpec:
        """Inverse of :meth:`to_json`; errors name the variable and why the text is invalid."""
        config, options = delivery.decode(text, ENV_VAR, OPTIONS)
        return cls(config=config, kl_outside_std=bool(options.get("kl_outside_std", False)))


def configured() -> PatchSpec | None:
    """The patch requested by :data:`ENV_VAR` in this process' environment (None if unset)."""
    found = delivery.from_environ("verl", OPTIONS)
    if found is None:
        return None
    config, options = found
    return PatchSpec(config, kl_outside_std=bool(options.get("kl_outside_std", False)))


# ----------------------------------------------------------------------------- any verl release
RUNTIME_ENV_HOOK = "kl_patches.adapters.verl.delivery.runtime_env_hook"
"""Value for Ray's ``RAY_RUNTIME_ENV_HOOK`` in the driver's environment (see
:func:`runtime_env_hook`)."""

SETUP_HOOK = "kl_patches.adapters.verl.plugin.worker_setup"
"""The Ray ``worker_process_setup_hook`` that :func:`runtime_env_hook` adds."""

RAY_HOOK_VAR = "RAY_RUNTIME_ENV_HOOK"
"""Ray reads this variable in ``ray.init``: a ``module.function`` that may change the job's
``runtime_env`` (``ray/_private/worker.py``, ``_maybe_modify_runtime_env``)."""


def runtime_env_hook(runtime_env: dict[str, object] | None) -> dict[str, object]:
    """Ray's ``RAY_RUNTIME_ENV_HOOK``: the job's ``runtime_env`` plus :data:`SETUP_HOOK` and
    :data:`ENV_VAR` (from the runtime env when verl's config put it there, else from this
    process's environment), so that every worker of the job applies the patch.

    The route for verl releases without the ``verl.plugins`` entry point (< 0.9.0), whose
    ``main_ppo`` builds its own ``ray.init`` runtime env (0.4-0.5: a fixed dict, so no Hydra key
    reaches it): ``RAY_RUNTIME_ENV_HOOK`` and ``KL_PATCHES_VERL`` in the driver's environment
    (the ``kl-patches verl`` launcher sets both). Without a configuration it returns the
    runtime env unchanged; a conflicting ``worker_process_setup_hook`` is an error (Ray runs
    one per job).
    """
    env = dict(runtime_env or {})
    env_vars = dict(env.get("env_vars") or {})  # type: ignore[call-overload]
    text = str(env_vars.get(ENV_VAR) or os.environ.get(ENV_VAR, "")).strip()
    if not text:
        return env
    PatchSpec.from_json(text)  # a bad configuration stops ray.init in the driver, not a worker
    env_vars[ENV_VAR] = text
    env["env_vars"] = env_vars
    hook = env.get("worker_process_setup_hook")
    if hook not in (None, SETUP_HOOK):
        raise ValueError(
            f"the job's runtime_env already has worker_process_setup_hook={hook!r}; Ray runs one "
            f"per job, and kl-patches needs {SETUP_HOOK!r} to patch verl in every worker"
        )
    env["worker_process_setup_hook"] = SETUP_HOOK
    return env
