"""The harness's ``VERL_USE_EXTERNAL_MODULES`` module (test-only): verl loads it in every process.

It loads the CPU trial's stand-ins of the package (:mod:`kl_patches.experiments.cpu.verl_platform`:
the ``cpu`` platform, the FSDP engines on ``cpu``, gloo, no pinned memory, the ``hfcpu`` rollout),
then what only the tests add: the recorder (:mod:`.verl_record`) when ``KL_E2E_RECORD`` names a
directory, and the KL-code timer (:mod:`.profile`) when ``KL_E2E_PROFILE`` does (benchmarks).
"""

from __future__ import annotations

from kl_patches.experiments.cpu import verl_platform  # noqa: F401  (installs the stand-ins)

from .profile import install as _install_profile
from .verl_record import install as _install_recorder

_install_recorder()
_install_profile()
