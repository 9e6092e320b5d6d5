"""The verl adapter as the rest of kl-patches sees it (imports no verl)."""

from __future__ import annotations

from kl_patches.adapters.base import AdapterDescriptor, Launcher

from .entries import ARGV_MARKERS, NOT_REFERENCE_KL, OTHER_ENTRIES, entries
from .read import COVERS, SECTIONS
from .versions import SUPPORT

DESCRIPTOR = AdapterDescriptor(
    name="verl",
    package="kl_patches.adapters.verl",
    support=SUPPORT,
    entries=entries(),
    launchers=(Launcher("kl_patches.adapters.verl.launch", "verl"),),
    covers=COVERS,
    mapping_hint=f"a verl config has top-level sections {list(SECTIONS)}",
    bare_argv="overrides",
    other_entries=OTHER_ENTRIES,
    argv_markers=ARGV_MARKERS,
    assumed_entry="verl.trainer.main_ppo",
    not_reference_kl=NOT_REFERENCE_KL,
)
