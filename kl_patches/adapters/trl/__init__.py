"""kl-patches for TRL: GRPOTrainer and RLOOTrainer with any KL estimator x placement.

Three ways in, all running the same hooks (:mod:`.hooks`):

* ``from kl_patches.trl import GRPOTrainer`` -- TRL's trainer plus ``kl="k1-in-reward"``;
* ``kl_patches.trl.apply("k1-in-reward")`` / ``revert()`` -- patch TRL's own classes in place;
* ``KLArguments`` -- the same switch as ``kl_*`` keys of a TRL YAML config for ``TrlParser``.

Unsloth's generated trainer replaces TRL's loss; :mod:`.unsloth` (``apply``/``revert``) patches
its own loss instead, loss side only, and :mod:`.unsloth_facts` is how the reader sees it.

The reader (:func:`from_trl_config`, :func:`read`) tells what TRL runs natively and works
without TRL installed. Importing this package does not import TRL; the trainer classes and
``apply`` import it (and check its version) on first use.
"""

from __future__ import annotations

from typing import Any

from .patch import active_config, applied, apply, is_applied, revert
from .read import installed_defaults, read
from .translate import KLArguments, from_trl_config
from .versions import SUPPORT, TESTED_BELOW, TESTED_MIN, check_version

__all__ = [
    "SUPPORT",
    "TESTED_BELOW",
    "TESTED_MIN",
    "GRPOTrainer",
    "KLArguments",
    "RLOOTrainer",
    "active_config",
    "applied",
    "apply",
    "check_version",
    "from_trl_config",
    "installed_defaults",
    "is_applied",
    "read",
    "revert",
]


def __getattr__(name: str) -> Any:
    if name in ("GRPOTrainer", "RLOOTrainer"):
        from . import trainers

        return getattr(trainers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
