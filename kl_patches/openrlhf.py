"""``kl_patches.openrlhf``: the OpenRLHF launcher's public path and its Ray setup hook.

``python -m kl_patches.openrlhf <train_ppo_ray flags> --kl k1-in-reward --kl.coef 0.01`` runs
:mod:`kl_patches.adapters.openrlhf.launch`; ``kl_patches.openrlhf.ray_setup_hook`` is the
``worker_process_setup_hook`` that patches each Ray worker. Ray imports this module in every
worker, so it imports only the standard library and kl-patches' config until a function runs.
"""

from __future__ import annotations

from kl_patches.adapters.openrlhf.launch import (
    ENTRY,
    OPENRLHF_ENV_DEFAULTS,
    build_argv,
    main,
    parse_kl_args,
    ray_init,
    runtime_env,
    split_argv,
    warnings_for,
)

__all__ = [
    "ENTRY",
    "OPENRLHF_ENV_DEFAULTS",
    "build_argv",
    "main",
    "parse_kl_args",
    "ray_init",
    "ray_setup_hook",
    "runtime_env",
    "split_argv",
    "warnings_for",
]


def ray_setup_hook() -> None:
    """Ray ``worker_process_setup_hook``: patch this worker (stdlib import until OpenRLHF loads)."""
    from kl_patches.adapters.openrlhf.delivery import setup

    setup()


if __name__ == "__main__":
    raise SystemExit(main())
