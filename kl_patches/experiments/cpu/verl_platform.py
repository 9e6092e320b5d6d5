"""verl on a CPU, for the CPU trial only: loaded in every verl process through
``VERL_USE_EXTERNAL_MODULES`` by ``kl-patches smoke verl`` (and the end-to-end tests), never in a
real run.

verl 0.9.1 has no CPU training path; this module supplies what it lacks, without changing verl:

* a ``cpu`` platform (``PlatformRegistry``; select it with ``VERL_PLATFORM=cpu``): device
  ``cpu``, backend ``gloo``, a device module answering the ``torch.cuda`` calls verl makes
  (memory queries, seeds, synchronize) from ``torch.cpu``/``torch``;
* the FSDP engines registered for the ``cpu`` device (verl registers them for cuda/npu only);
* ``initialize_global_process_group_ray`` with the backend ``gloo`` (verl builds
  ``"cpu:gloo,cpu:gloo"``, which torch refuses);
* the reference model's ``CPUOffloadPolicy`` without pinned memory (pinning needs an
  accelerator);
* the rollout backend ``hfcpu`` (:mod:`.verl_rollout`): a Ray actor sampling with transformers,
  registered in verl's rollout and replica registries.

Each piece is installed when the verl module it extends has been imported (so loading this
module inside ``import verl`` imports nothing heavy).
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

import torch
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

from kl_patches.adapters.delivery import after_import


class _CpuDeviceModule(ModuleType):
    """What verl calls on ``get_torch_device()``: ``torch.cpu`` plus the CUDA-only queries."""

    def __init__(self) -> None:
        super().__init__("kl_patches_cpu_device")

    def __getattr__(self, name: str) -> Any:
        if hasattr(torch.cpu, name):
            return getattr(torch.cpu, name)
        zero = ("memory_allocated", "memory_reserved", "max_memory_allocated",
                "max_memory_reserved", "reset_peak_memory_stats", "empty_cache", "ipc_collect",
                "reset_max_memory_allocated")  # fmt: skip
        if name in zero:
            return lambda *a, **k: 0
        if name == "mem_get_info":
            return lambda *a, **k: (64 << 30, 64 << 30)
        if name in ("manual_seed", "manual_seed_all"):
            return lambda seed: torch.manual_seed(seed)
        if name == "get_rng_state":
            return lambda *a, **k: torch.get_rng_state()
        if name == "set_rng_state":
            return lambda state, *a, **k: torch.set_rng_state(state)
        if name == "get_device_name":
            return lambda *a, **k: "CPU"
        if name == "memory_stats":
            return lambda *a, **k: {}
        raise AttributeError(f"the CPU stand-in for torch.cuda has no {name!r}")


DEVICE = _CpuDeviceModule()


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """verl's platform interface on a CPU: gloo, no profiling, no IPC."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        return DEVICE

    def is_available(self) -> bool:
        return True

    def current_device(self) -> str:  # type: ignore[override]
        return "cpu"  # verl passes it to .to(device=...): an int would mean a CUDA index

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    def nvtx_range(self, msg: str) -> Any:
        import contextlib

        return contextlib.nullcontext()

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"  # logical GPUs given to Ray (num_gpus), never used as CUDA

    def ray_noset_envvars(self) -> list[str]:
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None


def _gloo_process_group() -> None:
    from verl.utils import distributed

    original = distributed.initialize_global_process_group_ray
    if getattr(original, "kl_patches_cpu", False):
        return

    def initialize_global_process_group_ray(timeout_second: Any = None, backend: Any = None) -> Any:
        return original(timeout_second=timeout_second, backend=backend or "gloo")

    initialize_global_process_group_ray.kl_patches_cpu = True  # type: ignore[attr-defined]
    distributed.initialize_global_process_group_ray = initialize_global_process_group_ray


def _cpu_engines() -> None:
    from verl.workers.engine.base import EngineRegistry
    from verl.workers.engine.fsdp import transformer_impl as impl

    engines = EngineRegistry._engines
    for model_type, cls in (("language_model", impl.FSDPEngineWithLMHead),
                            ("value_model", impl.FSDPEngineWithValueHead)):  # fmt: skip
        for backend in ("fsdp", "fsdp2"):
            engines.setdefault(model_type, {}).setdefault(backend, {})["cpu"] = cls
    policy = impl.CPUOffloadPolicy
    if not getattr(policy, "kl_patches_cpu", False):

        class CPUOffloadPolicyNoPin(policy):  # type: ignore[misc, valid-type]
            kl_patches_cpu = True

            def __init__(self, pin_memory: bool = True, **kwargs: Any) -> None:
                super().__init__(pin_memory=False, **kwargs)

        impl.CPUOffloadPolicy = CPUOffloadPolicyNoPin


def _rollout() -> None:
    from verl.workers.rollout import base, replica

    base._ROLLOUT_REGISTRY[("hfcpu", "async")] = f"{__package__}.verl_rollout.CpuServerAdapter"

    def load() -> type:
        from .verl_rollout import CpuReplica

        return CpuReplica

    replica.RolloutReplicaRegistry.register("hfcpu", load)


def install() -> None:
    """Install every piece (each when its verl module is imported)."""
    os.environ.setdefault("VERL_PLATFORM", "cpu")
    after_import(["verl.utils.distributed"], _gloo_process_group)
    after_import(["verl.workers.engine.fsdp.transformer_impl"], _cpu_engines)
    after_import(["verl.workers.rollout.replica"], _rollout)


install()
