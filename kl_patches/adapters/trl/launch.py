"""``python -m kl_patches.trl {grpo,rloo} --config recipe.yaml [flags]``: TRL's own training
script with the KL switch.

Parses TRL's script arguments plus :class:`.KLArguments` (``--kl_*`` flags or YAML keys) with
``TrlParser``, calls :func:`.apply` with the resulting KLConfig, then runs TRL's
``trl.scripts.grpo.main`` / ``trl.scripts.rloo.main`` unchanged. Under ``accelerate launch -m
kl_patches.trl ...`` every rank runs this module, so every rank applies the patch; at exit each
rank reports (on stderr) its config and how often each hook ran, and fails if the loss or
scoring hooks never ran.
"""

from __future__ import annotations

import importlib
import os
import sys

from .arguments import KLArguments

SCRIPTS = {"grpo": "trl.scripts.grpo", "rloo": "trl.scripts.rloo"}
"""Subcommand -> TRL script module exposing ``make_parser()`` and ``main(...)``."""

USAGE = (
    "usage: python -m kl_patches.trl {grpo,rloo} [--config recipe.yaml] [TRL flags] "
    "[--kl_estimator k1|k2|k3] [--kl_placement reward|loss|both|none] [--kl_coef BETA] ..."
)


def main(argv: list[str] | None = None) -> int:
    """Run TRL's GRPO or RLOO script with the KL config applied; returns an exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help") or args[0] not in SCRIPTS:
        print(USAGE, file=sys.stderr)
        if args and args[0] not in ("-h", "--help"):
            print(f"unknown trainer {args[0]!r}; choose one of {sorted(SCRIPTS)}", file=sys.stderr)
            return 2
        return 0 if args else 2
    from trl import TrlParser

    from .patching import apply, hook_calls

    script = importlib.import_module(SCRIPTS[args[0]])
    types = (*script.make_parser().dataclass_types, KLArguments)
    *parsed, kl_args = TrlParser(types).parse_args_and_config(args[1:])
    config = apply(kl_args.to_config(), full_monitor=kl_args.kl_full_monitor)
    script.main(*parsed)
    calls = hook_calls()
    rank = os.environ.get("RANK", "0")
    world = os.environ.get("WORLD_SIZE", "1")
    print(f"kl_patches.trl rank {rank}/{world}: {config}; hook calls {calls}", file=sys.stderr)
    sys.stderr.flush()
    _shutdown_distributed()
    needed = ["__init__", "_generate_and_score_completions", "_compute_loss"]
    if config.placement != "none" and any(calls.get(n, 0) == 0 for n in needed):
        print(f"kl_patches.trl rank {rank}: the KL hooks did not run: {calls}", file=sys.stderr)
        return 1
    return 0


def _shutdown_distributed() -> None:
    """Leave the process group together: a rank exiting with gloo still up can hang the other."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
