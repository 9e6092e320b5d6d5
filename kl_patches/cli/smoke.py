"""``kl-patches smoke trl``: a real TRL GRPO run of a few steps on the CPU, nothing downloaded.

Builds a tiny random Qwen2, a character tokenizer and a toy prompt set on this machine
(:mod:`kl_patches.experiments.tiny`), runs ``--steps`` (default 3) training steps of
``kl_patches.trl.GRPOTrainer`` with the KL configuration of the ``--kl`` flags (default
k1-in-reward at 0.05) and prints the KL block first, then the KL metrics TRL logged at each
step. Exit 0 when every step logged its KL metrics and the hooks ran, 1 otherwise. It needs TRL
(``pip install 'kl-patches[trl]'``) and about a minute on two CPU cores.

``smoke verl`` and ``smoke openrlhf`` are not there yet: they need the end-to-end harness of
issue 37 (each library's own trainer on the CPU); until it lands they say so and exit 2.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from kl_patches.adapters import flags
from kl_patches.cli import errors

LIBRARIES = ("trl", "verl", "openrlhf")
"""The libraries ``smoke`` names (only TRL runs for now)."""

NOT_YET = (
    "smoke {library} is not available yet: a CPU run of {name}'s own trainer needs the "
    "end-to-end harness of issue 37 (tests/e2e), which has not landed. Meanwhile: "
    "kl-patches {library} ... --print{check} shows what a launch would run, and kl-patches "
    "audit reads your launch file"
)
"""What ``smoke verl|openrlhf`` says (exit 2)."""


def parser() -> argparse.ArgumentParser:
    """``kl-patches smoke`` options."""
    from kl_patches.adapters.trl.launch import DEFAULTS_OF_FLAGS

    p = errors.ArgumentParser(
        prog="kl-patches smoke",
        description="A few real training steps of a library's trainer on the CPU with a tiny "
        "model built here (no GPU, no download), printing the KL metrics.",
    )
    p.add_argument("library", choices=LIBRARIES, help="the library to try (trl runs today)")
    p.add_argument("--steps", type=errors.at_least(1), default=3, help="training steps (default 3)")
    p.add_argument(
        "--output-dir",
        metavar="DIR",
        help="keep the tiny model and the run here (default: a temporary folder, removed)",
    )
    flags.add_arguments(p, defaults=DEFAULTS_OF_FLAGS)
    errors.add_debug_option(p)
    return p


@errors.command("kl-patches smoke", debug_option=True)
def main(argv: list[str]) -> int:
    """Entry point of ``kl-patches smoke``; returns 0 when the run logged its KL metrics."""
    args = parser().parse_args(argv)
    if args.library != "trl":
        name = {"verl": "verl", "openrlhf": "OpenRLHF"}[args.library]
        check = " (or --check)" if args.library == "verl" else ""
        raise errors.UsageError(
            NOT_YET.format(library=args.library, name=name, check=check),
            field="library",
            value=args.library,
        )
    from kl_patches.adapters.trl.launch import DEFAULTS_OF_FLAGS

    config = flags.build(
        args.kl_name or "k1-in-reward",
        flags.values_from_namespace(args),
        flags.base_of(DEFAULTS_OF_FLAGS),
    )
    if args.output_dir is not None:
        errors.writable_dir("--output-dir", args.output_dir)
        Path(args.output_dir).mkdir(parents=True, exist_ok=True)
        return run_trl(config, args.steps, Path(args.output_dir), hasattr(args, "kl_field_coef"))
    with tempfile.TemporaryDirectory(prefix="kl-patches-smoke-") as folder:
        return run_trl(config, args.steps, Path(folder), hasattr(args, "kl_field_coef"))


def run_trl(config: Any, steps: int, folder: Path, coef_given: bool = False) -> int:
    """Train ``steps`` GRPO steps of the tiny model in ``folder``; print the KL metrics."""
    from kl_patches.experiments import tiny  # sets the offline environment before TRL loads

    tiny.offline()
    try:
        import trl  # noqa: F401
    except ImportError:
        raise errors.UsageError(
            "smoke trl needs TRL, which is not installed here: pip install 'kl-patches[trl]' "
            "(in the virtual environment you train in)",
            field="trl",
        ) from None
    import torch
    from transformers import TrainerCallback
    from transformers.utils import logging as hf_logging

    from kl_patches.adapters.launch_report import LaunchReport, announce, coef_source
    from kl_patches.adapters.trl import hooks
    from kl_patches.adapters.trl.launch import DEFAULTS_OF_FLAGS, updates_of

    started = time.monotonic()
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
            coef_source=coef_source(
                ["--kl.coef"] if coef_given else [], DEFAULTS_OF_FLAGS["coef"].source
            ),
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
            *(f"{int(entry['step'])}" if c == "step" else _number(entry.get(c)) for c in columns)
        )
    return render(table)


def _number(value: object) -> str:
    return "-" if not isinstance(value, (int, float)) else f"{value:.4g}"


if __name__ == "__main__":
    sys.exit(main())
