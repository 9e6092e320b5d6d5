"""Tables and plots of the paper-shaped miniature (:mod:`.paper`), with intervals over seeds.

Each (configuration, beta) row gives the final in-domain accuracy, the two out-of-domain
accuracies (held-out lengths, held-out operations), the KL to the reference on in-domain prompts
and the number of runs that diverged, as mean and 95% t-interval over the seeds (the seeds are
the independent repetitions; the sampling error of one run's evaluation is much smaller and is
kept in the JSON). A run *diverged* when it stopped with an error (a non-finite value, say) or
when its final in-domain accuracy fell below half the reference's: the paper's "collapse".
Accuracy means are over the runs that finished; errored runs count only as diverged.

The relative out-of-domain gain of k1-in-reward over k3-in-loss (the paper's headline, about
+19% on MMLU science) is given per beta with a bootstrap interval over seeds.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .paper_train import RunRecord, final

GROUPS = ("id", "ood_length", "ood_ops")
"""Evaluation groups, in table order."""

_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
"""Student t 0.975 quantiles for 1..30 degrees of freedom (standard tables)."""


def t975(df: int) -> float:
    """The two-sided 95% Student t quantile for ``df`` degrees of freedom (normal above 30)."""
    if df < 1:
        return math.nan
    return _T975[df - 1] if df <= len(_T975) else 1.96


@dataclass(frozen=True)
class Interval:
    """Mean over seeds and the half-width of its 95% t-interval."""

    mean: float
    """Mean over runs."""
    half: float
    """Half-width of the 95% t-interval (nan for fewer than two runs)."""
    n: int
    """Number of runs."""

    @classmethod
    def of(cls, values: list[float]) -> Interval:
        """t-interval of ``values`` (nan mean when empty)."""
        n = len(values)
        if n == 0:
            return cls(math.nan, math.nan, 0)
        if n == 1:
            return cls(values[0], math.nan, 1)
        half = t975(n - 1) * statistics.stdev(values) / math.sqrt(n)
        return cls(statistics.fmean(values), half, n)

    def __str__(self) -> str:
        if math.isnan(self.mean):
            return "n/a"
        if math.isnan(self.half):
            return f"{self.mean:.3f}"
        return f"{self.mean:.3f} ± {self.half:.3f}"


@dataclass(frozen=True)
class Row:
    """One (configuration, beta) line of the table."""

    name: str
    """Configuration label."""
    beta: float
    """KL coefficient (0 for ``none``)."""
    acc: dict[str, Interval]
    """Final accuracy per evaluation group."""
    kl: Interval
    """Final KL(pi || pi_ref) on in-domain prompts (full-vocabulary estimate)."""
    entropy: Interval
    """Final mean per-token entropy on in-domain prompts."""
    runs: int
    """Runs in the row."""
    diverged: int
    """Runs that stopped with an error or collapsed (see the module docstring)."""


def reference_accuracy(records: list[RunRecord]) -> dict[str, float]:
    """The reference's accuracy per group (the step-0 evaluations, averaged over runs)."""
    out = {}
    for g in GROUPS:
        vals = [r.evals[0][f"acc_{g}"]["mean"] for r in records if r.evals and r.steps[0] == 0]
        out[g] = statistics.fmean(vals) if vals else math.nan
    return out


def diverged(record: RunRecord, ref_id: float) -> bool:
    """Stopped with an error, or final in-domain accuracy below half the reference's."""
    f = final(record)
    return f is None or f["acc_id"]["mean"] < 0.5 * ref_id


def summarise(records: list[RunRecord]) -> list[Row]:
    """One row per (configuration, beta), in the order the runs first appear."""
    ref = reference_accuracy(records)
    keys: list[tuple[str, float]] = []
    for r in records:
        if (r.name, r.beta) not in keys:
            keys.append((r.name, r.beta))
    rows = []
    for name, beta in keys:
        group = [r for r in records if (r.name, r.beta) == (name, beta)]
        finals = [f for f in (final(r) for r in group) if f is not None]
        rows.append(
            Row(
                name=name,
                beta=beta,
                acc={g: Interval.of([f[f"acc_{g}"]["mean"] for f in finals]) for g in GROUPS},
                kl=Interval.of([f["kl_full"]["mean"] for f in finals]),
                entropy=Interval.of([f["entropy"]["mean"] for f in finals]),
                runs=len(group),
                diverged=sum(diverged(r, ref["id"]) for r in group),
            )
        )
    return rows


def ood_gain(
    records: list[RunRecord], beta: float, group: str, resamples: int = 2000
) -> tuple[float, float, float] | None:
    """Relative gain of k1-in-reward over k3-in-loss in ``group`` accuracy at ``beta``:
    (gain, 2.5% and 97.5% bootstrap quantiles), resampling the seeds of each side; None when a
    side has no finished run."""

    def accs(name: str) -> list[float]:
        rs = [r for r in records if r.name == name and r.beta == beta]
        return [f[f"acc_{group}"]["mean"] for f in (final(r) for r in rs) if f is not None]

    a, b = accs("k1-in-reward"), accs("k3-in-loss")
    if not a or not b or statistics.fmean(b) == 0:
        return None
    rng = random.Random(0)
    gains = []
    for _ in range(resamples):
        ma = statistics.fmean(rng.choices(a, k=len(a)))
        mb = statistics.fmean(rng.choices(b, k=len(b)))
        if mb > 0:
            gains.append(ma / mb - 1)
    gains.sort()
    lo, hi = gains[int(0.025 * len(gains))], gains[int(0.975 * len(gains)) - 1]
    return statistics.fmean(a) / statistics.fmean(b) - 1, lo, hi


def format_markdown(records: list[RunRecord]) -> str:
    """The table in the paper's shape, the reference's row first."""
    ref = reference_accuracy(records)
    seeds = sorted({r.seed for r in records})
    lines = [
        "| beta | configuration | ID accuracy | OOD: longer inputs | OOD: other operations "
        "| KL to reference | entropy | diverged |",
        "|---|---|---|---|---|---|---|---|",
        f"| - | reference (before RL) | {ref['id']:.3f} | {ref['ood_length']:.3f} "
        f"| {ref['ood_ops']:.3f} | 0 | | |",
    ]
    for row in sorted(summarise(records), key=lambda r: (r.beta == 0, r.beta)):
        beta = "-" if row.name == "none" else f"{row.beta:g}"
        lines.append(
            f"| {beta} | {row.name} | {row.acc['id']} | {row.acc['ood_length']} "
            f"| {row.acc['ood_ops']} | {row.kl} | {row.entropy} | {row.diverged}/{row.runs} |"
        )
    lines.append("")
    lines.append(
        f"Mean ± 95% t-interval over {len(seeds)} seeds; accuracy is Pass@1 at temperature 1."
    )
    return "\n".join(lines)


def gain_lines(records: list[RunRecord]) -> list[str]:
    """The relative gain of k1-in-reward over k3-in-loss per beta and group."""
    betas = sorted({r.beta for r in records if r.name == "k1-in-reward"})
    out = []
    for beta in betas:
        parts = []
        for g in GROUPS:
            res = ood_gain(records, beta, g)
            if res is not None:
                parts.append(f"{g} {100 * res[0]:+.1f}% [{100 * res[1]:+.1f}, {100 * res[2]:+.1f}]")
        if parts:
            out.append(f"beta {beta:g}, k1-in-reward vs k3-in-loss: " + "; ".join(parts))
    return out


def curves(
    records: list[RunRecord], name: str, beta: float, key: str
) -> tuple[list[int], list[float]]:
    """Mean over runs of ``key`` (an eval field's mean) at each evaluation step (finished
    evaluations only; a step is kept when every run that got there has it)."""
    group = [r for r in records if r.name == name and r.beta == beta]
    steps = sorted({s for r in group for s in r.steps})
    xs, ys = [], []
    for s in steps:
        vals = [r.evals[r.steps.index(s)][key]["mean"] for r in group if s in r.steps]
        if vals:
            xs.append(s)
            ys.append(statistics.fmean(vals))
    return xs, ys


PLOT_KEYS = (
    ("acc_id", "ID accuracy"),
    ("acc_ood_length", "OOD accuracy (longer inputs)"),
    ("acc_ood_ops", "OOD accuracy (other operations)"),
    ("kl_full", "KL(pi || pi_ref), ID prompts"),
)


def plot(records: list[RunRecord], out_dir: Path, prefix: str = "paper") -> list[Path]:
    """``<prefix>_curves.png`` (metrics against updates, one column per beta) and
    ``<prefix>_summary.png`` (final ID against OOD accuracy with intervals)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    betas = sorted({r.beta for r in records if r.name != "none"})
    names = list(dict.fromkeys(r.name for r in records))
    colors = {n: f"C{i}" for i, n in enumerate(names)}
    fig, axes = plt.subplots(
        len(PLOT_KEYS), len(betas), figsize=(4.2 * len(betas), 2.8 * len(PLOT_KEYS)), squeeze=False
    )
    for j, beta in enumerate(betas):
        for i, (key, label) in enumerate(PLOT_KEYS):
            ax = axes[i][j]
            for name in names:
                b = 0.0 if name == "none" else beta
                xs, ys = curves(records, name, b, key)
                if xs:
                    style = ":" if name == "none" else "-"
                    ax.plot(xs, ys, style, color=colors[name], label=name, lw=1.4)
            if i == 0:
                ax.set_title(f"beta = {beta:g}")
            if j == 0:
                ax.set_ylabel(label, fontsize=8)
            if i == len(PLOT_KEYS) - 1:
                ax.set_xlabel("RL updates")
            if key == "kl_full":
                ax.set_yscale("symlog", linthresh=0.1)
            ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.suptitle("Mean over seeds; accuracy is Pass@1 at temperature 1", fontsize=9)
    fig.tight_layout()
    paths = [out_dir / f"{prefix}_curves.png"]
    fig.savefig(paths[0], dpi=110)
    plt.close(fig)

    rows = summarise(records)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for ax, group, label in (
        (axes[0], "ood_length", "OOD: longer inputs"),
        (axes[1], "ood_ops", "OOD: other operations"),
    ):
        ref = reference_accuracy(records)
        ax.plot([ref["id"]], [ref[group]], "k*", ms=12, label="reference")
        markers = {b: m for b, m in zip(betas, "osD^v", strict=False)}
        for row in rows:
            x, y = row.acc["id"], row.acc[group]
            if math.isnan(x.mean):
                continue
            m = "X" if row.name == "none" else markers.get(row.beta, "o")
            ax.errorbar(
                x.mean,
                y.mean,
                xerr=0 if math.isnan(x.half) else x.half,
                yerr=0 if math.isnan(y.half) else y.half,
                fmt=m,
                color=colors[row.name],
                ms=6,
                capsize=2,
                label=row.name if row.beta == betas[0] or row.name == "none" else None,
            )
        ax.set_xlabel("ID accuracy")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    shape_names = {
        "o": "circle",
        "s": "square",
        "D": "diamond",
        "^": "triangle",
        "v": "triangle down",
    }
    shapes = ", ".join(f"{shape_names[m]} beta {b:g}" for b, m in zip(betas, "osD^v", strict=False))
    axes[1].legend(fontsize=7, loc="best")
    fig.suptitle(
        f"Final accuracy, mean ± 95% interval over seeds ({shapes}; cross: no KL)", fontsize=9
    )
    fig.tight_layout()
    paths.append(out_dir / f"{prefix}_summary.png")
    fig.savefig(paths[1], dpi=110)
    plt.close(fig)
    return paths


def records_from_json_lines(text: str) -> list[RunRecord]:
    """Records of a results file of :func:`.paper.run_sweep` (the first line is the plan)."""
    lines = [x for x in text.splitlines() if x.strip()]
    return [RunRecord(**_record_fields(json.loads(x))) for x in lines[1:]]


def _record_fields(d: dict[str, Any]) -> dict[str, Any]:
    return {k: d[k] for k in RunRecord.__dataclass_fields__ if k in d}
