"""Step time and peak memory of the kl-patches GRPO trainer on a real-sized model, against native.

Usage (the TRL venv, CPU; about 30 minutes with the defaults on a quiet 2-core machine):
    python benchmarks/bench_trl_real.py [--rounds 4] [--attribution-rounds 30]
                                        [--completion-length 512] [--threads 2]
    python benchmarks/bench_trl_real.py --layers 1 --rounds 1 --attribution-rounds 3
                                        --completion-length 32   # a quick smoke run

The model has the published shape of a 0.5B Qwen2-family model (Qwen2.5-0.5B: vocabulary
151,936, 24 layers, width 896, MLP 4,864, 14 query / 2 key-value heads, tied embeddings),
built from its configuration with random weights (no download), float32. The policy is that
model with a small perturbation, the reference is the unperturbed copy; both are shared by
all the trainers (TRL would load one reference per trainer: the memory of this machine holds
one), so every configuration runs on the same weights.

A step is one full GRPO step through TRL's own code: ``trainer.training_step`` (scoring: the
reference forward and any policy forward TRL or the adapter needs; the loss forward with
TRL's entropy; the backward), gradient clipping at 1.0, an SGD update, zeroing the gradients.
Generation is not timed work: a ``rollout_func`` hands every configuration the same random
completions of exactly ``--completion-length`` tokens (CPU sampling from a 0.5B model would
take longer than the training step; in real runs a vLLM engine samples). Leaving it out makes
every ratio below an upper bound of the overhead as a share of a real step.

Configurations: native TRL k3-in-loss (beta=0.04); a second native trainer of the same
configuration (the A/A control: its ratio to native is what this machine's noise alone gives,
the floor under which no ratio here means anything); the patched trainer running the
native-equivalent k3-in-loss; patched none; patched k1-in-reward (coef=0.04; TRL computes no
old log-probs on-policy, so its penalty is deferred to the loss forward); the same with the
deferral switched off, i.e. one extra no-grad policy forward (the implementation before issue
16); patched k3-in-both. Time: each round runs every configuration once, in a shuffled order,
after one untimed warm-up round of short steps and one untimed full-length step (the
allocator then holds buffers of the timed size before the first timed step); ratios are per
round (the configurations of a round ran within minutes of each other), reported as the
median and min-max over rounds,
for the wall time and for the process CPU time (user + system, all threads; idle OpenMP
threads sleep): on a machine shared with other jobs the wall time of one step swings by
several times with their load, its CPU time far less, so the CPU-time ratio is the figure.
Attribution (``--attribution-rounds``, default 30, run first): one real-sized step takes about
a minute of CPU time here and the same work measured twice differs by 10% or more, so a 1-2%
target cannot be resolved from a few real-sized rounds. Where a configuration runs exactly
native's forwards (counted at every step), the model's work is the same in both, and what
differs is the code around the model (TRL's and the adapter's, on the same [B, T] tensors),
which does not grow with the model. The same trainers, batch and lengths therefore run again
on a Qwen2 of one small layer and a small vocabulary, where a step takes a fraction of a
second and many rounds fit: the extra CPU time per step against native (median and min-max
over rounds, with the A/A control beside it), divided by the real-sized native step, is the
real-sized ratio it implies. Configurations with other forwards than native get no implied
ratio (their model work differs).

Memory: the peak resident set size above the size before the step (sampled every 5 ms; freed
heap handed back with malloc_trim first), median over rounds. Forwards per step are counted
(the adapter's counters; a counting wrapper for native TRL) and must be what each path says.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
# idle OpenMP threads sleep instead of spinning, so process CPU time counts work, not waiting
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import targets

QWEN2_0_5B = {
    "vocab_size": 151936,
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
}
"""The published configuration of Qwen2.5-0.5B (its config.json), minus the weights."""

BETA = 0.04
"""Native TRL's beta and every patched coefficient."""


@dataclass
class Config:
    """One benchmarked configuration."""

    name: str
    """Row label."""
    patched: bool
    """The kl-patches trainer (True) or TRL's own GRPOTrainer."""
    kl: Any
    """The KL config of a patched trainer (None for native)."""
    beta: float
    """TRL's beta argument."""
    forwards: dict[str, int]
    """Expected model forwards per step: policy and reference."""
    defer: bool = True
    """False switches the adapter's deferral off (the extra forward)."""


def configs() -> list[Config]:
    """The benchmarked configurations, in report order."""
    import kl_patches.trl as klt
    from kl_patches import KLConfig

    native_eq = klt.from_trl_config({"beta": BETA})
    one_each = {"policy": 1, "reference": 1}
    return [
        Config("native k3-in-loss (beta=0.04)", False, None, BETA, one_each),
        Config(AA_CONTROL, False, None, BETA, one_each),
        Config("patched k3-in-loss, native-equivalent", True, native_eq, 0.0, one_each),
        Config("patched none", True, "none", 0.0, {"policy": 1}),
        Config("patched k1-in-reward (coef=0.04)", True, KLConfig(coef=BETA), 0.0, one_each),
        Config(
            "patched k1-in-reward, extra forward (before)",
            True,
            KLConfig(coef=BETA),
            0.0,
            {"policy": 2, "reference": 1},
            defer=False,
        ),
        Config(
            "patched k3-in-both (coef=0.04)",
            True,
            KLConfig(estimator="k3", placement="both", coef=BETA),
            0.0,
            one_each,
        ),
    ]


AA_CONTROL = "native k3-in-loss again (A/A control)"
"""A second native trainer of the same configuration: its ratio to native is the noise floor."""

RATIOS = (
    (AA_CONTROL, None),
    ("patched k3-in-loss, native-equivalent", 1.01),
    ("patched k1-in-reward (coef=0.04)", 1.02),
    ("patched k1-in-reward, extra forward (before)", None),
    ("patched k3-in-both (coef=0.04)", None),
    ("patched none", None),
)
"""Configurations reported against native k3-in-loss, with the issue's target (None: none)."""
BASELINE = "native k3-in-loss (beta=0.04)"


# ------------------------------------------------------------------------------ model and data
def build_tokenizer(vocab_size: int) -> Any:
    """A word-level tokenizer over ``vocab_size`` ids (``t<id>``): decodes any sampled id."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, **{f"t{i}": i for i in range(2, vocab_size)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", padding_side="left"
    )


def build_model_dir(path: Path, shape: dict[str, Any]) -> Path:
    """Save the random-init model of ``shape`` (and its tokenizer) once; TRL reads the config
    from it."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = build_tokenizer(shape["vocab_size"])
    config = Qwen2Config(
        **shape,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
    )
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def reward(completions: list[str], **_: Any) -> list[float]:
    """Toy task reward: the share of even token ids in the completion."""
    out = []
    for text in completions:
        ids = [int(w[1:]) for w in text.split() if w.startswith("t")]
        out.append(sum(i % 2 == 0 for i in ids) / max(len(ids), 1))
    return out


ROLLOUT_SEED = [0]
"""The seed of the next rollout (set per round, so all configurations get the same tokens)."""


def make_rollout(prompt_length: int, completion_length: int, vocab: int) -> Callable[..., Any]:
    """TRL ``rollout_func``: the same random prompt and completion ids for a given seed."""
    import torch

    def rollout(prompts: list[str], trainer: Any) -> dict[str, Any]:
        gen = torch.Generator().manual_seed(ROLLOUT_SEED[0])
        distinct = sorted(set(prompts))
        prompt_of = {
            p: torch.randint(2, vocab, (prompt_length,), generator=gen).tolist() for p in distinct
        }
        completions = torch.randint(2, vocab, (len(prompts), completion_length), generator=gen)
        return {
            "prompt_ids": [prompt_of[p] for p in prompts],
            "completion_ids": completions.tolist(),
            "logprobs": [[0.0] * completion_length for _ in prompts],
        }

    return rollout


# ------------------------------------------------------------------------------ trainers
@dataclass
class Runner:
    """A trainer of one configuration and what it measured."""

    config: Config
    trainer: Any
    optimizer: Any
    counts: Callable[[], dict[str, int]]
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    peak_mib: list[float] = field(default_factory=list)
    forwards: list[dict[str, int]] = field(default_factory=list)


def _native_counter(trainer: Any) -> Callable[[], dict[str, int]]:
    counts = {"policy": 0, "reference": 0}
    original = trainer._get_per_token_logps_and_entropies

    def counting(model: Any, *args: Any, **kwargs: Any) -> Any:
        counts["reference" if model is trainer.ref_model else "policy"] += 1
        return original(model, *args, **kwargs)

    trainer._get_per_token_logps_and_entropies = counting
    return lambda: dict(counts)


def build_runner(
    config: Config, policy: Any, ref: Any, vocab: int, out: Path, a: argparse.Namespace
) -> Runner:
    """The trainer of ``config`` on the shared policy and reference models."""
    import torch
    import trl
    import trl.trainer.grpo_trainer as grpo_module

    import kl_patches.trl as klt
    from kl_patches.adapters.trl import hooks

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
        bf16=False,
        fp16=False,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        seed=0,
    )
    kwargs: dict[str, Any] = {
        "args": args,
        "train_dataset": _dataset(a.prompts),
        "processing_class": build_tokenizer(vocab),
        "rollout_func": make_rollout(a.prompt_length, a.completion_length, vocab),
    }
    original = grpo_module.create_model_from_path
    grpo_module.create_model_from_path = lambda *_, **__: ref  # share the reference model
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if config.patched:
                trainer = klt.GRPOTrainer(policy, reward, kl=config.kl, **kwargs)
            else:
                trainer = trl.GRPOTrainer(policy, reward, **kwargs)
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
        counts = _native_counter(trainer)
    trainer.current_gradient_accumulation_steps = 1
    optimizer = torch.optim.SGD(policy.parameters(), lr=args.learning_rate)
    return Runner(config, trainer, optimizer, counts)


def _dataset(prompts: int) -> Any:
    from datasets import Dataset

    return Dataset.from_dict({"prompt": [f"p{i}" for i in range(prompts)]})


def _no_defer_hook() -> None:
    """Let a trainer opt out of the deferral (the 'before' configuration)."""
    from kl_patches.adapters.trl import hooks

    original = hooks._no_defer_reason

    def reason(trainer: Any) -> str | None:
        if trainer.__dict__.get("_kl_no_defer"):
            return "switched off by the benchmark (the implementation before issue 16)"
        return original(trainer)

    hooks._no_defer_reason = reason


# ------------------------------------------------------------------------------ one step
def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _trim() -> None:
    gc.collect()
    with contextlib.suppress(OSError):  # not glibc: RSS then includes freed heap
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def step(runner: Runner, inputs: list[dict[str, str]], measure: bool) -> None:
    """One full GRPO step of ``runner``; with ``measure``, its time, peak RSS and forwards."""
    import torch

    trainer = runner.trainer
    params = [p for p in trainer.model.parameters() if p.requires_grad]
    _trim()
    before_counts = runner.counts()
    baseline = _rss_mib()
    peak = [baseline]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss_mib())
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start, cpu_start = time.perf_counter(), time.process_time()
    trainer.training_step(trainer.model, inputs, None)
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    runner.optimizer.step()
    trainer.model.zero_grad(set_to_none=True)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    done.set()
    sampler.join()
    if measure:
        after = runner.counts()
        runner.seconds.append(elapsed)
        runner.cpu.append(cpu)
        runner.peak_mib.append(peak[0] - baseline)
        runner.forwards.append({k: after.get(k, 0) - before_counts.get(k, 0) for k in after})


# ------------------------------------------------------------------------------ main
SMALL = {
    **QWEN2_0_5B,
    "vocab_size": 1024,
    "hidden_size": 64,
    "intermediate_size": 256,
    "num_hidden_layers": 1,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
}
"""The attribution model: Qwen2 code with one small layer and a small vocabulary."""


@dataclass
class Measured:
    """The runners of one model after their rounds."""

    runners: list[Runner]
    n_params: int
    shape: dict[str, Any]
    seconds: float


def measure(shape: dict[str, Any], rounds: int, a: argparse.Namespace, root: Path) -> Measured:
    """Build policy and reference of ``shape``, one trainer per configuration, warm up, run
    ``rounds`` shuffled rounds and check every step's forward counts."""
    import torch
    from transformers import AutoModelForCausalLM

    started = time.monotonic()
    model_dir = build_model_dir(root / f"model-{shape['num_hidden_layers']}", shape)
    ref = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    policy = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in policy.parameters():  # a policy away from the reference: the KL is not 0
            p.add_(1e-3 * torch.randn(p.shape, generator=gen))
    ref.eval()
    n_params = sum(p.numel() for p in policy.parameters())
    vocab = shape["vocab_size"]
    runners = [build_runner(c, policy, ref, vocab, root / "out", a) for c in configs()]
    inputs = [{"prompt": f"p{i}"} for i in range(a.prompts) for _ in range(a.generations)]

    # warm-up: every configuration once, short completions (allocator, first-call paths)
    for runner in runners:
        set_length(runner, a.warmup_length, a, vocab)
        ROLLOUT_SEED[0] = 10_000
        step(runner, inputs, measure=False)
        set_length(runner, a.completion_length, a, vocab)
    ROLLOUT_SEED[0] = 10_001
    step(runners[0], inputs, measure=False)  # full length, once
    shuffler = random.Random(a.seed)
    order = list(range(len(runners)))
    for r in range(rounds):
        shuffler.shuffle(order)
        for i in order:
            ROLLOUT_SEED[0] = r
            step(runners[i], inputs, measure=True)
            print(
                f"[{shape['num_hidden_layers']} layers, round {r}] {runners[i].config.name}: "
                f"{runners[i].seconds[-1]:.2f} s, CPU {runners[i].cpu[-1]:.2f} s",
                file=sys.stderr,
                flush=True,
            )
    for runner in runners:
        for seen in runner.forwards:
            if seen != runner.config.forwards:
                raise RuntimeError(
                    f"{runner.config.name}: forwards per step {seen}, expected "
                    f"{runner.config.forwards}"
                )
    for runner in runners:  # free the trainers before the next model is built
        runner.trainer = runner.optimizer = None
    del policy, ref
    _trim()
    return Measured(runners, n_params, shape, time.monotonic() - started)


def main() -> int:
    """Attribution run on the small model, then the real-sized run; print the report."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="timed rounds (each config once)")
    parser.add_argument(
        "--attribution-rounds",
        type=int,
        default=30,
        help="rounds on the small model that attributes the extra CPU time (0: none)",
    )
    parser.add_argument("--prompts", type=int, default=2, help="groups per batch")
    parser.add_argument("--generations", type=int, default=2, help="completions per group")
    parser.add_argument("--prompt-length", type=int, default=16)
    parser.add_argument("--completion-length", type=int, default=512)
    parser.add_argument("--warmup-length", type=int, default=16, help="tokens in warm-up steps")
    parser.add_argument("--layers", type=int, default=24, help="fewer only for a smoke run")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="also print one JSON summary line")
    a = parser.parse_args()

    import torch
    import transformers
    import trl

    torch.set_num_threads(a.threads)
    started = time.monotonic()
    _no_defer_hook()
    root = Path(tempfile.mkdtemp(prefix="bench-trl-real-"))
    small = measure(SMALL, a.attribution_rounds, a, root) if a.attribution_rounds else None
    real = measure({**QWEN2_0_5B, "num_hidden_layers": a.layers}, a.rounds, a, root)
    report(real, small, a, time.monotonic() - started, transformers, trl, torch)
    return 0


def set_length(runner: Runner, length: int, a: argparse.Namespace, vocab: int) -> None:
    """Make ``runner``'s rollouts ``length`` tokens long."""
    runner.trainer.max_completion_length = length
    runner.trainer.rollout_func = make_rollout(a.prompt_length, length, vocab)


def report(
    real: Measured,
    small: Measured | None,
    a: argparse.Namespace,
    total: float,
    transformers: Any,
    trl: Any,
    torch: Any,
) -> None:
    """Print the tables (and, with --json, one summary line)."""
    runners = real.runners
    by_name = {r.config.name: r for r in runners}
    base = by_name[BASELINE]
    batch = a.prompts * a.generations
    print(f"run of {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC")
    print(
        f"Qwen2-0.5B shape ({real.n_params / 1e6:.0f}M parameters, {a.layers} layers, "
        f"vocabulary {QWEN2_0_5B['vocab_size']}), random init, float32, CPU "
        f"({platform.machine()}, {os.cpu_count()} cores, {a.threads} torch threads; shared "
        "machine)"
    )
    print(
        f"TRL {trl.__version__}, transformers {transformers.__version__}, torch "
        f"{torch.__version__}; {a.prompts} groups x {a.generations} completions = {batch} "
        f"sequences of {a.prompt_length} + {a.completion_length} tokens; one step = TRL "
        "training_step + clip + SGD update (generation replaced by fixed random completions)"
    )
    print(
        f"{a.rounds} timed rounds (each configuration once per round, shuffled order) after one "
        f"warm-up round; real-sized part {real.seconds / 60:.1f} min, whole run "
        f"{total / 60:.1f} min"
    )
    print()
    print(
        f"{'configuration':46}{'wall s':>8}{'min-max':>14}{'CPU s':>8}{'min-max':>14}"
        f"{'peak RSS MiB':>14}  forwards/step"
    )
    for r in runners:
        fw = ", ".join(f"{k} {v}" for k, v in sorted(r.forwards[-1].items()) if v)
        print(
            f"{r.config.name:46}{statistics.median(r.seconds):8.1f}"
            f"{min(r.seconds):7.1f}-{max(r.seconds):<6.1f}{statistics.median(r.cpu):8.1f}"
            f"{min(r.cpu):7.1f}-{max(r.cpu):<6.1f}{statistics.median(r.peak_mib):14.0f}  {fw}"
        )
    print()
    print(f"ratios to {BASELINE}, per round: median (min-max over {a.rounds} rounds)")
    summary: dict[str, Any] = {"rounds": a.rounds, "ratios": {}}
    for name, target in RATIOS:
        r = by_name[name]
        cpu = [x / y for x, y in zip(r.cpu, base.cpu, strict=True)]
        wall = [x / y for x, y in zip(r.seconds, base.seconds, strict=True)]
        mem = statistics.median(r.peak_mib) / max(statistics.median(base.peak_mib), 1e-9)
        goal = f" (target <= {target})" if target is not None else ""
        print(
            f"  {name:46} CPU time {statistics.median(cpu):.3f}x ({min(cpu):.3f}-"
            f"{max(cpu):.3f}){goal}; wall {statistics.median(wall):.3f}x ({min(wall):.3f}-"
            f"{max(wall):.3f}); peak RSS {mem:.2f}x"
        )
        if target is not None:
            targets.emit(
                "bench_trl_real.py",
                f"TRL real-sized step: {name} / {BASELINE}",
                statistics.median(cpu),
                min(cpu),
                max(cpu),
                target,
                mem,
                f"process CPU time per step, {a.rounds} rounds",
            )
        summary["ratios"][name] = {
            "cpu_median": statistics.median(cpu),
            "cpu_min": min(cpu),
            "cpu_max": max(cpu),
            "wall_median": statistics.median(wall),
            "memory": mem,
            "target": target,
        }
    if small is not None:
        summary["attributed"] = attribution(small, real)
    if a.json:
        print(json.dumps(summary))


def attribution(small: Measured, real: Measured) -> dict[str, Any]:
    """Print the extra CPU time per step measured on the small model, and what it is as a
    share of the real-sized native step; returns the figures."""
    by_name = {r.config.name: r for r in small.runners}
    base = by_name[BASELINE]
    real_base = statistics.median({r.config.name: r for r in real.runners}[BASELINE].cpu)
    rounds = len(base.cpu)
    print()
    print(
        f"attribution: the same {len(small.runners)} trainers, batch and lengths on a Qwen2 of "
        f"{small.shape['num_hidden_layers']} layer, width {small.shape['hidden_size']}, "
        f"vocabulary {small.shape['vocab_size']} ({small.n_params / 1e6:.2f}M parameters), "
        f"{rounds} shuffled rounds, {small.seconds:.0f} s. Where a configuration runs the "
        "same forwards as native (counted), the model's work is the same in both and the "
        "difference is the code around it (TRL's and the adapter's, on the same [B, T] "
        "tensors); its extra CPU time per step does not grow with the model, so the real-sized "
        "ratio is 1 + extra / native real-sized CPU time per step "
        f"({real_base:.1f} s, measured above)."
    )
    print(
        f"  native CPU time per step on this model: {statistics.median(base.cpu) * 1e3:.1f} ms "
        f"({min(base.cpu) * 1e3:.1f}-{max(base.cpu) * 1e3:.1f})"
    )
    out: dict[str, Any] = {}
    for name, target in RATIOS:
        r = by_name[name]
        extra = [(x - y) * 1e3 for x, y in zip(r.cpu, base.cpu, strict=True)]
        med = statistics.median(extra)
        goal = f" (target <= {target})" if target is not None else ""
        if r.config.forwards != base.config.forwards:
            implied = "n/a: other forwards than native, model work differs"
            out[name] = {"extra_ms": med, "implied": None}
        else:
            ratio = 1 + med / 1e3 / real_base
            hi = 1 + max(extra) / 1e3 / real_base
            implied = f"real-sized {ratio:.5f}x (largest round {hi:.5f}x){goal}"
            out[name] = {"extra_ms": med, "implied": ratio, "implied_max": hi, "target": target}
        print(
            f"  {name:46} extra CPU {med:+7.1f} ms ({min(extra):+.1f} to {max(extra):+.1f}); "
            f"{implied}"
        )
    return out


if __name__ == "__main__":
    sys.exit(main())
