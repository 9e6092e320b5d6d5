"""Find the trainer launches in what a user hands the audit, and shape them for each reader.

Inputs people have: a launch shell script, a YAML/JSON config, a file of Hydra overrides or
flags, or an argv (after ``--`` on the audit's command line). Each launch found becomes an
:class:`AuditInput`: the library, what its reader takes (an argv list or a dict), where it came
from, and what could not be read exactly.

Only *where a launch is* is known here (the entry-point module names and the top-level shape of
a YAML file); what the flags mean is the adapters' business (:mod:`kl_patches.adapters`).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kl_patches.audit_shell import Command, ShellParseError, parse_script
from kl_patches.config import KLConfig

LIBRARIES = ("verl", "openrlhf", "trl")
"""Libraries the audit can read (each through its adapter's ``read``)."""

ENTRY_MODULES: dict[str, tuple[str, ...]] = {
    "verl": ("verl.trainer.main_ppo",),
    "openrlhf": ("openrlhf.cli.train_ppo_ray",),
}
"""Python entry points (``python -m``, ``deepspeed --module``, or the ``.py`` path) per library."""

TRL_SUBCOMMANDS = ("grpo", "rloo")
"""``trl <subcommand>`` launches with a KL regulariser (also ``-m trl.scripts.<subcommand>``)."""

LAUNCHERS: dict[str, str] = {
    "kl_patches.openrlhf": "openrlhf",
    "kl_patches.trl": "trl",
    "kl_patches.adapters.verl.launch": "verl",
}
"""kl-patches' own launchers (``python -m`` or ``kl-patches <command>``) and their library."""


def _cli_launcher(command: str) -> str:
    """The launcher module behind ``kl-patches <command>`` ("" when it is not a launcher)."""
    from kl_patches.cli import COMMANDS

    module = COMMANDS.get(command, "").split(":")[0]
    return module if module in LAUNCHERS else ""


VERL_SECTIONS = ("actor_rollout_ref", "algorithm")
"""Top-level mapping keys that mark a YAML file as a verl (Hydra) config."""

YAML_SUFFIXES = (".yaml", ".yml", ".json")
SHELL_SUFFIXES = (".sh", ".bash", ".zsh", ".slurm", ".sbatch")


class InputError(ValueError):
    """Input the audit cannot read (exit code 2, a message and no traceback)."""


@dataclass(frozen=True)
class AuditInput:
    """One trainer launch, ready for its library's reader."""

    library: str
    """``verl``, ``openrlhf`` or ``trl``."""
    payload: list[str] | dict[str, Any]
    """What the reader takes: an argv / override list, or a config mapping."""
    origin: str
    """Where it came from: ``path:line``, ``path`` or ``argv``."""
    kind: str
    """``shell``, ``yaml``, ``overrides``, ``argv``, ``installed`` or ``object``."""
    notes: tuple[str, ...] = ()
    """What the audit could not follow exactly (unrun substitutions, script arguments...)."""
    warnings: tuple[str, ...] = ()
    """Launch-script mistakes that change what runs (reported as findings)."""
    dropped: tuple[str, ...] = ()
    """Arguments a comment cut off the launch (bash runs them as a separate command)."""
    unresolved: tuple[str, ...] = ()
    """Shell variables used by the launch that the script never set."""
    kl_config: KLConfig | None = None
    """The KLConfig a kl-patches launcher runs (its ``--kl`` flags); None for a stock launch.
    (TRL's ``kl_*`` keys are read by the TRL reader itself and leave this None.)"""


# ----------------------------------------------------------------------------- commands
def _entry(words: list[str]) -> tuple[str, int, str] | None:
    """(library, index of the first argument, entry) of a launch inside a command's words.

    ``entry`` is the module, ``trl <sub>``, or ``kl_patches.<lib>[ <sub>]`` for a launcher.
    """
    for i, w in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else ""
        launcher = ""
        if w in ("-m", "--module") and nxt in LAUNCHERS:
            launcher, start = nxt, i + 2
        elif os.path.basename(w) == "kl-patches" and _cli_launcher(nxt):
            launcher, start = _cli_launcher(nxt), i + 2
        if launcher:
            lib = LAUNCHERS[launcher]
            if lib == "trl":
                sub = words[start] if start < len(words) else ""
                if sub not in TRL_SUBCOMMANDS:
                    raise InputError(
                        f"{launcher} needs a trainer ({'|'.join(TRL_SUBCOMMANDS)}), got {sub!r}"
                    )
                return lib, start + 1, f"{launcher} {sub}"
            return lib, start, launcher
        if w in ("-m", "--module") and nxt:
            for lib, modules in ENTRY_MODULES.items():
                if nxt in modules:
                    return lib, i + 2, nxt
        script = w[: -len(".py")].replace("/", ".") if w.endswith(".py") else ""
        for sub in TRL_SUBCOMMANDS:
            module = f"trl.scripts.{sub}"
            if w in ("-m", "--module") and nxt == module:
                return "trl", i + 2, f"trl {sub}"
            if script == module or script.endswith("." + module):
                return "trl", i + 1, f"trl {sub}"
        if w.endswith(".py"):
            dotted = w[: -len(".py")].replace("/", ".").replace("\\", ".")
            for lib, modules in ENTRY_MODULES.items():
                if any(dotted == m or dotted.endswith("." + m) for m in modules):
                    return lib, i + 1, w
        if os.path.basename(w) == "trl" and i + 1 < len(words) and words[i + 1] in TRL_SUBCOMMANDS:
            return "trl", i + 2, f"trl {words[i + 1]}"
    return None


_HYDRA_VALUE_OPTIONS = ("--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd")


def split_hydra_options(argv: list[str]) -> tuple[list[str], list[str]]:
    """(overrides, Hydra's own command-line options) of a Hydra app's argv."""
    overrides: list[str] = []
    options: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        i += 1
        if tok.startswith("-") and not tok.startswith("--") and len(tok) > 1 and "=" in tok:
            options.append(tok)
        elif tok.startswith("-"):
            options.append(tok)
            if tok in _HYDRA_VALUE_OPTIONS and i < len(argv):
                options.append(argv[i])
                i += 1
        else:
            overrides.append(tok)
    return overrides, options


def _yaml() -> Any:
    """pyyaml, or an InputError saying how to get it (the core install has only torch)."""
    try:
        import yaml
    except ImportError as err:
        raise InputError(
            "reading YAML configs and TRL flags needs pyyaml: pip install 'kl-patches[audit]'"
        ) from err
    return yaml


def _scalar(text: str) -> Any:
    """A flag value as TRL's parser would type it (YAML scalars: 0.1, true, null, ...)."""
    yaml = _yaml()
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return value if isinstance(value, (str, int, float, bool)) or value is None else text


def trl_dict(argv: list[str], trainer: str | None, base_dir: Path | None) -> dict[str, Any]:
    """``--config FILE --key value ...`` (TrlParser style) as one mapping; flags win."""
    out: dict[str, Any] = {}
    flags: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        tok = argv[i]
        i += 1
        if not tok.startswith("--"):
            continue
        name, eq, value = tok[2:].partition("=")
        if not eq:
            if i < len(argv) and not argv[i].startswith("--"):
                value = argv[i]
                i += 1
            else:
                value = "true"
        if name == "config":
            out.update(_load_mapping(_resolve(value, base_dir), what="TRL config"))
            continue
        flags[name] = _scalar(value)
    out.update(flags)
    if trainer is not None:
        out["trainer"] = trainer
    return out


def _resolve(name: str, base_dir: Path | None) -> Path:
    path = Path(name)
    if not path.is_absolute() and base_dir is not None and (base_dir / path).exists():
        return base_dir / path
    return path


def _from_command(cmd: Command, origin: str, base_dir: Path | None) -> AuditInput | None:
    found = _entry(cmd.words)
    if found is None:
        return None
    lib, start, entry = found
    argv = cmd.words[start:]
    payload: list[str] | dict[str, Any]
    notes = list(cmd.notes)
    kl_config: KLConfig | None = None
    if lib == "trl":
        payload = trl_dict(argv, entry.split()[-1], base_dir)
    elif entry == "kl_patches.openrlhf":
        payload, kl_config = _openrlhf_launcher(argv, origin)
    elif entry == "kl_patches.adapters.verl.launch":
        payload = _verl_launcher(argv, origin)
    elif lib == "verl":
        payload, options = split_hydra_options(argv)
        if options:
            notes.append(
                f"Hydra options not read: {' '.join(options)}; the overrides are read on top of "
                "verl's default config, so KL settings in a custom config file are not seen "
                "(audit that YAML file too)"
            )
    else:
        payload = argv
    return AuditInput(
        library=lib,
        payload=payload,
        origin=origin,
        kind="shell",
        notes=tuple(dict.fromkeys(notes)),
        warnings=tuple(cmd.warnings),
        dropped=tuple(cmd.dropped),
        unresolved=tuple(cmd.unresolved),
        kl_config=kl_config,
    )


def _verl_launcher(argv: list[str], origin: str) -> list[str]:
    """The Hydra overrides ``kl-patches verl [--kl ...] -- OVERRIDES`` hands to verl.

    The launcher writes the KLConfig as verl overrides (with the patch's marker where verl
    cannot express it), which the verl reader reads back, so no KLConfig is carried here.
    """
    from kl_patches.adapters.verl import launch

    own, user = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :])
        if "--" in argv
        else (
            argv,
            [],
        )
    )
    try:
        args = launch._parser().parse_args(own)
        config = launch._config(args)
        return launch.build(config, user, args.kl_outside_std)
    except SystemExit as err:  # argparse printed why
        raise InputError(f"{origin}: kl-patches verl cannot parse {' '.join(own)!r}") from err
    except ValueError as err:
        raise InputError(f"{origin}: kl-patches verl would refuse this launch: {err}") from err


def _openrlhf_launcher(argv: list[str], origin: str) -> tuple[list[str], KLConfig | None]:
    """The launcher's ``--kl`` flags as a KLConfig, and the OpenRLHF argv it runs."""
    from kl_patches import openrlhf as launcher
    from kl_patches.adapters.openrlhf import TESTED_VERSION

    ours, rest = launcher.split_argv(argv)
    try:
        config = launcher.parse_kl_args(ours)
        if config is None:
            return rest, None
        return launcher.build_argv(config, rest, TESTED_VERSION), config
    except ValueError as err:
        raise InputError(f"{origin}: kl_patches.openrlhf would refuse this launch: {err}") from err


# ----------------------------------------------------------------------------- files
def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise InputError(f"{path}: no such file") from err
    except IsADirectoryError as err:
        raise InputError(
            f"{path}: is a directory; pass its launch scripts and configs (e.g. {path}/*.sh)"
        ) from err
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not a text file (not UTF-8)") from err
    except OSError as err:
        raise InputError(f"{path}: cannot be read ({err.strerror or err})") from err


def _load_mapping(path: Path, what: str = "config") -> dict[str, Any]:
    yaml = _yaml()
    text = _read_text(path)
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as err:
        raise InputError(
            f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'} "
            f"({str(err).splitlines()[0]})"
        ) from err
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(
            f"{path}: a {what} must be a mapping of keys to values, got a {type(data).__name__}"
        )
    return data


def library_of_mapping(data: dict[str, Any]) -> str | None:
    """verl for a nested Hydra config, trl for a flat TrlParser config, None if unclear."""
    if any(isinstance(data.get(k), dict) for k in VERL_SECTIONS):
        return "verl"
    if data and all(not isinstance(v, dict) for v in data.values()):
        return "trl"
    return None


def _check_library(library: str | None) -> None:
    if library is not None and library not in LIBRARIES:
        raise InputError(f"unknown library {library!r}; choose one of {list(LIBRARIES)}")


def inputs_from_mapping(data: dict[str, Any], library: str | None, origin: str) -> list[AuditInput]:
    """A YAML/JSON config (already loaded) as one input."""
    _check_library(library)
    lib = library or library_of_mapping(data)
    if lib is None:
        raise InputError(
            f"{origin}: cannot tell which library this config is for (a verl config has "
            f"top-level sections {list(VERL_SECTIONS)}; a TRL config is a flat mapping); "
            "pass --library verl|trl"
        )
    if lib == "openrlhf":
        raise InputError(
            f"{origin}: OpenRLHF is configured by command-line flags, not a config file; give "
            "the launch script or the argv (kl-patches audit --library openrlhf -- --flag ...)"
        )
    return [AuditInput(library=lib, payload=data, origin=origin, kind="yaml")]


def inputs_from_argv(
    argv: list[str], library: str | None = None, origin: str = "argv"
) -> list[AuditInput]:
    """An argv: a whole launch command, or the flags/overrides of one library."""
    _check_library(library)
    words = [str(w) for w in argv]
    cmd = Command(words=words, line=1)
    found = _from_command(cmd, origin, None)
    if found is not None:
        return [AuditInput(found.library, found.payload, origin, "argv")]
    return [_bare(words, library, origin, "argv", ())]


def _bare(
    words: list[str], library: str | None, origin: str, kind: str, notes: tuple[str, ...]
) -> AuditInput:
    """Flags or overrides without an entry point: the library is given or guessed by form."""
    lib = library
    extra: tuple[str, ...] = ()
    if lib is None:
        if not words:
            raise InputError(f"{origin}: nothing to audit (no flags, overrides or launch)")
        if all(re.match(r"^[+~]{0,2}[A-Za-z_][\w.\-/@]*(=|$)", w) for w in words) and any(
            "=" in w for w in words
        ):
            lib = "verl"
        elif words[0].startswith("--"):
            lib = "openrlhf"
            extra = (
                "flags without an entry point read as OpenRLHF train_ppo_ray flags "
                "(use --library trl for TRL flags)",
            )
        else:
            raise InputError(
                f"{origin}: cannot tell which library {' '.join(words[:3])!r}... is for; "
                f"pass --library with one of {list(LIBRARIES)}"
            )
    payload: list[str] | dict[str, Any] = words
    if lib == "trl":
        payload = trl_dict(words, None, None)
    return AuditInput(lib, payload, origin, kind, notes + extra)


def inputs_from_text(
    text: str,
    origin: str,
    library: str | None = None,
    variables: dict[str, str] | None = None,
    base_dir: Path | None = None,
    kind: str = "shell",
) -> list[AuditInput]:
    """Every launch in a shell script (or an overrides/flags file read with shell rules)."""
    _check_library(library)
    try:
        script = parse_script(
            text, variables, str(base_dir.resolve()) if base_dir is not None else None
        )
    except ShellParseError as err:
        raise InputError(f"{origin}: cannot parse shell {err}") from err
    found = []
    for cmd in script.commands:
        where = f"{origin}:{cmd.line}" + (f" [{', '.join(cmd.loop)}]" if cmd.loop else "")
        item = _from_command(cmd, where, base_dir)
        if item is not None and (library is None or item.library == library):
            found.append(item)
    if found:
        return found
    # No launch command: a file of overrides or flags (one or many per line).
    words = [w for cmd in script.commands for w in cmd.words]
    if kind == "shell":
        looked = sorted(m for ms in ENTRY_MODULES.values() for m in ms)
        looked += [f"trl {'|'.join(TRL_SUBCOMMANDS)}", *sorted(LAUNCHERS)]
        runs = sorted({" ".join(c.words[:3]) for c in script.commands if len(c.words) > 1})
        raise InputError(
            f"{origin}: no verl, OpenRLHF or TRL launch found (looked for {', '.join(looked)}"
            + (f"; {library} only" if library else "")
            + f"); the commands here start {runs[:6]}"
        )
    notes = tuple(dict.fromkeys(n for c in script.commands for n in c.notes))
    unresolved = tuple(dict.fromkeys(u for c in script.commands for u in c.unresolved))
    item = _bare(words, library, origin, "overrides", notes)
    return [AuditInput(item.library, item.payload, origin, "overrides", item.notes, (), unresolved)]


def inputs_from_file(
    path: str | Path, library: str | None = None, variables: dict[str, str] | None = None
) -> list[AuditInput]:
    """Every launch in a file: YAML/JSON config, shell script, or overrides/flags file."""
    _check_library(library)
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in YAML_SUFFIXES:
        return inputs_from_mapping(_load_mapping(p), library, str(p))
    text = _read_text(p)
    if suffix not in SHELL_SUFFIXES and not text.startswith("#!"):
        data: Any = None
        try:
            yaml = _yaml()
            data = yaml.safe_load(text)
        except InputError:  # no pyyaml: the file can only be a script or an overrides list
            pass
        except Exception:  # not YAML at all (yaml.YAMLError and friends)
            data = None
        if isinstance(data, dict) and not any(isinstance(k, str) and "=" in k for k in data):
            return inputs_from_mapping(data, library, str(p))
    kind = "shell" if suffix in SHELL_SUFFIXES or text.startswith("#!") else "overrides"
    return inputs_from_text(text, str(p), library, variables, p.parent, kind)
