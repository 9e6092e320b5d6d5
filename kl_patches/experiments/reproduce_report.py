"""Tables, summaries and plots of the miniature reproduction (:mod:`.reproduce`).

"Final" is the exact value after the last update; "best" is the highest exact regularised
objective reached at any step of a run. Both are averaged over seeds (mean +- sample std).
The ``none`` configuration (no KL) is trained once per seed and scored at every beta.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from kl_patches.config import KLConfig
from kl_patches.experiments.reproduce_train import RunResult


@dataclass(frozen=True)
class Stat:
    """Mean and sample standard deviation over seeds."""

    mean: float
    std: float

    @classmethod
    def of(cls, values: list[float]) -> Stat:
        """Mean and std (0 for one value)."""
        return cls(statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0)

    def __str__(self) -> str:
        return f"{self.mean:7.3f}±{self.std:5.3f}"


@dataclass(frozen=True)
class Row:
    """One (configuration, beta) line of the table."""

    name: str
    beta: float
    seeds: int
    reward: Stat
    """Final E[R]."""
    reverse_kl: Stat
    """Final KL(pi || pi_ref)."""
    objective: Stat
    """Final E[R] - beta * KL(pi || pi_ref)."""
    best_objective: Stat
    """Best objective reached during training."""
    forward_kl: Stat
    """Final KL(pi_ref || pi)."""
    optimum: float
    """The exact optimum of the objective (mean over seeds' tasks)."""


def runs_for(runs: list[RunResult], name: str, beta: float) -> list[RunResult]:
    """The runs of one configuration at one beta (``none`` runs serve every beta)."""
    if name == "none":
        return [r for r in runs if r.name == name]
    return [r for r in runs if r.name == name and abs(r.config.coef - beta) < 1e-12]


def summarise(runs: list[RunResult], betas: tuple[float, ...]) -> list[Row]:
    """One :class:`Row` per (configuration, beta), configurations in first-seen order."""
    names = list(dict.fromkeys(r.name for r in runs))
    rows = []
    for beta in betas:
        for name in names:
            group = runs_for(runs, name, beta)
            if not group:
                continue
            objectives = [r.objective(beta) for r in group]
            rows.append(
                Row(
                    name=name,
                    beta=beta,
                    seeds=len(group),
                    reward=Stat.of([r.reward[-1] for r in group]),
                    reverse_kl=Stat.of([r.reverse_kl[-1] for r in group]),
                    objective=Stat.of([o[-1] for o in objectives]),
                    best_objective=Stat.of([max(o) for o in objectives]),
                    forward_kl=Stat.of([r.forward_kl[-1] for r in group]),
                    optimum=statistics.fmean(r.optimum[beta] for r in group),
                )
            )
    return rows


def format_table(rows: list[Row]) -> str:
    """Fixed-width text table, one block per beta."""
    width = max([22, *(len(r.name) for r in rows)])
    head = (
        f"{'beta':>5} {'configuration':{width}} {'final E[R]':>13} {'final KL':>13} "
        f"{'final obj':>13} {'best obj':>13} {'fwd KL':>13} {'optimum':>8}"
    )
    lines = [head, "-" * len(head)]
    last_beta = None
    for r in rows:
        if last_beta is not None and r.beta != last_beta:
            lines.append("")
        last_beta = r.beta
        lines.append(
            f"{r.beta:5g} {r.name:{width}} {r.reward!s:>13} {r.reverse_kl!s:>13} "
            f"{r.objective!s:>13} {r.best_objective!s:>13} {r.forward_kl!s:>13} {r.optimum:8.3f}"
        )
    lines.append(
        "obj = E[R] - beta*KL(pi||pi_ref), all exact by enumeration; mean±std over seeds; "
        "optimum = beta*log E_ref[exp(R/beta)]."
    )
    return "\n".join(lines)


def runs_to_json(runs: list[RunResult]) -> str:
    """Every run's metrics as JSON (``kl-patches reproduce --json FILE``)."""
    return json.dumps(
        [
            {
                "name": r.name,
                "config": r.config.to_dict(),
                "seed": r.seed,
                "reward": r.reward,
                "reverse_kl": r.reverse_kl,
                "forward_kl": r.forward_kl,
                "optimum": {str(k): v for k, v in r.optimum.items()},
            }
            for r in runs
        ]
    )


def runs_from_json(text: str) -> list[RunResult]:
    """Inverse of :func:`runs_to_json` (to redo tables and plots without training again)."""
    return [
        RunResult(
            name=d["name"],
            config=KLConfig.from_dict(d["config"]),
            seed=d["seed"],
            reward=d["reward"],
            reverse_kl=d["reverse_kl"],
            forward_kl=d["forward_kl"],
            optimum={float(k): v for k, v in d["optimum"].items()},
        )
        for d in json.loads(text)
    ]


def format_markdown(rows: list[Row]) -> str:
    """The same table in Markdown (for docs/results.md)."""
    lines = [
        "| beta | configuration | final E[R] | final KL | final objective | best objective "
        "| forward KL | optimum |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.beta:g} | {r.name} | {r.reward} | {r.reverse_kl} | {r.objective} | "
            f"{r.best_objective} | {r.forward_kl} | {r.optimum:.3f} |"
        )
    return "\n".join(line.replace("  ", " ") for line in lines)


def summary_lines(rows: list[Row], off_policy: bool = False) -> list[str]:
    """Plain sentences: per beta, the ranking by final objective (what the runs show)."""
    out = ["", "Ranking by final regularised objective (higher is better):"]
    for beta in dict.fromkeys(r.beta for r in rows):
        group = sorted((r for r in rows if r.beta == beta), key=lambda r: -r.objective.mean)
        ranking = " > ".join(f"{r.name} ({r.objective.mean:.3f})" for r in group)
        out.append(f"  beta={beta:g} (optimum {group[0].optimum:.3f}): {ranking}")
    if off_policy:
        by_key = {(r.name, r.beta): r for r in rows}
        for tag, what in (
            ("[iw]", "importance_weighting='token'"),
            ("[seq-iw]", "importance_weighting='sequence'"),
            ("[seq-iw c=1]", "importance_weighting='sequence', is_clip=1"),
            ("[seq-iw c=2]", "importance_weighting='sequence', is_clip=2"),
        ):
            pairs = [
                (name, beta, r, by_key[(f"{name} {tag}", beta)])
                for (name, beta), r in by_key.items()
                if (f"{name} {tag}", beta) in by_key
            ]
            if not pairs:
                continue
            out.append(f"What {what} changes (final objective, final KL):")
            for name, beta, r, weighted in pairs:
                out.append(
                    f"  beta={beta:g} {name:12} objective {r.objective.mean:7.3f} -> "
                    f"{weighted.objective.mean:7.3f}, KL {r.reverse_kl.mean:6.3f} -> "
                    f"{weighted.reverse_kl.mean:6.3f}"
                )
    return out


def plot_runs(
    runs: list[RunResult], betas: tuple[float, ...], folder: Path, off_policy: bool = False
) -> list[Path]:
    """Curves (rows: beta; columns: E[R], reverse KL, objective, forward KL) and a summary.

    Returns the written files: ``reproduce[_offpolicy]_curves.png`` and
    ``reproduce[_offpolicy]_summary.png`` (final objective's gap to the optimum against beta).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    stem = "reproduce_offpolicy" if off_policy else "reproduce"
    names = list(dict.fromkeys(r.name for r in runs))
    palette, size = ("tab10", 10) if len(names) <= 10 else ("tab20", 20)
    colours = {n: plt.get_cmap(palette)(i % size) for i, n in enumerate(names)}
    metrics = ("E[R]", "KL(pi||pi_ref)", "E[R] - beta*KL", "KL(pi_ref||pi)")
    fig, axes = plt.subplots(
        len(betas), 4, figsize=(17, 3.2 * len(betas)), squeeze=False, sharex=True
    )
    for i, beta in enumerate(betas):
        for name in names:
            group = runs_for(runs, name, beta)
            if not group:
                continue
            series = (
                [r.reward for r in group],
                [r.reverse_kl for r in group],
                [r.objective(beta) for r in group],
                [r.forward_kl for r in group],
            )
            style = "--" if name == "none" else "-"
            for j, values in enumerate(series):
                steps = range(len(values[0]))
                mean = [statistics.fmean(v) for v in zip(*values, strict=True)]
                std = [statistics.pstdev(v) for v in zip(*values, strict=True)]
                ax = axes[i][j]
                ax.plot(steps, mean, style, color=colours[name], lw=1.3, label=name)
                lo = [m - s for m, s in zip(mean, std, strict=True)]
                hi = [m + s for m, s in zip(mean, std, strict=True)]
                ax.fill_between(steps, lo, hi, color=colours[name], alpha=0.12, lw=0)
        axes[i][2].axhline(group[0].optimum[beta], color="k", lw=0.8, ls=":", label="optimum")
        for j, metric in enumerate(metrics):
            axes[i][j].set_title(f"beta={beta:g}: {metric}", fontsize=9)
    for ax in axes[-1]:
        ax.set_xlabel("update")
    axes[0][3].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    curves = folder / f"{stem}_curves.png"
    fig.savefig(curves, dpi=90)
    plt.close(fig)

    rows = summarise(runs, betas)
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for name in names:
        sel = [r for r in rows if r.name == name]
        gaps = [max(r.optimum - r.objective.mean, 1e-4) for r in sel]
        ax.errorbar(
            [r.beta for r in sel],
            gaps,
            yerr=[r.objective.std for r in sel],
            marker="o",
            capsize=3,
            color=colours[name],
            ls="--" if name == "none" else "-",
            label=name,
        )
    ax.set(xscale="log", yscale="log", xlabel="beta", ylabel="optimum - final objective")
    ax.set_title("Distance from the exact optimum of E[R] - beta*KL (lower is better)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    summary = folder / f"{stem}_summary.png"
    fig.savefig(summary, dpi=110)
    plt.close(fig)
    return [curves, summary]
