"""Cost of the core's KL functions against each library's own KL function, on realistic shapes.

Usage (any venv with torch; run it in a library's venv to compare with that library):
    python benchmarks/bench_core.py [--lib verl|openrlhf|trl|none] [--json] [--repeats 15]
    python benchmarks/bench_core.py --full-kl [--vocab 32000] [--tokens 4096] [--chunk 1024]

Per-token estimator at B=64, T=2048 (float32, CPU, one thread): best-of-N wall time (the
functions interleaved round by round) of the forward pass and of forward + backward (sum of the
values), for ``kl_patches.core.kl_terms`` configured like the
library (same estimator and clamps) and for the library's own function, imported from the
installed wheel:
  * verl: ``verl.trainer.ppo.core_algos.kl_penalty(logp, ref, "low_var_kl")`` (k3, clamps);
  * OpenRLHF: ``openrlhf.models.utils.compute_approx_kl(logp, ref, kl_estimator="k3")``
    (imported with the tests' import-only stand-ins for flash_attn and vllm on sys.path);
  * TRL: no function exists; the k3 expression assigned to ``per_token_kl`` in
    ``GRPOTrainer._compute_loss`` is read from the installed source and evaluated as is.
Also the absolute cost of ``reward_penalty`` (k1, sequence) and ``loss_term`` (k3, sum).

``--full-kl``: the exact full-vocabulary monitor ``core.full_kl`` over ``tokens`` positions at
V=32k, chunked, against the naive one-shot log_softmax; time and the peak resident-memory
increase over the inputs, each in a fresh child process (CPU: RSS, not accelerator memory).
Timings on a shared CPU are noisy: read the ratios, not the milliseconds.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import resource
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from types import CodeType

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from kl_patches import core  # noqa: E402
from kl_patches.config import KLConfig  # noqa: E402

Fn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def best_times(fns: list[Callable[[], object]], rounds: int) -> list[float]:
    """Fastest seconds of each ``fn`` over ``rounds`` rounds, the functions interleaved round by
    round (after one warm-up call each) so that load on a shared machine hits them alike."""
    for fn in fns:
        fn()
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


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
        sys.path.insert(0, str(stubs))
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


def estimator_rows(lib: str, batch: int, length: int, repeats: int) -> list[dict[str, object]]:
    """Forward and forward+backward time of core vs the library's own function."""
    gen = torch.Generator().manual_seed(0)
    ref = -torch.rand(batch, length, generator=gen) * 3
    base = ref + 0.3 * torch.randn(batch, length, generator=gen)
    mask = torch.ones(batch, length, dtype=torch.bool)
    mask[:, length * 3 // 4 :] = torch.rand(batch, 1, generator=gen) < 0.5  # some padding
    cases: list[tuple[str, Fn, bool]] = []
    if lib != "none":
        desc, lib_fn, cfg = library_function(lib)
        core_fn: Fn = lambda lp, rl: core.kl_terms(lp, rl, mask, cfg)  # noqa: E731
        cases += [
            (desc, lib_fn, True),
            (f"core.kl_terms({cfg.estimator}, as {lib})", core_fn, True),
        ]
    k1, k3 = KLConfig.parse("k1-in-reward"), KLConfig.parse("k3-in-loss")
    cases.append(
        (
            "core.reward_penalty(k1, sequence)",
            lambda lp, rl: core.reward_penalty(lp, rl, mask, k1),
            False,
        )
    )
    cases.append(("core.loss_term(k3, sum)", lambda lp, rl: core.loss_term(lp, rl, mask, k3), True))

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

    fwd = best_times([forward(fn) for _, fn, _ in cases], repeats)
    with_bwd = [i for i, c in enumerate(cases) if c[2]]
    bwd = dict(
        zip(
            with_bwd,
            best_times([forward_backward(cases[i][1]) for i in with_bwd], repeats),
            strict=True,
        )
    )
    rows: list[dict[str, object]] = []
    for i, (name, _, _) in enumerate(cases):
        row: dict[str, object] = {"library": lib, "shape": f"{batch}x{length}", "function": name}
        row["forward_ms"] = 1e3 * fwd[i]
        if i in bwd:
            row["fwd_bwd_ms"] = 1e3 * bwd[i]
        rows.append(row)
    if lib != "none":
        ours = rows[1]
        ours["ratio_forward"] = fwd[1] / fwd[0]
        ours["ratio_fwd_bwd"] = bwd[1] / bwd[0]
        with torch.no_grad():
            ours["max_abs_diff"] = (
                (cases[0][1](base, ref) - cases[1][1](base, ref))[mask].abs().max().item()
            )
    return rows


# ---------------------------------------------------------------------------- full-vocab KL
def naive_full_kl(logits: torch.Tensor, ref_logits: torch.Tensor) -> torch.Tensor:
    """The one-shot version: two [B, T, V] log_softmax tensors at once."""
    lp, rl = torch.log_softmax(logits, -1), torch.log_softmax(ref_logits, -1)
    return (lp.exp() * (lp - rl)).sum(-1)


def _rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() // 1024


def full_kl_child(method: str, tokens: int, vocab: int, chunk: int) -> dict[str, float]:
    """In this (fresh) process: time one call and the peak RSS increase over the inputs."""
    torch.manual_seed(0)
    logits = torch.randn(1, tokens, vocab)
    ref = logits + 0.1 * torch.randn(1, tokens, vocab)
    mask = torch.ones(1, tokens, dtype=torch.bool)
    before = _rss_kib()
    start = time.perf_counter()
    if method == "chunked":
        out = core.full_kl(logits, ref, mask, chunk_size=chunk)
    else:
        out = naive_full_kl(logits, ref)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "seconds": seconds,
        "peak_increase_mib": max(peak - before, 0) / 1024,
        "inputs_mib": 2 * logits.numel() * 4 / 2**20,
        "mean_kl": float(out.mean()),
    }


def full_kl_rows(tokens: int, vocab: int, chunk: int) -> list[dict[str, object]]:
    """Chunked core.full_kl vs the naive one-shot computation, each in a child process."""
    rows: list[dict[str, object]] = []
    for method in ("chunked", "naive"):
        cmd = [sys.executable, __file__, "--child", method, "--tokens", str(tokens)]
        cmd += ["--vocab", str(vocab), "--chunk", str(chunk)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        row: dict[str, object] = json.loads(out.strip().splitlines()[-1])
        label = f"core.full_kl (chunk {chunk})" if method == "chunked" else "naive log_softmax"
        row.update(function=label, shape=f"{tokens}x{vocab}")
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; prints a table (or JSON lines with --json)."""
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--lib", default="none", choices=["none", "verl", "openrlhf", "trl"])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--length", type=int, default=2048)
    p.add_argument("--repeats", type=int, default=15, help="interleaved rounds (best of)")
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
        print(json.dumps(full_kl_child(a.child, a.tokens, a.vocab, a.chunk)))
        return 0
    if a.full_kl:
        rows = full_kl_rows(a.tokens, a.vocab, a.chunk)
    else:
        rows = estimator_rows(a.lib, a.batch, a.length, a.repeats)
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
