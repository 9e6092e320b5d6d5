"""``kl-patches demo``: the built-in example a newcomer runs first (about a minute on 2 cores).

Prints the five parts of :mod:`kl_patches.experiments.demo` and writes the plots to ``--out``.
"""

from __future__ import annotations

from pathlib import Path

from kl_patches.cli import SUMMARIES, errors
from kl_patches.experiments import bias
from kl_patches.experiments.demo import (
    DEMO_BETAS,
    audit_defaults,
    audit_recipes,
    closing_summary,
    recipes_folder,
    run_training,
    training_summary,
)
from kl_patches.experiments.reproduce_report import format_table, plot_runs, summarise
from kl_patches.experiments.tables import Table, render
from kl_patches.theory import describe, table1


def table1_table() -> Table:
    """Part 1: Table 1 (each configuration's expected gradient) as a text table."""
    table = Table("", ["configuration", "expected gradient", "verdict"])
    for cfg, v in table1():
        table.add(describe(cfg), v.gradient, "unbiased" if v.unbiased else "BIASED")
    return table


@errors.command("kl-patches demo", debug_option=True)
def main(argv: list[str]) -> int:
    """Run the demo; returns 0 (2, with one line on stderr, for a bad option)."""
    p = errors.ArgumentParser(prog="kl-patches demo", description=SUMMARIES["demo"])
    p.add_argument("--out", default="out", help="folder for plots (default: out/)")
    p.add_argument(
        "--steps", type=errors.at_least(1), default=250, help="training updates per run (250)"
    )
    p.add_argument(
        "--seeds", type=errors.at_least(1), default=3, help="seeds per configuration (3)"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--no-audit", action="store_true", help="skip the audits (parts 4 and 5)")
    errors.add_debug_option(p)
    args = p.parse_args(argv)
    errors.writable_dir("--out", args.out)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    show = not args.quiet

    print("1. Which gradient does each KL configuration follow? (on-policy, exact algebra)\n")
    print(render(table1_table()))

    print("\n2. Checked by exact enumeration of a tabular policy (V=3, T=4):\n")
    print(bias.format_table(bias.run_table(show_progress=show)))
    sweep = bias.run_sweep(lengths=(1, 2, 3, 4, 5), num_batches=100, show_progress=show)
    plots: list[Path] = []
    try:
        bias.plot_sweep(sweep, str(out / "bias_vs_length.png"))
        plots.append(out / "bias_vs_length.png")
    except ImportError:
        pass

    print(
        "\n3. Training with each configuration: REINFORCE + leave-one-out baseline on a toy "
        "reward\n   (fraction of tokens matching a target), tabular policy V=3, T=4, started at "
        f"the reference;\n   {args.steps} updates of 16 samples, {args.seeds} seeds; every "
        "number below is exact (all 81 sequences enumerated).\n"
    )
    runs = run_training(args.steps, args.seeds, show)
    rows = summarise(runs, DEMO_BETAS)
    print(format_table(rows))
    print()
    for line in training_summary(rows):
        print(line)
    try:
        plots += plot_runs(runs, DEMO_BETAS, out)
    except ImportError:
        print("  (install kl-patches[plot] for the plots)")

    folder = recipes_folder()
    if folder is not None and not args.no_audit:
        print(
            f"\n4. Audit of the shipped recipes ({folder.name}/): which gradient each launch runs\n"
        )
        try:
            lines = audit_recipes(folder)
            print("\n".join(lines) if lines else "  (no recipe files found)")
            print("  details: kl-patches audit recipes/<library>/<file>")
        except Exception as err:  # the demo must finish; say what failed
            print(f"  audit unavailable here ({type(err).__name__}: {err})")
    if not args.no_audit:
        print(
            "\n5. The libraries' own defaults (tested releases, as each adapter records them; "
            "no library needs\n   to be installed; `kl-patches audit --installed` reads the "
            "installed ones)\n"
        )
        try:
            print("\n".join(audit_defaults()))
        except Exception as err:
            print(f"  audit unavailable here ({type(err).__name__}: {err})")

    if plots:
        print("\nPlots: " + ", ".join(str(p) for p in plots))
    for line in closing_summary(rows):
        print(line)
    return 0
