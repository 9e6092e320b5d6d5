"""Accelerator probes: ``python3 -c 'import torch_npu'``, the one test of a launch script that
depends on the machine's installed vendor package (:data:`.vocabulary.ACCELERATOR_PACKAGES`).

The reader reads such a probe as failing (exit status 1, nothing printed): the machine has
no vendor package, as on an NVIDIA GPU machine, the device the libraries fall back to. The
world records the assumption (:attr:`.state.World.assumed`), so that each launch read under it
carries an ``accelerator_assumed`` finding naming the other run. Deviation from bash: bash
runs the probe; the reader never runs commands."""

from __future__ import annotations

import os
import re

from kl_patches.audit.shell.vocabulary import ACCELERATOR_PACKAGES

_IMPORT = re.compile(r"\s*import\s+([A-Za-z_][\w.]*)\s*;?\s*")


def probed_package(words: list[str]) -> str | None:
    """The vendor package ``words`` (a command's expanded words) only imports, else None:
    ``python3 -c 'import torch_npu'``, ``python -c "import habana_frameworks.torch"``."""
    if len(words) != 3 or words[1] != "-c":
        return None
    if not re.fullmatch(r"python[\d.]*", os.path.basename(words[0])):
        return None
    m = _IMPORT.fullmatch(words[2])
    if m is None:
        return None
    top = m.group(1).split(".")[0]
    return top if top in ACCELERATOR_PACKAGES else None


def assumption(package: str, written: str, absent: str = "", present: str = "") -> str:
    """The text recording that ``written`` (a probe for ``package``) is read as failing;
    ``absent``/``present``: what the command substitution around it prints each way."""
    text = (
        f"`{written}` is read as failing: the audit reads the launch on a machine without "
        f"{package} (an NVIDIA GPU machine)"
    )
    if present or absent:
        text += f", so the probe's substitution gives {absent!r}"
    text += f"; on {ACCELERATOR_PACKAGES[package]}, where {package} imports, it succeeds"
    if present:
        text += f" and gives {present!r}"
    return text + " and the script may take other branches"
