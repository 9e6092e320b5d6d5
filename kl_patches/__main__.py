"""``python -m kl_patches``: the ``kl-patches`` command."""

from __future__ import annotations

from kl_patches.cli import main

raise SystemExit(main())
