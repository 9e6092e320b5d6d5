"""vLLM stand-in: ``StatelessProcessGroup``, a rendezvous over a TCPStore (the CPU trial only)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any


@dataclass
class StatelessProcessGroup:
    """Rank, world size and the store the gloo group meets in."""

    rank: int
    world_size: int
    store: Any

    @classmethod
    def create(cls, host: str, port: int, rank: int, world_size: int) -> StatelessProcessGroup:
        import torch.distributed as dist

        store = dist.TCPStore(
            host, port, world_size, is_master=rank == 0, timeout=timedelta(seconds=300)
        )
        return cls(rank, world_size, store)
