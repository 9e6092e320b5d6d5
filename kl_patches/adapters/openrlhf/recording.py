"""What ``python -m kl_patches.dev record openrlhf VERSION`` reads from an OpenRLHF release.

The data land in ``data/<release>.json`` and are loaded by :mod:`.flagsets` (every option of
the trainer command lines) and :mod:`.compat` (the wrapped functions and the KL flags'
spelling and default). Options come from the ``add_argument`` calls of each CLI module, read
with :mod:`ast`, f-string names inside ``for prefix in ("actor", "critic"):`` included.
"""

from __future__ import annotations

from kl_patches.adapters.releases import NameSetSpec, RecordSpec, SymbolSpec

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
    symbols=tuple(
        SymbolSpec(name)
        for name in (
            "compute_approx_kl",
            "RemoteExperienceMaker.compute_advantages_and_returns",
            "ActorPPOTrainer.training_step",
            "aggregate_loss",
        )
    ),
)
"""OpenRLHF: the PPO trainers' command lines and the functions the patch wraps."""

SPECS = (SPEC,)
"""Everything this adapter records."""
