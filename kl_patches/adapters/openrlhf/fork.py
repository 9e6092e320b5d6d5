"""The command-line options of an OpenRLHF copy committed in a project (a fork), read from its code.

A project that commits a copy of OpenRLHF and launches ``python -m openrlhf.cli.train_ppo_ray``
from its checkout runs the copy's own argparse, not a release's: forks add options (LIMR's
``--ref_pretrain``, R1-Searcher's ``--group_method``, MM-EUREKA's multimodal ones) that the
release their version file names would refuse. :func:`copy_options` reads the copy's
``openrlhf/cli/<module>.py`` with the recorder's own reader
(:func:`kl_patches.dev.extract.argparse_options`, the one that wrote ``data/<release>.json``
from each release: ``add_argument`` calls read with :mod:`ast`, never imported or run), so the
reader checks the launch's flags against them.

A copy may state no version (LIMR's ``openrlhf/__init__.py`` is empty): :func:`nearest_release`
names the recorded release whose ``train_ppo_ray`` options it shares most of (Jaccard index of
the two option sets; the newer release on a tie), which is what
:func:`.semantics.vendored_version` then reports as its version. Deviation: only the options and
their argparse defaults come from the copy; what the KL code does (estimator, clamp, loss
aggregation) stays the recorded release's.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from kl_patches.adapters.files import MAX_SOURCE_FILE_BYTES, InputError, read_optional
from kl_patches.adapters.releases import Entry

from .flagsets import RELEASES
from .flagsets import options as release_options

__all__ = ["CLI_MODULES", "copy_options", "nearest_release", "package_of"]

CLI_MODULES = ("train_ppo_ray", "train_ppo")
"""The trainer modules of a copy that are read (``openrlhf/cli/<module>.py``)."""


def package_of(version_file: str | Path) -> Path | None:
    """The ``openrlhf`` package folder of the copy that ``version_file`` belongs to (what
    :func:`.semantics.vendored_version` returns: ``openrlhf/__init__.py``, a ``version.txt``
    or ``VERSION`` beside the package, or the package's ``cli/train_ppo_ray.py``); None when
    there is no package there."""
    path = Path(version_file)
    if path.name == "__init__.py" and path.parent.name == "openrlhf":
        found = path.parent
    elif path.parent.name == "cli" and path.parent.parent.name == "openrlhf":
        found = path.parent.parent
    else:
        found = path.parent / "openrlhf"
    return found if (found / "cli").is_dir() else None


def copy_options(package: str | Path, module: str = "train_ppo_ray") -> dict[str, Entry] | None:
    """``option -> {"default", "choices"?, "action"?, "type"?, "at"}`` of every ``--option``
    that ``<package>/cli/<module>.py`` defines (as the recorder reads a release); None when the
    file is missing, unreadable (a FIFO, too big) or does not parse."""
    if module not in CLI_MODULES:
        raise ValueError(f"module={module!r} is not read; choose one of {list(CLI_MODULES)}")
    path = Path(package) / "cli" / f"{module}.py"
    try:
        stat = path.stat()
    except OSError:
        return None
    return _read(str(path), stat.st_mtime_ns, stat.st_size)


@cache
def _read(path: str, mtime_ns: int, size: int) -> dict[str, Entry] | None:
    """:func:`copy_options` of one file version (``mtime_ns`` and ``size`` key the cache)."""
    del mtime_ns, size
    from kl_patches.dev.extract import Module, argparse_options

    try:
        text = read_optional(Path(path), MAX_SOURCE_FILE_BYTES)
    except InputError:
        return None
    if text is None:
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    found: dict[str, Entry] = dict(argparse_options(Module("openrlhf.cli", path, text, tree)))
    return found or None


def nearest_release(names: frozenset[str] | set[str]) -> str:
    """The recorded release whose ``train_ppo_ray`` options are nearest to ``names`` (largest
    Jaccard index; the newer release on a tie)."""
    best, score = RELEASES[-1], -1.0
    for release in RELEASES:
        known = release_options(release, "train_ppo_ray") or frozenset()
        union = len(names | known)
        value = len(names & known) / union if union else 0.0
        if value >= score:
            best, score = release, value
    return best
