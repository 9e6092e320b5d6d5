"""``python -m kl_patches.trl {grpo,rloo} --config recipe.yaml [flags]``: TRL's own training
script with the KL switch.

Takes the uniform ``--kl NAME --kl.FIELD VALUE`` flags (:mod:`kl_patches.adapters.flags`) out of
the command line, parses the rest (TRL's script arguments plus :class:`.KLArguments`, whose
``kl_*`` keys a YAML config may set) with ``TrlParser``, calls :func:`.apply` with the KLConfig of
both (the ``--kl`` flags win; ``--kl_FIELD`` flags still work, with a deprecation warning), then
runs TRL's
``trl.scripts.grpo.main`` / ``trl.scripts.rloo.main`` unchanged. Under ``accelerate launch -m
kl_patches.trl ...`` every rank runs this module, so every rank applies the patch; at exit each
rank reports (on stderr, one write per line) its config and how often each hook ran, fails if
the loss or scoring hooks never ran, and ends with ``os._exit`` so that gloo's destructors
cannot deadlock (see :func:`main`). Bad arguments are one line on stderr and exit code 2
(:mod:`kl_patches.cli.errors`); the KL flags are checked before TRL is imported.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from kl_patches.adapters import flags
from kl_patches.adapters.base import LaunchPayload
from kl_patches.cli import errors
from kl_patches.config import ESTIMATOR_ALIASES, FIELD_CHOICES, KLConfig

from .read import argv_dict
from .translate import FIELD_OF, KL_KEYS, MONITOR_FIELD, KLArguments, argument_name, patched_config

SCRIPTS = {"grpo": "trl.scripts.grpo", "rloo": "trl.scripts.rloo"}
"""Subcommand -> TRL script module exposing ``make_parser()`` and ``main(...)``."""

USAGE = (
    "usage: python -m kl_patches.trl {grpo,rloo} [--config recipe.yaml] [TRL flags] "
    "[--kl NAME] [--kl.FIELD VALUE ...]   (NAME: k1-in-reward, k3-in-loss, ..., none; "
    f"fields: {flags.valid_flags()})"
)

_PROBE: dict[str, dict[str, Any]] = {
    "loss_coef": {"placement": "both"},
    "is_clip": {"importance_weighting": "sequence"},
}
"""Fields whose value is only valid next to another field: the value is checked next to it."""

_HELD: list[object] = []
"""The default process group, held from parsing to the end of the rank (see :func:`main`)."""


def _check_value(flag: str, field: str, text: str) -> None:
    """One KL field's value on its own (``flag`` as the user wrote it); UsageError if invalid."""
    item = flags.spec(field)
    if item.kind == "choice":
        valid = ESTIMATOR_ALIASES if field == "estimator" else FIELD_CHOICES[field]
        if (text.lower() if field == "estimator" else text) not in valid:
            raise errors.invalid(flag, text, list(item.choices))
        return
    try:
        value = flags.parse_value(item, text)
    except ValueError:
        none = " or none" if item.kind == "optional_float" else ""
        raise errors.invalid(flag, text, f"use a finite number{none}") from None
    try:
        KLConfig(**{**_PROBE.get(field, {}), field: value})
    except ValueError as err:
        raise errors.UsageError(f"{flag}={text!r}: {err}", field=flag, value=text) from None


def check_flags(ours: Sequence[str], rest: Sequence[str]) -> None:
    """Check the ``--kl``/``--kl.*`` flags and the deprecated ``--kl_*`` ones before TRL loads.

    Each value on its own (a bad name, field, choice or number is a one-line error within a
    second instead of a traceback per rank after TRL has loaded); combinations, and the
    ``kl_*`` keys of a ``--config`` YAML, are checked once TRL has parsed everything.
    """
    name, _ = flags.parse_tokens(ours)  # unknown --kl.FIELD, a missing value
    if name is not None:
        KLConfig.parse(name)
    tokens = list(ours)
    for i, token in enumerate(tokens):
        flag, eq, inline = token.partition("=")
        if flag.startswith(flags.PREFIX):
            _check_value(flag, flag[len(flags.PREFIX) :], inline if eq else tokens[i + 1])
    for key, given, following in flags.long_options(rest):
        field = FIELD_OF.get(key.replace("-", "_"))
        if field is None:
            continue
        if given is None and not following:
            raise errors.UsageError(f"--{key} needs a value", field=f"--{key}")
        _check_value(f"--{key}", field, given if given is not None else following[0])


@errors.command("kl_patches.trl")
def main(argv: list[str]) -> int:
    """Run TRL's GRPO or RLOO script with the KL config applied; returns an exit code.

    Bad arguments are one line on stderr and exit code 2 (``KL_PATCHES_DEBUG=1``: traceback):
    the KL flags are checked before TRL is imported, TRL's own arguments by TRL's parser.

    In a distributed run (``accelerate launch``) each rank ends here with ``os._exit`` after
    its report, the exit handlers and a flush of stdout/stderr: the process group, held from
    parsing on, is never destroyed. Letting Python free the trainer when TRL's ``main``
    returns destroys DDP's reducer and with it gloo's process group, whose destructor joins a
    worker thread that waits for the GIL the main thread holds: a deadlock at exit in about
    one run in five on CPU, stock TRL included.
    """
    args = list(argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr)
        return 0 if args else 2
    if args[0] not in SCRIPTS:
        raise errors.invalid("trainer", args[0], sorted(SCRIPTS))
    ours, rest = flags.split_argv(args[1:])
    check_flags(ours, rest)
    from trl import TrlParser

    from .delivery import export
    from .patch import apply, hook_calls

    for token in rest:
        key = token[2:].partition("=")[0] if token.startswith("--") else ""
        if key in KL_KEYS:
            flags.deprecated(f"--{key}", f"--kl.{FIELD_OF[key]}")
    script = importlib.import_module(SCRIPTS[args[0]])
    types = (*script.make_parser().dataclass_types, KLArguments)
    parser = errors.one_line(TrlParser(types, prog=f"python -m kl_patches.trl {args[0]}"))
    *parsed, kl_args = parser.parse_args_and_config(rest)
    try:
        base = kl_args.to_config()
    except ValueError as err:
        raise errors.UsageError(f"kl_* settings (--config file or --kl_* flags): {err}") from None
    chosen = flags.config_from_tokens(ours, base=base.to_dict()) if ours else base
    config = apply(chosen, full_monitor=getattr(kl_args, MONITOR_FIELD))
    export(config)
    distributed = _hold_process_group(parsed)
    try:
        with errors.library_code():
            script.main(*parsed)
    except SystemExit as exc:
        if not distributed:
            raise
        _end_rank(exc.code if isinstance(exc.code, int) else 1)
    except BaseException:
        if not distributed:
            raise
        traceback.print_exc()  # what the interpreter would print, then the same exit as below
        _end_rank(1)
    calls = hook_calls()
    rank = os.environ.get("RANK", "0")
    world = os.environ.get("WORLD_SIZE", "1")
    errors.say(f"kl_patches.trl rank {rank}/{world}: {config}; hook calls {calls}")
    needed = ["__init__", "_generate_and_score_completions", "_compute_loss"]
    code = 0
    if config.placement != "none" and any(calls.get(n, 0) == 0 for n in needed):
        errors.say(f"kl_patches.trl rank {rank}: the KL hooks did not run: {calls}")
        code = 1
    if distributed:
        _barrier()
        _end_rank(code)
    return code


def _hold_process_group(parsed: Sequence[object]) -> bool:
    """Keep a reference to the default process group until the rank ends; True if there is one.

    transformers sets the group up while parsing (``TrainingArguments.__post_init__`` reads
    ``self.device``); for a version that does it later, reading ``device`` here does it now, as
    the trainer would.
    """
    import torch.distributed as dist

    if not dist.is_available():
        return False
    if not dist.is_initialized() and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        for arguments in parsed:
            if isinstance(getattr(type(arguments), "device", None), property):
                _ = arguments.device  # type: ignore[attr-defined]
                break
    if not dist.is_initialized():
        return False
    _HELD.append(dist.group.WORLD)
    return True


def _barrier() -> None:
    """Wait for the other ranks when the group is still up (TRL's ``trainer.end()`` destroys it
    with transformers >= 5.18), so no rank leaves while another still talks to it."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()


def _end_rank(code: int) -> NoReturn:
    """Run the exit handlers, flush stdout and stderr, and leave without any destructor."""
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


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
