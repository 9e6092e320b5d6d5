"""An OpenRLHF run on the tiny task: the CPU trial's flags, plus the harness's recorder.

:func:`flags` is the package's (:func:`kl_patches.experiments.cpu.openrlhf_trial.flags`: 3 global
steps of a GRPO-style run on one vLLM stand-in engine); :func:`environment` the trial's
environment with the harness's start-up hook (``startup/sitecustomize.py``: the package's CPU
shims, the recorder, the timer) in place of the package's. The user's launch line is then
``python -m kl_patches.openrlhf <flags> --kl ...``.
"""

from __future__ import annotations

import os
from pathlib import Path

from kl_patches.experiments.cpu import openrlhf_trial
from kl_patches.experiments.cpu.openrlhf_trial import flags

__all__ = ["environment", "flags"]

REPO = Path(__file__).resolve().parents[3]
STARTUP = Path(__file__).resolve().parent / "startup"


def environment(record: Path | None = None) -> dict[str, str]:
    """The stand-ins, the harness's start-up hook, the repository and logical GPUs for Ray."""
    env = openrlhf_trial.environment(startup=STARTUP)
    startup, *rest = env["PYTHONPATH"].split(os.pathsep)
    env["PYTHONPATH"] = os.pathsep.join([startup, str(REPO), *rest])
    env["KL_E2E_LIBRARY"] = "openrlhf"
    if record is not None:
        env["KL_E2E_RECORD"] = str(record)
    return env
