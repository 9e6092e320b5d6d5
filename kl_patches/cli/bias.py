"""``kl-patches bias``: the options of :mod:`kl_patches.experiments.bias` and what it prints.

Argument parsing and output only; the enumeration, tables and plots are in
:mod:`kl_patches.experiments.bias`. ``--json`` prints JSON (errors as a JSON document too).
The command runs on the one error path of :mod:`kl_patches.cli.errors`.
"""

from __future__ import annotations

import argparse
import json
import math

from kl_patches.cli import errors
from kl_patches.experiments import bias
from kl_patches.experiments.tables import wrap


def _floats(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected numbers like 0.01,0.05; got {text!r}") from err
    if not values or any(not math.isfinite(v) or v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive numbers; got {text!r}")
    return values


MAX_BYTES = 2 * 1024**3
"""Memory the bias run may plan for: the per-sequence gradients of every enumerated sequence
and of every Monte-Carlo sample, float64 (a larger request is refused before it starts)."""
SWEEP_LENGTH = 6
"""Longest sequence ``--plot`` sweeps to (T = 1..6)."""


def _planned_bytes(vocab: int, length: int, samples: int) -> int:
    """Bytes of float64 gradients a table of ``vocab``/``length`` holds at its peak: one row
    of ``vocab * (number of prefixes)`` parameters per enumerated sequence, and two per sample
    (the gathered rows and their batch means), plus the sample indices."""
    prefixes = (vocab**length - 1) // (vocab - 1)
    params = vocab * prefixes
    return 8 * params * (vocab**length + 2 * samples) + 8 * samples


def _check_size(args: argparse.Namespace) -> None:
    """Refuse, before any work, a run whose enumeration or samples do not fit in
    :data:`MAX_BYTES`, naming the sizes and the largest that fits."""
    samples = args.batch_size * args.num_batches
    lengths = [args.length] + ([SWEEP_LENGTH] if args.plot else [])
    for length in lengths:
        if length * math.log(args.vocab) > math.log(20000):
            raise errors.invalid(
                "--vocab",
                args.vocab,
                f"--plot sweeps T=1..{SWEEP_LENGTH}, so V**{SWEEP_LENGTH} must be <= 20000 "
                "(vocab <= 5)",
            )
        base = _planned_bytes(args.vocab, length, 0)
        if base > MAX_BYTES:
            raise errors.invalid(
                "--vocab/--length",
                f"{args.vocab}/{length}",
                f"the exact enumeration alone would hold about {base / 1024**3:.3g} GiB of "
                f"gradients (the limit is {MAX_BYTES / 1024**3:g} GiB): choose a smaller "
                "vocab or length",
            )
        need = _planned_bytes(args.vocab, length, samples)
        if need > MAX_BYTES:
            per_sample = _planned_bytes(args.vocab, length, 1) - base
            raise errors.invalid(
                "--batch-size x --num-batches",
                f"{args.batch_size} x {args.num_batches}",
                f"the run would hold about {need / 1024**3:.3g} GiB of gradients (V={args.vocab},"
                f" T={length}; the limit is {MAX_BYTES / 1024**3:g} GiB): keep batch-size x "
                f"num-batches <= {(MAX_BYTES - base) // per_sample}",
            )


def _off_policy_main(args: argparse.Namespace) -> int:
    ppo = args.trainer == "ppo"
    reports = bias.run_off_policy(
        args.vocab,
        args.length,
        args.levels,
        args.seed,
        args.batch_size,
        args.num_batches,
        ppo,
        args.clips,
        not args.quiet,
    )
    if args.json:
        print(json.dumps([bias.as_json(r) for r in reports], indent=2))
    elif args.markdown:
        print(bias.format_off_policy_markdown(reports))
    else:
        print(
            f"off-policy: V={args.vocab}, T={args.length}, seed={args.seed}, "
            f"batch={args.batch_size}, N={args.num_batches} batches, {args.trainer} trainer"
        )
        print(bias.format_off_policy_table(reports))
        print()
        print(wrap(bias.off_policy_summary(reports)))
    if args.plot:
        sweep = bias.run_off_policy_sweep(
            args.vocab,
            level=args.levels[len(args.levels) // 2],
            seed=args.seed,
            batch_size=args.batch_size,
            trainer_ratio=ppo,
            clips=args.clips,
            show_progress=not args.quiet,
        )
        bias.plot_off_policy(sweep, reports, args.plot)
        print(f"plot written to {args.plot}")
    return 0


def run(argv: list[str]) -> int:
    """``kl-patches bias ...``; returns the exit code (0, or 2 for bad options)."""
    parser = errors.ArgumentParser(
        prog="kl-patches bias", description=(bias.__doc__ or "").split("\n")[0]
    )
    parser.add_argument(
        "--vocab", type=errors.at_least(2), default=3, help="vocabulary size V (default 3)"
    )
    parser.add_argument(
        "--length", type=errors.at_least(1), default=4, help="sequence length T (default 4)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=errors.at_least(1), default=16)
    parser.add_argument(
        "--num-batches", type=errors.at_least(2), default=400, help="batches (>= 2: a s.e.)"
    )
    parser.add_argument("--plot", metavar="FILE.png", help="also sweep T=1..6 and plot")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--off-policy",
        action="store_true",
        help="samples from a behaviour policy mu: none / token / sequence / clipped weighting",
    )
    parser.add_argument(
        "--levels",
        type=_floats,
        default=bias.LEVELS,
        help="with --off-policy: KL(mu||pi) per token of each behaviour policy (0.01,0.05,0.2)",
    )
    parser.add_argument(
        "--clips",
        type=_floats,
        default=bias.CLIPS,
        help="with --off-policy: is_clip values (1,2,5)",
    )
    parser.add_argument(
        "--trainer",
        choices=("ppo", "reinforce"),
        default="ppo",
        help="with --off-policy: PPO-ratio (default) or REINFORCE trainer form",
    )
    errors.add_debug_option(parser)
    args = parser.parse_args(argv)
    if args.length * math.log(args.vocab) > math.log(20000):  # V**T, without computing it
        raise errors.invalid(
            "--vocab/--length",
            f"{args.vocab}/{args.length}",
            "every sequence is enumerated, so V**T (vocab**length) must be <= 20000",
        )
    _check_size(args)
    if args.plot:  # checked before the run, not after it
        errors.need_module("matplotlib", "--plot")
        errors.writable_file("--plot", args.plot)
    if args.off_policy:
        return _off_policy_main(args)
    reports = bias.run_table(
        args.vocab, args.length, args.seed, args.batch_size, args.num_batches, not args.quiet
    )
    if args.json:
        print(json.dumps([bias.as_json(r) for r in reports], indent=2))
    elif args.markdown:
        print(bias.format_markdown(reports))
    else:
        print(
            f"V={args.vocab}, T={args.length}, seed={args.seed}, batch={args.batch_size}, "
            f"N={args.num_batches} batches"
        )
        print(bias.format_table(reports))
        print()
        print(wrap(bias.summary(reports)))
    if args.plot:
        sweep = bias.run_sweep(
            args.vocab, seed=args.seed, batch_size=args.batch_size, show_progress=not args.quiet
        )
        bias.plot_sweep(sweep, args.plot)
        print(f"plot written to {args.plot}")
    return 0


main = errors.command("kl-patches bias", debug_option=True, json_output=True)(run)
"""Entry point of ``kl-patches bias``: :func:`run` on the one error path of
:mod:`kl_patches.cli.errors`."""
