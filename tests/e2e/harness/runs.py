"""Running one end-to-end launch as a subprocess and reading back what its processes recorded."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Outcome:
    """How one launch ended and what its processes recorded."""

    returncode: int
    output: str
    """stdout and stderr, interleaved as written."""
    wall_s: float
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Record kind (``batch``, ``loss``, ``process``) -> the records, in write order."""

    def tail(self, n: int = 6000) -> str:
        """The end of the output (for assertion messages)."""
        return self.output[-n:]


def launch(cmd: list[str], env: dict[str, str], record: Path, log: Path,
           timeout: float = 900.0) -> Outcome:  # fmt: skip
    """Run ``cmd`` in its own session, in the log's folder (what a run writes to its working
    directory, such as Hydra's ``outputs/``, stays out of the checkout); kill the whole session
    if it outlives ``timeout``."""
    record.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            cwd=log.parent,
        )  # fmt: skip
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = -9
    wall = time.monotonic() - start
    with contextlib.suppress(ProcessLookupError):  # what the run left behind (Ray workers)
        os.killpg(proc.pid, signal.SIGKILL)
    return Outcome(code, log.read_text(errors="replace"), wall, read_records(record))


def read_records(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """Every ``<kind>-<pid>-<n>.pt`` record under ``folder``, by kind, in write order."""
    import torch

    out: dict[str, list[dict[str, Any]]] = {}
    files = sorted(folder.glob("*.pt"), key=lambda p: (p.stat().st_mtime_ns, p.name))
    for path in files:
        kind = path.name.split("-", 1)[0]
        out.setdefault(kind, []).append(torch.load(path, weights_only=False))
    return out


STEP = re.compile(r"step:(\d+) - (.*)")


def verl_logged(output: str) -> dict[int, dict[str, str]]:
    """verl's console logger lines: step -> {metric: value text}."""
    steps: dict[int, dict[str, str]] = {}
    for line in output.splitlines():
        found = STEP.search(line)
        if found:
            items = (part.split(":", 1) for part in found.group(2).split(" - ") if ":" in part)
            steps[int(found.group(1))] = {k.strip(): v.strip() for k, v in items}
    return steps
