"""``kl-patches bias``: see :mod:`kl_patches.experiments.bias`."""

from __future__ import annotations

from kl_patches.experiments.bias import main

__all__ = ["main"]
