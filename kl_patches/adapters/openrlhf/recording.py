"""What ``python -m kl_patches.dev record openrlhf VERSION`` reads from an OpenRLHF release.

The data land in ``data/<release>.json`` and are loaded by :mod:`.flagsets` (every option of
the trainer command lines) and :mod:`.compat` (the wrapped functions and the KL flags'
spelling and default). Options come from the ``add_argument`` calls of each CLI module, read
with :mod:`ast`, f-string names inside ``for prefix in ("actor", "critic"):`` included.
"""

from __future__ import annotations

from kl_patches.adapters.releases import NameSetSpec, RecordSpec, SymbolSpec

PATCH_TARGETS: tuple[str, ...] = (
    "compute_approx_kl",
    "RemoteExperienceMaker.compute_advantages_and_returns",
    "ActorPPOTrainer.training_step",
    "aggregate_loss",
)
"""The functions the patch wraps (``compat.TARGETS``)."""

OLDER_KL_SITES: tuple[str, ...] = ("compute_reward", "masked_mean")
"""The reward-side KL and the loss-side mean of the releases before 0.10.3."""

SPEC = RecordSpec(
    library="openrlhf",
    distribution="openrlhf",
    package="openrlhf",
    data_package="kl_patches.adapters.openrlhf",
    data_folder="data",
    name_sets=(
        NameSetSpec("train_ppo_ray", "argparse", (("", ("openrlhf/cli/train_ppo_ray.py",)),)),
        NameSetSpec("train_ppo", "argparse", (("", ("openrlhf/cli/train_ppo.py",)),)),
    ),
    symbols=tuple(SymbolSpec(name) for name in (*PATCH_TARGETS, *OLDER_KL_SITES)),
)
"""OpenRLHF: the PPO trainers' command lines, the functions the patch wraps, and
``compute_reward`` / ``masked_mean`` (the KL's other sites in older releases)."""

SPECS = (SPEC,)
"""Everything this adapter records."""
