"""Overhead of the OpenRLHF patches: patched / native wall time of the real OpenRLHF methods (CPU).

    PYTHONPATH=tests/adapters/openrlhf python benchmarks/openrlhf_overhead.py

Needs OpenRLHF 0.11.2 installed as for ``nox -s openrlhf`` (uses the test stand-ins for vllm
and flash_attn). One run, median of repeats; prints ratios, asserts nothing.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from openrlhf_support.harness import activate

activate()

import torch  # noqa: E402

torch.set_num_threads(1)  # stable timings on a shared machine
from openrlhf_support.cases import actor_batch, args_for, run_training_step  # noqa: E402
from openrlhf_support.harness import (  # noqa: E402
    attach_kl_like_make_experience,
    make_experience,
    make_experience_maker,
    tiny_actor,
)

from kl_patches import KLConfig  # noqa: E402
from kl_patches.adapters.openrlhf import apply, revert  # noqa: E402


def median_time(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def advantages(batch: int, length: int, config: KLConfig, patched: bool) -> float:
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

    if patched:
        apply(config)
    try:
        return median_time(run, repeats=5)
    finally:
        revert()


def training_step(config: KLConfig, patched: bool) -> float:
    actor = tiny_actor()
    data = actor_batch()
    args = args_for(config)
    if patched:
        apply(config)
    try:
        return median_time(lambda: run_training_step(actor, args, data), repeats=20)
    finally:
        revert()


def main() -> None:
    reward = KLConfig(estimator="k1", placement="reward", coef=0.1)  # sequence shape: patched
    native = advantages(1024, 1024, reward, patched=False)
    patched = advantages(1024, 1024, reward, patched=True)
    print(
        f"compute_advantages_and_returns 1024x1024 rloo: native {native * 1e3:.1f} ms, "
        f"patched {patched * 1e3:.1f} ms, ratio {patched / native:.2f}"
    )
    loss = KLConfig(estimator="k3", placement="loss", coef=0.1)  # sum aggregation: patched
    native = training_step(loss, patched=False)
    patched = training_step(loss, patched=True)
    print(
        f"training_step tiny Llama 4x10: native {native * 1e3:.1f} ms, "
        f"patched {patched * 1e3:.1f} ms, ratio {patched / native:.2f}"
    )


if __name__ == "__main__":
    main()
