"""``kl-patches reproduce --paper``: the options of :mod:`kl_patches.experiments.paper`.

Argument parsing and output only. Everything goes to one folder (``--out``, default
``kl-patches-paper``): the pre-trained reference, ``runs.jsonl`` (one line per finished run;
a rerun with the same settings resumes it), ``table.md`` and, with ``--plot``, the PNGs.
Progress and the time estimate go to stderr, one line per run. Needs ``kl-patches[trl]``
(and matplotlib for ``--plot``).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from pathlib import Path

from kl_patches.cli import errors


def _floats(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected numbers like 0.1,0.3; got {text!r}") from err
    if not values or any(not math.isfinite(v) or v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected finite numbers > 0 like 0.1,0.3; got {text!r}")
    return values


def run(argv: list[str]) -> int:
    """``kl-patches reproduce --paper ...`` (``--paper`` already removed); exit code."""
    from kl_patches.experiments import paper

    doc = paper.__doc__ or ""
    p = errors.ArgumentParser(prog="kl-patches reproduce --paper", description=doc.split("\n")[0])
    p.add_argument(
        "--preset",
        choices=sorted(paper.PRESETS),
        default="cpu",
        help="cpu: the documented sweep (default); quick: a 2-minute smoke run; "
        "gpu: a larger model and more seeds (with --device cuda --workers N)",
    )
    p.add_argument("--betas", type=_floats, help="beta grid (preset's: 0.1,1)")
    p.add_argument("--seeds", type=errors.at_least(1), help="RL seeds per configuration")
    p.add_argument(
        "--configs",
        help=f"comma-separated subset of: {', '.join(paper.GRID)} (default: all)",
    )
    p.add_argument("--steps", type=errors.at_least(1), help="RL updates per run")
    p.add_argument("--device", choices=("cpu", "cuda"), help="where to train (preset's)")
    p.add_argument("--workers", type=errors.at_least(1), default=1, help="processes (1)")
    p.add_argument(
        "--time-budget",
        type=errors.positive_float,
        metavar="MIN",
        help="start no run after MIN minutes (the report covers what finished)",
    )
    p.add_argument("--out", default="kl-patches-paper", help="folder of every output")
    p.add_argument("--plot", action="store_true", help="write paper_curves/summary.png to --out")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    errors.add_debug_option(p)
    args = p.parse_args(argv)
    plan = paper.PRESETS[args.preset]()
    configs = plan.configs
    if args.configs:
        configs = tuple(c.strip() for c in args.configs.split(",") if c.strip())
        bad = [c for c in configs if c not in paper.GRID]
        if bad:
            raise errors.invalid("--configs", ",".join(bad), list(paper.GRID))
    rl = plan.rl
    if args.steps is not None:
        rl = replace(rl, steps=args.steps)
    if args.device is not None:
        rl = replace(rl, device=args.device, bf16=rl.bf16 and args.device == "cuda")
    plan = replace(
        plan,
        betas=args.betas or plan.betas,
        seeds=args.seeds or plan.seeds,
        configs=configs,
        rl=rl,
    )
    errors.need_module("trl", "--paper")
    if args.plot:
        errors.need_module("matplotlib", "--plot")
    errors.writable_dir("--out", args.out)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.quiet:
        print(paper.describe(plan, args.workers), flush=True)
    records = paper.run_sweep(
        plan,
        out / "runs.jsonl",
        out,
        show_progress=not args.quiet,
        workers=args.workers,
        deadline=None if args.time_budget is None else 60 * args.time_budget,
    )
    from kl_patches.experiments import paper_report

    table = paper_report.format_markdown(records)
    gains = paper_report.gain_lines(records)
    print(table)
    for line in gains:
        print(line)
    (out / "table.md").write_text(table + "\n\n" + "\n".join(gains) + "\n")
    print(f"table written to {out / 'table.md'}; runs in {out / 'runs.jsonl'}")
    if args.plot:
        for path in paper_report.plot(records, out):
            print(f"plot written to {path}")
    return 0


main = errors.command("kl-patches reproduce --paper", debug_option=True)(run)
"""Entry point: :func:`run` on the one error path of :mod:`kl_patches.cli.errors`."""
