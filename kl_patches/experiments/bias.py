"""``kl-patches bias``: exact and Monte-Carlo bias of each KL configuration's gradient.

On a seeded tabular autoregressive policy (:mod:`kl_patches.oracle`), for the paper's grid
(k1/k3 x reward/loss, both placements, token and sequence k2, importance-weighted k3), prints the
exact relative bias against the sequence-level reverse-KL gradient, the cosine, the Monte-Carlo
bias of the mean of N batch estimates with its standard error, and the per-coordinate variance.
``--plot FILE.png`` draws bias and variance against the sequence length (like the paper's Fig. 1).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from kl_patches.config import KLConfig
from kl_patches.experiments.progress import progress
from kl_patches.oracle import BiasReport, bias_report, make_problem
from kl_patches.theory import describe, verdict


def paper_grid(coef: float = 1.0) -> list[KLConfig]:
    """The configurations the bias table and plot compare."""
    return [
        KLConfig.parse("k1-in-reward", coef=coef),
        KLConfig.parse("k1-in-reward", coef=coef, reward_shape="reward_to_go"),
        KLConfig.parse("k1-in-loss", coef=coef),
        KLConfig.parse("k3-in-reward", coef=coef),
        KLConfig.parse("k3-in-loss", coef=coef),
        KLConfig.parse("k1-in-both", coef=coef),
        KLConfig.parse("k3-in-both", coef=coef),
        KLConfig.parse("k2-in-loss", coef=coef),
        KLConfig.parse("k2-in-loss", coef=coef, granularity="sequence"),
        KLConfig.parse("k3-in-loss", coef=coef, importance_weighting="token"),
    ]


def label(config: KLConfig) -> str:
    """Table label, with the reward shape when it is not the default."""
    text = describe(config)
    if config.has_reward and config.reward_shape != "sequence":
        text += f" [{config.reward_shape}]"
    return text


def run_table(
    vocab: int = 3,
    length: int = 4,
    seed: int = 0,
    batch_size: int = 16,
    num_batches: int = 400,
    show_progress: bool = True,
) -> list[BiasReport]:
    """One :class:`BiasReport` per configuration of :func:`paper_grid`."""
    enum, logits, ref = make_problem(vocab, length, seed)
    grid = paper_grid()
    return [
        bias_report(c, enum, logits, ref, batch_size, num_batches, seed)
        for c in progress(grid, len(grid), "bias", show_progress)
    ]


NUMERICAL_ZERO = 1e-12
"""Relative size below which an exact quantity is round-off: printed as such, not as digits."""


def _bias_cell(r: BiasReport, width: int = 0) -> str:
    if r.exact_relative_bias < NUMERICAL_ZERO:
        return f"{'<1e-12':>{width}}"
    return f"{r.exact_relative_bias:{width}.2e}"


def _cosine_cell(r: BiasReport, width: int = 0) -> str:
    """The cosine, or ``-`` when the expected gradient is numerically zero (no direction)."""
    if r.expected_norm < NUMERICAL_ZERO:
        return f"{'-':>{width}}"
    return f"{r.cosine:{width}.3f}"


def format_table(reports: list[BiasReport]) -> str:
    """Fixed-width text table of the reports."""
    head = (
        f"{'configuration':44} {'gradient':28} {'exact bias':>10} {'cosine':>7} "
        f"{'MC bias':>8} {'MC s.e.':>8} {'variance':>9}"
    )
    lines = [head, "-" * len(head)]
    for r in reports:
        lines.append(
            f"{label(r.config):44} {verdict(r.config).gradient:28} {_bias_cell(r, 10)} "
            f"{_cosine_cell(r, 7)} {r.mc_relative_bias:8.3f} {r.mc_standard_error:8.3f} "
            f"{r.variance:9.3e}"
        )
    lines.append(
        "exact bias = ||E[g] - coef*grad KL(pi||pi_ref)|| / ||coef*grad KL||, by enumeration; "
        "MC columns from the mean of N batch estimates; variance per coordinate of one batch "
        "estimate / ||grad KL||^2."
    )
    return "\n".join(lines)


def format_markdown(reports: list[BiasReport]) -> str:
    """The same table as :func:`format_table`, as Markdown (for docs/results.md)."""
    lines = [
        "| configuration | expected gradient | exact bias | cosine | MC bias | MC s.e. "
        "| variance |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in reports:
        lines.append(
            f"| {label(r.config)} | `{verdict(r.config).gradient}` | {_bias_cell(r)} "
            f"| {_cosine_cell(r)} | {r.mc_relative_bias:.3f} | {r.mc_standard_error:.3f} "
            f"| {r.variance:.3e} |"
        )
    return "\n".join(lines)


def run_sweep(
    vocab: int = 3,
    lengths: tuple[int, ...] = (1, 2, 3, 4, 5, 6),
    seed: int = 0,
    batch_size: int = 16,
    num_batches: int = 200,
    show_progress: bool = True,
) -> list[BiasReport]:
    """Reports for every configuration at every sequence length."""
    out: list[BiasReport] = []
    for t in progress(lengths, len(lengths), "lengths", show_progress):
        out += run_table(vocab, t, seed, batch_size, num_batches, show_progress=False)
    return out


def plot_sweep(reports: list[BiasReport], path: str) -> None:
    """Bias (left) and variance (right) against sequence length, one line per configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_b, ax_v) = plt.subplots(1, 2, figsize=(12, 4.5))
    names = list(dict.fromkeys(label(r.config) for r in reports))
    for name in names:
        rows = [r for r in reports if label(r.config) == name]
        xs = [r.length for r in rows]
        style = ":" if name.startswith("k1-in-reward") else "-"
        ax_b.plot(xs, [r.exact_relative_bias for r in rows], style, marker="o", label=name)
        ax_v.plot(xs, [r.variance for r in rows], style, marker="o", label=name)
    ax_b.set(xlabel="sequence length T", ylabel="relative bias (exact)", yscale="symlog")
    ax_b.set_yscale("symlog", linthresh=1e-3)
    ax_v.set(xlabel="sequence length T", ylabel="variance / ||grad KL||^2", yscale="log")
    ax_b.set_title("Gradient bias vs the sequence reverse KL")
    ax_v.set_title("Per-coordinate variance of a batch estimate")
    ax_v.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str]) -> int:
    """Entry point of ``kl-patches bias``."""
    parser = argparse.ArgumentParser(prog="kl-patches bias", description=__doc__.split("\n")[0])
    parser.add_argument("--vocab", type=int, default=3, help="vocabulary size V (default 3)")
    parser.add_argument("--length", type=int, default=4, help="sequence length T (default 4)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--num-batches", type=int, default=400)
    parser.add_argument("--plot", metavar="FILE.png", help="also sweep T=1..6 and plot")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.vocab < 2 or args.length < 1 or args.vocab**args.length > 20000:
        parser.error("need V >= 2, T >= 1 and V**T <= 20000 (every sequence is enumerated)")
    reports = run_table(
        args.vocab, args.length, args.seed, args.batch_size, args.num_batches, not args.quiet
    )
    if args.json:
        print(json.dumps([_as_json(r) for r in reports], indent=2))
    elif args.markdown:
        print(format_markdown(reports))
    else:
        print(
            f"V={args.vocab}, T={args.length}, seed={args.seed}, batch={args.batch_size}, "
            f"N={args.num_batches} batches"
        )
        print(format_table(reports))
    if args.plot:
        sweep = run_sweep(
            args.vocab, seed=args.seed, batch_size=args.batch_size, show_progress=not args.quiet
        )
        plot_sweep(sweep, args.plot)
        print(f"plot written to {args.plot}")
    return 0


def _as_json(r: BiasReport) -> dict[str, object]:
    d = asdict(r)
    d["config"] = r.config.to_dict()
    d["label"] = label(r.config)
    d["gradient"] = verdict(r.config).gradient
    return d
