"""What kl-patches knows about OpenRLHF itself: supported versions, flag history, constants.

Nothing here imports OpenRLHF. The numbers are those of OpenRLHF 0.11.2's code
(``openrlhf/models/utils.py``, ``cli/train_ppo_ray.py``).
"""

from __future__ import annotations

from importlib import metadata

from kl_patches.adapters.support import VersionSupport

SUPPORT = VersionSupport(library="openrlhf", supported=">=0.11.2,<0.12", tested=("0.11.2",))
"""Patched OpenRLHF versions (0.11.2 is tested); ``KL_PATCHES_FORCE=1`` overrides."""

TESTED_VERSION = "0.11.2"
"""The OpenRLHF release whose defaults and code this adapter is tested against."""
DOTTED_SINCE = "0.10.2"
"""First release with dotted flag names (``--algo.kl.*``)."""
UNBIASED_GRADIENT_SINCE = "0.11.1"
"""First release with ``--algo.kl.unbiased_gradient``."""
NATIVE_KL_CLAMP = 10.0
"""OpenRLHF clamps every estimator value to [-10, 10] (``compute_approx_kl``)."""
IS_WEIGHT_CLIP = 10.0
"""Upper clip of the importance weight under ``--algo.kl.unbiased_gradient``."""
GROUP_ESTIMATORS = ("rloo", "reinforce_baseline", "group_norm", "dr_grpo", "flash_reinforce")
WHITENED_ESTIMATORS = ("gae", "reinforce", "reinforce_baseline")
ADVANTAGE_ESTIMATORS = ("gae", "reinforce", *GROUP_ESTIMATORS)


def installed_version() -> str | None:
    """OpenRLHF's installed version from its metadata (not imported); None if absent."""
    try:
        return metadata.version("openrlhf")
    except metadata.PackageNotFoundError:
        return None
