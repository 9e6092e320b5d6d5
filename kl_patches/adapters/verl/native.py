"""Deprecated path: the contents moved to :mod:`.versions`, :mod:`.translate` and :mod:`.delivery`.

``from kl_patches.adapters.verl.native import to_overrides, PatchSpec, MARKER, ...`` keeps
working, with a deprecation warning.
"""

from __future__ import annotations

import warnings

from kl_patches.adapters.verl.delivery import PatchSpec
from kl_patches.adapters.verl.translate import (
    SideReading,
    from_config,
    loss_needs_patch,
    loss_side,
    needs_patch,
    parse_overrides,
    patch_spec_of,
    reward_needs_patch,
    reward_side,
    settings_of,
    to_overrides,
)
from kl_patches.adapters.verl.versions import *  # noqa: F403
from kl_patches.adapters.verl.versions import __all__ as _versions_all

__all__ = [
    *_versions_all,
    "PatchSpec",
    "SideReading",
    "from_config",
    "loss_needs_patch",
    "loss_side",
    "needs_patch",
    "parse_overrides",
    "patch_spec_of",
    "reward_needs_patch",
    "reward_side",
    "settings_of",
    "to_overrides",
]

warnings.warn(
    "kl_patches.adapters.verl.native is deprecated; import from kl_patches.adapters.verl (or its "
    "versions, translate and delivery modules)",
    DeprecationWarning,
    stacklevel=2,
)
