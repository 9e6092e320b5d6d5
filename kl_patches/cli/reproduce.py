"""``kl-patches reproduce``: see :mod:`kl_patches.experiments.reproduce`."""

from __future__ import annotations

from kl_patches.experiments.reproduce import main

__all__ = ["main"]
