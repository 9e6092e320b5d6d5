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
the cosine of a zero expected gradient as ``-``. Each table ends with a sentence computed from
its numbers (:func:`summary`, :func:`off_policy_summary`): which configurations are unbiased,
how large the others' bias is, and whether the Monte-Carlo estimates agree.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict

from kl_patches.config import KLConfig
from kl_patches.experiments.progress import progress
from kl_patches.experiments.tables import Table, render, wrap
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


EXACT_ZERO = 1e-12
"""An exact relative bias below this is float round-off: the configuration is unbiased."""

CAPTION = (
    "exact bias = ||E[g] - coef*grad KL(pi||pi_ref)|| / ||coef*grad KL||, by enumeration; MC "
    "columns from the mean of N batch estimates; variance per coordinate of one batch estimate "
    "/ ||grad KL||^2."
)


def format_table(reports: list[BiasReport]) -> str:
    """The reports as a text table (rich), with what the columns mean under it."""
    table = Table(
        "",
        ["configuration", "gradient", "exact bias", "cosine", "MC bias", "MC s.e.", "variance"],
        caption=CAPTION,
    )
    for r in reports:
        table.add(
            label(r.config),
            verdict(r.config).gradient,
            _bias(r.exact_relative_bias),
            _cosine(r.cosine),
            f"{r.mc_relative_bias:.3f}",
            f"{r.mc_standard_error:.3f}",
            f"{r.variance:.3e}",
        )
    return render(table)


def _agreement(reports: list[BiasReport]) -> str:
    """How the Monte-Carlo column agrees with the exact one, in standard errors."""
    unbiased = [r for r in reports if r.exact_relative_bias < EXACT_ZERO]
    biased = [r for r in reports if r.exact_relative_bias >= EXACT_ZERO]
    parts = []
    if unbiased:
        worst = max(r.mc_relative_bias / max(r.mc_standard_error, 1e-300) for r in unbiased)
        parts.append(
            f"the Monte-Carlo bias of every unbiased one is within {worst:.1f} standard errors "
            "of zero"
        )
    if biased:
        apart = [
            abs(r.mc_relative_bias - r.exact_relative_bias) / max(r.mc_standard_error, 1e-300)
            for r in biased
        ]
        parts.append(
            f"the biased ones' Monte-Carlo bias lies within {max(apart):.1f} standard errors "
            "of their exact bias"
        )
    return " and ".join(parts)


def summary(reports: list[BiasReport]) -> str:
    """What the table shows, in one paragraph computed from its numbers."""
    unbiased = [r for r in reports if r.exact_relative_bias < EXACT_ZERO]
    biased = sorted(
        (r for r in reports if r.exact_relative_bias >= EXACT_ZERO),
        key=lambda r: r.exact_relative_bias,
    )
    n = len(reports)
    out = [
        f"In short: {len(unbiased)} of {n} configurations follow the gradient of the sequence "
        f"reverse KL exactly ({', '.join(label(r.config) for r in unbiased) or 'none'})"
    ]
    if biased:
        low, high = biased[0], biased[-1]
        out.append(
            f"; the other {len(biased)} are biased by {low.exact_relative_bias:.2g} "
            f"({label(low.config)}) to {high.exact_relative_bias:.2g} ({label(high.config)}) "
            "of its norm"
        )
    if unbiased:
        calm = min(unbiased, key=lambda r: r.variance)
        out.append(
            f". Among the unbiased ones {label(calm.config)} has the lowest variance "
            f"({calm.variance:.2e})"
        )
    agreement = _agreement(reports)
    out.append(f"; {agreement}." if agreement else ".")
    return "".join(out)


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
    """Bias (left) and variance (right) against sequence length, one series per configuration
    (:mod:`.plotstyle`: distinct colour, marker and line per series, coinciding series side by
    side, an exact zero in the shaded band at the bottom, one legend under both panels)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kl_patches.experiments import plotstyle

    names = list(dict.fromkeys(label(r.config) for r in reports))
    ncol = 4
    rows = plotstyle.legend_rows(len(names), ncol)
    fig, (ax_b, ax_v) = plt.subplots(1, 2, figsize=(12, 4.6 + 0.25 * rows))
    lengths = sorted({r.length for r in reports})
    for i, name in enumerate(names):
        series = [r for r in reports if label(r.config) == name]
        xs = plotstyle.dodge([r.length for r in series], i, len(names))
        look = plotstyle.style(i, emphasis=name.startswith("k1-in-reward"))
        ax_b.plot(xs, plotstyle.floor([r.exact_relative_bias for r in series]), label=name, **look)
        ax_v.plot(xs, [r.variance for r in series], label=name, **look)
    ax_b.set(xlabel="sequence length T", ylabel="relative bias (exact)", yscale="log")
    plotstyle.zero_band(ax_b)
    ax_v.set(xlabel="sequence length T", ylabel="variance / ||grad KL||^2", yscale="log")
    for ax in (ax_b, ax_v):
        plotstyle.integer_ticks(ax, lengths)
        ax.grid(True, which="major", color="0.9", lw=0.6)
    ax_b.set_title("Gradient bias vs the sequence reverse KL")
    ax_v.set_title("Per-coordinate variance of a batch estimate")
    plotstyle.shared_legend(fig, ax_b, ncol=ncol)
    fig.tight_layout(rect=(0, 0.01 + 0.035 * rows, 1, 1))
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
    """Text tables (rich), one per behaviour policy, with what the columns mean under them."""
    blocks: list[str] = []
    for kl, group in _by_behaviour(reports):
        r0 = group[0]
        title = (
            f"KL(mu||pi) = {kl:.4g} ({kl / r0.length:.4g} per token), T={r0.length}, largest "
            f"prefix weight {r0.max_weight:.3g}, "
            f"{'PPO-ratio' if r0.trainer_ratio else 'REINFORCE'} trainer"
        )
        table = Table(
            title,
            [
                "configuration",
                "weighting",
                "exact bias",
                "cosine",
                "MC bias",
                "MC s.e.",
                "variance",
            ],
        )
        for r in group:
            table.add(
                label(r.config),
                weighting(r.config),
                _bias(r.exact_relative_bias),
                _cosine(r.cosine),
                f"{r.mc_relative_bias:.3f}",
                f"{r.mc_standard_error:.3f}",
                f"{r.variance:.3e}",
            )
        blocks.append(render(table))
    caption = (
        "exact bias = ||E_mu[g] - coef*grad KL(pi||pi_ref)|| / ||coef*grad KL|| by enumeration "
        "(samples from mu); MC columns from the mean of N batch estimates; variance per "
        "coordinate of one batch estimate / ||grad KL||^2."
    )
    return "\n\n".join(blocks) + "\n" + wrap(caption)


def off_policy_summary(reports: list[BiasReport]) -> str:
    """What the off-policy tables show, in one paragraph computed from their numbers."""
    groups = _by_behaviour(reports)
    names = list(dict.fromkeys(label(r.config) for r in reports))
    always = [
        name
        for name in names
        if all(
            r.exact_relative_bias < EXACT_ZERO
            for _, g in groups
            for r in g
            if label(r.config) == name
        )
    ]
    levels = ", ".join(f"{kl / g[0].length:.3g}" for kl, g in groups)
    out = [
        f"In short: under samples from the behaviour policies (KL(mu||pi) per token {levels}), "
        f"{len(always)} of {len(names)} configurations stay exactly unbiased at every level "
        f"({', '.join(always) or 'none'})"
    ]
    kl_last, last = groups[-1]
    biased = sorted(
        (r for r in last if r.exact_relative_bias >= EXACT_ZERO),
        key=lambda r: r.exact_relative_bias,
    )
    if biased:
        out.append(
            f"; at the largest level ({kl_last / last[0].length:.3g} per token) the others' bias "
            f"runs from {biased[0].exact_relative_bias:.2g} ({label(biased[0].config)}) to "
            f"{biased[-1].exact_relative_bias:.2g} ({label(biased[-1].config)})"
        )
    clipped = sorted(
        (r for r in last if r.config.is_clip is not None),
        key=lambda r: float(r.config.is_clip or 0),
    )
    if len(clipped) > 1:
        biases = [r.exact_relative_bias for r in clipped]
        variances = [r.variance for r in clipped]
        trade = all(a >= b for a, b in itertools.pairwise(biases)) and all(
            a <= b for a, b in itertools.pairwise(variances)
        )
        each = ", ".join(
            f"is_clip={r.config.is_clip:g}: bias {r.exact_relative_bias:.2g}, variance "
            f"{r.variance:.2e}"
            for r in clipped
        )
        how = (
            "the tighter the clip, the larger the bias and the smaller the variance"
            if trade
            else "bias and variance do not simply trade against each other here"
        )
        out.append(f"; with clipped prefix weights {how} ({each})")
    return "".join(out) + "."


def format_off_policy_markdown(reports: list[BiasReport]) -> str:
    """The off-policy table as Markdown, one row per (behaviour policy, configuration)."""
    lines = [
        "| KL(mu&#124;&#124;pi) per token | configuration | weighting | exact bias | cosine "
        "| MC bias | MC s.e. | variance |",
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
    """Bias and variance against T (top) and against KL(mu || pi) per token (bottom), in the
    style of :func:`plot_sweep` (sequence-weighted configurations solid, the others dotted by
    their own line style; one legend under the four panels)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kl_patches.experiments import plotstyle

    names = list(dict.fromkeys(label(r.config) for r in (*by_length, *by_level)))
    ncol = 3
    rows = plotstyle.legend_rows(len(names), ncol)
    fig, axes = plt.subplots(2, 2, figsize=(13, 8.2 + 0.25 * rows))
    panels = [
        (by_length, lambda r: r.length, "sequence length T", False),
        (by_level, lambda r: r.kl_behaviour / r.length, "KL(mu||pi) per token", True),
    ]
    for row, (reports, x_of, xlabel, log_x) in enumerate(panels):
        for i, name in enumerate(names):
            series = [r for r in reports if label(r.config) == name]
            if not series:
                continue
            xs = plotstyle.dodge([x_of(r) for r in series], i, len(names), log=log_x)
            look = plotstyle.style(i, emphasis=weighting(series[0].config) == "sequence")
            biases = plotstyle.floor([r.exact_relative_bias for r in series])
            axes[row][0].plot(xs, biases, label=name, **look)
            axes[row][1].plot(xs, [r.variance for r in series], label=name, **look)
        axes[row][0].set(xlabel=xlabel, ylabel="relative bias (exact)", yscale="log")
        plotstyle.zero_band(axes[row][0])
        axes[row][1].set(xlabel=xlabel, ylabel="variance / ||grad KL||^2", yscale="log")
        for ax in axes[row]:
            ax.grid(True, which="major", color="0.9", lw=0.6)
            if log_x:
                ax.set_xscale("log")
            else:
                plotstyle.integer_ticks(ax, [int(x_of(r)) for r in reports])
    r0, r1 = by_length[0], by_level[0]
    axes[0][0].set_title(f"Off-policy bias vs T (KL(mu||pi)/T = {r0.kl_behaviour / r0.length:.3g})")
    axes[0][1].set_title("Per-coordinate variance of a batch estimate")
    axes[1][0].set_title(f"Off-policy bias vs KL(mu||pi) per token (T = {r1.length})")
    axes[1][1].set_title("Per-coordinate variance of a batch estimate")
    plotstyle.shared_legend(fig, axes[0][0], ncol=ncol)
    fig.tight_layout(rect=(0, 0.01 + 0.022 * rows, 1, 1))
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
