"""Exact and Monte-Carlo bias of each KL configuration's gradient.

On a seeded tabular autoregressive policy (:mod:`kl_patches.oracle`), for the paper's grid
(k1/k3 x reward/loss, both placements, token and sequence k2, importance-weighted k3), reports the
exact relative bias against the sequence-level reverse-KL gradient, the cosine, the Monte-Carlo
bias of the mean of N batch estimates with its standard error, and the per-coordinate variance.
``--plot FILE.png`` draws bias and variance against the sequence length (like the paper's Fig. 1).

``--off-policy`` samples from a behaviour policy mu at several levels of KL(mu || pi) per token
and compares unweighted, token-weighted, sequence-weighted (per-decision prefix weights) and
clipped sequence-weighted configurations inside a PPO-ratio (default) or REINFORCE trainer;
``--plot`` then draws bias and variance against the sequence length and against the level.

Round-off stays out of the printed tables: an exact bias below 1e-12 prints as ``<1e-12`` and
the cosine of a zero expected gradient as ``-``.
"""

from __future__ import annotations

import math
from dataclasses import asdict

from kl_patches.config import KLConfig
from kl_patches.experiments.progress import progress
from kl_patches.oracle import BiasReport, behaviour_at_level, bias_report, make_problem
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


def _bias(x: float) -> str:
    """An exact relative bias; below 1e-12 it is float round-off and prints as such."""
    return "<1e-12" if x < 1e-12 else f"{x:.2e}"


def _cosine(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.3f}"


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


def format_table(reports: list[BiasReport]) -> str:
    """Fixed-width text table of the reports."""
    head = (
        f"{'configuration':44} {'gradient':28} {'exact bias':>10} {'cosine':>7} "
        f"{'MC bias':>8} {'MC s.e.':>8} {'variance':>9}"
    )
    lines = [head, "-" * len(head)]
    for r in reports:
        lines.append(
            f"{label(r.config):44} {verdict(r.config).gradient:28} "
            f"{_bias(r.exact_relative_bias):>10} {_cosine(r.cosine):>7} "
            f"{r.mc_relative_bias:8.3f} {r.mc_standard_error:8.3f} {r.variance:9.3e}"
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
            f"| {label(r.config)} | `{verdict(r.config).gradient}` | "
            f"{_bias(r.exact_relative_bias)} | {_cosine(r.cosine)} | {r.mc_relative_bias:.3f} "
            f"| {r.mc_standard_error:.3f} | {r.variance:.3e} |"
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


# ---------------------------------------------------------------------------- off-policy
LEVELS = (0.01, 0.05, 0.2)
"""KL(mu || pi) per token of the behaviour policies the off-policy table compares."""
CLIPS = (1.0, 2.0, 5.0)
"""``is_clip`` values of the clipped sequence-weighted rows."""


def off_policy_grid(coef: float = 1.0, clips: tuple[float, ...] = CLIPS) -> list[KLConfig]:
    """Unweighted, token-weighted, sequence-weighted and clipped configurations."""
    seq = {"importance_weighting": "sequence", "coef": coef}
    rtg = {"reward_shape": "reward_to_go"}
    return [
        KLConfig.parse("k1-in-reward", coef=coef),
        KLConfig.parse("k1-in-reward", coef=coef, **rtg),
        KLConfig.parse("k3-in-loss", coef=coef, importance_weighting="token"),
        KLConfig.parse("k3-in-both", coef=coef, importance_weighting="token"),
        KLConfig.parse("k1-in-reward", **seq),
        KLConfig.parse("k1-in-reward", **seq, **rtg),
        KLConfig.parse("k3-in-both", **seq, **rtg),
        *(KLConfig.parse("k1-in-reward", **seq, **rtg, is_clip=c) for c in clips),
    ]


def weighting(config: KLConfig) -> str:
    """``none``, ``token``, ``sequence`` or ``sequence c=...`` (the table's weighting column)."""
    if config.importance_weighting == "sequence" and config.is_clip is not None:
        return f"sequence c={config.is_clip:g}"
    return config.importance_weighting


def run_off_policy(
    vocab: int = 3,
    length: int = 4,
    levels: tuple[float, ...] = LEVELS,
    seed: int = 0,
    batch_size: int = 16,
    num_batches: int = 400,
    trainer_ratio: bool = True,
    clips: tuple[float, ...] = CLIPS,
    show_progress: bool = True,
) -> list[BiasReport]:
    """One report per (level, configuration of :func:`off_policy_grid`), levels in order.

    The behaviour policy of each level is :func:`kl_patches.oracle.behaviour_at_level` with
    noise seed ``seed + 1``; sampling for the Monte-Carlo columns uses ``seed``.
    """
    enum, logits, ref = make_problem(vocab, length, seed)
    grid = off_policy_grid(clips=clips)
    jobs = [(level, c) for level in levels for c in grid]
    behaviours = {level: behaviour_at_level(enum, logits, level, seed + 1)[0] for level in levels}
    return [
        bias_report(
            c,
            enum,
            logits,
            ref,
            batch_size,
            num_batches,
            seed,
            behaviour_logits=behaviours[level],
            trainer_ratio=trainer_ratio,
        )
        for level, c in progress(jobs, len(jobs), "off-policy bias", show_progress)
    ]


def format_off_policy_table(reports: list[BiasReport]) -> str:
    """Fixed-width text table, one block per behaviour policy."""
    head = (
        f"{'configuration':57} {'weighting':14} {'exact bias':>10} {'cosine':>7} "
        f"{'MC bias':>8} {'MC s.e.':>8} {'variance':>9}"
    )
    lines: list[str] = []
    for kl, group in _by_behaviour(reports):
        r0 = group[0]
        lines += [
            "",
            f"KL(mu||pi) = {kl:.4g} ({kl / r0.length:.4g} per token), T={r0.length}, largest "
            f"prefix weight {r0.max_weight:.3g}, "
            f"{'PPO-ratio' if r0.trainer_ratio else 'REINFORCE'} trainer",
            head,
            "-" * len(head),
        ]
        for r in group:
            lines.append(
                f"{label(r.config):57} {weighting(r.config):14} "
                f"{_bias(r.exact_relative_bias):>10} {_cosine(r.cosine):>7} "
                f"{r.mc_relative_bias:8.3f} {r.mc_standard_error:8.3f} {r.variance:9.3e}"
            )
    lines.append(
        "exact bias = ||E_mu[g] - coef*grad KL(pi||pi_ref)|| / ||coef*grad KL|| by enumeration "
        "(samples from mu); MC columns from the mean of N batch estimates; variance per "
        "coordinate of one batch estimate / ||grad KL||^2."
    )
    return "\n".join(lines[1:])


def format_off_policy_markdown(reports: list[BiasReport]) -> str:
    """The off-policy table as Markdown, one row per (behaviour policy, configuration)."""
    lines = [
        "| KL(mu\\|\\|pi) per token | configuration | weighting | exact bias | cosine | MC bias "
        "| MC s.e. | variance |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kl, group in _by_behaviour(reports):
        for r in group:
            lines.append(
                f"| {kl / r.length:.4g} | {label(r.config)} | {weighting(r.config)} | "
                f"{_bias(r.exact_relative_bias)} | {_cosine(r.cosine)} | "
                f"{r.mc_relative_bias:.3f} | {r.mc_standard_error:.3f} | {r.variance:.3e} |"
            )
    return "\n".join(lines)


def _by_behaviour(reports: list[BiasReport]) -> list[tuple[float, list[BiasReport]]]:
    groups: dict[tuple[int, float], list[BiasReport]] = {}
    for r in reports:
        groups.setdefault((r.length, r.kl_behaviour), []).append(r)
    return [(kl, g) for (_, kl), g in groups.items()]


def run_off_policy_sweep(
    vocab: int = 3,
    lengths: tuple[int, ...] = (1, 2, 3, 4, 5, 6),
    level: float = 0.05,
    seed: int = 0,
    batch_size: int = 16,
    num_batches: int = 200,
    trainer_ratio: bool = True,
    clips: tuple[float, ...] = CLIPS,
    show_progress: bool = True,
) -> list[BiasReport]:
    """Reports for every configuration at every sequence length, at one level per token."""
    out: list[BiasReport] = []
    for t in progress(lengths, len(lengths), "lengths", show_progress):
        out += run_off_policy(
            vocab, t, (level,), seed, batch_size, num_batches, trainer_ratio, clips, False
        )
    return out


def plot_off_policy(by_length: list[BiasReport], by_level: list[BiasReport], path: str) -> None:
    """Bias and variance against T (top) and against KL(mu || pi) per token (bottom)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 8.5))
    panels = [
        (by_length, lambda r: r.length, "sequence length T"),
        (by_level, lambda r: r.kl_behaviour / r.length, "KL(mu||pi) per token"),
    ]
    for row, (reports, x_of, xlabel) in enumerate(panels):
        names = list(dict.fromkeys(f"{label(r.config)}" for r in reports))
        for name in names:
            rows = [r for r in reports if label(r.config) == name]
            xs = [x_of(r) for r in rows]
            kind = weighting(rows[0].config)
            style = "-" if kind.startswith("sequence") else ":"
            biases = [max(r.exact_relative_bias, 1e-13) for r in rows]  # round-off floor
            axes[row][0].plot(xs, biases, style, marker="o", label=name)
            axes[row][1].plot(xs, [r.variance for r in rows], style, marker="o", label=name)
        axes[row][0].axhline(1e-12, color="grey", lw=0.8, ls="--")
        axes[row][0].text(
            0.01,
            1.5e-12,
            "below: float round-off (shown at 1e-13)",
            fontsize=7,
            color="grey",
            transform=axes[row][0].get_yaxis_transform(),
        )
        axes[row][0].set(xlabel=xlabel, ylabel="relative bias (exact)", yscale="log")
        axes[row][1].set(xlabel=xlabel, ylabel="variance / ||grad KL||^2", yscale="log")
        if row == 1:
            axes[row][0].set_xscale("log")
            axes[row][1].set_xscale("log")
    r0, r1 = by_length[0], by_level[0]
    axes[0][0].set_title(f"Off-policy bias vs T (KL(mu||pi)/T = {r0.kl_behaviour / r0.length:.3g})")
    axes[0][1].set_title("Per-coordinate variance of a batch estimate")
    axes[1][0].set_title(f"Off-policy bias vs KL(mu||pi) per token (T = {r1.length})")
    axes[1][1].set_title("Per-coordinate variance of a batch estimate")
    axes[0][1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def as_json(r: BiasReport) -> dict[str, object]:
    """One report as a JSON-ready dict (config, label, gradient, weighting; no NaN)."""
    d = asdict(r)
    d["config"] = r.config.to_dict()
    d["label"] = label(r.config)
    d["gradient"] = verdict(r.config).gradient
    d["weighting"] = weighting(r.config)
    if math.isnan(r.cosine):
        d["cosine"] = None  # a zero expected gradient has no direction (strict JSON: no NaN)
    return d
