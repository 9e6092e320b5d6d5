"""``kl-patches reproduce --paper``: the paper's comparison in miniature, through TRL's GRPOTrainer.

A small Qwen2 is pre-trained by supervised learning on string operations (:mod:`.paper_task`,
:mod:`.paper_pretrain`) to become the reference; it is then fine-tuned by RL on one part of the
family with a verifiable reward, once per configuration of the paper's grid, beta and seed, each
run through TRL's real GRPOTrainer (:mod:`.paper_train`), and evaluated in domain and out of
domain (:mod:`.paper_eval`). Tables and plots are in :mod:`.paper_report`.

Runs are appended to a JSON-lines file as they finish, so an interrupted sweep resumes where it
stopped (same settings; a different reference or RL setting starts a new file). Progress and a
time estimate go to stderr (one line per run when stderr is not a terminal).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .paper_pretrain import compact
from .paper_task import ModelSize, PretrainSettings, Split
from .paper_train import RLSettings, RunRecord

GRID: tuple[str, ...] = (
    "k1-in-reward",
    "k3-in-loss",
    "k1-in-loss",
    "k3-in-reward",
    "k1-in-both",
    "k2-in-loss (sequence)",
    "none",
)
"""The configurations compared: the paper's four (k1/k3 x reward/loss), k1 in both places and k2
on the sequence log-ratio (the two other unbiased ones), and no KL. ``k3-in-loss`` and ``none``
are TRL's own (unpatched) GRPOTrainer; the others run the kl-patches GRPOTrainer."""

DEFAULT_BETAS = (0.1, 1.0)
"""The KL coefficients of the sweep: the ends of the paper's grid (0.05-1)."""


@dataclass(frozen=True)
class Plan:
    """Everything that determines a sweep's results."""

    betas: tuple[float, ...] = DEFAULT_BETAS
    """KL coefficients (``none`` runs once per seed and serves every beta)."""
    seeds: int = 5
    """RL seeds per (configuration, beta)."""
    configs: tuple[str, ...] = GRID
    """Configurations (labels of :data:`GRID`)."""
    split: Split = field(default_factory=Split)
    """The task family and its in-domain / held-out parts."""
    pretrain: PretrainSettings = field(default_factory=PretrainSettings)
    """Pre-training of the reference."""
    rl: RLSettings = field(default_factory=RLSettings)
    """RL settings shared by every run."""

    def __post_init__(self) -> None:
        unknown = [c for c in self.configs if c not in GRID]
        if unknown:
            raise ValueError(f"unknown configurations {unknown}; choose from {list(GRID)}")
        if not self.betas or any(b <= 0 for b in self.betas):
            raise ValueError(f"betas must be non-empty and > 0; got {self.betas}")
        if self.seeds < 1:
            raise ValueError(f"seeds must be >= 1; got {self.seeds}")

    def jobs(self) -> list[tuple[str, float, int]]:
        """(configuration, beta, seed) of every run; ``none`` once per seed (beta 0)."""
        out: list[tuple[str, float, int]] = []
        for seed in range(self.seeds):  # seed-major: a partial sweep covers every configuration
            for name in self.configs:
                for beta in (0.0,) if name == "none" else self.betas:
                    out.append((name, beta, seed))
        return out

    def key(self) -> dict[str, Any]:
        """What a results file must match to be resumed (everything but betas/seeds/configs)."""
        d = asdict(self)
        key = {"split": d["split"], "pretrain": compact(d["pretrain"]), "rl": d["rl"]}
        return dict(json.loads(json.dumps(key)))  # as it reads back from the file


def job_id(name: str, beta: float, seed: int) -> str:
    """A stable identifier of one run."""
    return f"{name}|{beta:g}|{seed}"


def load(path: Path, plan: Plan) -> dict[str, RunRecord]:
    """The runs already in ``path`` (empty if it does not exist).

    Raises ValueError when ``path`` holds a sweep with other settings (it is never overwritten).
    """
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()
    if not lines:
        return {}
    if json.loads(lines[0]).get("plan") != plan.key():
        raise ValueError(
            f"{path} holds runs of other settings (reference or RL); give another results file "
            "or delete it"
        )
    done: dict[str, RunRecord] = {}
    for line in lines[1:]:
        d = json.loads(line)
        rec = RunRecord(**d)
        done[job_id(rec.name, rec.beta, rec.seed)] = rec
    return done


def _eta(done: int, total: int, elapsed: float) -> str:
    if done == 0:
        return "?"
    left = elapsed / done * (total - done)
    return f"{left / 60:.0f} min" if left >= 60 else f"{left:.0f} s"


def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)


def _train_job_args(*job: Any) -> RunRecord:
    from .paper_train import train_run

    return train_run(*job)


def _train_job(job: tuple[Any, ...]) -> RunRecord:
    return _train_job_args(*job)


def run_sweep(
    plan: Plan,
    results: Path,
    cache: Path,
    show_progress: bool = True,
    workers: int = 1,
    deadline: float | None = None,
    train: Callable[..., RunRecord] | None = None,
) -> list[RunRecord]:
    """Pre-train (cached) and run every job of ``plan`` not yet in ``results``; all records.

    ``workers > 1`` runs jobs in that many spawned processes (one torch thread each; on a GPU
    they share it). ``deadline`` (seconds from the start) stops *starting* jobs after it; the
    jobs are seed-major, so what finished covers every configuration for the first seeds.
    ``train`` replaces :func:`.paper_train.train_run` (tests; one process only).
    """
    from .paper_pretrain import pretrained

    log = _logger(show_progress)
    start = time.monotonic()
    reference = pretrained(plan.split, plan.pretrain, cache, device=plan.rl.device, log=log)
    done = load(results, plan)
    if not done:
        results.parent.mkdir(parents=True, exist_ok=True)
        results.write_text(json.dumps({"plan": plan.key()}) + "\n")
    todo = [j for j in plan.jobs() if job_id(*j) not in done]
    total = len(todo)
    if done:
        log(f"resuming: {len(done)} runs in {results}, {total} to go")
    log(f"{total} runs of {plan.rl.steps} updates; {workers} worker(s)")
    began = time.monotonic()

    def record(k: int, rec: RunRecord) -> None:
        done[job_id(rec.name, rec.beta, rec.seed)] = rec
        with results.open("a") as fh:
            fh.write(json.dumps(rec.as_dict()) + "\n")
        elapsed = time.monotonic() - began
        status = "diverged: " + rec.error if rec.error else f"{rec.seconds:.0f} s"
        log(
            f"[{k}/{total}] {rec.name} beta={rec.beta:g} seed={rec.seed}: {status}; "
            f"elapsed {elapsed / 60:.1f} min, about {_eta(k, total, elapsed)} left"
        )

    def late() -> bool:
        return deadline is not None and time.monotonic() - start > deadline

    if workers <= 1:
        run_one = train if train is not None else _train_job_args
        for k, (name, beta, seed) in enumerate(todo, 1):
            if late():
                log(f"time budget reached: {total - k + 1} runs not started")
                break
            record(k, run_one(name, beta, seed, reference, plan.split, plan.rl))
    else:
        _run_parallel(plan, reference, todo, workers, record, late, log)
    wanted = {job_id(*j) for j in plan.jobs()}
    return [r for key, r in done.items() if key in wanted]


def _run_parallel(
    plan: Plan,
    reference: Path,
    todo: list[tuple[str, float, int]],
    workers: int,
    record: Callable[[int, RunRecord], None],
    late: Callable[[], bool],
    log: Callable[[str], None],
) -> None:
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

    queue = list(todo)
    running: set[Future[RunRecord]] = set()
    finished = 0
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker) as pool:
        while queue or running:
            while queue and len(running) < workers and not late():
                name, beta, seed = queue.pop(0)
                job = (name, beta, seed, reference, plan.split, plan.rl)
                running.add(pool.submit(_train_job, job))
            if not running:
                break
            ready, running = wait(running, return_when=FIRST_COMPLETED)
            for fut in ready:
                finished += 1
                record(finished, fut.result())
        if queue:
            log(f"time budget reached: {len(queue)} runs not started")


def _logger(enabled: bool) -> Callable[[str], None]:
    """One line per event on stderr (a terminal gets the same lines; they are few)."""

    def log(message: str) -> None:
        if enabled:
            sys.stderr.write(f"paper: {message}\n")
            sys.stderr.flush()

    return log


def _quick() -> Plan:
    return Plan(
        betas=(0.3,),
        seeds=1,
        configs=("k1-in-reward", "k3-in-loss", "none"),
        pretrain=PretrainSettings(steps=100),
        rl=RLSettings(steps=10, eval_every=5, eval_prompts=32, final_repeats=1),
    )


def _gpu() -> Plan:
    return Plan(
        seeds=10,
        pretrain=PretrainSettings(
            steps=3000,
            batch_size=128,
            target_accuracy=0.75,
            size=ModelSize(hidden=256, layers=4, heads=8, intermediate=1024),
        ),
        rl=RLSettings(steps=300, prompts_per_step=16, device="cuda", eval_prompts=512),
    )


PRESETS: dict[str, Callable[[], Plan]] = {"cpu": Plan, "quick": _quick, "gpu": _gpu}
"""Named sweeps: ``cpu`` (the documented one), ``quick`` (a smoke run of a minute or two on a
CPU), ``gpu`` (a larger model, more seeds; for ``--device cuda --workers N``)."""

SECONDS_PER_UPDATE = {"cpu": 0.12, "cuda": 0.12}
"""Rough wall time of one RL update of the ``cpu`` preset, evaluation included, on one idle
core (measured on the development machine); the estimate printed before a sweep scales it."""


def describe(plan: Plan, workers: int = 1) -> str:
    """What the sweep will run, and a rough time estimate."""
    n = len(plan.jobs())
    size = plan.pretrain.size
    est = n * plan.rl.steps * SECONDS_PER_UPDATE[plan.rl.device] / max(1, workers)
    return (
        f"paper miniature: Qwen2 (width {size.hidden}, {size.layers} layers) pre-trained for "
        f"{plan.pretrain.steps} steps, then {n} RL runs ({len(plan.configs)} configurations, "
        f"betas {', '.join(f'{b:g}' for b in plan.betas)}, {plan.seeds} seeds) of "
        f"{plan.rl.steps} updates of {plan.rl.prompts_per_step}x{plan.rl.group} completions "
        f"through TRL's GRPOTrainer on {plan.rl.device}; roughly {est / 60:.0f} min with "
        f"{workers} worker(s) on an idle machine"
    )
