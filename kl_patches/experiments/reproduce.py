"""``kl-patches reproduce``: the paper's comparison in miniature, measured exactly.

Trains an enumerable policy (tabular by default, or ``--model transformer``) on a toy reward
with REINFORCE + leave-one-out baseline, once per configuration of the paper's grid (k1/k3 in
reward/loss/both, token and sequence k2 in the loss, and no KL), beta and seed, and reports the
exact expected reward, reverse KL, regularised objective E[R] - beta * KL(pi || pi_ref) and
forward KL (final and best over training, mean +- std over seeds) next to the exact optimum.
``--off-policy`` runs several mini-batch updates per sampled batch and compares each loss-side
configuration with and without ``importance_weighting='token'``, and k1 in the reward and k3 in
both places with ``importance_weighting='sequence'`` (per-decision prefix weights, ``[seq-iw]``),
unclipped and clipped (``c=...``). ``--plot DIR`` draws the curves.
The training loop is in :mod:`kl_patches.experiments.reproduce_train`, tables and plots in
:mod:`kl_patches.experiments.reproduce_report`.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import time
from collections.abc import Callable, Iterator

import torch

from kl_patches.config import KLConfig
from kl_patches.experiments.progress import progress
from kl_patches.experiments.reproduce_train import RunResult, ToyTask, TrainSettings, train

DEFAULT_LR = {"tabular": 0.05, "transformer": 0.003}
"""Adam learning rate per policy model (a table of logits tolerates a much larger step)."""

GridEntry = tuple[str, Callable[[float], KLConfig]]

ON_POLICY_GRID: list[GridEntry] = [
    ("k1-in-reward", lambda b: KLConfig.parse("k1-in-reward", coef=b)),
    ("k3-in-loss", lambda b: KLConfig.parse("k3-in-loss", coef=b)),
    ("k1-in-loss", lambda b: KLConfig.parse("k1-in-loss", coef=b)),
    ("k3-in-reward", lambda b: KLConfig.parse("k3-in-reward", coef=b)),
    ("k1-in-both", lambda b: KLConfig.parse("k1-in-both", coef=b)),
    ("k3-in-both", lambda b: KLConfig.parse("k3-in-both", coef=b)),
    ("k2-in-loss (token)", lambda b: KLConfig.parse("k2-in-loss", coef=b)),
    (
        "k2-in-loss (sequence)",
        lambda b: KLConfig.parse("k2-in-loss", coef=b, granularity="sequence"),
    ),
    ("none", lambda b: KLConfig(placement="none", coef=b)),
]
"""(label, beta -> KLConfig) of the on-policy comparison."""


def _iw(name: str) -> Callable[[float], KLConfig]:
    return lambda b: KLConfig.parse(name, coef=b, importance_weighting="token")


def _seq_iw(name: str, clip: float | None = None) -> Callable[[float], KLConfig]:
    return lambda b: KLConfig.parse(name, coef=b, importance_weighting="sequence", is_clip=clip)


OFF_POLICY_GRID: list[GridEntry] = [
    ("k1-in-reward", lambda b: KLConfig.parse("k1-in-reward", coef=b)),
    ("k3-in-loss", lambda b: KLConfig.parse("k3-in-loss", coef=b)),
    ("k3-in-loss [iw]", _iw("k3-in-loss")),
    ("k1-in-loss", lambda b: KLConfig.parse("k1-in-loss", coef=b)),
    ("k1-in-loss [iw]", _iw("k1-in-loss")),
    ("k3-in-both", lambda b: KLConfig.parse("k3-in-both", coef=b)),
    ("k3-in-both [iw]", _iw("k3-in-both")),
    ("k1-in-reward [seq-iw]", _seq_iw("k1-in-reward")),
    ("k1-in-reward [seq-iw c=1]", _seq_iw("k1-in-reward", 1.0)),
    ("k1-in-reward [seq-iw c=2]", _seq_iw("k1-in-reward", 2.0)),
    ("k3-in-both [seq-iw]", _seq_iw("k3-in-both")),
    ("none", lambda b: KLConfig(placement="none", coef=b)),
]
"""The off-policy comparison: each loss-side configuration with and without token IS weights,
and the reward-side ones with and without per-decision prefix weights (unclipped, clipped)."""

Job = tuple[str, KLConfig, ToyTask, TrainSettings, int, tuple[float, ...]]


def make_jobs(
    grid: list[GridEntry],
    betas: tuple[float, ...],
    seeds: int,
    task: ToyTask,
    settings: TrainSettings,
) -> list[Job]:
    """One job per (configuration, beta, seed); ``none`` once per seed (it ignores beta)."""
    jobs: list[Job] = []
    for name, make in grid:
        for beta in betas[:1] if name == "none" else betas:
            jobs.extend((name, make(beta), task, settings, s, betas) for s in range(seeds))
    return jobs


def _run(job: Job) -> RunResult:
    return train(*job)


def _init_worker() -> None:
    torch.set_num_threads(1)


def run_jobs(jobs: list[Job], workers: int = 1, show_progress: bool = True) -> list[RunResult]:
    """Run every job (in ``workers`` processes when > 1), results in job order."""
    results: Iterator[RunResult]
    if workers <= 1:
        results = map(_run, jobs)
        return list(progress(results, len(jobs), "reproduce", show_progress))
    ctx = mp.get_context("spawn")
    with ctx.Pool(workers, initializer=_init_worker) as pool:
        results = pool.imap(_run, jobs, chunksize=1)
        return list(progress(results, len(jobs), "reproduce", show_progress))


def estimate_seconds(jobs: list[Job], workers: int, trial_steps: int = 10) -> float:
    """Wall seconds :func:`run_jobs` would take, from two short trials of the first job timed
    here after a warm-up (0 and ``trial_steps`` updates: its set-up, and its cost per update),
    scaled to every
    job's updates, over the workers that run at once. A rough figure for a message (other jobs'
    configurations cost about the same on these toy tasks), not a promise."""
    if not jobs:
        return 0.0
    name, config, task, settings, seed, betas = jobs[0]
    steps = min(trial_steps, settings.steps)
    train(name, config, task, dataclasses.replace(settings, steps=0), seed, betas)  # warm-up
    timed = []
    for n in (0, steps):
        start = time.perf_counter()
        train(name, config, task, dataclasses.replace(settings, steps=n), seed, betas)
        timed.append(time.perf_counter() - start)
    setup = timed[0]
    per_update = max(0.0, timed[1] - timed[0]) / max(steps, 1)
    total = sum(setup + per_update * job[3].steps for job in jobs)
    return total / max(1, min(workers, len(jobs)))


def reproduce(
    betas: tuple[float, ...] = (0.05, 0.1, 0.3, 1.0),
    seeds: int = 5,
    task: ToyTask | None = None,
    settings: TrainSettings | None = None,
    off_policy: bool = False,
    workers: int = 1,
    show_progress: bool = True,
    grid: list[GridEntry] | None = None,
) -> list[RunResult]:
    """Every run of the comparison (on-policy grid, or the off-policy one)."""
    task = task or ToyTask()
    if settings is None:
        settings = TrainSettings(updates_per_batch=4 if off_policy else 1)
    if grid is None:
        grid = OFF_POLICY_GRID if off_policy else ON_POLICY_GRID
    jobs = make_jobs(grid, betas, seeds, task, settings)
    return run_jobs(jobs, workers, show_progress)
