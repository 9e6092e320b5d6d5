"""Peak tensor memory of one call on CPU, from the torch profiler's allocation events.

torch has no CPU counterpart of ``torch.cuda.max_memory_allocated``; with ``profile_memory=True``
the profiler records every allocation of torch's CPU allocator with the running total, and the
peak of that total above its level before the call's first allocation is the call's peak
(tensor memory only: numpy arrays and Python objects are not counted). Shared by the benchmarks
that report memory ratios (``bench_core.py``, ``bench_verl.py``, ``openrlhf_overhead.py``).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2 (the profiler's C++ start/stop lines); exceptions still raise."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_mib(call: Callable[[], object], label: str) -> float:
    """Peak MiB held by torch's CPU allocator above its level at the start of ``call()``.

    Raises when the profiler saw no allocation (a call that allocates nothing would read as
    0 MiB, indistinguishable from a profiler that recorded nothing)."""
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        call()
    events = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())  # type: ignore[union-attr]
    while stack:
        node = stack.pop()
        stack += node.children
        if node.typed[0] == _EventType.Allocation:
            fields = node.extra_fields
            events.append((node.start_time_ns, fields.alloc_size, fields.total_allocated))
    if not events:
        raise RuntimeError(f"{label}: the profiler recorded no allocation, memory not measured")
    events.sort()
    # The running total carries over from earlier profiled calls: start from its level before
    # this call's first event.
    start = events[0][2] - events[0][1]
    return max(0, *(total - start for _, _, total in events)) / 2**20
