"""Step time and peak memory of the kl-patches TRL trainers against native GRPO, in one run.

Usage (the TRL venv, CPU, a few minutes):
    python benchmarks/bench_trl.py [--steps 30] [--completion-length 32]

Tiny random Qwen2 of ``kl_patches.experiments.tiny`` (policy perturbed away from the
reference), every completion forced to full length so all configurations do the same work.
Step time: one scored generation batch (TRL's ``_generate_and_score_completions``), TRL's
``_compute_loss`` and the backward -- everything the adapter touches; the optimizer and the
Trainer loop are the same for all and left out. Median over ``--steps`` steps after one warm-up,
the configurations interleaved step by step in a shuffled order so machine noise hits them
alike; the scoring and loss phases are reported apart. Peak memory:
each configuration again in a fresh child process, 3 steps, the peak resident set size
(sampled every 2 ms) above the size right before the steps (CPU: RSS, not accelerator memory).

Each step stands for a TRL training step (the scoring of a batch is followed by the loss of
that batch), so the adapter may defer k1-in-reward's penalty to the loss forward, as it does
inside ``training_step``; "extra forward (before)" switches that off: one more no-grad policy
forward per generation batch, the implementation before issue 16.

Reported ratios: patched native-equivalent k3-in-loss vs native GRPO k3 (target <= 1.01),
patched none vs native beta=0 (<= 1.01), k1-in-reward vs native k3-in-loss (<= 1.02), and the
extra-forward variant for comparison. The real-sized model: ``bench_trl_real.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "adapters" / "trl"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

CONFIGS: dict[str, tuple[bool, Any, dict[str, Any]]] = {
    "native k3-in-loss (beta=0.04)": (False, None, {"beta": 0.04}),
    "patched k3-in-loss, native-equivalent": (True, "native", {"beta": 0.04}),
    "native beta=0": (False, None, {"beta": 0.0}),
    "patched none": (True, "none", {"beta": 0.0}),
    "patched k1-in-reward (coef=0.04)": (True, "k1-in-reward", {"beta": 0.0}),
    "patched k1-in-reward, extra forward (before)": (True, "k1-before", {"beta": 0.0}),
}
RATIOS = (
    ("patched k3-in-loss, native-equivalent", "native k3-in-loss (beta=0.04)", 1.01),
    ("patched none", "native beta=0", 1.01),
    ("patched k1-in-reward (coef=0.04)", "native k3-in-loss (beta=0.04)", 1.02),
    ("patched k1-in-reward, extra forward (before)", "native k3-in-loss (beta=0.04)", None),
)


def build(name: str, model_dir: Path, out: Path, steps: int, length: int) -> Any:
    from trl_support import harness

    import kl_patches.trl as klt
    from kl_patches import KLConfig

    patched, kl, overrides = CONFIGS[name]
    args = {
        "max_steps": steps + 1,
        "learning_rate": 1e-6,
        "max_completion_length": length,
        "per_device_train_batch_size": 16,
        "generation_kwargs": {"min_new_tokens": length},
        **overrides,
    }
    if kl == "native":
        kl = klt.from_trl_config({"beta": 0.04, "max_completion_length": length})
        args["beta"] = 0.0
    elif kl in ("k1-in-reward", "k1-before"):
        kl = KLConfig(coef=0.04)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = harness.make_trainer(model_dir, out, "GRPO", patched=patched, kl=kl, **args)
    if patched:
        # a step here is a training step: the loss of the scored batch follows (see the
        # docstring); "before" keeps the extra forward
        trainer._kl_in_step = not name.endswith("(before)")
    return trainer


def one_step(trainer: Any, seed: int) -> tuple[float, float]:
    """Seconds for (one scored generation batch, the loss and its backward); no optimizer."""
    from trl_support import harness

    start = time.perf_counter()
    batch = harness.scored_batch(trainer, seed=seed, num_generations=4)
    scored = time.perf_counter()
    trainer.current_gradient_accumulation_steps = 1
    loss = trainer._compute_loss(trainer.model, batch)
    loss.backward()
    done = time.perf_counter()
    trainer.model.zero_grad(set_to_none=True)
    return scored - start, done - scored


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(name: str, model_dir: Path, steps: int, length: int) -> None:
    """Peak RSS above the pre-step baseline while ``steps`` steps of one configuration run."""
    import torch

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as out:
        trainer = build(name, model_dir, Path(out), steps, length)
        baseline = _rss_mib()
        peak = [baseline]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], _rss_mib())
                time.sleep(0.002)

        sampler = threading.Thread(target=sample)
        sampler.start()
        for step in range(steps):
            one_step(trainer, step)
        done.set()
        sampler.join()
    print(json.dumps({"peak_rss_increase_mib": peak[0] - baseline}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--completion-length", type=int, default=32)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", default=None, help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.child is not None:
        child(a.child, Path(a.model_dir), a.steps, a.completion_length)
        return 0

    import torch
    from trl_support import harness

    from kl_patches.experiments import tiny

    torch.set_num_threads(1)
    root = Path(tempfile.mkdtemp(prefix="bench-trl-"))
    model_dir = tiny.build_model_dir(root / "model")
    trainers = {}
    for name in CONFIGS:
        trainers[name] = build(name, model_dir, root / "out", a.steps, a.completion_length)
        harness.perturb(trainers[name].model)  # a policy away from the reference, for all alike
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in CONFIGS}
    order = list(trainers)
    shuffler = random.Random(0)
    for step in range(a.steps + 1):
        shuffler.shuffle(order)  # no configuration always runs first or after the same one
        for name in order:
            elapsed = one_step(trainers[name], seed=step)
            if step > 0:  # step 0 warms up
                times[name].append(elapsed)
    memory: dict[str, float] = {}
    for name in CONFIGS:
        cmd = [sys.executable, __file__, "--child", name, "--model-dir", str(model_dir)]
        cmd += ["--steps", "3", "--completion-length", str(a.completion_length)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        memory[name] = json.loads(out.strip().splitlines()[-1])["peak_rss_increase_mib"]

    print(f"tiny Qwen2, 16 completions of {a.completion_length} tokens, CPU, 1 torch thread")
    print(f"medians over {a.steps} interleaved steps (ms); peak RSS above baseline (MiB)")
    print(f"{'configuration':46} {'scoring':>9} {'loss+bwd':>9} {'total':>9} {'peak RSS':>9}")
    med: dict[str, tuple[float, float, float]] = {}
    for name, t in times.items():
        med[name] = (
            statistics.median(x for x, _ in t),
            statistics.median(y for _, y in t),
            statistics.median(x + y for x, y in t),
        )
        row = " ".join(f"{1e3 * v:9.1f}" for v in med[name])
        print(f"{name:46} {row} {memory[name]:9.1f}")
    print()
    for num, den, target in RATIOS:
        r = [med[num][i] / med[den][i] for i in range(3)]
        print(f"{num} / {den}:")
        goal = "" if target is None else f" (target <= {target})"
        print(
            f"    total {r[2]:.3f}x{goal}; scoring {r[0]:.3f}x, "
            f"loss+backward {r[1]:.3f}x; peak RSS {memory[num] / memory[den]:.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
