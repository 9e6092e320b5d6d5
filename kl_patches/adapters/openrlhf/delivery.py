"""Delivery of the OpenRLHF patches into every process of a Ray job (stdlib only, lazy).

OpenRLHF's KL code runs inside Ray actors (the ``PPOTrainer`` that hosts the experience maker,
every ``PolicyModelActor``), which re-import OpenRLHF from scratch: a patch made in the driver
never reaches them. Ray runs a job's ``worker_process_setup_hook`` in every worker before any
task or actor code; :func:`setup` is that hook. It reads the configuration from the environment
variable :data:`ENV_VAR` (the shared wire format of :mod:`kl_patches.adapters.delivery`) and
installs an import hook that
patches ``experience_maker`` / ``ppo_actor`` right after they are imported, so processes that
never import them (vLLM engines, reward models) stay untouched and import nothing heavy.

Loud failure: a missing or invalid configuration makes :func:`setup` raise, which makes Ray
kill the worker with the message; a patch that cannot be applied makes the import of the
OpenRLHF module itself fail. :func:`status` reports what is patched in the current process.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from kl_patches.adapters import delivery
from kl_patches.adapters.patching import is_replacement
from kl_patches.config import KLConfig

ENV_VAR = delivery.env_var("openrlhf")
"""``KL_PATCHES_OPENRLHF``: the configuration carried into Ray workers."""
HOOK = "kl_patches.openrlhf.ray_setup_hook"
"""Value for ``runtime_env["worker_process_setup_hook"]``."""
MODULE_SIDES = {
    "openrlhf.trainer.ppo_utils.experience_maker": "reward",
    "openrlhf.trainer.ray.ppo_actor": "loss",
}


def config_from_env() -> KLConfig:
    """The KLConfig in :data:`ENV_VAR`; raises a clear error when missing or invalid."""
    try:
        found = delivery.from_environ("openrlhf")
    except ValueError as exc:
        raise RuntimeError(f"kl_patches: {exc}") from exc
    if found is None:
        raise RuntimeError(
            f"kl_patches: the OpenRLHF setup hook {HOOK} runs in this Ray worker but {ENV_VAR} "
            "is not set; pass it in runtime_env['env_vars'] (python -m kl_patches.openrlhf does)"
        )
    return found[0]


def config_to_env(config: KLConfig) -> str:
    """The :data:`ENV_VAR` value for ``config`` (the shared wire format)."""
    return delivery.encode(config)


def _patch(side: str) -> None:
    from kl_patches.adapters.openrlhf import patch

    config = patch.apply(config_from_env(), only=side)
    if side in patch.needed_sides(config):
        delivery.announce("openrlhf", f"{config} ({side} side patched)")


def _callbacks() -> dict[str, Callable[[], None]]:
    return {name: functools.partial(_patch, side) for name, side in MODULE_SIDES.items()}


def _finder() -> delivery.PostImportFinder | None:
    return delivery.post_import_finder("openrlhf")


def install() -> None:
    """Patch now what is imported, and the rest right after its import (idempotent)."""
    config_from_env()
    delivery.install_post_import("openrlhf", _callbacks())


def uninstall() -> None:
    """Remove the import hook (patches already made stay; see ``patches.revert``)."""
    delivery.uninstall_post_import("openrlhf")


def setup() -> None:
    """The Ray ``worker_process_setup_hook``: read the config, install the import hook."""
    install()


def status() -> dict[str, object]:
    """What is patched in this process: config, hook installed, patched symbols per module."""
    patched: dict[str, list[str]] = {}
    for name in MODULE_SIDES:
        module = sys.modules.get(name)
        if module is None:
            continue
        found = []
        for owner_name, owner in [("", module), *_classes(module)]:
            for attr, value in vars(owner).items():
                if is_replacement(value, "openrlhf"):
                    found.append(f"{owner_name}.{attr}" if owner_name else attr)
        patched[name] = sorted(found)
    return {
        "configured": bool(os.environ.get(ENV_VAR)),
        "hook_installed": _finder() is not None,
        "patched": patched,
    }


def _classes(module: ModuleType) -> list[tuple[str, Any]]:
    names = ("RemoteExperienceMaker", "ActorPPOTrainer")
    return [(n, getattr(module, n)) for n in names if isinstance(getattr(module, n, None), type)]
