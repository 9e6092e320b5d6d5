"""What ``python -m kl_patches.dev record verl VERSION`` reads from a verl release.

The data land in ``data/<release>.json`` and are loaded by :mod:`.keysets` (every key path of
the composed trainer configs) and :mod:`.compat` (the wrapped functions). The configs are
composed with hydra-core from the release's own ``verl/trainer/config`` folder, as
``main_ppo`` composes them (``--config-name``), without importing verl.
"""

from __future__ import annotations

from kl_patches.adapters.releases import NameSetSpec, RecordSpec, SymbolSpec

CONFIG_DIR = "verl/trainer/config"
"""The trainer configs' folder inside the package."""

PATCH_TARGETS: tuple[str, ...] = (
    "apply_kl_penalty",
    "compute_advantage",
    "ppo_loss",
    "agg_loss",
    "kl_penalty",
    "kl_penalty_forward",
)
"""The functions the patch wraps or relies on (``compat.TARGETS``)."""

LEGACY_KL_LOSS_SITE = "DataParallelPPOActor.update_policy"
"""Where the legacy actor (every release before 0.8.0) adds the KL loss."""

SPEC = RecordSpec(
    library="verl",
    distribution="verl",
    package="verl",
    data_package="kl_patches.adapters.verl",
    data_folder="data",
    name_sets=(
        NameSetSpec("ppo_trainer", "hydra", (("ppo_trainer", (CONFIG_DIR,)),)),
        NameSetSpec("ppo_megatron_trainer", "hydra", (("ppo_megatron_trainer", (CONFIG_DIR,)),)),
    ),
    symbols=tuple(SymbolSpec(name) for name in (*PATCH_TARGETS, LEGACY_KL_LOSS_SITE)),
)
"""verl: the two trainer configs, the functions the patch wraps or relies on, and the legacy
actor's ``update_policy`` (the KL-loss site of 0.1-0.7)."""

SPECS = (SPEC,)
"""Everything this adapter records."""
