"""``kl-patches smoke trl|verl|openrlhf``: a few real training steps on the CPU, nothing downloaded.

Each library's own trainer runs ``--steps`` (default 3) steps on a tiny random Qwen2 built on
this machine (:mod:`kl_patches.experiments.tiny`) with the KL configuration of the ``--kl``
flags (default k1-in-reward at 0.05), then the KL metrics the library logged are printed, one
row per metric and a column per step. A time estimate comes first.

* ``trl``: ``kl_patches.trl.GRPOTrainer`` in this process (about a minute on two cores).
* ``verl``: ``kl-patches verl --kl ... -- <overrides>``, verl's own ``main_ppo`` with Ray, on
  verl 0.9.1; ``openrlhf``: ``python -m kl_patches.openrlhf <flags> --kl ...``, OpenRLHF's own
  ``train_ppo_ray`` with Ray, on OpenRLHF 0.11.2. Both are launched in a subprocess exactly as a
  user launches them, with the CPU stand-ins of :mod:`kl_patches.experiments.cpu` loaded in
  that run only (about 2 minutes and 1 minute on two cores, most of it start-up).

Exit 0 when every step logged its KL metrics, 1 when the run failed or logged none, 2 (one line
naming what to install) when the library or one of its CPU dependencies is missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from kl_patches.adapters import flags
from kl_patches.cli import errors

LIBRARIES = ("trl", "verl", "openrlhf")
"""The libraries ``smoke`` runs."""

COEF = flags.Default(
    0.05, "kl-patches' default for every trial, large enough to show in three steps"
)
"""The coefficient of every trial unless ``--kl.coef`` is given."""


def parser() -> argparse.ArgumentParser:
    """``kl-patches smoke`` options."""
    p = errors.ArgumentParser(
        prog="kl-patches smoke",
        description="A few real training steps of a library's own trainer on the CPU with a "
        "tiny model built here (no GPU, no download), printing the KL metrics it logged.",
    )
    p.add_argument(
        "library",
        choices=LIBRARIES,
        help="the library to try: trl (about a minute on two cores), verl (about 2 minutes), "
        "openrlhf (about a minute); it must be installed here",
    )
    p.add_argument("--steps", type=errors.at_least(1), default=3, help="training steps (default 3)")
    p.add_argument(
        "--output-dir",
        metavar="DIR",
        help="keep the tiny model and the run (its log: DIR/run.log) here (default: a "
        "temporary folder, removed)",
    )
    flags.add_arguments(p, defaults={"coef": COEF})
    errors.add_debug_option(p)
    return p


@errors.command("kl-patches smoke", debug_option=True)
def main(argv: list[str]) -> int:
    """Entry point of ``kl-patches smoke``; returns 0 when the run logged its KL metrics."""
    args = parser().parse_args(argv)
    config = flags.build(
        args.kl_name or "k1-in-reward",
        flags.values_from_namespace(args),
        flags.base_of({"coef": COEF}),
    )
    if args.library != "trl":
        _check_library(args.library)
    if args.output_dir is not None:
        errors.writable_dir("--output-dir", args.output_dir)
        Path(args.output_dir).mkdir(parents=True, exist_ok=True)
        return _run(args, config, Path(args.output_dir))
    with tempfile.TemporaryDirectory(prefix="kl-patches-smoke-") as folder:
        return _run(args, config, Path(folder))


def _run(args: argparse.Namespace, config: Any, folder: Path) -> int:
    coef_given = hasattr(args, "kl_field_coef")
    if args.library == "trl":
        return run_trl(config, args.steps, folder, coef_given)
    return run_library(args.library, config, args.steps, folder, coef_given)


def _check_library(library: str) -> None:
    """Exit 2 naming what to install when the library or a CPU dependency is missing."""
    from kl_patches.experiments.cpu import trial

    name = trial.NAMES[library]
    lacking = trial.missing(library)
    if lacking:
        raise errors.UsageError(
            f"smoke {library} needs {name} and its CPU dependencies in this environment; "
            f"missing: {'; '.join(lacking)}. The CPU install: {trial.module(library).INSTALL}",
            field=library,
        )
    problem = trial.release_problem(library)
    if problem is not None:
        raise errors.UsageError(
            f"{problem}: pip install --no-deps {library}=={trial.RELEASES[library][-1]} in a "
            f"virtual environment of its own to try kl-patches with {name} on a CPU",
            field=library,
        )


def estimate(library: str, steps: int) -> str:
    """``about 2 minutes on two CPU cores``: what ``steps`` steps of ``library`` take."""
    if library == "trl":
        seconds = TRL_SECONDS[0] + TRL_SECONDS[1] * steps
    else:
        from kl_patches.experiments.cpu import trial

        start_up, per_step = trial.module(library).SECONDS
        seconds = start_up + per_step * steps
    minutes = round(seconds / 60)
    return (
        "under a minute"
        if minutes < 1
        else "about a minute"
        if minutes == 1
        else (f"about {minutes} minutes")
    )


TRL_SECONDS = (15, 10)
"""``smoke trl`` on two cores: start-up (model built, TRL imported), then seconds per step."""


def run_library(library: str, config: Any, steps: int, folder: Path, coef_given: bool) -> int:
    """``steps`` steps of verl's or OpenRLHF's own trainer, launched as a user launches it."""
    from kl_patches.experiments.cpu import trial

    started = time.monotonic()
    name = trial.NAMES[library]
    kl = flags.to_tokens(config)
    if "--kl.coef" not in kl:  # the launchers' own default is the library's coefficient
        kl += ["--kl.coef", f"{config.coef!r}"]
    errors.say(
        f"kl-patches smoke {library}: {steps} steps of {name}'s own trainer on the CPU with "
        f"{config.short_name} (coef {config.coef:g}, "
        f"{'from --kl.coef' if coef_given else 'the trial default'}); "
        f"{estimate(library, steps)} on two cores, most of it start-up (log: {folder / 'run.log'})"
    )
    outcome = trial.run(library, kl, steps, folder, errors.say)
    if outcome.returncode != 0:
        errors.say(outcome.tail())
        errors.say(
            f"kl-patches smoke {library}: the run failed (exit {outcome.returncode}) after "
            f"{outcome.wall_s:.0f} s; the end of its log is above"
        )
        return 1
    print(step_table(outcome.steps, f"KL metrics logged by {name}"))
    logged = sorted(outcome.steps)
    keys = kl_keys(outcome.steps)
    if logged != list(range(1, steps + 1)) or (config.placement != "none" and not keys):
        errors.say(
            f"kl-patches smoke {library}: {name} logged steps {logged} and KL metrics "
            f"{keys or 'none'}; expected {steps} steps with KL metrics"
        )
        return 1
    print(
        f"kl-patches smoke {library}: {len(logged)} steps with {config.short_name} in "
        f"{time.monotonic() - started:.0f} s ({outcome.wall_s:.0f} s in {name}'s launcher)"
    )
    return 0


def kl_keys(steps: dict[int, dict[str, Any]]) -> list[str]:
    """The logged metric names about the KL (``kl`` in the name), sorted."""
    return sorted({k for metrics in steps.values() for k in metrics if "kl" in k.lower()})


def step_table(steps: dict[int, dict[str, Any]], title: str) -> str:
    """The KL metrics (and the task score) per step: a row per metric, a column per step."""
    from kl_patches.experiments.tables import Table, render

    score = [k for k in ("critic/score/mean", "reward") if any(k in m for m in steps.values())]
    order = sorted(steps)
    table = Table(title, ["metric", *(f"step {s}" for s in order)])
    for key in [*score[:1], *kl_keys(steps)]:
        table.add(key, *(cell(steps[s].get(key)) for s in order))
    return render(table)


def run_trl(config: Any, steps: int, folder: Path, coef_given: bool = False) -> int:
    """Train ``steps`` GRPO steps of the tiny model in ``folder``; print the KL metrics."""
    from kl_patches.experiments import tiny  # sets the offline environment before TRL loads

    tiny.offline()
    if importlib.util.find_spec("trl") is None:
        raise errors.UsageError(
            "smoke trl needs TRL, which is not installed here: pip install 'kl-patches[trl]' "
            "(in the virtual environment you train in)",
            field="trl",
        )
    started = time.monotonic()
    errors.say(
        f"kl-patches smoke trl: {steps} TRL GRPO steps on the CPU; "
        f"{estimate('trl', steps)} on two cores"
    )
    import torch
    from transformers import TrainerCallback
    from transformers.utils import logging as hf_logging

    from kl_patches.adapters.launch_report import LaunchReport, announce, coef_source
    from kl_patches.adapters.trl import hooks
    from kl_patches.adapters.trl.launch import updates_of

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()  # bars of saving/loading the tiny model: noise here
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"transformers\..*")
    torch.set_num_threads(2)
    model_dir = tiny.build_model_dir(folder / "model")
    import trl as trl_module

    arguments = trl_module.GRPOConfig(
        **tiny.common_args(folder / "run", max_steps=steps, scale_rewards="none")
    )
    announce(
        LaunchReport(
            prog="kl-patches smoke trl",
            library="TRL",
            config=config,
            coef_source=coef_source(["--kl.coef"] if coef_given else [], COEF.source),
            route="kl_patches.trl.GRPOTrainer on a tiny random Qwen2 built in "
            f"{model_dir} (CPU, fp32, {steps} steps of 8 completions in groups of 4)",
            updates=updates_of(arguments),
        )
    )
    kept: list[dict[str, float]] = []

    class Collect(TrainerCallback):  # type: ignore[misc]
        """Keeps every dict TRL logs during training."""

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if logs and "train_runtime" not in logs:  # the end-of-training summary is not a step
                kept.append({"step": float(state.global_step), **logs})

    from kl_patches.trl import GRPOTrainer

    trainer = GRPOTrainer(
        str(model_dir),
        tiny.target_reward,
        args=arguments,
        train_dataset=tiny.dataset(),
        processing_class=tiny.build_tokenizer(),
        kl=config,
    )
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # the table below says it once, readably
    trainer.add_callback(Collect())
    with errors.library_code():
        trainer.train()
    elapsed = time.monotonic() - started
    print(metrics_table(kept))
    sources = hooks.penalty_sources(trainer)
    kl_keys = sorted({k for entry in kept for k in entry if "kl" in k.lower()})
    if config.placement != "none" and not kl_keys:
        errors.say("kl-patches smoke trl: no KL metric was logged: the KL hooks did not run")
        return 1
    where = ", ".join(f"{k}: {v}" for k, v in sorted(sources.items())) or "no reward side"
    print(
        f"kl-patches smoke trl: {len(kept)} steps with {config.short_name} in {elapsed:.0f} s; "
        f"reward-side penalty sources per generation batch: {where}"
    )
    return 0


def metrics_table(logs: list[dict[str, float]]) -> str:
    """The logged KL metrics (and the task reward) per step, as a rich table rendered to text."""
    from kl_patches.experiments.tables import Table, render

    keys = sorted({k for entry in logs for k in entry if "kl" in k.lower()})
    reward = "reward" if any("reward" in entry for entry in logs) else None
    columns = ["step", *([reward] if reward else []), *keys]
    table = Table("KL metrics logged by TRL", columns)
    for entry in logs:
        table.add(
            *(f"{int(entry['step'])}" if c == "step" else cell(entry.get(c)) for c in columns)
        )
    return render(table)


def cell(value: object) -> str:
    """A logged value as a table cell: 4 significant digits, ``-`` where the step has none."""
    if isinstance(value, str):
        try:
            return f"{float(value):.4g}"
        except ValueError:
            return value
    return "-" if not isinstance(value, (int, float)) else f"{value:.4g}"


if __name__ == "__main__":
    sys.exit(main())
