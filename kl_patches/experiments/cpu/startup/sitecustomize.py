"""Interpreter start-up hook of ``kl-patches smoke openrlhf`` (on ``PYTHONPATH`` only there).

Python imports ``sitecustomize`` in every process it starts, Ray workers included, which is how
the CPU shims (:mod:`kl_patches.experiments.cpu.openrlhf_shims`) reach processes the trial does
not launch itself. It acts only with ``KL_PATCHES_CPU_TRIAL=openrlhf``, which the trial sets;
each shim waits until the module it changes is imported. In the trial's processes it takes the
place of any other ``sitecustomize`` of the environment.
"""

import os

if os.environ.get("KL_PATCHES_CPU_TRIAL") == "openrlhf":
    from kl_patches.experiments.cpu.openrlhf_shims import install as _install

    _install()
