"""Cost of the core's KL functions against each library's own KL function, on realistic shapes.

Usage (any venv with torch; run it in a library's venv to compare with that library):
    python benchmarks/bench_core.py [--lib verl|openrlhf|trl|none] [--json] [--pairs 201]
        [--calls 10]
        [--dtypes float32,bfloat16] [--clock cpu|wall]
    python benchmarks/bench_core.py --full-kl [--vocab 32000] [--tokens 4096] [--chunk 1024]
        [--grad no|yes|both]

Per-token estimator at B=64, T=2048 (CPU, one torch thread), float32 and bfloat16: the forward
pass and forward + backward (sum of the values) of ``kl_patches.core.kl_terms`` configured
like the library (same estimator and clamps; the finiteness check on, as always) and of the
library's own function, imported from the installed wheel:
  * verl: ``verl.trainer.ppo.core_algos.kl_penalty(logp, ref, "low_var_kl")`` (k3, clamps);
  * OpenRLHF: ``openrlhf.models.utils.compute_approx_kl(logp, ref, kl_estimator="k3")``
    (imported with the tests' import-only stand-ins for flash_attn and vllm on sys.path);
  * TRL: no function exists; the k3 expression assigned to ``per_token_kl`` in
    ``GRPOTrainer._compute_loss`` is read from the installed source and evaluated as is.
Timing: ``--pairs`` interleaved pairs (native and core back to back, the order alternating
from pair to pair, after warm-up calls; each side of a pair is ``--calls`` consecutive calls,
since one call of a fraction of a millisecond is shorter than the noise of a shared machine);
each pair gives one ratio core / native; reported:
the median time of each side and the median ratio with its min-max over the pairs. The clock
is the thread's CPU time by default (``--clock cpu``: with one torch thread all the work runs
on the calling thread, so time the scheduler gives to other processes of a shared machine does
not count); ``--clock wall`` for wall time. Also the largest difference core - native on valid
tokens and each side's largest error against the estimator evaluated in float64 on the same
inputs (core's float64 path, which the tests check against the textbook formulas), and the
absolute cost of ``reward_penalty`` (k1, sequence) and ``loss_term`` (k3, sum). Memory: one
more call of each side, forward and forward + backward, under the torch profiler
(``alloc.peak_mib``: the CPU allocator's peak above the call's start), and core / native.

``--full-kl``: the exact full-vocabulary monitor ``core.full_kl`` over ``tokens`` positions at
V=32k, chunked, against the naive one-shot log_softmax; time and the peak resident-memory
increase over the inputs, each in a fresh child process (CPU: RSS, not accelerator memory);
with ``--grad both`` (default) also forward and backward (the logits require grad), where
the increase includes the ``[tokens, V]`` gradient itself (inherent: as large as one input).
Timings on a shared CPU are noisy: read the ratios, not the milliseconds.

No torch.compile path: tried on this CPU (torch 2.13, inductor C++), the compiled masked k3
took 79 s to compile, ran slower than eager (0.59 ms vs 0.50 ms per call, native 0.27 ms, on a
loaded machine) and differed from eager by 2.4e-7 (its own exp), so it is neither faster nor
exact here; no GPU was available to try it there.

No ``out=`` stores into the half-precision output: byte-identical, but on CPU a store whose
dtype differs from the computation's leaves the vectorised loop (a float32 subtraction into
bfloat16 at [64, 2048]: 112 us, against 88 us for the subtraction and a separate cast).
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import resource
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from types import CodeType

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import alloc  # noqa: E402  (benchmarks/alloc.py)
import torch  # noqa: E402

from kl_patches import core  # noqa: E402
from kl_patches.config import KLConfig  # noqa: E402

Fn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


CLOCKS: dict[str, Callable[[], int]] = {"cpu": time.thread_time_ns, "wall": time.perf_counter_ns}


def paired_times(
    native: Callable[[], object],
    ours: Callable[[], object],
    pairs: int,
    clock: str = "cpu",
    calls: int = 1,
) -> dict[str, float]:
    """Interleaved pairs: median seconds per call of each side and the median, min and max over
    the pairs of the per-pair ratio ours / native (the order inside a pair alternates). Each
    side of a pair is timed over ``calls`` consecutive calls (a sample shorter than the clock's
    and the scheduler's granularity is mostly noise)."""
    now = CLOCKS[clock]
    for _ in range(3):
        native()
        ours()
    t_native: list[float] = []
    t_ours: list[float] = []
    for i in range(pairs):
        order = ((native, t_native), (ours, t_ours))
        for fn, out in order if i % 2 == 0 else order[::-1]:
            start = now()
            for _ in range(calls):
                fn()
            out.append((now() - start) * 1e-9 / calls)
    ratios = [o / n for o, n in zip(t_ours, t_native, strict=True)]
    return {
        "native": statistics.median(t_native),
        "ours": statistics.median(t_ours),
        "ratio": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
    }


def median_time(
    fn: Callable[[], object], repeats: int, clock: str = "cpu", calls: int = 1
) -> float:
    """Median seconds per call of ``fn`` over ``repeats`` samples of ``calls`` calls each
    (after warm-up calls)."""
    now = CLOCKS[clock]
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start = now()
        for _ in range(calls):
            fn()
        times.append((now() - start) * 1e-9 / calls)
    return statistics.median(times)


def library_function(lib: str) -> tuple[str, Fn, KLConfig]:
    """(description, per-token k3 function of (logp, ref_logp), matching KLConfig)."""
    if lib == "verl":
        from verl.trainer.ppo.core_algos import kl_penalty

        cfg = KLConfig.parse("k3-in-loss", log_ratio_clamp=20.0, kl_clamp=10.0)
        return (
            "verl core_algos.kl_penalty('low_var_kl')",
            (lambda lp, rl: kl_penalty(lp, rl, "low_var_kl")),
            cfg,
        )
    if lib == "openrlhf":
        # import-only stand-ins for flash_attn / vllm (no CPU wheels), as the OpenRLHF tests use
        stubs = ROOT / "tests" / "adapters" / "openrlhf" / "openrlhf_support" / "stubs"
        sys.path.insert(0, str(ROOT / "kl_patches" / "experiments" / "cpu" / "stand_ins"))
        sys.path.insert(0, str(stubs))  # its import-only vllm before the package's working one
        from openrlhf.models.utils import compute_approx_kl

        cfg = KLConfig.parse("k3-in-loss", log_ratio_clamp=10.0, kl_clamp=10.0)
        return (
            "openrlhf compute_approx_kl(k3)",
            (lambda lp, rl: compute_approx_kl(lp, rl, kl_estimator="k3")),
            cfg,
        )
    if lib == "trl":
        return (
            "TRL GRPOTrainer per_token_kl expression",
            trl_expression(),
            KLConfig.parse("k3-in-loss"),
        )
    raise ValueError(f"--lib {lib!r} is not valid; choose one of ['verl', 'openrlhf', 'trl']")


def trl_expression() -> Fn:
    """The right-hand side of TRL's first ``per_token_kl = ...`` in ``_compute_loss``."""
    from trl.trainer.grpo_trainer import GRPOTrainer

    tree = ast.parse(textwrap.dedent(inspect.getsource(GRPOTrainer._compute_loss)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "per_token_kl" for t in node.targets
        ):
            code = compile(ast.Expression(node.value), "<trl per_token_kl>", "eval")

            def fn(lp: torch.Tensor, rl: torch.Tensor, code: CodeType = code) -> torch.Tensor:
                env = {"torch": torch, "per_token_logps": lp, "ref_per_token_logps": rl}
                result: torch.Tensor = eval(code, env)
                return result

            return fn
    raise RuntimeError("no 'per_token_kl = ...' in GRPOTrainer._compute_loss: TRL changed")


def _inputs(
    batch: int, length: int, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    ref = -torch.rand(batch, length, generator=gen) * 3
    base = ref + 0.3 * torch.randn(batch, length, generator=gen)
    mask = torch.ones(batch, length, dtype=torch.bool)
    mask[:, length * 3 // 4 :] = torch.rand(batch, 1, generator=gen) < 0.5  # some padding
    return base.to(dtype), ref.to(dtype), mask


def _float64_error(
    fn: Fn, cfg: KLConfig, base: torch.Tensor, ref: torch.Tensor, mask: torch.Tensor
) -> float:
    """Largest |fn(inputs) - k(inputs)| on valid tokens, with k the estimator (and clamps) of
    ``cfg`` evaluated in float64 on the same (rounded) inputs: the rounding error of a side.
    (The libraries' own functions cannot be the reference: OpenRLHF's casts to float32.)"""
    with torch.no_grad():
        got = fn(base, ref).double()
        exact = core.kl_terms(base.double(), ref.double(), mask, cfg)
    return float((got - exact)[mask].abs().max())


def estimator_rows(
    lib: str,
    batch: int,
    length: int,
    pairs: int,
    dtypes: tuple[torch.dtype, ...] = (torch.float32,),
    clock: str = "cpu",
    calls: int = 1,
) -> list[dict[str, object]]:
    """Forward and forward+backward time of core vs the library's own function, per dtype
    (``calls`` calls per timed sample)."""
    rows: list[dict[str, object]] = []
    for dtype in dtypes:
        rows += _estimator_rows(lib, batch, length, pairs, dtype, clock, calls)
    return rows


def _estimator_rows(
    lib: str, batch: int, length: int, pairs: int, dtype: torch.dtype, clock: str, calls: int
) -> list[dict[str, object]]:
    base, ref, mask = _inputs(batch, length, dtype)
    dname = str(dtype).removeprefix("torch.")
    tag = "" if dtype == torch.float32 else f" [{dname}]"
    common: dict[str, object] = {"library": lib, "shape": f"{batch}x{length}", "dtype": dname}

    def forward(fn: Fn) -> Callable[[], object]:
        def run() -> object:
            with torch.no_grad():
                return fn(base, ref)

        return run

    def forward_backward(fn: Fn) -> Callable[[], object]:
        def run() -> object:
            lp = base.clone().requires_grad_(True)
            fn(lp, ref).sum().backward()
            return lp.grad

        return run

    timing = {"pairs": pairs, "calls_per_sample": calls, "clock": clock}

    def paired(native: Fn, ours: Fn) -> tuple[dict[str, float], dict[str, float]]:
        """:func:`paired_times` of ``native`` against ``ours``, forward and forward+backward."""
        fwd = paired_times(forward(native), forward(ours), pairs, clock, calls)
        return fwd, paired_times(
            forward_backward(native), forward_backward(ours), pairs, clock, calls
        )

    def float32_reference_row(
        lib_fn: Fn, core_fn: Fn, desc: str, cfg: KLConfig
    ) -> dict[str, object]:
        """The core against the library's expression at the core's accuracy: the same expression
        on the half-precision inputs converted to float32, its result rounded once back (what the
        core computes inside). Informative (``reference`` set): issue 16's target is against the
        library's expression as it runs, in the input dtype; this row shows how much of the gap is
        the float32 arithmetic itself."""
        dtype = base.dtype

        def in_float32(lp: torch.Tensor, rl: torch.Tensor) -> torch.Tensor:
            return lib_fn(lp.float(), rl.float()).to(dtype)

        fwd, bwd = paired(in_float32, core_fn)
        return {
            **common,
            "function": f"core.kl_terms / {desc} in float32{tag}",
            "reference": True,
            "forward_ms": 1e3 * fwd["native"],
            "fwd_bwd_ms": 1e3 * bwd["native"],
            **_ratio_fields(fwd, bwd),
            "max_err_vs_float64": _float64_error(in_float32, cfg, base, ref, mask),
            **timing,
        }

    rows: list[dict[str, object]] = []
    if lib != "none":
        desc, lib_fn, cfg = library_function(lib)
        core_fn: Fn = lambda lp, rl: core.kl_terms(lp, rl, mask, cfg)  # noqa: E731
        fwd, bwd = paired(lib_fn, core_fn)
        with torch.no_grad():
            diff = (lib_fn(base, ref).double() - core_fn(base, ref).double())[mask].abs().max()
        mib = {
            (side, part): alloc.peak_mib(make(fn), f"{side} {part}")
            for side, fn in (("native", lib_fn), ("core", core_fn))
            for part, make in (("fwd", forward), ("fwd_bwd", forward_backward))
        }
        rows.append(
            {
                **common,
                "function": desc + tag,
                "forward_ms": 1e3 * fwd["native"],
                "fwd_bwd_ms": 1e3 * bwd["native"],
                "max_err_vs_float64": _float64_error(lib_fn, cfg, base, ref, mask),
                "fwd_mib": mib["native", "fwd"],
                "fwd_bwd_mib": mib["native", "fwd_bwd"],
            }
        )
        rows.append(
            {
                **common,
                "function": f"core.kl_terms({cfg.estimator}, as {lib}){tag}",
                "forward_ms": 1e3 * fwd["ours"],
                "fwd_bwd_ms": 1e3 * bwd["ours"],
                **_ratio_fields(fwd, bwd),
                "max_abs_diff": float(diff),
                "max_err_vs_float64": _float64_error(core_fn, cfg, base, ref, mask),
                "fwd_mib": mib["core", "fwd"],
                "fwd_bwd_mib": mib["core", "fwd_bwd"],
                "memory_forward": mib["core", "fwd"] / mib["native", "fwd"],
                "memory_fwd_bwd": mib["core", "fwd_bwd"] / mib["native", "fwd_bwd"],
                **timing,
            }
        )
        if dtype != torch.float32:
            rows.append(float32_reference_row(lib_fn, core_fn, desc, cfg))
    k1, k3 = KLConfig.parse("k1-in-reward"), KLConfig.parse("k3-in-loss")
    penalty: Fn = lambda lp, rl: core.reward_penalty(lp, rl, mask, k1)  # noqa: E731
    loss: Fn = lambda lp, rl: core.loss_term(lp, rl, mask, k3)  # noqa: E731
    rows.append(
        {
            **common,
            "function": f"core.reward_penalty(k1, sequence){tag}",
            "forward_ms": 1e3 * median_time(forward(penalty), pairs, clock, calls),
        }
    )
    rows.append(
        {
            **common,
            "function": f"core.loss_term(k3, sum){tag}",
            "forward_ms": 1e3 * median_time(forward(loss), pairs, clock, calls),
            "fwd_bwd_ms": 1e3 * median_time(forward_backward(loss), pairs, clock, calls),
        }
    )
    return rows


def _ratio_fields(fwd: dict[str, float], bwd: dict[str, float]) -> dict[str, float]:
    """The ratio columns of a row from :func:`paired_times`' forward and forward+backward."""
    return {
        "ratio_forward": fwd["ratio"],
        "ratio_forward_min": fwd["ratio_min"],
        "ratio_forward_max": fwd["ratio_max"],
        "ratio_fwd_bwd": bwd["ratio"],
        "ratio_fwd_bwd_min": bwd["ratio_min"],
        "ratio_fwd_bwd_max": bwd["ratio_max"],
    }


# ---------------------------------------------------------------------------- full-vocab KL
def naive_full_kl(logits: torch.Tensor, ref_logits: torch.Tensor) -> torch.Tensor:
    """The one-shot version: two [B, T, V] log_softmax tensors at once."""
    lp, rl = torch.log_softmax(logits, -1), torch.log_softmax(ref_logits, -1)
    return (lp.exp() * (lp - rl)).sum(-1)


def _rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() // 1024


def full_kl_child(
    method: str, tokens: int, vocab: int, chunk: int, grad: bool = False
) -> dict[str, float]:
    """In this (fresh) process: time one call (forward, or forward and backward with
    ``grad``) and the peak RSS increase over the inputs."""
    torch.manual_seed(0)
    logits = torch.randn(1, tokens, vocab)
    ref = logits + 0.1 * torch.randn(1, tokens, vocab)
    mask = torch.ones(1, tokens, dtype=torch.bool)
    logits.requires_grad_(grad)
    before = _rss_kib()
    start = time.perf_counter()
    if method == "chunked":
        out = core.full_kl(logits, ref, mask, chunk_size=chunk)
    else:
        out = naive_full_kl(logits, ref)
    if grad:
        out.sum().backward()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "seconds": seconds,
        "peak_increase_mib": max(peak - before, 0) / 1024,
        "inputs_mib": 2 * logits.numel() * 4 / 2**20,
        "mean_kl": float(out.detach().mean()),
        "grad": float(grad),
    }


def full_kl_rows(
    tokens: int, vocab: int, chunk: int, grad: bool = False
) -> list[dict[str, object]]:
    """Chunked core.full_kl vs the naive one-shot computation, each in a child process."""
    rows: list[dict[str, object]] = []
    for method in ("chunked", "naive"):
        cmd = [sys.executable, __file__, "--child", method, "--tokens", str(tokens)]
        cmd += ["--vocab", str(vocab), "--chunk", str(chunk), "--grad", "yes" if grad else "no"]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        row: dict[str, object] = json.loads(out.strip().splitlines()[-1])
        label = f"core.full_kl (chunk {chunk})" if method == "chunked" else "naive log_softmax"
        label += " + backward" if grad else ""
        row.update(function=label, shape=f"{tokens}x{vocab}")
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; prints a table (or JSON lines with --json)."""
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--lib", default="none", choices=["none", "verl", "openrlhf", "trl"])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--length", type=int, default=2048)
    p.add_argument("--pairs", type=int, default=201, help="interleaved pairs (median, min-max)")
    p.add_argument("--calls", type=int, default=10, help="calls per timed sample")
    p.add_argument("--dtypes", default="float32,bfloat16", help="comma-separated dtypes")
    p.add_argument("--clock", default="cpu", choices=sorted(CLOCKS), help="thread CPU or wall")
    p.add_argument(
        "--grad",
        default="both",
        choices=["no", "yes", "both"],
        help="--full-kl: forward only, forward and backward, or both (default)",
    )
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: stabler)")
    p.add_argument("--full-kl", action="store_true", help="the full-vocabulary monitor instead")
    p.add_argument("--tokens", type=int, default=4096, help="positions for --full-kl")
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--chunk", type=int, default=1024)
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    if a.child:
        print(json.dumps(full_kl_child(a.child, a.tokens, a.vocab, a.chunk, a.grad == "yes")))
        return 0
    if a.full_kl:
        modes = {"no": [False], "yes": [True], "both": [False, True]}[a.grad]
        rows = [r for grad in modes for r in full_kl_rows(a.tokens, a.vocab, a.chunk, grad)]
    else:
        dtypes = tuple(getattr(torch, name.strip()) for name in a.dtypes.split(",") if name)
        rows = estimator_rows(a.lib, a.batch, a.length, a.pairs, dtypes, a.clock, a.calls)
    if a.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    for row in rows:
        print("  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                        for k, v in row.items()))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
