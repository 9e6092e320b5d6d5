"""Drop-in ``GRPOTrainer`` and ``RLOOTrainer``: TRL's trainers plus one argument, ``kl``.

``GRPOTrainer(model, reward_funcs, args=GRPOConfig(...), ..., kl="k1-in-reward")`` takes every
TRL argument unchanged; ``kl`` is a :class:`~kl_patches.KLConfig`, a short name
(``"k3-in-loss"``) or a dict, and defaults to the paper's k1-in-reward at ``coef=0.05``;
``kl_full_monitor=True`` also logs the exact full-vocabulary KL (``kl_patches/full_vocab``). TRL's
``beta`` becomes an internal switch (see :mod:`.hooks`). Importing this module imports TRL and
checks its version.
"""

from __future__ import annotations

from typing import Any

import trl

from kl_patches.config import KLConfig

from . import foreign, hooks, legacy
from .patch import HOOKED, guard
from .versions import patch_mode

VERSION = guard()
"""The installed TRL release (checked at import)."""

NATIVE = patch_mode(VERSION) == "native"
"""True on TRL 0.14-0.26: ``kl`` runs through TRL's ``beta`` only (:mod:`.legacy`)."""


class _KLTrainer(hooks.KLTrainerMixin):
    """What both trainers add to TRL's: the ``kl`` and ``kl_full_monitor`` arguments and the
    hooks they share. ``_kl_kind`` names the TRL trainer (``"GRPO"`` or ``"RLOO"``)."""

    _kl_kind: str

    def __init__(
        self,
        model: Any,
        reward_funcs: Any = None,
        args: Any = None,
        *more: Any,
        kl: KLConfig | str | dict[str, Any] | None = None,
        kl_full_monitor: bool = False,
        **kwargs: Any,
    ) -> None:
        kind = self._kl_kind
        config = KLConfig.coerce(kl)
        if NATIVE:
            if kl_full_monitor:
                raise ValueError(
                    "kl_patches.trl: the full-vocabulary KL monitor needs the hooks (trl>=0.27); "
                    f"TRL {VERSION} is patched through beta only"
                )
            args, reward_funcs = legacy.prepare(kind, model, args, reward_funcs, config, VERSION)
            super().__init__(model, reward_funcs, args, *more, **kwargs)  # type: ignore[call-arg]
            legacy.after_init(self, kind, config, float(args.beta), VERSION)
            return
        public = GRPOTrainer if kind == "GRPO" else RLOOTrainer
        foreign.check_subclass(type(self), public, HOOKED)
        hooks.init_state(self, config, kl_full_monitor)
        args = hooks.prepare_args(kind, model, args, config)
        super().__init__(model, reward_funcs, args, *more, **kwargs)  # type: ignore[call-arg]
        hooks.after_init(self, kind)

    @property
    def kl_config(self) -> KLConfig:
        """The KL regulariser this trainer runs."""
        return self._kl_config


class _HookedTrainer(_KLTrainer):
    """The hooks of TRL >= 0.27 (on 0.14-0.26 the trainers take ``kl`` through ``beta``)."""

    def _get_per_token_logps_and_entropies(self, *args: Any, **kwargs: Any) -> Any:
        return hooks.get_logps(
            self,
            super()._get_per_token_logps_and_entropies,  # type: ignore[misc]
            args,
            kwargs,
        )

    def _calculate_rewards(self, *args: Any, **kwargs: Any) -> Any:
        return hooks.calculate_rewards(
            self,
            super()._calculate_rewards,  # type: ignore[misc]
            args,
            kwargs,
        )

    def training_step(self, *args: Any, **kwargs: Any) -> Any:
        return hooks.training_step(self, super().training_step, args, kwargs)  # type: ignore[misc]


class _GRPOHooks(_HookedTrainer):
    """GRPO's own hooks."""

    def _generate_and_score_completions(self, inputs: Any) -> Any:
        return hooks.grpo_generate_and_score(
            self,
            super()._generate_and_score_completions,  # type: ignore[misc]
            inputs,
        )

    def _compute_loss(self, model: Any, inputs: Any) -> Any:
        return hooks.grpo_compute_loss(
            self,
            super()._compute_loss,  # type: ignore[misc]
            model,
            inputs,
        )


class _RLOOHooks(_HookedTrainer):
    """RLOO's own hooks."""

    def _generate_and_score_completions(self, inputs: Any) -> Any:
        return hooks.rloo_generate_and_score(
            self,
            super()._generate_and_score_completions,  # type: ignore[misc]
            inputs,
        )

    def _compute_loss(self, model: Any, inputs: Any) -> Any:
        return hooks.rloo_compute_loss(
            self,
            super()._compute_loss,  # type: ignore[misc]
            model,
            inputs,
        )


class GRPOTrainer(_KLTrainer if NATIVE else _GRPOHooks, trl.GRPOTrainer):  # type: ignore[misc]
    """TRL's GRPOTrainer with the KL regulariser chosen by ``kl`` (a KLConfig or short name)."""

    _kl_kind = "GRPO"


class RLOOTrainer(_KLTrainer if NATIVE else _RLOOHooks, trl.RLOOTrainer):  # type: ignore[misc]
    """TRL's RLOOTrainer with the KL regulariser chosen by ``kl`` (a KLConfig or short name)."""

    _kl_kind = "RLOO"
