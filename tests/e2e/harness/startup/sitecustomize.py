"""Interpreter start-up hook of the end-to-end runs (test-only; on ``PYTHONPATH`` only there).

Python imports ``sitecustomize`` in every process it starts, Ray workers and ``accelerate``
ranks included, which is how the harness reaches processes it does not launch itself.
``KL_E2E_LIBRARY`` (set by :func:`..trl.environment` and :func:`..openrlhf.environment`) picks
what to install: for OpenRLHF the package's CPU shims
(:mod:`kl_patches.experiments.cpu.openrlhf_shims`, which the CPU trial's own start-up hook
installs there) and the recorder; verl needs none of this (verl loads ``verl_cpu`` itself
through ``VERL_USE_EXTERNAL_MODULES``). Each installer defers its work until the library module
it wraps is imported; the recorder and the timer do nothing without ``KL_E2E_RECORD`` /
``KL_E2E_PROFILE``.
"""

import os

_LIBRARY = os.environ.get("KL_E2E_LIBRARY", "")

if _LIBRARY == "openrlhf":
    from kl_patches.experiments.cpu.openrlhf_shims import install as _install_cpu
    from tests.e2e.harness.openrlhf_record import install as _install_recorder
    from tests.e2e.harness.profile import install as _install_profile

    _install_cpu()  # the package's CPU shims (the CPU trial's)
    _install_recorder()
    _install_profile()
elif _LIBRARY == "trl":
    from tests.e2e.harness.profile import install as _install_profile
    from tests.e2e.harness.trl_record import install as _install_recorder

    _install_recorder()
    _install_profile()
