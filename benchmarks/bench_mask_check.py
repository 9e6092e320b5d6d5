"""What the core's mask check costs: ``reward_penalty`` and ``loss_term`` with a bool, an int64
and a float32 mask of the same valid tokens, and the mask conversion alone.

    python benchmarks/bench_mask_check.py [--label NAME] [--batch 64] [--length 2048]

Prints the minimum over rounds of the mean time per call, one line per (function, mask dtype),
then the conversion the core does per call (``core._bool_mask``: the bool cast and, for a
non-bool mask, the 0/1 check) against the bare ``mask.bool()`` of the code before the check,
timed in alternation. Run it once in this tree and once with ``PYTHONPATH`` pointing at a
checkout of an older commit (``git archive <commit> | tar -x -C /tmp/old``) to compare whole
calls; numbers from a loaded machine vary by 2x, so compare runs made back to back (the
conversion lines, timed in one process, vary less). No assertion: a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

from kl_patches import core
from kl_patches.config import KLConfig


def _best(fn: Callable[[], object], rounds: int = 15, calls: int = 20) -> float:
    """Minimum over ``rounds`` of the mean microseconds of ``calls`` calls (after a warm-up)."""
    for _ in range(calls):
        fn()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


def main() -> None:
    """Time each function with each mask dtype and print the table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--label", default="this tree")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--length", type=int, default=2048)
    args = p.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    logp = -torch.rand(args.batch, args.length, generator=gen)
    ref = -torch.rand(args.batch, args.length, generator=gen)
    valid = torch.ones(args.batch, args.length, dtype=torch.bool)
    valid[:, args.length * 3 // 4 :] = torch.rand(args.batch, 1, generator=gen) < 0.5
    reward = KLConfig.parse("k1-in-reward")
    loss = KLConfig.parse("k3-in-loss")
    for dtype in (torch.bool, torch.int64, torch.float32):
        mask = valid.to(dtype)
        for name, fn in (
            ("reward_penalty", lambda m=mask: core.reward_penalty(logp, ref, m, reward)),
            ("loss_term", lambda m=mask: core.loss_term(logp, ref, m, loss)),
        ):
            print(f"{args.label}  {name:15} {dtype!s:14} {_best(fn):8.1f} us")
    checked = getattr(core, "_bool_mask", None)
    if checked is None:
        return
    for dtype in (torch.int64, torch.float32):
        mask = valid.to(dtype)
        bare, full = float("inf"), float("inf")
        for _ in range(5):  # alternate, so both see the same load
            bare = min(bare, _best(mask.bool, rounds=5))
            full = min(full, _best(lambda m=mask: checked(m), rounds=5))
        print(
            f"{args.label}  mask conversion {dtype!s:14} bool() {bare:7.1f} us, "
            f"checked {full:7.1f} us (+{full - bare:.1f} us)"
        )


if __name__ == "__main__":
    main()
