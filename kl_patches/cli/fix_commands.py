"""kl-patches' own check of a printed kl-patches command line, for the audit's fix checks.

:func:`kl_patches.audit.fix.validate.check_command` asks this module (registered when
:mod:`kl_patches.cli.audit` is imported): the check parses the command's arguments as the
command does, running nothing, which needs the CLI's parsers; the audit sits below the CLI and
never imports it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import warnings
from collections.abc import Callable, Sequence

from kl_patches.audit.fix.validate import (
    _PLACEHOLDER,
    Check,
    command_words,
    register_command_check,
)

__all__ = ["check_command", "register"]


def check_command(text: str | Sequence[str]) -> Check:
    """Whether kl-patches' own argument parsing accepts the command line ``text`` (or its shell
    words; placeholders ``<...>`` dropped: they stand for the library's arguments). The library
    is not run; ``--help`` is accepted."""
    words = command_words(text)
    if words is None:
        return Check(False, f"not a kl-patches command: {text!r}")
    words = [w for w in words if not _PLACEHOLDER.fullmatch(w)]
    from kl_patches.cli import COMMANDS, errors

    if not words or words[0] not in COMMANDS:
        return Check(False, f"kl-patches has no command {words[:1]}; valid: {sorted(COMMANDS)}")
    name, rest = words[0], words[1:]
    if "-h" in rest or "--help" in rest:
        return Check(True, f"kl-patches {name} --help")
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            _parse_command(name, rest)
    except (ValueError, errors.UsageError) as exc:
        return Check(False, f"kl-patches {name} refuses it: {exc}")
    except SystemExit:
        lines = err.getvalue().strip().splitlines()
        return Check(False, f"kl-patches {name} refuses it: {lines[-1] if lines else 'exit 2'}")
    return Check(True, f"accepted by kl-patches {name}'s parser")


def _parse_command(name: str, argv: list[str]) -> None:
    """Parse a kl-patches command's arguments as the command does, running nothing."""
    from kl_patches.adapters import flags

    if name == "verl":
        from kl_patches.adapters.verl.launch import overrides_of

        overrides_of(argv)
    elif name == "openrlhf":
        from kl_patches.adapters.openrlhf.launch import OWN_FLAGS, parse_kl_args, split_argv

        ours, _ = split_argv([a for a in argv if a not in OWN_FLAGS])
        if parse_kl_args(ours) is None:
            raise ValueError("kl-patches openrlhf needs --kl")
    elif name == "trl":
        from kl_patches.adapters.trl import launch

        if not argv or argv[0] not in launch.SCRIPTS:
            raise ValueError(f"kl-patches trl needs a trainer: {sorted(launch.SCRIPTS)}")
        ours, rest = flags.split_argv(argv[1:], switches=launch.SWITCHES)
        _, ours = launch._switch(ours, launch.MONITOR_SWITCH)
        launch.check_flags(ours, rest)
        flags.config_from_tokens(ours)
    elif name == "verdict":
        from kl_patches.cli import verdict

        args = verdict.parser().parse_args(argv)
        flags.build(args.name, flags.values_from_namespace(args))
    elif name == "audit":
        _AUDIT_PARSER[0]().parse_args(argv)
    else:
        raise ValueError(f"kl-patches {name} is not a command a fix runs")


_AUDIT_PARSER: list[Callable[[], argparse.ArgumentParser]] = []


def register(audit_parser: Callable[[], argparse.ArgumentParser]) -> None:
    """Called by :mod:`kl_patches.cli.audit` (which imports this module, so this module takes
    its parser as an argument instead of importing it back): the audit's fix checks then run
    kl-patches command lines through :func:`check_command`."""
    _AUDIT_PARSER[:] = [audit_parser]
    register_command_check(check_command)
