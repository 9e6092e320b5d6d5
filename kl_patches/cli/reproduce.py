"""``kl-patches reproduce``: the options of :mod:`kl_patches.experiments.reproduce`.

Argument parsing and output only; the grid, training and reports are in
:mod:`kl_patches.experiments.reproduce` (and its ``_train`` / ``_report`` modules).
``--json FILE`` writes the metrics to a file (not stdout); that file, ``--markdown FILE`` and
``--plot DIR`` are checked for writability before the run. The command runs on the one error
path of :mod:`kl_patches.cli.errors`.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

from kl_patches.cli import SUMMARIES, errors
from kl_patches.experiments import reproduce, reproduce_report, reproduce_train
from kl_patches.experiments.tables import wrap


def _betas(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected numbers like 0.05,0.1; got {text!r}") from err
    if not values or any(not math.isfinite(v) or v < 0 for v in values):
        raise argparse.ArgumentTypeError(
            f"expected finite non-negative numbers like 0.05,0.1; got {text!r}"
        )
    return values


MAX_STEPS = 100_000
"""Most ``--steps`` (updates per run)."""
MAX_SEEDS = 1_000
"""Most ``--seeds`` per configuration."""
MAX_BATCH = 100_000
"""Most ``--batch-size`` sequences per update."""
MAX_UPDATES_PER_BATCH = 1_000
"""Most ``--updates`` per sampled batch."""
MAX_BETAS = 64
"""Most values in ``--betas``."""
MAX_RECORDS = 10_000_000
"""Most metric rows kept (runs x (steps + 1)): three floats each, about 1 GiB at the limit."""
ESTIMATE_FROM = 20_000
"""Updates in all from which the run is timed first and its duration said on stderr."""
SAY_FROM_S = 30.0
"""Estimated seconds from which the estimate is printed."""


def _check_sizes(args: argparse.Namespace, runs: int) -> None:
    """Refuse, before any work, a size beyond its bound, naming the bound."""
    for flag, value, bound in (
        ("--steps", args.steps, MAX_STEPS),
        ("--seeds", args.seeds, MAX_SEEDS),
        ("--batch-size", args.batch_size, MAX_BATCH),
        ("--updates", args.updates, MAX_UPDATES_PER_BATCH),
        ("--betas", len(args.betas), MAX_BETAS),
    ):
        if value > bound:
            what = f"{value} values" if flag == "--betas" else value
            raise errors.invalid(flag, what, f"use at most {bound}")
    cpus = os.cpu_count() or 1
    if args.workers > 4 * cpus:
        raise errors.invalid(
            "--workers", args.workers, f"use at most {4 * cpus} (4 x this machine's {cpus} CPUs)"
        )
    records = runs * (args.steps + 1)
    if records > MAX_RECORDS:
        raise errors.invalid(
            "--seeds x --steps",
            f"{args.seeds} x {args.steps}",
            f"{runs} runs x {args.steps + 1} metric rows = {records} rows, over the limit of "
            f"{MAX_RECORDS} (about 1 GiB); use fewer seeds, steps or betas",
        )


def _say_estimate(jobs: list[Any], args: argparse.Namespace) -> None:
    """One line on stderr with the work and its estimated duration, for long runs (also with
    ``--quiet``, which only drops the progress bar)."""
    updates = sum(job[3].steps * job[3].updates_per_batch for job in jobs)
    if updates < ESTIMATE_FROM:
        return
    seconds = reproduce.estimate_seconds(jobs, args.workers)
    if seconds < SAY_FROM_S:
        return
    text = f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"
    errors.say(
        f"kl-patches reproduce: {len(jobs)} runs x {args.steps} updates of {args.batch_size} "
        f"samples ({updates} updates): about {text} with {min(args.workers, len(jobs))} "
        "worker(s) (timed on a few updates here); Ctrl-C stops it"
    )


def run(argv: list[str]) -> int:
    """``kl-patches reproduce ...``; returns the exit code (0, or 2 for bad options)."""
    if "--paper" in argv:  # the trained-reference miniature through TRL: its own options
        from kl_patches.cli import reproduce_paper

        return reproduce_paper.run([a for a in argv if a != "--paper"])
    p = errors.ArgumentParser(prog="kl-patches reproduce", description=SUMMARIES["reproduce"])
    p.add_argument("--betas", type=_betas, default=(0.05, 0.1, 0.3, 1.0), help="beta grid")
    p.add_argument(
        "--seeds", type=errors.at_least(1), default=5, help="seeds per configuration (default 5)"
    )
    p.add_argument(
        "--steps", type=errors.at_least(1), default=300, help="updates per run (default 300)"
    )
    p.add_argument(
        "--batch-size", type=errors.at_least(2), default=16, help="sequences per update (16)"
    )
    p.add_argument(
        "--lr",
        type=errors.positive_float,
        default=None,
        help="Adam learning rate (tabular 0.05, transformer 0.003)",
    )
    p.add_argument("--vocab", type=errors.at_least(2), default=3, help="vocabulary size V (3)")
    p.add_argument("--length", type=errors.at_least(1), default=4, help="sequence length T (4)")
    p.add_argument("--task-seed", type=int, default=0, help="seed of the task instance (0)")
    p.add_argument(
        "--model", choices=reproduce_train.MODELS, default="tabular", help="policy (tabular)"
    )
    p.add_argument(
        "--off-policy", action="store_true", help="several mini-batch updates per sampled batch"
    )
    p.add_argument(
        "--updates", type=errors.at_least(1), default=4, help="updates per batch with --off-policy"
    )
    p.add_argument("--workers", type=errors.at_least(1), default=2, help="processes (default 2)")
    p.add_argument("--plot", metavar="DIR", help="write curves and the summary plot to DIR")
    p.add_argument("--json", metavar="FILE", help="write every run's metrics to FILE")
    p.add_argument("--markdown", metavar="FILE", help="write the table as Markdown to FILE")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--paper",
        action="store_true",
        help="the paper's comparison with a pre-trained reference through TRL's GRPOTrainer "
        "(its options: kl-patches reproduce --paper --help)",
    )
    errors.add_debug_option(p)
    args = p.parse_args(argv)
    if args.length * math.log(args.vocab) > math.log(20000):  # V**T, without computing it
        raise errors.invalid(
            "--vocab/--length",
            f"{args.vocab}/{args.length}",
            "every sequence is enumerated, so V**T (vocab**length) must be <= 20000",
        )
    task = reproduce_train.ToyTask(
        vocab=args.vocab, length=args.length, model=args.model, seed=args.task_seed
    )
    # Every output is checked before the run (minutes), not when it is written after it.
    if args.plot:
        errors.need_module("matplotlib", "--plot")
        errors.writable_dir("--plot", args.plot)
    if args.json:
        errors.writable_file("--json", args.json)
    if args.markdown:
        errors.writable_file("--markdown", args.markdown)
    settings = reproduce_train.TrainSettings(
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr if args.lr is not None else reproduce.DEFAULT_LR[args.model],
        updates_per_batch=args.updates if args.off_policy else 1,
    )
    grid = reproduce.OFF_POLICY_GRID if args.off_policy else reproduce.ON_POLICY_GRID
    jobs = reproduce.make_jobs(grid, args.betas, args.seeds, task, settings)
    _check_sizes(args, len(jobs))
    _say_estimate(jobs, args)
    runs = reproduce.reproduce(
        args.betas, args.seeds, task, settings, args.off_policy, args.workers, not args.quiet
    )
    mode = (
        f"off-policy ({settings.updates_per_batch} updates/batch)"
        if args.off_policy
        else "on-policy"
    )
    print(
        f"{args.model} policy, V={args.vocab}, T={args.length}, {args.steps} updates of "
        f"{args.batch_size} samples, Adam lr={settings.lr}, {args.seeds} seeds, {mode}"
    )
    rows = reproduce_report.summarise(runs, args.betas)
    print(reproduce_report.format_table(rows))
    for line in reproduce_report.summary_lines(rows, off_policy=args.off_policy):
        print(line)
    print()
    print(wrap(reproduce_report.summary_sentence(rows)))
    if args.plot:
        paths = reproduce_report.plot_runs(
            runs, args.betas, Path(args.plot), off_policy=args.off_policy, model=args.model
        )
        for path in paths:
            print(f"plot written to {path}")
    if args.json:
        Path(args.json).write_text(reproduce_report.runs_to_json(runs))
        print(f"metrics written to {args.json}")
    if args.markdown:
        Path(args.markdown).write_text(reproduce_report.format_markdown(rows) + "\n")
        print(f"table written to {args.markdown}")
    return 0


main = errors.command("kl-patches reproduce", debug_option=True)(run)
"""Entry point of ``kl-patches reproduce``: :func:`run` on the one error path of
:mod:`kl_patches.cli.errors`."""
