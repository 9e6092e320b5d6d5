"""A verl run on the tiny task: the CPU trial's overrides, plus the harness's recorder.

:func:`overrides` is the package's (:func:`kl_patches.experiments.cpu.verl_trial.overrides`: a
3-step GRPO run on one CPU process); :func:`environment` the trial's environment with the
harness's external module (:mod:`.verl_cpu`, which loads the package's stand-ins and the
recorder) in place of the package's. The user's launch line is then
``kl-patches verl --kl ... -- <overrides>``.
"""

from __future__ import annotations

import os
from pathlib import Path

from kl_patches.experiments.cpu import verl_trial
from kl_patches.experiments.cpu.verl_trial import overrides

__all__ = ["EXTERNAL_MODULE", "environment", "overrides"]

EXTERNAL_MODULE = "tests.e2e.harness.verl_cpu"
"""Loaded by verl in every process (``VERL_USE_EXTERNAL_MODULES``)."""
REPO = Path(__file__).resolve().parents[3]


def environment(record: Path | None = None) -> dict[str, str]:
    """The process environment of a CPU run (Ray's local cluster passes it to every worker)."""
    env = verl_trial.environment(module=EXTERNAL_MODULE)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(REPO) not in paths:
        paths.insert(0, str(REPO))
    env["PYTHONPATH"] = os.pathsep.join(paths)
    if record is not None:
        env["KL_E2E_RECORD"] = str(record)
    return env
