"""OpenRLHF on a CPU (test-only): installed in every process of a run by the start-up hook
(``startup/sitecustomize.py``).

OpenRLHF 0.11.x assumes CUDA devices in its Ray actors. Without changing OpenRLHF this supplies:

* ``torch.cuda.set_device``, ``synchronize``, ``empty_cache`` and ``current_stream`` as no-ops,
  and ``current_device()`` answering ``"cpu"`` (OpenRLHF passes it to ``.to()`` and
  ``device=``; formatted into ``f"cuda:{...}"`` it reads ``0``), used at
  ``utils/deepspeed/deepspeed.py:97``, ``trainer/ray/launcher.py:136,190``,
  ``trainer/ray/ppo_actor.py:148,171,436,627``, ``utils/distributed_util.py``;
* ``init_device_mesh("cuda", ...)`` built on ``"cpu"`` (``utils/deepspeed/deepspeed.py:106``);
* DeepSpeed's shared-memory all-reduce op not built and its Adam run as ``torch.optim.AdamW``
  (its ``torch_adam`` option) instead of FusedAdam: both are C++ ops JIT-compiled on a CPU
  accelerator (minutes on two cores, and a lock file a killed run leaves behind);
* the replay buffer's target device on the CPU (``trainer/ppo_utils/replay_buffer.py:40``
  builds ``cuda:<current device>``);
* the test's recorder (:mod:`.openrlhf_record`) when ``KL_E2E_RECORD`` names a directory.

With the working ``vllm`` stand-in (``openrlhf_stubs/``), the import-only ``flash_attn`` stub
(``tests/adapters/openrlhf/openrlhf_support/stubs``) on ``PYTHONPATH`` and logical GPUs given
to Ray (``RAY_OVERRIDE_RESOURCES``), OpenRLHF's own ``train_ppo_ray`` runs. DeepSpeed 0.19.6
selects its CPU accelerator and gloo by itself.
"""

from __future__ import annotations

import functools
from typing import Any


class _CpuDevice(str):
    """``"cpu"`` as a device; ``f"cuda:{d}"`` formats it as an index (``cuda:0``), which
    :func:`_replay_buffer_on_cpu` then moves back to the CPU."""

    def __format__(self, spec: str) -> str:
        return "0"


def _cuda_no_ops() -> None:
    import torch

    cuda = torch.cuda
    if getattr(cuda, "kl_e2e", False):
        return
    cuda.set_device = lambda *a, **k: None
    cuda.synchronize = lambda *a, **k: None
    cuda.empty_cache = lambda *a, **k: None
    cuda.current_stream = lambda *a, **k: None
    cuda.current_device = lambda: _CpuDevice("cpu")
    cuda.kl_e2e = True


def _no_shm_op() -> None:
    """DeepSpeed's CPU backend JIT-compiles a shared-memory all-reduce op (a C++ build per
    machine, minutes on two cores, and a lock file that a killed run leaves behind); without it
    DeepSpeed uses torch.distributed, which one process per model needs no more of."""
    from deepspeed.comm import torch as ds_torch

    ds_torch.build_shm_op = lambda: None


def _torch_adam() -> None:
    """DeepSpeed's Adam through ``torch.optim.AdamW`` (its ``torch_adam`` option) instead of
    FusedAdam, another JIT-compiled C++ op on a CPU accelerator."""
    from deepspeed.runtime.engine import DeepSpeedEngine

    original = DeepSpeedEngine.get_optimizer_configuration
    if getattr(original, "kl_e2e", False):
        return

    @functools.wraps(original)
    def get_optimizer_configuration(self: Any, parameters: Any, *args: Any, **kwargs: Any) -> Any:
        parameters["torch_adam"] = True
        return original(self, parameters, *args, **kwargs)

    get_optimizer_configuration.kl_e2e = True  # type: ignore[attr-defined]
    DeepSpeedEngine.get_optimizer_configuration = get_optimizer_configuration


def _device_mesh() -> None:
    from openrlhf.utils.deepspeed import deepspeed as ds

    original = ds.init_device_mesh
    if getattr(original, "kl_e2e", False):
        return

    @functools.wraps(original)
    def init_device_mesh(device_type: str, *args: Any, **kwargs: Any) -> Any:
        return original("cpu" if device_type == "cuda" else device_type, *args, **kwargs)

    init_device_mesh.kl_e2e = True  # type: ignore[attr-defined]
    ds.init_device_mesh = init_device_mesh


def _replay_buffer_on_cpu() -> None:
    import torch
    from openrlhf.trainer.ppo_utils import replay_buffer

    for cls in vars(replay_buffer).values():
        init = getattr(cls, "__init__", None)
        if not isinstance(cls, type) or getattr(init, "kl_e2e", False):
            continue
        if "target_device" not in getattr(init, "__code__", compile("", "", "exec")).co_names:
            continue

        def make(original: Any) -> Any:
            @functools.wraps(original)
            def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
                original(self, *args, **kwargs)
                self.target_device = torch.device("cpu")

            __init__.kl_e2e = True  # type: ignore[attr-defined]
            return __init__

        cls.__init__ = make(init)


def install() -> None:
    """Install every piece (the OpenRLHF ones when their module is imported)."""
    from kl_patches.adapters.delivery import after_import

    from .openrlhf_record import install as install_recorder

    after_import(["torch.cuda"], _cuda_no_ops)
    after_import(["deepspeed.comm.torch"], _no_shm_op)
    after_import(["deepspeed.runtime.engine"], _torch_adam)
    after_import(["openrlhf.utils.deepspeed.deepspeed"], _device_mesh)
    after_import(["openrlhf.trainer.ppo_utils.replay_buffer"], _replay_buffer_on_cpu)
    install_recorder()
