"""Step time and peak GPU memory of the kl-patches GRPO trainer on a real-sized model in
bfloat16 on a GPU, against native TRL.

Usage (a CUDA machine with TRL installed; about 2-3 minutes on one H200)::

    python benchmarks/bench_trl_gpu.py [--rounds 20] [--completion-length 1024] [--json OUT]
    python benchmarks/bench_trl_gpu.py --device cpu --layers 1 --rounds 1 \\
        --completion-length 16 --vocab 1024        # a smoke run of the code path on a CPU

The GPU counterpart of ``bench_trl_real.py`` (read its docstring for the configurations, the
A/A control and the forward counts; they are imported from it unchanged). What differs: the
model (the published Qwen2.5-0.5B shape, random weights) runs in bfloat16 on the GPU, TRL runs
with ``bf16=True``; a step's time is wall time between two ``torch.cuda.synchronize()`` calls
(the CPU time of the process is not the figure on a GPU), and memory is the peak of PyTorch's
CUDA allocator above what it held before the step. The batch is larger than on the CPU
(``--prompts 2 --generations 4`` = 8 sequences of 1024 completion tokens by default), so a
step is a real-sized step of a small GRPO run. Generation is replaced by fixed random
completions as in the CPU benchmark, so every ratio is an upper bound of the overhead as a
share of a real step (a real step also samples).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_trl_real as real


def build_runner(config: real.Config, policy: Any, ref: Any, vocab: int, out: Path,
                 a: argparse.Namespace) -> real.Runner:  # fmt: skip
    """The trainer of ``config`` on the shared models, in bfloat16 on ``a.device``."""
    import torch
    import trl
    import trl.trainer.grpo_trainer as grpo_module

    import kl_patches.trl as klt
    from kl_patches.adapters.trl import hooks

    on_gpu = a.device != "cpu"
    args = trl.GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=a.prompts * a.generations,
        num_generations=a.generations,
        max_completion_length=a.completion_length,
        beta=config.beta,
        learning_rate=1e-6,
        max_grad_norm=1.0,
        scale_rewards="none",
        gradient_checkpointing=False,
        bf16=on_gpu,
        fp16=False,
        use_cpu=not on_gpu,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        seed=0,
    )
    kwargs: dict[str, Any] = {
        "args": args,
        "train_dataset": real._dataset(a.prompts),
        "processing_class": real.build_tokenizer(vocab),
        "rollout_func": real.make_rollout(a.prompt_length, a.completion_length, vocab),
    }
    original = grpo_module.create_model_from_path
    grpo_module.create_model_from_path = lambda *_, **__: ref
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if config.patched:
                trainer = klt.GRPOTrainer(policy, real.reward, kl=config.kl, **kwargs)
            else:
                trainer = trl.GRPOTrainer(policy, real.reward, **kwargs)
    finally:
        grpo_module.create_model_from_path = original
    if trainer.ref_model is not None and trainer.ref_model is not ref:
        raise RuntimeError(f"{config.name}: the shared reference model was not used")
    if config.patched:
        if not config.defer:
            trainer._kl_no_defer = True

        def counts() -> dict[str, int]:
            seen = hooks.forward_counts(trainer)
            return {k: v for k, v in seen.items() if k in ("policy", "reference")}

    else:
        counts = real._native_counter(trainer)
    trainer.current_gradient_accumulation_steps = 1
    optimizer = torch.optim.SGD(policy.parameters(), lr=args.learning_rate)
    return real.Runner(config, trainer, optimizer, counts)


def step(runner: real.Runner, inputs: list[dict[str, str]], a: argparse.Namespace,
         measure: bool) -> None:  # fmt: skip
    """One full GRPO step; with ``measure``, its wall time, peak allocator memory, forwards."""
    import torch

    on_gpu = a.device != "cpu"
    trainer = runner.trainer
    params = [p for p in trainer.model.parameters() if p.requires_grad]
    before_counts = runner.counts()
    if on_gpu:
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    trainer.training_step(trainer.model, inputs, None)
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    runner.optimizer.step()
    trainer.model.zero_grad(set_to_none=True)
    if on_gpu:
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    if measure:
        after = runner.counts()
        runner.seconds.append(elapsed)
        runner.peak_mib.append(
            (torch.cuda.max_memory_allocated() - base) / 2**20 if on_gpu else float("nan")
        )
        runner.forwards.append({k: after.get(k, 0) - before_counts.get(k, 0) for k in after})


def main() -> int:
    """Build the models, run the shuffled rounds, print the table and the ratios."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--prompts", type=int, default=2, help="groups per batch")
    parser.add_argument("--generations", type=int, default=4, help="completions per group")
    parser.add_argument("--prompt-length", type=int, default=64)
    parser.add_argument("--completion-length", type=int, default=1024)
    parser.add_argument("--warmup-length", type=int, default=32)
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--vocab", type=int, default=real.QWEN2_0_5B["vocab_size"])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write the summary as JSON here")
    a = parser.parse_args()
    if a.rounds < 1 or a.rounds > 1000:
        parser.error("--rounds must be between 1 and 1000")

    import torch
    import transformers
    import trl
    from transformers import AutoModelForCausalLM

    started = time.monotonic()
    real._no_defer_hook()
    on_gpu = a.device != "cpu"
    dtype = torch.bfloat16 if on_gpu else torch.float32
    shape = {**real.QWEN2_0_5B, "num_hidden_layers": a.layers, "vocab_size": a.vocab}
    root = Path(tempfile.mkdtemp(prefix="bench-trl-gpu-"))
    model_dir = real.build_model_dir(root / "model", shape)
    ref = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(a.device)
    policy = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(a.device)
    gen = torch.Generator(device="cpu").manual_seed(1)
    with torch.no_grad():
        for p in policy.parameters():  # a policy away from the reference: the KL is not 0
            p.add_((1e-3 * torch.randn(p.shape, generator=gen)).to(p.device, p.dtype))
    ref.eval()
    n_params = sum(p.numel() for p in policy.parameters())
    runners = [build_runner(c, policy, ref, a.vocab, root / "out", a) for c in real.configs()]
    inputs = [{"prompt": f"p{i}"} for i in range(a.prompts) for _ in range(a.generations)]
    for runner in runners:  # warm-up: short, then one full-length step each
        real.set_length(runner, a.warmup_length, a, a.vocab)
        real.ROLLOUT_SEED[0] = 10_000
        step(runner, inputs, a, measure=False)
        real.set_length(runner, a.completion_length, a, a.vocab)
        real.ROLLOUT_SEED[0] = 10_001
        step(runner, inputs, a, measure=False)
    shuffler = random.Random(a.seed)
    order = list(range(len(runners)))
    for r in range(a.rounds):
        shuffler.shuffle(order)
        for i in order:
            real.ROLLOUT_SEED[0] = r
            step(runners[i], inputs, a, measure=True)
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr, flush=True)
    for runner in runners:
        for seen in runner.forwards:
            if seen != runner.config.forwards:
                raise RuntimeError(
                    f"{runner.config.name}: forwards per step {seen}, expected "
                    f"{runner.config.forwards}"
                )

    device_name = torch.cuda.get_device_name() if on_gpu else "CPU"
    batch = a.prompts * a.generations
    print(
        f"Qwen2-0.5B shape ({n_params / 1e6:.0f}M parameters, {a.layers} layers, vocabulary "
        f"{a.vocab}), random init, {str(dtype).replace('torch.', '')}, {device_name}; TRL "
        f"{trl.__version__}, transformers {transformers.__version__}, torch {torch.__version__}"
    )
    print(
        f"{a.prompts} groups x {a.generations} completions = {batch} sequences of "
        f"{a.prompt_length} + {a.completion_length} tokens; {a.rounds} shuffled rounds; "
        f"whole run {(time.monotonic() - started) / 60:.1f} min"
    )
    print(f"{'configuration':46}{'ms/step':>9}{'min-max':>16}{'peak MiB':>10}  forwards/step")
    for r in runners:
        fw = ", ".join(f"{k} {v}" for k, v in sorted(r.forwards[-1].items()) if v)
        print(
            f"{r.config.name:46}{statistics.median(r.seconds) * 1e3:9.1f}"
            f"{min(r.seconds) * 1e3:8.1f}-{max(r.seconds) * 1e3:<7.1f}"
            f"{statistics.median(r.peak_mib):10.0f}  {fw}"
        )
    by_name = {r.config.name: r for r in runners}
    base = by_name[real.BASELINE]
    summary: dict[str, Any] = {
        "device": device_name,
        "dtype": str(dtype),
        "rounds": a.rounds,
        "batch": batch,
        "completion_length": a.completion_length,
        "trl": trl.__version__,
        "torch": torch.__version__,
        "native_ms": statistics.median(base.seconds) * 1e3,
        "native_peak_mib": statistics.median(base.peak_mib),
        "ratios": {},
    }
    print(f"\nratios to {real.BASELINE}, per round: median (min-max over {a.rounds} rounds)")
    for name, target in real.RATIOS:
        r = by_name[name]
        wall = [x / y for x, y in zip(r.seconds, base.seconds, strict=True)]
        mem = statistics.median(r.peak_mib) / max(statistics.median(base.peak_mib), 1e-9)
        goal = f" (target <= {target})" if target is not None else ""
        print(
            f"  {name:46} wall {statistics.median(wall):.3f}x ({min(wall):.3f}-"
            f"{max(wall):.3f}){goal}; peak memory {mem:.3f}x"
        )
        summary["ratios"][name] = {
            "wall_median": statistics.median(wall),
            "wall_min": min(wall),
            "wall_max": max(wall),
            "memory": mem,
            "target": target,
        }
    if a.json:
        a.json.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
