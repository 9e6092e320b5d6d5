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
    """Text table (rich), one group of rows per beta, with what the columns mean under it."""
    from kl_patches.experiments.tables import Table, render

    table = Table(
        "",
        ["beta", "configuration", "final E[R]", "final KL", "final obj", "best obj", "fwd KL",
         "optimum"],
        caption="obj = E[R] - beta*KL(pi||pi_ref), all exact by enumeration; mean±std over "
        "seeds; optimum = beta*log E_ref[exp(R/beta)].",
    )  # fmt: skip
    last_beta = None
    for r in rows:
        if last_beta is not None and r.beta != last_beta:
            table.section()
        last_beta = r.beta
        table.add(
            f"{r.beta:g}",
            r.name,
            *(_stat(x) for x in (r.reward, r.reverse_kl, r.objective, r.best_objective)),
            _stat(r.forward_kl),
            f"{r.optimum:.3f}",
        )
    return render(table)


def _stat(value: Stat) -> str:
    return f"{value.mean:.3f}±{value.std:.3f}"


def summary_sentence(rows: list[Row]) -> str:
    """What the table shows, in one paragraph computed from its numbers: which configuration
    ends closest to the exact optimum, per beta and on average, and where the lead is within
    the seeds' spread."""
    betas = list(dict.fromkeys(r.beta for r in rows))
    names = list(dict.fromkeys(r.name for r in rows))
    gap = {
        name: statistics.fmean(r.optimum - r.objective.mean for r in rows if r.name == name)
        for name in names
    }
    closest = min(names, key=lambda n: gap[n])
    worst = max(names, key=lambda n: gap[n])
    per_beta = []
    ties = []
    wins = 0
    for beta in betas:
        group = sorted((r for r in rows if r.beta == beta), key=lambda r: -r.objective.mean)
        best = group[0]
        wins += best.name == closest
        per_beta.append(f"{beta:g}: {best.name}")
        if len(group) > 1:
            second = group[1]
            spread = max(best.objective.std, second.objective.std)
            if best.objective.mean - second.objective.mean <= spread and spread > 0:
                ties.append(f"beta={beta:g} ({best.name} and {second.name})")
    text = (
        f"In short: {closest} ends closest to the exact optimum of E[R] - beta*KL, "
        f"{gap[closest]:.3g} below it on average over the {len(betas)} betas, and ends best at "
        f"{wins} of them (best per beta: {'; '.join(per_beta)}); {worst} ends farthest, "
        f"{gap[worst]:.3g} below on average."
    )
    if ties:
        text += (
            " Within one standard deviation over seeds the top two are tied at "
            + ", ".join(ties)
            + "."
        )
    return text


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
    runs: list[RunResult],
    betas: tuple[float, ...],
    folder: Path,
    off_policy: bool = False,
    model: str = "tabular",
) -> list[Path]:
    """Curves (rows: beta; columns: E[R], reverse KL, objective, forward KL) and a summary.

    Returns the written files: ``reproduce[_MODEL][_offpolicy]_curves.png`` and
    ``..._summary.png`` (final objective's gap to the optimum against beta); ``_MODEL`` names a
    policy other than the tabular one (``reproduce_transformer_curves.png``), so that runs of
    both models can share a folder.
    Every configuration has its own colour (a colour-blind-safe palette), line style and marker
    (:mod:`.plotstyle`); one legend serves all panels; in the summary, configurations at the
    same beta are drawn side by side so that none hides another.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kl_patches.experiments import plotstyle

    folder.mkdir(parents=True, exist_ok=True)
    stem = "reproduce" + ("" if model == "tabular" else f"_{model}")
    stem += "_offpolicy" if off_policy else ""
    names = list(dict.fromkeys(r.name for r in runs))
    looks = {n: plotstyle.style(i, emphasis=n == "k1-in-reward") for i, n in enumerate(names)}
    metrics = ("E[R]", "KL(pi||pi_ref)", "E[R] - beta*KL", "KL(pi_ref||pi)")
    ncol = min(len(names), 5)
    rows = plotstyle.legend_rows(len(names), ncol)
    fig, axes = plt.subplots(
        len(betas), 4, figsize=(17, 3.2 * len(betas) + 0.35 * rows), squeeze=False, sharex=True
    )
    for i, beta in enumerate(betas):
        group: list[RunResult] = []
        for name in names:
            group = runs_for(runs, name, beta) or group
            chosen = runs_for(runs, name, beta)
            if not chosen:
                continue
            series = (
                [r.reward for r in chosen],
                [r.reverse_kl for r in chosen],
                [r.objective(beta) for r in chosen],
                [r.forward_kl for r in chosen],
            )
            look = dict(looks[name])
            every = max(1, len(chosen[0].reward) // 8)
            for j, values in enumerate(series):
                steps = range(len(values[0]))
                mean = [statistics.fmean(v) for v in zip(*values, strict=True)]
                std = [statistics.pstdev(v) for v in zip(*values, strict=True)]
                ax = axes[i][j]
                ax.plot(steps, mean, label=name, markevery=(names.index(name), every), **look)
                lo = [m - s for m, s in zip(mean, std, strict=True)]
                hi = [m + s for m, s in zip(mean, std, strict=True)]
                ax.fill_between(steps, lo, hi, color=look["color"], alpha=0.10, lw=0)
        if group:
            axes[i][2].axhline(
                group[0].optimum[beta], color="k", lw=0.9, ls=":", label="exact optimum"
            )
        for j, metric in enumerate(metrics):
            axes[i][j].set_title(f"beta={beta:g}: {metric}", fontsize=9)
            axes[i][j].grid(True, color="0.92", lw=0.6)
    for ax in axes[-1]:
        ax.set_xlabel("update")
    handles, labels = axes[0][2].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="lower center",
        ncol=min(len(labels), 5),
        fontsize=9,
        frameon=False,
        bbox_to_anchor=(0.5, 0.0),
    )
    fig.tight_layout(rect=(0, 0.012 + 0.022 * plotstyle.legend_rows(len(labels), 5), 1, 1))
    curves = folder / f"{stem}_curves.png"
    fig.savefig(curves, dpi=90)
    plt.close(fig)

    rows_ = summarise(runs, betas)
    fig, ax = plt.subplots(figsize=(8.5, 5.2))
    for index, name in enumerate(names):
        sel = [r for r in rows_ if r.name == name]
        gaps = [max(r.optimum - r.objective.mean, 1e-4) for r in sel]
        xs = plotstyle.dodge([r.beta for r in sel], index, len(names), log=True)
        look = dict(looks[name])
        ax.errorbar(
            xs,
            gaps,
            yerr=[r.objective.std for r in sel],
            capsize=3,
            label=name,
            **look,
        )
    ax.set(xscale="log", yscale="log", xlabel="beta", ylabel="optimum - final objective")
    ax.set_xticks(list(betas), [f"{b:g}" for b in betas])
    ax.minorticks_off()
    ax.grid(True, color="0.92", lw=0.6)
    ax.set_title("Distance from the exact optimum of E[R] - beta*KL (lower is better)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    fig.tight_layout()
    summary = folder / f"{stem}_summary.png"
    fig.savefig(summary, dpi=110)
    plt.close(fig)
    return [curves, summary]
