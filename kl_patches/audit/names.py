"""The release a launch was written for, told from the names it uses (``version_source: names``).

When no ``--library-version``, pin or vendored copy says which release a launch is for, the
audit would read it as the installed package or the newest tested release; a launch written
for an older release then uses names that release refuses (OpenRLHF's flat ``--init_kl_coef``
of 0.10.1 and before, a verl key removed since, a TRL field renamed) and the reading leaves
them out: what runs after the user deletes them, not what the file was written to run. The
launch's own names say which releases it was written for: those whose name sets accept every
name of it. :func:`infer` reads the launch at every recorded release of its library (each
adapter's reader already refuses, per release, what that release's recorded name set lacks:
:mod:`kl_patches.adapters.releases`), keeps the releases whose reading has no refusal the
others lack, and gives the newest of them.

A refusal is a finding of severity ``error`` whose code ends in ``_rejected`` (the adapters'
convention, also used by :mod:`.ignored`). Refusals every release shares (a typo no release
has, stray words on a TRL command line) say nothing about the release and are not held
against any. Deviation: the releases are read one by one (a reading per release: about 70 for
OpenRLHF), not by one set lookup, so that each adapter's own rules decide acceptance (argparse
prefixes, Hydra's ``+``/``++``, TRL's dataclasses); it runs only for a launch the chosen
release refuses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kl_patches import adapters
from kl_patches.adapters.base import NativeReading

__all__ = ["Inferred", "infer", "refusals", "release_ranges"]


def refusals(reading: NativeReading) -> frozenset[str]:
    """The codes of the reading's refusal findings (severity error, code ``*_rejected``)."""
    return frozenset(
        f.code for f in reading.findings if f.severity == "error" and f.code.endswith("_rejected")
    )


@dataclass(frozen=True)
class Inferred:
    """The releases a launch's names select, and the reading as the newest of them."""

    release: str
    """The newest release that accepts every name of the launch."""
    accepting: tuple[str, ...]
    """Every recorded release that accepts them, ascending."""
    reading: NativeReading
    """The launch read as :attr:`release`."""


def release_ranges(releases: tuple[str, ...], accepting: tuple[str, ...]) -> str:
    """``0.5.0-0.10.1.post2`` (or ``0.5.0-0.6.1, 0.7.0``): the runs of ``accepting`` among the
    recorded ``releases`` (ascending), each as its first and last release."""
    runs: list[list[str]] = []
    previous = -2
    for i, release in enumerate(releases):
        if release not in accepting:
            continue
        if i == previous + 1:
            runs[-1].append(release)
        else:
            runs.append([release])
        previous = i
    return ", ".join(r[0] + (f"-{r[-1]}" if len(r) > 1 else "") for r in runs)


def infer(
    library: str,
    reading: NativeReading,
    read_at: Callable[[str], NativeReading | None],
) -> Inferred | None:
    """The releases whose names accept the launch (see the module docstring), or None when
    ``reading`` (the launch as the chosen release runs it) has no refusal, when no release
    accepts more than that one, or when every release refuses it alike.

    ``read_at(release)`` reads the launch as ``release`` (None if it cannot be read)."""
    refused = refusals(reading)
    if not refused:
        return None
    readings: dict[str, NativeReading] = {}
    for release in adapters.get(library).releases():
        other = read_at(release)
        if other is not None:
            readings[release] = other
    if not readings:
        return None
    shared = frozenset.intersection(*(refusals(r) for r in readings.values()))
    if refused <= shared:
        return None
    accepting = tuple(r for r, other in readings.items() if refusals(other) <= shared)
    if not accepting:
        return None
    newest = accepting[-1]
    return Inferred(newest, accepting, readings[newest])
