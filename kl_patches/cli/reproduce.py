"""``kl-patches reproduce``: see :mod:`kl_patches.experiments.reproduce`.

``--json FILE`` writes the metrics to a file (not stdout); that file, ``--markdown FILE`` and
``--plot DIR`` are checked for writability before the run.
"""

from __future__ import annotations

from kl_patches.cli import errors
from kl_patches.experiments import reproduce

main = errors.command("kl-patches reproduce", debug_option=True)(reproduce.main)
"""Entry point of ``kl-patches reproduce``: :func:`kl_patches.experiments.reproduce.main` on
the one error path of :mod:`kl_patches.cli.errors`."""

__all__ = ["main"]
