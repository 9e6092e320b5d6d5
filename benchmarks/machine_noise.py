"""How much the same work's CPU time varies on this machine: the noise floor of every benchmark.

Usage (any venv with torch; 5-8 minutes with the defaults on 2 cores):
    python benchmarks/machine_noise.py [--samples 30] [--repeats 20]

Three measurements of one fixed workload (an MLP block of the Qwen2-0.5B shape on 2,112 tokens:
``x @ W1``, SiLU, ``@ W2``, ``--repeats`` times per sample, float32, one torch thread):

1. one process pinned to core 0: the spread of the samples' CPU time, and the ratio of each
   adjacent pair (what an interleaved pair of two identical configurations would report);
2. two processes at the same time, one pinned to each core, same start: the ratio of their i-th
   samples. If the machine's speed drifted for both cores together, these ratios would be
   close to 1 and two concurrent runs could cancel each other's noise;
3. whether ``perf stat`` can count instructions and cycles (a clock that does not depend on
   the machine's speed), when ``perf`` is installed.

It prints what it measured; nothing is asserted. benchmarks/results.md and docs/results.md
(section 3) cite its figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time


def work_samples(samples: int, repeats: int, core: int, start_at: float = 0.0) -> list[float]:
    """CPU seconds of each of ``samples`` samples of the fixed workload, pinned to ``core``."""
    import torch

    torch.set_num_threads(1)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2112, 896, generator=gen)
    w1 = torch.randn(896, 4864, generator=gen)
    w2 = torch.randn(4864, 896, generator=gen)
    while time.time() < start_at:
        time.sleep(0.001)
    out = []
    for _ in range(samples):
        start = time.process_time()
        for _ in range(repeats):
            torch.nn.functional.silu(x @ w1) @ w2
        out.append(time.process_time() - start)
    return out


def spread(values: list[float]) -> str:
    med = statistics.median(values)
    return f"median {med:.3f}, min {min(values):.3f}, max {max(values):.3f}"


def perf_counters() -> str:
    """What ``perf stat`` says about the instruction and cycle counters."""
    perf = shutil.which("perf")
    if perf is None:
        return "perf is not installed"
    probe = [sys.executable, "-c", "sum(range(10**6))"]
    proc = subprocess.run(
        [perf, "stat", "-e", "instructions,cycles", *probe],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line.strip() for line in proc.stderr.splitlines() if "instructions" in line]
    lines += [line.strip() for line in proc.stderr.splitlines() if "cycles" in line]
    return "; ".join(" ".join(line.split()) for line in lines) or proc.stderr.strip()[-200:]


def main() -> int:
    """Run the three measurements and print them."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=20, help="workload repeats per sample")
    parser.add_argument("--worker", nargs=3, type=float, help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.worker:  # one of the two concurrent processes
        core, start_at, samples = a.worker
        print(json.dumps(work_samples(int(samples), a.repeats, int(core), start_at)))
        return 0

    # before the first measurement pins this process to core 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    print(f"fixed workload, {a.repeats} repeats per sample, {a.samples} samples, 1 thread")
    alone = work_samples(a.samples, a.repeats, 0)
    pairs = [alone[i + 1] / alone[i] for i in range(0, len(alone) - 1, 2)]
    print(f"1. one process, CPU s per sample: {spread(alone)}")
    print(f"   adjacent pairs (second / first), {len(pairs)} pairs: {spread(pairs)}")

    if cores >= 2:
        start_at = time.time() + 3.0
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--repeats",
                    str(a.repeats),
                    "--worker",
                    str(core),
                    str(start_at),
                    str(a.samples),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            for core in (0, 1)
        ]
        first, second = (json.loads(p.communicate()[0]) for p in procs)
        ratios = [x / y for x, y in zip(first, second, strict=True)]
        print(
            f"2. two processes at once (core 0 / core 1, i-th samples): {spread(ratios)}; "
            f"whole runs {sum(first) / sum(second):.3f}"
        )
    else:
        print("2. skipped: fewer than two cores")
    print(f"3. perf stat: {perf_counters()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
