"""``kl-patches bias``: see :mod:`kl_patches.experiments.bias` (``--json``: errors as JSON too)."""

from __future__ import annotations

from kl_patches.cli import errors
from kl_patches.experiments import bias

main = errors.command("kl-patches bias", debug_option=True, json_output=True)(bias.main)
"""Entry point of ``kl-patches bias``: :func:`kl_patches.experiments.bias.main` on the one
error path of :mod:`kl_patches.cli.errors`."""

__all__ = ["main"]
