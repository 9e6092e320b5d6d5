"""The library releases the end-to-end harness supports, and the check that names them.

The harness reaches into each library's internals (verl's platform, engine and rollout
registries and its rollout output contract; OpenRLHF's vLLM interface and CUDA calls; TRL's
``compute_loss`` and model outputs), which move between releases: a release not listed here
fails with a message naming the supported ones instead of an obscure error deep in a run.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from kl_patches.experiments.cpu import RELEASES

SUPPORTED: dict[str, tuple[str, ...]] = {**RELEASES, "trl": ("1.16.0",)}
"""Library -> the releases the harness was run against (verl's and OpenRLHF's: those of the
package's CPU stand-ins, which the harness loads)."""


class UnsupportedRelease(RuntimeError):
    """The installed library is not a release the harness supports."""


def check(library: str) -> str:
    """The installed release of ``library``; raises :class:`UnsupportedRelease` otherwise."""
    supported = SUPPORTED[library]
    try:
        found = version(library)
    except PackageNotFoundError:
        raise UnsupportedRelease(
            f"{library} is not installed; the end-to-end harness supports {library} "
            f"{', '.join(supported)} (nox -s \"e2e(library='{library}')\" installs it)"
        ) from None
    if found not in supported:
        raise UnsupportedRelease(
            f"{library} {found} is installed; the end-to-end harness supports {library} "
            f"{', '.join(supported)} only (it uses internals that move between releases: see "
            "kl_patches/experiments/cpu/__init__.py)"
        )
    return found
