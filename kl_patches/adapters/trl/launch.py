"""``python -m kl_patches.trl {grpo,rloo} --config recipe.yaml [flags]``: TRL's own training
script with the KL switch.

The KL settings are written one way everywhere: ``--kl NAME --kl.FIELD VALUE`` on the command
line (:mod:`kl_patches.adapters.flags`, plus ``--kl.full_monitor``) and the same names under a
``kl:`` mapping in the ``--config`` YAML (``kl: {name: k1-in-reward, coef: 0.05}``). The
command line wins over the file. The flat spellings of earlier releases (``--kl_coef`` flags,
``kl_coef:`` keys, ``--kl.kl_clamp``) still work, each with a deprecation warning that names
the user's own file and line (or the command line) and the new spelling.

The coefficient defaults to 0.05, kl-patches' default, which is also TRL's own RLOO ``beta``
default; TRL's GRPO ``beta`` defaults to 0.0, which means no KL at all, so it is no coefficient
to inherit.

The launcher checks the KL flags before TRL is imported, parses the rest with ``TrlParser``
(TRL's script arguments, plus :class:`.KLArguments` for the flat spellings), calls
:func:`.apply`, prints the launch report (:mod:`kl_patches.adapters.launch_report`) and only
then runs TRL's ``trl.scripts.grpo.main`` / ``trl.scripts.rloo.main`` unchanged. ``--check``
stops after TRL's parser (the config dataclasses' ``__post_init__``) and the KL checks
(:func:`check`), with the report printed and nothing patched. ``--help`` prints the
KL options and TRL's own. Under ``accelerate launch -m kl_patches.trl ...`` every rank runs this
module, so every rank applies the patch; at exit each rank reports (on stderr, one write per
line) how often each hook ran, fails if the loss or scoring hooks never ran, and ends with
``os._exit`` so that gloo's destructors cannot deadlock (see :func:`main`). Bad arguments are
one line on stderr and exit code 2 (:mod:`kl_patches.cli.errors`).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import os
import sys
import traceback
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from kl_patches.adapters import flags
from kl_patches.adapters.base import LaunchPayload
from kl_patches.adapters.launch_report import LaunchReport, Updates, announce, coef_source
from kl_patches.cli import errors
from kl_patches.config import ESTIMATOR_ALIASES, FIELD_CHOICES, KLConfig

from .read import argv_dict
from .translate import (
    FIELD_OF,
    KL_BLOCK,
    KL_KEYS,
    MONITOR_FIELD,
    MONITOR_SWITCH,
    KLArguments,
    argument_name,
    kl_block_tokens,
    patched_config,
)
from .versions import RLOO_DEFAULTS

SCRIPTS = {"grpo": "trl.scripts.grpo", "rloo": "trl.scripts.rloo"}
"""Subcommand -> TRL script module exposing ``make_parser()`` and ``main(...)``."""

USAGE = (
    "usage: python -m kl_patches.trl {grpo,rloo} [--config recipe.yaml] [TRL flags] "
    "[--kl NAME] [--kl.FIELD VALUE ...]   (python -m kl_patches.trl grpo --help: every option)"
)

SWITCHES = (MONITOR_SWITCH,)
CHECK = "--check"
"""The launcher's own switch: parse everything as a launch would, report, and exit."""
"""``--kl.<switch>`` options of this launcher that are not KLConfig fields (on/off)."""

DEFAULTS_OF_FLAGS = {
    "coef": flags.Default(
        KLConfig().coef,
        f"kl-patches' default, also TRL's RLOO beta default ({RLOO_DEFAULTS['beta']}); "
        "TRL's GRPO beta defaults to 0.0, no KL",
    )
}
"""Where the launcher's coefficient default comes from (said in ``--help``)."""

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
        valid = ESTIMATOR_ALIASES if item.name == "estimator" else FIELD_CHOICES[item.name]
        if (text.lower() if item.name == "estimator" else text) not in valid:
            raise errors.invalid(flag, text, list(item.choices))
        return
    try:
        value = flags.parse_value(item, text)
    except ValueError:
        none = " or none" if item.kind == "optional_float" else ""
        raise errors.invalid(flag, text, f"use a finite number{none}") from None
    try:
        KLConfig(**{**_PROBE.get(item.name, {}), item.name: value})
    except ValueError as err:
        raise errors.UsageError(f"{flag}={text!r}: {err}", field=flag, value=text) from None


def check_flags(ours: Sequence[str], rest: Sequence[str]) -> None:
    """Check the ``--kl``/``--kl.*`` flags and the deprecated ``--kl_*`` ones before TRL loads.

    Each value on its own (a bad name, field, choice or number is a one-line error within a
    second instead of a traceback per rank after TRL has loaded); combinations, and the
    settings of a ``--config`` YAML, are checked once TRL has parsed everything.
    """
    with warnings.catch_warnings():  # the spelling warns once, when the flags are read
        warnings.simplefilter("ignore", FutureWarning)
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


def _config_path(rest: Sequence[str]) -> str | None:
    """The ``--config`` file of a TRL command line (TrlParser reads the first one)."""
    for i, token in enumerate(rest):
        if token == "--config" and i + 1 < len(rest):
            return rest[i + 1]
        if token.startswith("--config="):
            return token.partition("=")[2]
    return None


def yaml_settings(path: str) -> tuple[list[str], bool | None]:
    """The KL settings of a ``--config`` YAML as ``--kl``/``--kl.FIELD`` tokens, and its
    ``full_monitor`` switch (None when not set).

    ``kl:`` holds them under their flag names; each flat ``kl_*`` key (the deprecated spelling,
    which TRL's parser reads through KLArguments) warns, naming the file and line.
    """
    from kl_patches.adapters.files import read_text, yaml_module

    yaml = yaml_module()
    text = read_text(Path(path))
    root = yaml.compose(text)
    if not isinstance(root, yaml.MappingNode):
        return [], None  # TRL's parser says what is wrong with it
    lines = {
        str(key.value): key.start_mark.line + 1
        for key, _ in root.value
        if isinstance(key, yaml.ScalarNode)
    }
    data = yaml.safe_load(text) or {}
    for key in data:
        if key in KL_KEYS or key == MONITOR_FIELD:
            new = MONITOR_SWITCH if key == MONITOR_FIELD else flags.spec(FIELD_OF[key]).cli
            flags.deprecated(f"{key}:", f"kl: {{{new}: ...}}", path, lines.get(key, 0))
    if KL_BLOCK not in data:
        return [], None
    block = data[KL_BLOCK]
    block_lines = _block_lines(yaml, root, lines.get(KL_BLOCK, 0))
    try:
        tokens, monitor = kl_block_tokens(block, path, block_lines)
    except ValueError as err:
        raise errors.UsageError(str(err)) from None
    try:
        flags.parse_tokens(tokens)  # a value that is not a number: said here, with the file
    except ValueError as err:
        raise errors.UsageError(f"{path}: kl: {err}") from None
    return [_canonical(t) for t in tokens], monitor


def _canonical(token: str) -> str:
    """``--kl.kl_clamp`` -> ``--kl.clamp`` (the old name has warned already)."""
    if not token.startswith(flags.PREFIX):
        return token
    return flags.spec(token[len(flags.PREFIX) :]).flag


def _block_lines(yaml: Any, root: Any, default: int) -> dict[str, int]:
    for key, value in root.value:
        if getattr(key, "value", None) == KL_BLOCK and isinstance(value, yaml.MappingNode):
            return {str(k.value): k.start_mark.line + 1 for k, _ in value.value}
    return {}


def _old_flag_tokens(rest: Sequence[str]) -> list[str]:
    """The deprecated ``--kl_FIELD V`` flags as ``--kl.FIELD V`` tokens (each warns)."""
    out: list[str] = []
    for key, given, following in flags.long_options(rest):
        field = FIELD_OF.get(key)
        if field is None:
            continue
        item = flags.spec(field)
        flags.deprecated(f"--{key}", item.flag)
        out += [item.flag, given if given is not None else following[0]]
    return out


def _switch(tokens: list[str], name: str) -> tuple[bool | None, list[str]]:
    """Take ``--kl.<name> [true|false]`` out of ``tokens``: (its value or None, the rest)."""
    flag = flags.PREFIX + name
    out: list[str] = []
    value: bool | None = None
    i = 0
    while i < len(tokens):
        head, eq, inline = tokens[i].partition("=")
        if head != flag:
            out.append(tokens[i])
            i += 1
            continue
        word = inline if eq else "true"
        if not eq and i + 1 < len(tokens) and tokens[i + 1].lower() in flags.BOOL_WORDS:
            word = tokens[i + 1]
            i += 1
        if word.lower() not in flags.BOOL_WORDS:
            raise errors.invalid(flag, word, "use true or false")
        value = flags.BOOL_WORDS[word.lower()]
        i += 1
    return value, out


def help_text(trainer: str) -> str:
    """``--help``: the launcher's KL options (with their defaults and where they come from),
    then TRL's own options for ``trainer`` (without the deprecated ``--kl_*`` ones)."""
    p = argparse.ArgumentParser(
        prog=f"python -m kl_patches.trl {trainer}",
        usage=f"python -m kl_patches.trl {trainer} [--config recipe.yaml] [TRL options] "
        "[--kl NAME] [--kl.FIELD VALUE ...]",
        description=f"TRL's own {trainer.upper()} training script with a kl-patches KL "
        "configuration. In the --config YAML, write the same settings under kl: "
        "(kl: {name: k1-in-reward, coef: 0.05}); the command line wins over the file.",
        add_help=False,
    )
    flags.add_arguments(p, defaults=DEFAULTS_OF_FLAGS)
    p.add_argument(
        CHECK,
        action="store_true",
        help="parse the command as TRL does (its config dataclasses' __post_init__ checks "
        "run), check the KL settings against them, print the launch report and exit "
        "(needs TRL, no GPU)",
    )
    p.add_argument(
        flags.PREFIX + MONITOR_SWITCH,
        action="store_true",
        help="also log the exact KL over the whole vocabulary (two extra forwards per "
        "generation batch; a monitor, not part of the KL config; default off)",
    )
    text = p.format_help()
    try:
        from trl import TrlParser

        script = importlib.import_module(SCRIPTS[trainer])
        trl_parser = TrlParser(tuple(script.make_parser().dataclass_types), prog="TRL")
        text += f"\nTRL's own options ({SCRIPTS[trainer]}):\n" + trl_parser.format_help()
    except ImportError:
        text += "\nTRL is not installed here (pip install 'kl-patches[trl]'): its options are "
        text += "those of `trl " + trainer + " --help`.\n"
    return text


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
    if "-h" in args[1:] or "--help" in args[1:]:
        print(help_text(args[0]))
        return 0
    check_only = CHECK in args[1:]
    launch = parse(args[0], [a for a in args[1:] if a != CHECK])
    if check_only:
        check(launch)
        return 0
    from .delivery import export
    from .patch import apply, hook_calls

    config = apply(launch.config, full_monitor=launch.monitor)
    export(config)
    if os.environ.get("RANK", "0") == "0":  # every rank applies it; the first one says it
        announce(launch.report(config))
    script, parsed = launch.script, launch.parsed
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
    if _native_release():  # 0.14-0.26 patch __init__ only; legacy_reward checks every step
        needed = ["__init__"]
    code = 0
    if config.placement != "none" and any(calls.get(n, 0) == 0 for n in needed):
        errors.say(f"kl_patches.trl rank {rank}: the KL hooks did not run: {calls}")
        code = 1
    if distributed:
        _barrier()
        _end_rank(code)
    return code


@dataclass(frozen=True)
class Launch:
    """A parsed ``python -m kl_patches.trl`` command line, before anything is patched."""

    script: Any
    """TRL's script module (``trl.scripts.grpo``)."""
    parsed: tuple[Any, ...]
    """TRL's parsed dataclasses (script, training and model arguments), for ``script.main``."""
    config: KLConfig
    """The KL configuration: defaults < flat YAML keys < ``kl:`` < ``--kl_*`` < ``--kl.*``."""
    monitor: bool
    """The full-vocabulary KL monitor switch."""
    coef_given: tuple[str, ...]
    """Where the coefficient was set (flags, the file's ``kl:``); empty for the default."""

    @property
    def training(self) -> Any:
        """TRL's training arguments (GRPOConfig/RLOOConfig) among the parsed dataclasses."""
        return next((a for a in self.parsed if hasattr(a, "gradient_accumulation_steps")), None)

    @property
    def kind(self) -> str:
        """``GRPO`` or ``RLOO``."""
        return "RLOO" if type(self.training).__name__.startswith("RLOO") else "GRPO"

    def updates(self) -> Updates:
        """On- or off-policy for this launch (:func:`updates_of`)."""
        if self.training is None:
            return Updates("unknown", "no GRPO/RLOO training arguments were parsed")
        return updates_of(self.training)

    def changes(self, config: KLConfig) -> list[str]:
        """What the launch changes in TRL beyond the KL, each with why."""
        from .hooks import trl_beta

        beta = trl_beta(config)
        was = getattr(self.training, "beta", None)
        kind = self.kind
        if beta:
            what = (
                f"{kind}Config.beta={beta:g} (was {was:g}): TRL then loads the reference model; "
                "TRL's own KL term is off while its loss runs (beta is set to 0 around it), "
                "the KL is kl-patches'"
            )
        else:
            what = f"{kind}Config.beta=0 (was {was:g}): no reference model, no KL from TRL"
        out = [what] if was is None or float(was) != beta else []
        if _native_release():
            out.append(_native_change(kind, config))
            return out
        out.append(
            f"{kind}Trainer's methods are patched in place on every rank (the hooks of "
            "kl_patches.adapters.trl.hooks); the advantages are recomputed with TRL's own "
            "normalisation after the reward-side penalty"
            if config.has_reward
            else f"{kind}Trainer's methods are patched in place on every rank"
        )
        return out

    def report(self, config: KLConfig) -> LaunchReport:
        """The launch report printed before TRL's script starts (``config``: what ``apply``
        took)."""
        return LaunchReport(
            prog="kl_patches.trl",
            library="TRL",
            config=config,
            updates=self.updates(),
            coef_source=coef_source(self.coef_given, DEFAULTS_OF_FLAGS["coef"].source),
            route=(
                f"TRL's {self.kind}Trainer through its own beta and reward functions (no hook "
                "points before TRL 0.27: kl_patches.adapters.trl.legacy)"
                if _native_release()
                else f"TRL's {self.kind}Trainer with the kl-patches hooks (patched in place)"
            )
            + ("; full-vocabulary KL monitor on" if self.monitor else ""),
            changes=tuple(self.changes(config)),
        )


def _native_release() -> bool:
    """Whether the installed TRL is patched through ``beta`` and a reward function only
    (0.14-0.26, :mod:`.legacy`) rather than the hooks (False without TRL)."""
    from .versions import installed_version, patch_mode

    try:
        return patch_mode(installed_version()) == "native"
    except ImportError:
        return False


def _native_change(kind: str, config: KLConfig) -> str:
    """What the patched ``__init__`` of a 0.14-0.26 release changes (:mod:`.legacy`)."""
    from .legacy_reward import PENALTY_NAME

    if kind == "GRPO" and config.has_reward:
        return (
            f"{kind}Trainer.__init__ is patched on every rank: one more reward function, "
            f"{PENALTY_NAME}, gives -coef * the sequence KL, which TRL sums into the reward "
            "before its own group normalisation"
        )
    return f"{kind}Trainer.__init__ is patched on every rank: TRL's own beta runs the KL"


def updates_of(training: Any) -> Updates:
    """On- or off-policy for a run with TRL's ``training`` arguments (a GRPOConfig or
    RLOOConfig whose ``__post_init__`` has filled ``steps_per_generation``: nothing unset)."""
    from .read import off_policy_reasons, settings_at
    from .semantics import semantics

    kind = "RLOO" if type(training).__name__.startswith("RLOO") else "GRPO"
    s = settings_at(training, kind, semantics())
    ga = s["gradient_accumulation_steps"]
    spg = s["steps_per_generation"]
    how = f"steps_per_generation={ga} num_iterations=1"  # = gradient_accumulation_steps
    reasons = off_policy_reasons(s, training)
    if reasons:
        return Updates("off-policy", "; ".join(reasons), on_policy_how=how)
    return Updates(
        "on-policy",
        f"num_iterations={s['num_iterations']}, steps_per_generation={spg} = "
        f"gradient_accumulation_steps={ga}: one optimiser step per generation batch",
    )


def check(launch: Launch) -> None:
    """``--check``: TRL's parser has built its config dataclasses (their ``__post_init__``
    checks ran in :func:`parse`); check the KL settings against them as a trainer built with
    them would (:func:`.hooks.validate`), print the launch report, and say so. Nothing is
    patched and no model is loaded."""
    from .hooks import validate

    training = launch.training
    if training is None:
        raise errors.UsageError("TRL's parser returned no GRPO/RLOO training arguments")
    try:
        if _native_release():  # what the patched __init__ of 0.14-0.26 checks (legacy.py)
            from . import legacy
            from .versions import installed_version

            legacy.check(launch.kind, training, launch.config, installed_version())
        else:
            validate(launch.kind, training, launch.config)
    except ValueError as err:
        raise errors.UsageError(str(err)) from None
    announce(launch.report(launch.config))
    errors.say(
        f"kl_patches.trl: TRL's parser and {type(training).__name__}.__post_init__ accept the "
        "arguments, and the KL settings fit them"
    )


def parse(trainer: str, argv: Sequence[str]) -> Launch:
    """Parse a launch's arguments (after the trainer name) as :func:`main` does, without
    patching or running anything. Imports TRL (after the KL flags are checked)."""
    ours, rest = flags.split_argv(argv, switches=SWITCHES)
    monitor_flag, ours = _switch(ours, MONITOR_SWITCH)
    check_flags(ours, rest)
    flags.parse_tokens(ours)  # an old name after --kl. (--kl.kl_clamp) warns here, once
    path = _config_path(rest)
    yaml_tokens, monitor_yaml = yaml_settings(path) if path is not None else ([], None)
    old_tokens = _old_flag_tokens(rest)
    from trl import TrlParser

    script = importlib.import_module(SCRIPTS[trainer])
    types = (*script.make_parser().dataclass_types, KLArguments)
    parser = errors.one_line(TrlParser(types, prog=f"python -m kl_patches.trl {trainer}"))
    parser.add_argument(f"--{KL_BLOCK}_block", dest=KL_BLOCK, default=None, help=argparse.SUPPRESS)
    *parsed, kl_args = [
        a for a in parser.parse_args_and_config(list(rest)) if not isinstance(a, argparse.Namespace)
    ]
    try:
        base = kl_args.to_config()
    except ValueError as err:
        raise errors.UsageError(f"kl_* settings (--config file or --kl_* flags): {err}") from None
    tokens = [*yaml_tokens, *old_tokens, *ours]
    with warnings.catch_warnings():  # each old spelling has warned once already
        warnings.simplefilter("ignore", FutureWarning)
        try:
            config = flags.config_from_tokens(tokens, base=base.to_dict()) if tokens else base
        except ValueError as err:
            where = f" ({path} kl: and the --kl flags)" if yaml_tokens else ""
            raise errors.UsageError(f"{err}{where}") from None
    assert config is not None  # tokens or base

    def has_coef(words: Sequence[str]) -> bool:
        return any(w.split("=")[0] == "--kl.coef" for w in words)

    given = tuple(
        where
        for where, words in (
            ("--kl.coef", ours),
            ("--kl_coef", old_tokens),
            (f"{path} (kl: coef)", yaml_tokens),
        )
        if has_coef(words)
    )
    if not given and "kl_coef" in base_keys(path):
        given = (f"{path} (kl_coef)",)
    monitor = next(
        (m for m in (monitor_flag, monitor_yaml) if m is not None),
        bool(getattr(kl_args, MONITOR_FIELD)),
    )
    return Launch(script, tuple(parsed), config, monitor, given)


def base_keys(path: str | None) -> set[str]:
    """The top-level keys of a ``--config`` YAML (empty without one or when unreadable)."""
    if path is None:
        return set()
    from kl_patches.adapters.files import load_mapping

    try:
        return set(load_mapping(Path(path)))
    except Exception:  # TRL's parser has already read it; this is only for the report
        return set()


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
    ours, rest = flags.split_argv([a for a in argv if a != CHECK], switches=SWITCHES)
    _, ours = _switch(ours, MONITOR_SWITCH)
    data = argv_dict(rest, label.split()[-1], base_dir)
    if ours:
        base = patched_config(data)
        config = flags.config_from_tokens(ours, base=None if base is None else base.to_dict())
        assert config is not None  # tokens were given
        data.pop(KL_BLOCK, None)  # the flags won over the file's kl: block, as in the launcher
        data.update({argument_name(k): v for k, v in config.to_dict().items()})
    return LaunchPayload(data)
