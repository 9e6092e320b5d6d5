"""Issue 16's overhead targets as machine-readable lines between a benchmark and run_all.py.

A benchmark prints one ``KLP_TARGET {json}`` line per measured ratio that has a target (the
median over interleaved pairs or rounds, its min-max, the target, and the memory ratio beside
it); ``run_all.py`` takes these lines out of the verbatim output and puts them in one summary
table at the top of the report, marked met or not met by the median. The benchmark's own
tables stay as they are.
"""

from __future__ import annotations

import json
from typing import Any

PREFIX = "KLP_TARGET "


def emit(
    benchmark: str,
    what: str,
    ratio: float,
    low: float,
    high: float,
    target: float,
    memory: float | None,
    measure: str,
) -> None:
    """Print one target line. ``measure`` says what the ratio compares (e.g. "CPU time per
    step, 4 rounds"); ``memory`` is the peak-memory ratio of the same pair (None: not
    measured)."""
    row = {
        "benchmark": benchmark,
        "what": what,
        "ratio": ratio,
        "min": low,
        "max": high,
        "target": target,
        "memory": memory,
        "measure": measure,
    }
    print(PREFIX + json.dumps(row), flush=True)


def split(text: str) -> tuple[list[dict[str, Any]], str]:
    """(the target rows in ``text``, ``text`` without their lines)."""
    rows: list[dict[str, Any]] = []
    kept: list[str] = []
    for line in text.splitlines():
        if line.startswith(PREFIX):
            rows.append(json.loads(line[len(PREFIX) :]))
        else:
            kept.append(line)
    return rows, "\n".join(kept) + ("\n" if text.endswith("\n") else "")


def met(row: dict[str, Any]) -> bool:
    """The median ratio is at most the target (exactly: no rounding in its favour)."""
    return float(row["ratio"]) <= float(row["target"])
