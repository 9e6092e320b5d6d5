"""Overhead of the OpenRLHF patches: patched / native time and memory of the real OpenRLHF
methods (CPU).

    PYTHONPATH=tests/adapters/openrlhf python benchmarks/openrlhf_overhead.py [--pairs 15]

Needs OpenRLHF 0.11.2 installed as for ``nox -s openrlhf`` (uses the test stand-ins for vllm
and flash_attn). Two cases, each a patched call and its native baseline on the same inputs:

* ``compute_advantages_and_returns`` (RLOO, 1024 responses x 1024 tokens, k1 in the reward
  with the sequence shape: the patch computes the penalty);
* one actor ``training_step`` of a tiny Llama (k3 in the loss with the sum aggregation: the
  patch computes the loss term).

Time: ``--pairs`` interleaved pairs per case, the order inside a pair alternating; the patch is
applied for the patched side and reverted for the native one (outside the timer); each side is
timed by the thread's CPU time (one torch thread, so the call's work runs on this thread) with
the garbage collector off. Reported: the median ms of each side and the median, min and max of
the per-pair ratio patched / native. (A sequential native-then-patched median, as this script
did before, read 1.69x once on a noisy machine where the pairs read 0.94-1.02x.) Memory: one
more call per side under the torch profiler (``alloc.peak_mib``). Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from openrlhf_support.harness import activate

activate()

import torch  # noqa: E402

torch.set_num_threads(1)  # stable timings on a shared machine
sys.path.insert(0, str(Path(__file__).resolve().parent))
import alloc  # noqa: E402  (benchmarks/alloc.py)
from openrlhf_support.cases import actor_batch, args_for, run_training_step  # noqa: E402
from openrlhf_support.harness import (  # noqa: E402
    attach_kl_like_make_experience,
    make_experience,
    make_experience_maker,
    tiny_actor,
)

from kl_patches import KLConfig  # noqa: E402
from kl_patches.adapters.openrlhf import apply, revert  # noqa: E402


def advantages_call(batch: int, length: int, config: KLConfig) -> Callable[[], object]:
    """One compute_advantages_and_returns over ``batch`` responses (fixed random inputs)."""
    g = torch.Generator().manual_seed(0)
    logp = -torch.rand(batch, length, generator=g) * 3
    ref = logp + 0.3 * torch.randn(batch, length, generator=g)
    mask = torch.arange(length)[None, :] < torch.randint(1, length + 1, (batch, 1), generator=g)
    rewards = torch.rand(batch, generator=g)
    args = args_for(config, advantage="rloo", n_samples=8)

    def run() -> object:
        exps = []
        for start in range(0, batch, 64):
            rows = slice(start, start + 64)
            exp = make_experience(
                rewards[rows], logp[rows], ref[rows], mask[rows], list(range(batch))[rows]
            )
            attach_kl_like_make_experience(exp, ref[rows], args)
            exps.append(exp)
        return make_experience_maker(args).compute_advantages_and_returns(exps)

    return run


def training_step_call(config: KLConfig) -> Callable[[], object]:
    """One actor training step of a tiny Llama on a fixed batch."""
    actor = tiny_actor()
    data = actor_batch()
    args = args_for(config)
    return lambda: run_training_step(actor, args, data)


def side(call: Callable[[], object], config: KLConfig, patched: bool) -> float:
    """Thread CPU seconds of one call, with the patch applied (patched) or not."""
    if patched:
        apply(config)
    try:
        gc.collect()
        gc.disable()
        start = time.thread_time()
        call()
        return time.thread_time() - start
    finally:
        gc.enable()
        if patched:
            revert()


def peak(call: Callable[[], object], config: KLConfig, patched: bool, label: str) -> float:
    if patched:
        apply(config)
    try:
        return alloc.peak_mib(call, label)
    finally:
        if patched:
            revert()


def measure(label: str, call: Callable[[], object], config: KLConfig, pairs: int) -> None:
    """Print one case: medians, the pair ratio with its spread, and the memory ratio."""
    for patched in (False, True):  # warm-up
        side(call, config, patched)
    native: list[float] = []
    ours: list[float] = []
    for i in range(pairs):
        for patched in (False, True) if i % 2 == 0 else (True, False):
            (ours if patched else native).append(side(call, config, patched))
    ratios = [o / n for o, n in zip(ours, native, strict=True)]
    n_mib = peak(call, config, False, f"{label} native")
    p_mib = peak(call, config, True, f"{label} patched")
    print(
        f"{label}: native {statistics.median(native) * 1e3:.1f} ms, patched "
        f"{statistics.median(ours) * 1e3:.1f} ms, ratio {statistics.median(ratios):.2f}x "
        f"({min(ratios):.2f}-{max(ratios):.2f}, {pairs} pairs); peak MiB native {n_mib:.1f}, "
        f"patched {p_mib:.1f}, memory {p_mib / n_mib:.2f}x"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--pairs", type=int, default=15, help="interleaved pairs per case")
    a = p.parse_args(argv)
    reward = KLConfig(estimator="k1", placement="reward", coef=0.1)  # sequence shape: patched
    measure(
        "compute_advantages_and_returns 1024x1024 rloo",
        advantages_call(1024, 1024, reward),
        reward,
        a.pairs,
    )
    loss = KLConfig(estimator="k3", placement="loss", coef=0.1)  # sum aggregation: patched
    measure("training_step tiny Llama 4x10", training_step_call(loss), loss, 4 * a.pairs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
