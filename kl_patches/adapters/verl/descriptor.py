"""The verl adapter as the rest of kl-patches sees it (imports no verl)."""

from __future__ import annotations

from kl_patches.adapters.base import AdapterDescriptor, Entry, Launcher

from .read import COVERS, SECTIONS
from .versions import SUPPORT

DESCRIPTOR = AdapterDescriptor(
    name="verl",
    package="kl_patches.adapters.verl",
    support=SUPPORT,
    entries=(Entry("verl.trainer.main_ppo", "verl.trainer.main_ppo"),),
    launchers=(Launcher("kl_patches.adapters.verl.launch", "verl"),),
    covers=COVERS,
    mapping_hint=f"a verl config has top-level sections {list(SECTIONS)}",
    bare_argv="overrides",
)
