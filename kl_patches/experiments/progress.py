"""Progress of the long experiment commands on stderr, drawn by rich where it can be redrawn.

On a terminal, a rich progress bar (label, bar, done/total, elapsed and remaining time) that
redraws itself in place. When stderr is not a terminal (a redirected log, a CI job, a pipe),
nothing is redrawn: one line when the work starts and one when it ends, so a log never gets a
line made of carriage returns. ``enabled=False`` prints nothing at all.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def _terminal() -> bool:
    stream = sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def progress(items: Iterable[T], total: int, label: str, enabled: bool = True) -> Iterator[T]:
    """Yield ``items`` (``total`` of them) while showing their progress on stderr."""
    if not enabled:
        yield from items
        return
    if not _terminal():
        start = time.monotonic()
        print(f"{label}: {total} to do", file=sys.stderr, flush=True)
        done = 0
        for item in items:
            done += 1
            yield item
        elapsed = time.monotonic() - start
        print(f"{label}: {done}/{total} done in {elapsed:.1f} s", file=sys.stderr, flush=True)
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True)) as bar:
        task = bar.add_task(label, total=total)
        for item in items:
            yield item
            bar.advance(task)
