"""The TRL adapter as the rest of kl-patches sees it (imports no TRL)."""

from __future__ import annotations

from kl_patches.adapters.base import AdapterDescriptor, Launcher

from .entries import ENTRIES, OTHER_ENTRIES, PYTHON, SCRIPTS
from .read import COVERS
from .versions import SUPPORT

DESCRIPTOR = AdapterDescriptor(
    name="trl",
    package="kl_patches.adapters.trl",
    support=SUPPORT,
    entries=ENTRIES,
    launchers=(Launcher("kl_patches.trl", "trl", ("grpo", "rloo")),),
    covers=COVERS,
    mapping_hint="a TRL config is a flat mapping",
    other_entries=OTHER_ENTRIES,
    scripts=SCRIPTS,
    argv_markers=(
        r"^--(beta|num_generations|loss_type|scale_rewards|num_iterations|"
        r"use_bias_correction_kl|steps_per_generation|kl_coef|num_ppo_epochs)(=|$)",
    ),
    assumed_entry="trl grpo",
    python=PYTHON,
)
