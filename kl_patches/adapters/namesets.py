"""The names a library's configuration accepts in each release, folded from per-release rows.

Each adapter records the option names of its library (TRL's config dataclass fields, verl's
Hydra key paths, OpenRLHF's command-line flags) as rows ``(since, added, removed)``: the
release where a change appeared, and the names added and removed there. A name list is text,
one line per parent: ``parent: child child ...`` gives ``parent.child`` for each child, and a
line without a parent (``: a b``) gives the bare names. :func:`names_in` replays the rows up
to a release. Plain data, read from the released wheels; nothing here imports a library.
"""

from __future__ import annotations

from collections.abc import Iterable

from packaging.version import Version

Row = tuple[str, str, str]
"""``(since, added, removed)``: a release and the name lists added and removed there."""


def expand(text: str) -> set[str]:
    """The names in a name list (see the module docstring); blank lines are skipped."""
    out: set[str] = set()
    for line in text.splitlines():
        if not line.strip():
            continue
        parent, _, children = line.partition(":")
        for child in children.split():
            out.add(f"{parent}.{child}" if parent else child)
    return out


def names_in(rows: Iterable[Row], release: str) -> set[str] | None:
    """The names in force at ``release``: the rows of releases up to it, in version order.

    None when no row up to ``release`` declared a name, or every declared name was removed
    again (the class, config or module is not in that release).
    """
    current: set[str] | None = None
    for since, added, removed in sorted(rows, key=lambda row: Version(row[0])):
        if Version(since) > Version(release):
            break
        current = ((current or set()) | expand(added)) - expand(removed)
        if not current:
            current = None
    return current
