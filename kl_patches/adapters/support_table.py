"""The support tables of docs/support.md and of each library's docs page, generated from the
adapters' data (the tested range, the compat matrix, the change points, the one-off sweeps).

Each adapter's ``versions.py`` has ``support_rows() -> tuple[SupportRow, ...]``: one row per
segment of releases that behave alike for the patch, saying what the library does natively,
what the patch does there, and how it was tested (``tested in CI`` for the compat matrix,
``tested once`` for a release covered by a recorded sweep, ``canaries only`` for a release that
cannot be trained on a CPU or is above the range). :func:`render` writes the markdown;
:func:`sync` puts it between ``<!-- support-table:LIB -->`` markers (``python -m
kl_patches.adapters.support_table`` rewrites the files; a test fails when they disagree).
"""

from __future__ import annotations

import importlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

LIBRARIES = ("trl", "verl", "openrlhf", "unsloth")
"""Libraries with a support table, in the order of docs/support.md (unsloth: its own loss,
patched by :mod:`kl_patches.adapters.trl.unsloth`)."""

TITLES = {"trl": "TRL", "verl": "verl", "openrlhf": "OpenRLHF", "unsloth": "unsloth_zoo"}

MODULES = {
    "trl": "kl_patches.adapters.trl.versions",
    "verl": "kl_patches.adapters.verl.versions",
    "openrlhf": "kl_patches.adapters.openrlhf.versions",
    "unsloth": "kl_patches.adapters.trl.unsloth",
}
"""The module whose ``support_rows()`` gives each table."""


@dataclass(frozen=True)
class SupportRow:
    """One segment of releases that behave alike for the patch."""

    releases: str
    """The releases, e.g. ``1.1.0-1.5.1`` or ``>= 1.17.0``."""
    native: str
    """What the library does natively there (the KL placements and estimators it has)."""
    patched: str
    """What the patch does there (or why it refuses)."""
    tested: str
    """How it is tested: ``tested in CI (nox -s compat)``, ``tested once (...)``, ``canaries
    only``, ``refused``."""


def rows(library: str) -> tuple[SupportRow, ...]:
    """The support rows of ``library`` (from ``kl_patches.adapters.<library>.versions``)."""
    if library not in LIBRARIES:
        raise ValueError(f"library={library!r} is not valid; choose one of {list(LIBRARIES)}")
    module = importlib.import_module(MODULES[library])
    found: tuple[SupportRow, ...] = module.support_rows()
    return found


def render(library: str) -> str:
    """The markdown table of ``library`` (no trailing newline)."""
    out = [
        f"| {TITLES[library]} releases | natively | with kl-patches | tested |",
        "|---|---|---|---|",
    ]
    for row in rows(library):
        cells = (row.releases, row.native, row.patched, row.tested)
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(out)


def _markers(library: str) -> tuple[str, str]:
    return f"<!-- support-table:{library} -->", f"<!-- /support-table:{library} -->"


def sync(path: Path, library: str, *, write: bool = False) -> bool:
    """True when ``path`` holds :func:`render` of ``library`` between its markers; with
    ``write``, put it there first. A file without the markers is a ValueError."""
    text = path.read_text(encoding="utf-8")
    start, end = _markers(library)
    pattern = re.compile(re.escape(start) + r"\n(.*?)\n?" + re.escape(end), re.S)
    match = pattern.search(text)
    if match is None:
        raise ValueError(f"{path} has no {start} ... {end} markers")
    table = render(library)
    if match.group(1).strip() == table:
        return True
    if write:
        path.write_text(text[: match.start()] + f"{start}\n{table}\n{end}" + text[match.end() :])
        return True
    return False


def targets(root: Path) -> list[tuple[Path, str]]:
    """(file, library) for every table: docs/support.md has all of them, each library's docs
    page its own."""
    return [(root / "docs" / "support.md", lib) for lib in LIBRARIES] + [
        (root / "docs" / f"{lib}.md", lib) for lib in LIBRARIES
    ]


def main(argv: list[str] | None = None) -> int:
    """Rewrite every support table under the repository root (the working directory)."""
    del argv
    root = Path.cwd()
    for path, library in targets(root):
        sync(path, library, write=True)
        print(f"{path.relative_to(root)}: {library} support table written")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
