"""Time and peak memory of verl 0.9.1's KL functions, native vs wrapped by the kl-patches patch.

Usage (the verl venv, CPU, about two minutes):
    python benchmarks/bench_verl.py [--batch 64] [--reward-batches 512] [--length 1024]
                                    [--rounds 8] [--inner 8]

verl cannot run a training step on CPU, so this times the three functions the patch wraps, with
verl's composed config for each case (``to_overrides`` on verl's defaults, GRPO, groups of 8), on
random log-probs of ``--batch`` responses of up to ``--length`` tokens (ragged, float32):

* reward path: ``ray_trainer.apply_kl_penalty`` then ``ray_trainer.compute_advantage`` (GRPO),
  also at the ``--reward-batches`` sizes (verl's GRPO loops over rows in Python, so the patch's
  fixed number of extra tensor operations weighs less on a larger batch; real batches are
  train_batch_size x rollout.n rows, thousands);
* loss: ``workers.utils.losses.ppo_loss`` and its backward, the whole batch as one micro-batch
  normalised by the global token and sequence counts, as verl's engine does.

Each case pairs a patched call with its native baseline. The patched call goes through verl's
module attributes after ``apply(spec)``: for a config verl expresses natively the wrappers hand
over to verl's originals (expect ~1.0x); for a config only the patch runs the estimator name is
``kl_patches`` and the KL comes from ``kl_patches.core``. The native call runs verl's original
functions, captured before any ``apply`` (the same objects ``revert`` puts back: checked).

Time: on this shared 2-core VM the speed drifts by up to 1.5x for seconds at a time, so the two
calls of a pair alternate (shuffled) within one visit of the case and the ratio compares samples
taken side by side. ``--rounds`` visits per case (cases in a shuffled order; ``apply`` and one
untimed warm-up call of each side at the start of a visit) x ``--inner`` pairs per visit; inputs
are built before the timer; Python's garbage collector is off inside the timer (as in timeit),
with a collection at the start of each visit. One torch thread. Each call is timed by the
thread's CPU time (``time.thread_time``: what the call computed, less exposed to the other jobs
of a shared machine) and by the wall clock. The ratio is per pair (patched / native of the same
inner step), reported as the median over all pairs with its min-max; the ms columns are medians
of the CPU time.

Memory: one more call per side under ``torch.profiler`` (``profile_memory=True``), natives with
the patch reverted: the peak of bytes held by torch's CPU allocator above its level at the start
of the call (tensor memory only; numpy arrays and Python objects are not counted).

Checks, not timed: every call runs the path it names (``kl_patches/active`` in the metrics of the
marker calls only); the native-equivalent marker loss equals verl's loss and gradient to 1e-6.
The patch is reverted at the end.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import random
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "adapters" / "verl")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import alloc  # noqa: E402  (benchmarks/alloc.py: this script's folder is on sys.path)
import targets  # noqa: E402  (benchmarks/targets.py)

GROUP = 8
"""Responses per prompt (verl's ``rollout.n``), the GRPO group."""
COEF = 0.1
"""KL coefficient of every case."""
TARGET = 1.10
"""Issue 16's bound on every patched / native ratio here (CPU time, median over the pairs)."""
ORIGINALS: dict[str, Any] = {}
"""verl's original ``apply_kl_penalty``, ``compute_advantage`` and ``ppo_loss`` (unpatched)."""


@dataclass
class Run:
    """One side of a pair: builds inputs, returns the call to time (which returns metrics)."""

    label: str
    """Row label of this side."""
    prepare: Callable[[], Callable[[], dict[str, Any]]]
    """Builds fresh inputs (untimed) and returns the call to time."""
    marker: bool
    """True when the call must go through the kl-patches estimator (``kl_patches/active``)."""


@dataclass
class Case:
    """A patched call and its native baseline, timed side by side."""

    part: str
    """``reward`` (apply_kl_penalty + compute_advantage) or ``loss`` (ppo_loss + backward)."""
    spec: Any
    """The PatchSpec applied while the pair runs."""
    patched: Run
    """Through verl's module attributes, i.e. the patch's wrappers."""
    native: Run
    """verl's original functions."""


def verl_fn(name: str, native: bool) -> Any:
    """verl's original function ``name``, or whatever verl's module holds now (the wrapper)."""
    if native:
        return ORIGINALS[name]
    from verl.trainer.ppo import ray_trainer
    from verl.workers.utils import losses

    return getattr(losses if name == "ppo_loss" else ray_trainer, name)


def capture_originals() -> None:
    """Record verl's functions with no patch active; they are the native side of every pair."""
    from verl.trainer.ppo import ray_trainer
    from verl.workers.utils import losses

    from kl_patches.adapters import verl as kv
    from kl_patches.adapters.verl import patch

    kv.revert()
    ORIGINALS.update(
        apply_kl_penalty=ray_trainer.apply_kl_penalty,
        compute_advantage=ray_trainer.compute_advantage,
        ppo_loss=losses.ppo_loss,
    )
    wrappers = {getattr(patch, name) for name in patch.SOURCES.values()}
    if kv.active() is not None or wrappers & set(ORIGINALS.values()):
        raise RuntimeError("the verl patch was active when the originals were captured")


def check_originals_restored() -> None:
    """After revert, verl's modules hold exactly the functions the native side ran."""
    for name, original in ORIGINALS.items():
        if verl_fn(name, native=False) is not original:
            raise RuntimeError(f"revert() did not restore verl's {name}")


def verl_config(config: Any, *, kl_outside_std: bool = False) -> Any:
    """verl's composed default config with ``to_overrides(config)``, GRPO, groups of 8."""
    from verl_support.configs import overlay

    from kl_patches.adapters import verl as kv

    return overlay(
        [
            *kv.to_overrides(config, kl_outside_std=kl_outside_std),
            "algorithm.adv_estimator=grpo",
            f"actor_rollout_ref.rollout.n={GROUP}",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
        ]
    )


def requested_spec(cfg: Any) -> Any:
    """The PatchSpec a verl config asks every process to apply (None: native)."""
    from kl_patches.adapters.verl import translate

    return translate.patch_spec_of(translate.settings_of(cfg))


def reward_run(label: str, rollout: Any, cfg: Any, *, native: bool) -> Run:
    """verl's reward path for ``cfg``: apply_kl_penalty, then GRPO's compute_advantage."""
    from verl.trainer.ppo import core_algos
    from verl_support.batches import to_dataproto

    from kl_patches.adapters.verl.versions import MARKER

    algo = cfg.algorithm
    if not algo.use_kl_in_reward:
        raise ValueError(f"{label}: the config has no reward side")

    def prepare() -> Callable[[], dict[str, Any]]:
        data = to_dataproto(rollout)
        kl_ctrl = core_algos.get_kl_controller(algo.kl_ctrl)

        def call() -> dict[str, Any]:
            penalize = verl_fn("apply_kl_penalty", native)
            out, metrics = penalize(data, kl_ctrl, kl_penalty=algo.kl_penalty)
            verl_fn("compute_advantage", native)(
                out,
                adv_estimator=algo.adv_estimator,
                gamma=algo.gamma,
                lam=algo.lam,
                num_repeat=GROUP,
                norm_adv_by_std_in_grpo=algo.norm_adv_by_std_in_grpo,
                config=algo,
            )
            return metrics

        return call

    return Run(label, prepare, marker=algo.kl_penalty == MARKER)


def loss_run(label: str, rollout: Any, advantages: Any, actor: Any, *, native: bool) -> Run:
    """verl's ppo_loss and its backward with the actor config ``actor``."""
    from verl_support.batches import ppo_loss_inputs

    from kl_patches.adapters.verl.versions import MARKER

    def prepare() -> Callable[[], dict[str, Any]]:
        rollout.logp.grad = None
        model_output, data = ppo_loss_inputs(rollout, advantages)

        def call() -> dict[str, Any]:
            loss, metrics = verl_fn("ppo_loss", native)(actor, model_output, data)
            loss.backward()
            LAST[label] = (loss.detach(), rollout.logp.grad)
            return metrics

        return call

    return Run(label, prepare, marker=actor.kl_loss_type == MARKER)


LAST: dict[str, tuple[Any, Any]] = {}
"""Loss label -> (loss, gradient) of its latest call."""


def actor_of(cfg: Any) -> Any:
    """verl's ActorConfig dataclass as the worker builds it from the composed config."""
    from verl.utils.config import omega_conf_to_dataclass

    return omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)


def reward_cases(rollout: Any, suffix: str = "") -> list[Case]:
    """The reward-path pairs on ``rollout`` (``suffix`` appended to every label)."""
    from kl_patches.adapters import verl as kv
    from kl_patches.adapters.verl.versions import MARKER
    from kl_patches.config import KLConfig

    cases: list[Case] = []
    native_reward = {}
    for est in ("k1", "k2", "k3"):
        cfg = verl_config(KLConfig(estimator=est, placement="reward", coef=COEF))
        if requested_spec(cfg) is not None:
            raise RuntimeError(f"to_overrides asks for the patch for native {est}-in-reward")
        label = f"{est} (kl_penalty={cfg.algorithm.kl_penalty}){suffix}"
        native_reward[est] = (cfg, reward_run(label, rollout, cfg, native=True))
    k1_reward = KLConfig(estimator="k1", placement="reward", coef=COEF)
    k1_cfg, k1_native = native_reward["k1"]
    label = f"apply(k1 reward), native config{suffix}"
    passthrough = reward_run(label, rollout, k1_cfg, native=False)
    cases.append(Case("reward", kv.PatchSpec(k1_reward), passthrough, k1_native))
    for label, config, outside, est in (
        ("k1 reward, KL outside GRPO std", k1_reward, True, "k1"),
        (
            "k2 reward, sequence granularity",
            KLConfig(estimator="k2", placement="reward", coef=COEF, granularity="sequence"),
            False,
            "k2",
        ),
        (
            "k3 both (sum, IS loss): reward side",
            KLConfig(estimator="k3", placement="both", coef=COEF, importance_weighting="token"),
            False,
            "k3",
        ),
    ):
        cfg = verl_config(config, kl_outside_std=outside)
        spec = requested_spec(cfg)
        if spec is None or cfg.algorithm.kl_penalty != MARKER:
            raise RuntimeError(f"{label}: to_overrides did not select the patch")
        run = reward_run(label + suffix, rollout, cfg, native=False)
        cases.append(Case("reward", spec, run, native_reward[est][1]))
    return cases


def build_cases(batch: int, length: int, reward_batches: tuple[int, ...] = ()) -> list[Case]:
    """The reward-path pairs (at ``batch`` and at each of ``reward_batches``) and the loss
    pairs (at ``batch``)."""
    import torch
    from verl_support.batches import make_rollout

    from kl_patches.adapters import verl as kv
    from kl_patches.adapters.verl.versions import MARKER
    from kl_patches.config import KLConfig

    rollout = make_rollout(batch=batch, length=length, group=GROUP, seed=0)
    cases = reward_cases(rollout)
    for size in reward_batches:
        big = make_rollout(batch=size, length=length, group=GROUP, seed=0)
        cases += reward_cases(big, f" [B={size}]")

    # (b) loss
    advantages = torch.randn(rollout.mask.shape, generator=torch.Generator().manual_seed(1))
    k3_loss = KLConfig(estimator="k3", placement="loss", coef=COEF, loss_aggregation="token_mean")
    k3_cfg = verl_config(k3_loss)
    k3_actor = actor_of(k3_cfg)
    if k3_actor.kl_loss_type == MARKER:
        raise RuntimeError("to_overrides asks for the patch for native k3-in-loss token-mean")
    label = f"k3 {k3_actor.loss_agg_mode} (kl_loss_type={k3_actor.kl_loss_type})"
    k3_native = loss_run(label, rollout, advantages, k3_actor, native=True)
    passthrough = loss_run(
        "apply(k3 loss token-mean), native config", rollout, advantages, k3_actor, native=False
    )
    cases.append(Case("loss", kv.PatchSpec(k3_loss), passthrough, k3_native))
    # The same KL through the core: verl's numerics as read back (its k3 clamps), marker name.
    marker_actor = dataclasses.replace(k3_actor, kl_loss_type=MARKER)
    label = "k3 loss token-mean via core (= native)"
    core_k3 = loss_run(label, rollout, advantages, marker_actor, native=False)
    cases.append(Case("loss", kv.PatchSpec(kv.from_config(k3_cfg)), core_k3, k3_native))

    k2_config = KLConfig(estimator="k2", placement="loss", coef=COEF)
    k2_actor = actor_of(verl_config(k2_config))
    label = f"k2 {k2_actor.loss_agg_mode} (kl_loss_type={k2_actor.kl_loss_type})"
    k2_native = loss_run(label, rollout, advantages, k2_actor, native=True)
    k2_seq_cfg = verl_config(k2_config.replace(granularity="sequence"))
    k2_seq_actor = actor_of(k2_seq_cfg)
    if k2_seq_actor.kl_loss_type != MARKER or k2_seq_actor.loss_agg_mode != k2_actor.loss_agg_mode:
        raise RuntimeError("to_overrides did not select the patch for sequence-level k2")
    run = loss_run("k2 loss, sequence granularity", rollout, advantages, k2_seq_actor, native=False)
    cases.append(Case("loss", requested_spec(k2_seq_cfg), run, k2_native))
    return cases


def check_path(run: Run, metrics: dict[str, Any]) -> None:
    """Fail loudly when a call did not run the path it names."""
    ran_marker = metrics.get("kl_patches/active") == 1.0
    if ran_marker != run.marker:
        raise RuntimeError(f"{run.label}: kl_patches/active={ran_marker}, expected {run.marker}")


def peak_mib(run: Run) -> float:
    """Peak torch CPU-allocator MiB above the start of one call (``alloc.peak_mib``)."""
    call = run.prepare()
    return alloc.peak_mib(lambda: check_path(run, call()), run.label)


def timed(run: Run) -> tuple[float, float]:
    """(thread CPU seconds, wall seconds) of one call on fresh inputs, garbage collector off."""
    call = run.prepare()
    gc.disable()
    try:
        start, cpu_start = time.perf_counter(), time.thread_time()
        call()
        return time.thread_time() - cpu_start, time.perf_counter() - start
    finally:
        gc.enable()


Samples = tuple[list[tuple[float, float]], list[tuple[float, float]]]
"""Per case: the native and the patched calls' (CPU s, wall s), index k of both from one pair."""


def measure(
    cases: list[Case], rounds: int, inner: int, seed: int
) -> tuple[list[Samples], list[tuple[float, float]]]:
    """Per case: the timed pairs (:data:`Samples`) and (native MiB, patched MiB)."""
    from kl_patches.adapters import verl as kv

    times: list[Samples] = [([], []) for _ in cases]
    shuffler = random.Random(seed)
    order = list(range(len(cases)))
    for _ in range(rounds):
        shuffler.shuffle(order)
        for i in order:
            case = cases[i]
            kv.apply(case.spec)  # raises unless every loaded verl module holds the wrappers
            for run in (case.native, case.patched):  # warm-up and path check
                check_path(run, run.prepare()())
            gc.collect()
            for _ in range(inner):
                sides = [0, 1]
                shuffler.shuffle(sides)
                for side in sides:
                    times[i][side].append(timed((case.native, case.patched)[side]))
    kv.revert()
    native_mib = [peak_mib(case.native) for case in cases]
    patched_mib = []
    for case in cases:
        kv.apply(case.spec)
        patched_mib.append(peak_mib(case.patched))
    kv.revert()
    return times, list(zip(native_mib, patched_mib, strict=True))


def pair_ratios(samples: Samples, which: int) -> list[float]:
    """Patched / native of each pair; ``which`` 0 is the CPU time, 1 the wall time."""
    native, patched = samples
    return [p[which] / n[which] for n, p in zip(native, patched, strict=True)]


def report(
    cases: list[Case],
    times: list[Samples],
    memory: list[tuple[float, float]],
) -> None:
    """The table of medians, pair ratios with their spread, peaks and memory ratios."""
    titles = {
        "reward": "(a) reward path: apply_kl_penalty + compute_advantage (GRPO)",
        "loss": "(b) ppo_loss + backward (one micro-batch, global token/sequence counts)",
    }
    wide = max(len(c.patched.label) for c in cases) + 2
    wide_native = max(len(c.native.label) for c in cases) + 2
    for part, title in titles.items():
        print(title)
        print(
            f"{'patched call':{wide}}{'native baseline':{wide_native}}{'native ms':>10}"
            f"{'patched ms':>11}{'CPU time (min-max)':>25}{'wall':>8}{'native MiB':>11}"
            f"{'patched MiB':>12}{'memory':>8}"
        )
        for case, samples, (native_m, patched_m) in zip(cases, times, memory, strict=True):
            if case.part != part:
                continue
            n = statistics.median(x[0] for x in samples[0])
            p = statistics.median(x[0] for x in samples[1])
            cpu, wall = pair_ratios(samples, 0), pair_ratios(samples, 1)
            spread = f"{statistics.median(cpu):.2f}x ({min(cpu):.2f}-{max(cpu):.2f})"
            print(
                f"{case.patched.label:{wide}}{case.native.label:{wide_native}}{1e3 * n:10.2f}"
                f"{1e3 * p:11.2f}{spread:>25}{statistics.median(wall):7.2f}x{native_m:11.2f}"
                f"{patched_m:12.2f}{patched_m / native_m:7.2f}x"
            )
            targets.emit(
                "bench_verl.py",
                f"verl {case.patched.label} / {case.native.label}",
                statistics.median(cpu),
                min(cpu),
                max(cpu),
                TARGET,
                patched_m / native_m if native_m else None,
                f"thread CPU time per call, {len(cpu)} pairs",
            )
        print()


def check_equivalent() -> None:
    """The marker k3 loss and its gradient equal verl's own (latest calls of each)."""
    import torch

    ours = LAST["k3 loss token-mean via core (= native)"]
    theirs = next(v for k, v in LAST.items() if k.startswith("k3 token-mean (kl_loss_type="))
    for i, what in enumerate(("loss", "gradient")):
        torch.testing.assert_close(ours[i], theirs[i], atol=1e-6, rtol=1e-6)
        print(f"    {what}: max abs diff {float((ours[i] - theirs[i]).abs().max()):.1e}")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--batch", type=int, default=64, help="responses (multiple of 8)")
    parser.add_argument(
        "--reward-batches",
        default="512",
        help="comma-separated further batch sizes for the reward path ('' for none)",
    )
    parser.add_argument("--length", type=int, default=1024, help="max response tokens")
    parser.add_argument("--rounds", type=int, default=8, help="shuffled visits of every case")
    parser.add_argument("--inner", type=int, default=8, help="timed pairs per visit")
    parser.add_argument("--seed", type=int, default=0)
    a = parser.parse_args()
    if a.batch <= 0 or a.batch % GROUP:
        parser.error(f"--batch must be a positive multiple of the GRPO group size {GROUP}")
    try:
        extra = tuple(int(x) for x in a.reward_batches.split(",") if x.strip())
    except ValueError:
        parser.error(f"--reward-batches: {a.reward_batches!r} is not a comma-separated list")
    if any(x <= 0 or x % GROUP for x in extra):
        parser.error(f"--reward-batches {a.reward_batches!r}: each a positive multiple of {GROUP}")

    import logging

    import torch
    import verl

    from kl_patches.adapters import verl as kv

    logging.disable(logging.WARNING)  # verl's accelerator and engine notices
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    start = time.monotonic()
    try:
        capture_originals()
        cases = build_cases(a.batch, a.length, extra)
        times, memory = measure(cases, a.rounds, a.inner, a.seed)
    finally:
        kv.revert()
    check_originals_restored()

    print(
        f"verl {verl.__version__}, torch {torch.__version__}, CPU, 1 torch thread; "
        f"B={a.batch} responses (groups of {GROUP}) x T<={a.length} tokens, float32, coef={COEF}"
    )
    print(
        f"time: {a.rounds * a.inner} pairs per case ({a.rounds} shuffled visits x {a.inner} "
        "alternating pairs); ms: median thread CPU time per call; CPU time / wall: patched / "
        "native per pair, median (min-max) over the pairs; memory: peak torch CPU-allocator "
        "MiB above the call's start (torch.profiler, profile_memory=True), patched / native"
    )
    print()
    report(cases, times, memory)
    print("k3 loss token-mean via core vs verl's own, latest calls:")
    check_equivalent()
    print(f"patch reverted, verl's originals back; {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
