"""``python -m kl_patches.trl {grpo,rloo} --config recipe.yaml [flags]``: TRL's own training
script with the KL switch.

Takes the uniform ``--kl NAME --kl.FIELD VALUE`` flags (:mod:`kl_patches.adapters.flags`) out of
the command line, parses the rest (TRL's script arguments plus :class:`.KLArguments`, whose
``kl_*`` keys a YAML config may set) with ``TrlParser``, calls :func:`.apply` with the KLConfig of
both (the ``--kl`` flags win; ``--kl_FIELD`` flags still work, with a deprecation warning), then
runs TRL's
``trl.scripts.grpo.main`` / ``trl.scripts.rloo.main`` unchanged. Under ``accelerate launch -m
kl_patches.trl ...`` every rank runs this module, so every rank applies the patch; at exit each
rank reports (on stderr) its config and how often each hook ran, and fails if the loss or
scoring hooks never ran.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

from kl_patches.adapters import flags
from kl_patches.adapters.base import LaunchPayload

from .read import argv_dict
from .translate import FIELD_OF, KL_KEYS, MONITOR_FIELD, KLArguments, argument_name, patched_config

SCRIPTS = {"grpo": "trl.scripts.grpo", "rloo": "trl.scripts.rloo"}
"""Subcommand -> TRL script module exposing ``make_parser()`` and ``main(...)``."""

USAGE = (
    "usage: python -m kl_patches.trl {grpo,rloo} [--config recipe.yaml] [TRL flags] "
    "[--kl NAME] [--kl.FIELD VALUE ...]   (NAME: k1-in-reward, k3-in-loss, ..., none; "
    f"fields: {flags.valid_flags()})"
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

    from .delivery import export
    from .patch import apply, hook_calls

    ours, rest = flags.split_argv(args[1:])
    for token in rest:
        key = token[2:].partition("=")[0] if token.startswith("--") else ""
        if key in KL_KEYS:
            flags.deprecated(f"--{key}", f"--kl.{FIELD_OF[key]}")
    script = importlib.import_module(SCRIPTS[args[0]])
    types = (*script.make_parser().dataclass_types, KLArguments)
    *parsed, kl_args = TrlParser(types).parse_args_and_config(rest)
    base = kl_args.to_config()
    chosen = flags.config_from_tokens(ours, base=base.to_dict()) if ours else base
    config = apply(chosen, full_monitor=getattr(kl_args, MONITOR_FIELD))
    export(config)
    script.main(*parsed)
    calls = hook_calls()
    rank = os.environ.get("RANK", "0")
    world = os.environ.get("WORLD_SIZE", "1")
    _report(f"kl_patches.trl rank {rank}/{world}: {config}; hook calls {calls}")
    _shutdown_distributed()
    needed = ["__init__", "_generate_and_score_completions", "_compute_loss"]
    if config.placement != "none" and any(calls.get(n, 0) == 0 for n in needed):
        print(f"kl_patches.trl rank {rank}: the KL hooks did not run: {calls}", file=sys.stderr)
        return 1
    return 0


def _report(line: str) -> None:
    """One line on stderr in a single write: ranks share the stream, and ``print`` writes the
    text and the newline separately, so two ranks' reports could run into one line."""
    sys.stderr.flush()
    os.write(sys.stderr.fileno(), (line + "\n").encode())


def _shutdown_distributed() -> None:
    """Leave the process group together: a rank exiting with gloo still up can hang the other."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def launcher_payload(
    label: str, argv: list[str], base_dir: Path | None, origin: str = ""
) -> LaunchPayload:
    """``python -m kl_patches.trl grpo|rloo ...``: the TRL dict with the ``--kl`` flags as its
    ``kl_*`` keys (which the reader reads as a run through kl-patches)."""
    ours, rest = flags.split_argv(argv)
    data = argv_dict(rest, label.split()[-1], base_dir)
    if ours:
        base = patched_config(data)
        config = flags.config_from_tokens(ours, base=None if base is None else base.to_dict())
        assert config is not None  # tokens were given
        data.update({argument_name(k): v for k, v in config.to_dict().items()})
    return LaunchPayload(data)
