"""vLLM stand-in: ``PyNcclCommunicator`` broadcasting with gloo on CPU (the CPU trial only)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any


class PyNcclCommunicator:
    """A gloo process group over the stateless group's store (no NCCL on a CPU)."""

    def __init__(self, group: Any, device: Any = None) -> None:
        import torch.distributed as dist

        prefix = dist.PrefixStore("kl_patches_cpu_weight_sync", group.store)
        self.group = dist.ProcessGroupGloo(
            prefix, group.rank, group.world_size, timedelta(seconds=300)
        )
        self.rank = group.rank

    def broadcast(self, tensor: Any, src: int, stream: Any = None) -> None:
        import torch.distributed as dist

        options = dist.BroadcastOptions()
        options.rootRank = src
        options.rootTensor = 0
        self.group.broadcast([tensor], options).wait()  # type: ignore[attr-defined]
