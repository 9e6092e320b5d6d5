"""What machine a benchmark ran on, in the terms that change its ratios.

Usage (any venv with torch):
    python benchmarks/machine.py

One line for the report header (benchmarks/run_all.py): the CPU model and vendor, the ATen CPU
capability torch dispatches to, whether torch uses MKL, and the time of ``torch.exp`` on a
[64, 2048] float32 tensor against the same on bfloat16 (one torch thread, median of 50 samples
of 20 calls, thread CPU time).

Why the exp probe: torch's CPU ``exp`` on float32 and float64 calls MKL's vector math
(``vsExp``), and its bfloat16 ``exp`` uses ATen's own vectorised code. MKL takes its fast code
path only on Intel CPUs: on an AMD EPYC (Zen 4) with torch 2.13's wheel, float32 ``exp`` took
137-166 us against 65-82 us for bfloat16, and 28-30 us when MKL was made to believe the CPU was
Intel (a preloaded ``mkl_serv_intel_cpu_true`` returning 1; a diagnosis, not something the
benchmarks do; the two MKL paths differ by one float32 ulp on 1.6% of a million inputs in
[-20, 20]). ``kl_patches.core`` computes half-precision inputs in float32 on purpose, so on such
a machine its bfloat16 rows pay MKL's slow float32 exp where the library one-liner evaluates
exp in bfloat16. On the machine of the earlier official runs float32 exp took 21 us.
"""

from __future__ import annotations

import platform
from pathlib import Path

import torch
from bench_core import median_time  # this script's folder is on sys.path


def cpu_model() -> tuple[str, str]:
    """(model name, vendor id) from /proc/cpuinfo; ("unknown", "unknown") elsewhere."""
    model, vendor = "unknown", "unknown"
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or model, vendor
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model == "unknown":
            model = value.strip()
        elif key == "vendor_id" and vendor == "unknown":
            vendor = value.strip()
    return model, vendor


def exp_times(
    shape: tuple[int, int] = (64, 2048), samples: int = 50, calls: int = 20
) -> dict[str, float]:
    """Median microseconds of one ``torch.exp`` call per dtype (float32, bfloat16), one thread
    (``bench_core.median_time``, the core benchmark's own timer)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        x = -torch.rand(*shape, generator=torch.Generator().manual_seed(0))
        out: dict[str, float] = {}
        for dtype in (torch.float32, torch.bfloat16):
            y = x.to(dtype)
            seconds = median_time(lambda y=y: torch.exp(y), samples, "cpu", calls)
            out[str(dtype).removeprefix("torch.")] = seconds * 1e6
        return out
    finally:
        torch.set_num_threads(threads)


def describe() -> str:
    """One sentence naming the CPU, torch's CPU dispatch and the exp probe."""
    model, vendor = cpu_model()
    capability = torch.backends.cpu.get_cpu_capability()
    mkl = "with MKL" if torch.backends.mkl.is_available() else "without MKL"
    t = exp_times()
    f32, bf16 = t["float32"], t["bfloat16"]
    return (
        f"CPU {model} ({vendor}); torch {torch.__version__}, ATen {capability}, {mkl}; "
        f"torch.exp on [64, 2048]: float32 {f32:.0f} us, bfloat16 {bf16:.0f} us "
        f"(float32 / bfloat16 {f32 / bf16:.2f}x; above 1 where MKL's float32 exp takes its "
        "slow path, see benchmarks/machine.py)"
    )


if __name__ == "__main__":
    print(describe())
