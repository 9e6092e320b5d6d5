"""``kl-patches demo``: the built-in example a newcomer runs first (about a minute on 2 cores).

Five parts, each a plain function of this package:
  1. Table 1: which gradient each estimator x placement follows (:mod:`kl_patches.theory`);
  2. the exact bias table of a small tabular policy and the bias/variance-vs-length plot
     (:mod:`kl_patches.experiments.bias`);
  3. a short training run, k1-in-reward vs k3-in-loss (and no KL), measured exactly by
     enumeration (:mod:`kl_patches.experiments.reproduce`), with its plot;
  4. the audit of the recipes shipped under ``recipes/`` (:mod:`kl_patches.audit`), when the
     recipes folder is there (a source checkout);
  5. the audit of each library's default trainer (as the adapters record the tested releases).
Plots go to ``--out`` (default ``out/``). The command line is :mod:`kl_patches.cli.demo`.
"""

from __future__ import annotations

from pathlib import Path

from kl_patches.config import KLConfig
from kl_patches.experiments.reproduce import GridEntry, reproduce
from kl_patches.experiments.reproduce_report import Row
from kl_patches.experiments.reproduce_train import RunResult, ToyTask, TrainSettings

DEMO_GRID: list[GridEntry] = [
    ("k1-in-reward", lambda b: KLConfig.parse("k1-in-reward", coef=b)),
    ("k3-in-loss", lambda b: KLConfig.parse("k3-in-loss", coef=b)),
    ("k1-in-loss", lambda b: KLConfig.parse("k1-in-loss", coef=b)),
    ("none", lambda b: KLConfig(placement="none", coef=b)),
]
DEMO_BETAS = (0.1, 0.3)
RECIPE_SUFFIXES = (".sh", ".yaml", ".yml", ".json", ".overrides", ".txt")


def recipes_folder() -> Path | None:
    """``recipes/`` of a source checkout (next to the package), or None."""
    folder = Path(__file__).resolve().parents[2] / "recipes"
    return folder if folder.is_dir() else None


LOOP_DATA_MARK = "# kl-patches: data for a loop, not a launch"
"""First line of a recipe file that another script reads (a grid's run list), not a launch."""


def is_loop_data(path: Path) -> bool:
    """True for recipe files marked with :data:`LOOP_DATA_MARK` on their first line."""
    with path.open(errors="replace") as f:
        return f.readline().startswith(LOOP_DATA_MARK)


def audit_recipes(folder: Path) -> list[str]:
    """The audit's summary table of every recipe file, as lines (empty when nothing to audit).

    Each file is read as the library its folder is named after (``recipes/<library>/``); a file
    the audit cannot read is listed with the reason, never dropped.
    """
    from kl_patches import adapters, audit
    from kl_patches.audit import report as audit_report

    paths = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in RECIPE_SUFFIXES)
    entries, unreadable = [], []
    for path in paths:
        if is_loop_data(path):
            unreadable.append(f"  data, not a launch: {path.relative_to(folder)}")
            continue
        library = path.parent.name if path.parent.name in adapters.names() else None
        try:
            entries += audit.audit(str(path), library, {})
        except Exception as err:  # e.g. YAML without pyyaml: say so, audit the rest
            reason = str(err).split(": ", 1)[-1] if str(path) in str(err) else str(err)
            unreadable.append(f"  not read: {path.relative_to(folder)}: {reason}")
    if not entries:
        return unreadable
    text = audit_report.render_plain(entries)
    table = text.split("\n\n")[0].splitlines()
    counts = audit_report.summary(entries)
    return [*table, *unreadable, "", "  " + ", ".join(f"{v} {k}" for k, v in counts.items())]


def audit_defaults() -> list[str]:
    """The audit's table of each library's default trainer, as each adapter records the tested
    release's defaults (read without the library installed)."""
    from kl_patches import audit
    from kl_patches.audit import report as audit_report

    entries, failed = [], []
    for library, empty in (("verl", []), ("openrlhf", []), ("trl", {})):
        try:
            reading = audit.reader_for(library)(empty)
            entries.append(audit.audit_reading(reading, f"{library} defaults", "recorded"))
        except Exception as err:  # say which library could not be read, show the others
            failed.append(f"  {library}: defaults not read ({type(err).__name__}: {err})")
    table = audit_report.render_plain(entries).split("\n\n")[0].splitlines() if entries else []
    return [*table, *failed]


def run_training(steps: int, seeds: int, show_progress: bool) -> list[RunResult]:
    """The short on-policy comparison of :data:`DEMO_GRID`."""
    return reproduce(
        DEMO_BETAS,
        seeds,
        ToyTask(),
        TrainSettings(steps=steps),
        workers=1,
        show_progress=show_progress,
        grid=DEMO_GRID,
    )


def training_summary(rows: list[Row]) -> list[str]:
    """Plain sentences comparing the configurations at each beta."""
    out = []
    for beta in DEMO_BETAS:
        by = {r.name: r for r in rows if r.beta == beta}
        good, k3, k1l = by["k1-in-reward"], by["k3-in-loss"], by["k1-in-loss"]
        out.append(
            f"  beta={beta:g}: the best possible E[R] - beta*KL is {good.optimum:.3f}. "
            f"k1-in-reward ends at {good.objective.mean:.3f} (KL {good.reverse_kl.mean:.2f}); "
            f"k3-in-loss at {k3.objective.mean:.3f} (KL {k3.reverse_kl.mean:.2f}); "
            f"k1-in-loss at {k1l.objective.mean:.3f} (KL {k1l.reverse_kl.mean:.2f}, "
            f"no KL at all: KL {by['none'].reverse_kl.mean:.2f})."
        )
    return out


def closing_summary(rows: list[Row]) -> list[str]:
    """The last words of the demo, with the numbers of this run (nothing claimed in advance)."""
    beta = max(DEMO_BETAS)
    by = {r.name: r for r in rows if r.beta == beta}
    good, k3, k1l, off = by["k1-in-reward"], by["k3-in-loss"], by["k1-in-loss"], by["none"]
    gaps = [r.optimum - r.objective.mean for r in rows if r.name == "k1-in-reward"]
    k3_gaps = [r.optimum - r.objective.mean for r in rows if r.name == "k3-in-loss"]
    return [
        "",
        "Summary: only k1 in the reward (or the same estimator in reward and loss with one",
        "coefficient and a token sum, or k2 on the sequence log-ratio) follows the gradient of",
        "E[R] - beta*KL(pi||pi_ref). In this run k1-in-reward ends within "
        f"{max(gaps):.3f} of the exact optimum",
        f"and k3-in-loss within {max(k3_gaps):.3f}; at beta={beta:g} the KL to the reference "
        f"ends at {good.reverse_kl.mean:.2f} (k1-in-reward),",
        f"{k3.reverse_kl.mean:.2f} (k3-in-loss), {k1l.reverse_kl.mean:.2f} (k1-in-loss) and "
        f"{off.reverse_kl.mean:.2f} with no KL at all.",
        "Turn the fix on with KLConfig.parse('k1-in-reward', coef=beta); "
        "`kl-patches reproduce` runs the full grid.",
    ]
