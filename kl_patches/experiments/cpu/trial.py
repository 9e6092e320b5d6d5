"""One CPU trial of verl or OpenRLHF: checks, launch as users launch, the KL metrics logged.

:func:`missing` and :func:`release_problem` say before anything starts what this environment
lacks (a library or one of its CPU dependencies, or a release the stand-ins were not written
for). :func:`run` builds the tiny chat task (:func:`kl_patches.experiments.tiny.build`), runs
the library's launcher in a subprocess of its own session with the trial's environment
(:mod:`.verl_trial`, :mod:`.openrlhf_trial`), writes its whole output to ``run.log`` (a file:
Ray's daemons may outlive the launcher), shows the launcher's KL block and one line per logged
step as they come, and ends the session's leftover processes (Ray's workers) when the launcher
exits. ``kl-patches smoke`` prints the result.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import ModuleType
from typing import Any

from kl_patches.experiments.cpu import RELEASES

NAMES = {"verl": "verl", "openrlhf": "OpenRLHF"}
"""Library -> its name in messages."""


def module(library: str) -> ModuleType:
    """The trial module of ``library`` (:mod:`.verl_trial` or :mod:`.openrlhf_trial`)."""
    if library not in NAMES:
        raise ValueError(f"no CPU trial for {library!r}; valid: {sorted(NAMES)}")
    return importlib.import_module(f"kl_patches.experiments.cpu.{library}_trial")


def missing(library: str) -> list[str]:
    """What to install for the trial of ``library``: one entry per module not importable here."""
    return [
        what
        for name, what in module(library).IMPORTS.items()
        if importlib.util.find_spec(name) is None
    ]


def release_problem(library: str) -> str | None:
    """Why the installed release cannot run the trial (None when it can)."""
    supported = RELEASES[library]
    try:
        found = version(library)
    except PackageNotFoundError:
        return f"{NAMES[library]} is not installed"
    if found in supported:
        return None
    return (
        f"{NAMES[library]} {found} is installed; the CPU trial runs {NAMES[library]} "
        f"{', '.join(supported)} only (its CPU stand-ins use internals that move between "
        "releases)"
    )


@dataclass
class Outcome:
    """How one trial ended."""

    returncode: int
    """The launcher's exit code (-9: killed after the timeout)."""
    wall_s: float
    """Seconds from the launch to the launcher's exit."""
    log: Path
    """Everything the run printed (stdout and stderr, interleaved)."""
    steps: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Step -> the metrics the library logged at that step."""

    def tail(self, lines: int = 40) -> str:
        """The last lines of the log (what a failed run says)."""
        text = self.log.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


def run(
    library: str,
    kl: list[str],
    steps: int,
    folder: Path,
    say: Callable[[str], None],
    timeout: float = 1200.0,
) -> Outcome:
    """Run ``steps`` training steps of ``library``'s own trainer on the CPU in ``folder``.

    ``kl``: the launcher's ``--kl`` flags; ``say``: where the KL block and the progress lines
    go (one line per call).
    """
    from transformers.utils import logging as hf_logging

    from kl_patches.experiments import tiny

    hf_logging.disable_progress_bar()  # saving the tiny model: not a step of the run
    trial = module(library)
    env = trial.environment()
    for key, value in trial.BUILD_ENV.items():
        os.environ.setdefault(key, value)
    task = tiny.build(folder / "tiny")
    command = trial.command(kl, task, folder, steps, sys.executable)
    log = folder / "run.log"
    outcome = Outcome(returncode=-1, wall_s=0.0, log=log)
    done = threading.Event()
    start = time.monotonic()
    with log.open("w") as out:  # a file, not a pipe: Ray's daemons may outlive the launcher
        proc = subprocess.Popen(
            command,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=folder,  # what the library writes to its working directory (Hydra's outputs/)
            start_new_session=True,
        )
        reader = threading.Thread(
            target=_follow, args=(log, trial, outcome, say, start, done), daemon=True
        )
        reader.start()
        try:
            outcome.returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            outcome.returncode = -9
        finally:
            outcome.wall_s = time.monotonic() - start
            with contextlib.suppress(ProcessLookupError):  # Ray's workers, left behind
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            done.set()
            reader.join(timeout=10)
    return outcome


def _follow(
    log: Path,
    trial: ModuleType,
    outcome: Outcome,
    say: Callable[[str], None],
    start: float,
    done: threading.Event,
) -> None:
    """Read the log as it grows; pass on the KL block and one line per logged step."""
    in_block = False
    pending = ""
    with log.open(errors="replace") as source:
        while True:
            finished = done.is_set()  # read once more after the run ended
            *lines, pending = (pending + source.read()).split("\n")
            if finished and pending:
                lines.append(pending)
            for text in lines:
                if text.startswith(f"{trial.PROG}:"):
                    in_block = True
                    say(text)
                elif in_block and text.startswith("  "):
                    say(text)
                else:
                    in_block = False
                found = trial.logged_line(text)
                if found is not None:
                    outcome.steps[found[0]] = found[1]
                    say(f"  step {found[0]} logged after {time.monotonic() - start:.0f} s")
            if finished:
                return
            done.wait(0.5)
