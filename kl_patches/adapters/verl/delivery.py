"""How the verl patch reaches every process: a :class:`PatchSpec` in ``KL_PATCHES_VERL``.

verl runs the reward-side KL in its TaskRunner process and the loss-side KL in the actor
workers, all Ray processes that import verl from scratch. The configuration travels as the
shared wire format (:mod:`kl_patches.adapters.delivery`) in ``KL_PATCHES_VERL``, carried into
every Ray process by ``ray_kwargs.ray_init.runtime_env.env_vars`` (see
:func:`~kl_patches.adapters.verl.translate.to_overrides`); the ``verl.plugins`` entry point
(:mod:`~kl_patches.adapters.verl.plugin`) reads it while ``import verl`` runs and applies the
patch.
"""

from __future__ import annotations

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
