"""The OpenRLHF adapter as the rest of kl-patches sees it (imports no OpenRLHF)."""

from __future__ import annotations

from kl_patches.adapters.base import AdapterDescriptor, Launcher

from .entries import ARGV_MARKERS, OTHER_ENTRIES, entries
from .read import COVERS
from .versions import SUPPORT

DESCRIPTOR = AdapterDescriptor(
    name="openrlhf",
    package="kl_patches.adapters.openrlhf",
    support=SUPPORT,
    entries=entries(),
    launchers=(Launcher("kl_patches.openrlhf", "openrlhf"),),
    covers=COVERS,
    bare_argv="flags",
    bare_note=(
        "flags without an entry point read as OpenRLHF train_ppo_ray flags "
        "(use --library trl for TRL flags)"
    ),
    config_files=(
        "OpenRLHF is configured by command-line flags, not a config file; give the launch "
        "script or the argv (kl-patches audit --library openrlhf -- --flag ...)"
    ),
    other_entries=OTHER_ENTRIES,
    argv_markers=ARGV_MARKERS,
    assumed_entry="openrlhf.cli.train_ppo_ray",
)
