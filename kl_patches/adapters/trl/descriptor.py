"""The TRL adapter as the rest of kl-patches sees it (imports no TRL)."""

from __future__ import annotations

from kl_patches.adapters.base import AdapterDescriptor, Entry, Launcher

from .read import COVERS
from .versions import SUPPORT

DESCRIPTOR = AdapterDescriptor(
    name="trl",
    package="kl_patches.adapters.trl",
    support=SUPPORT,
    entries=(
        Entry("trl.scripts.grpo", "trl grpo", ("trl", "grpo")),
        Entry("trl.scripts.rloo", "trl rloo", ("trl", "rloo")),
    ),
    launchers=(Launcher("kl_patches.trl", "trl", ("grpo", "rloo")),),
    covers=COVERS,
    mapping_hint="a TRL config is a flat mapping",
)
