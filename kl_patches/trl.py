"""``kl_patches.trl``: short import path for :mod:`kl_patches.adapters.trl`.

``from kl_patches.trl import GRPOTrainer, KLArguments, apply, revert`` works; see that module.
Like it, importing this module does not import TRL (the trainer classes do, on first use).
``python -m kl_patches.trl grpo|rloo ...`` runs the launcher (``kl-patches trl``).
"""

from __future__ import annotations

from typing import Any

from kl_patches.adapters.trl import (
    SUPPORT,
    TESTED_BELOW,
    TESTED_MIN,
    KLArguments,
    active_config,
    applied,
    apply,
    check_version,
    from_trl_config,
    installed_defaults,
    is_applied,
    read,
    revert,
)
from kl_patches.adapters.trl import __all__ as __all__


def __getattr__(name: str) -> Any:
    import kl_patches.adapters.trl as adapter

    return getattr(adapter, name)


_REEXPORTED = (
    SUPPORT,
    TESTED_BELOW,
    TESTED_MIN,
    KLArguments,
    active_config,
    applied,
    apply,
    check_version,
    from_trl_config,
    installed_defaults,
    is_applied,
    read,
    revert,
)


if __name__ == "__main__":
    import sys

    from kl_patches.adapters.trl.launch import main

    sys.exit(main())
