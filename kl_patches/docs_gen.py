"""Old path: ``python -m kl_patches.docs_gen`` runs :mod:`kl_patches.experiments.docs_gen`."""

from __future__ import annotations

from kl_patches.experiments.docs_gen import END, START, main, render

__all__ = ["END", "START", "main", "render"]

if __name__ == "__main__":
    raise SystemExit(main())
