"""A dependency-free progress bar on stderr (tqdm is not a core dependency)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def progress(items: Iterable[T], total: int, label: str, enabled: bool = True) -> Iterator[T]:
    """Yield ``items`` while drawing ``label [#####.....] k/total  elapsed`` on stderr."""
    start = time.monotonic()
    width = 24
    for k, item in enumerate(items, 1):
        yield item
        if enabled:
            filled = int(width * k / max(total, 1))
            bar = "#" * filled + "." * (width - filled)
            end = "\n" if k == total else ""
            sys.stderr.write(f"\r{label} [{bar}] {k}/{total} {time.monotonic() - start:5.1f}s{end}")
            sys.stderr.flush()
