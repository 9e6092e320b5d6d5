"""Find the trainer launches in what a user hands the audit, and shape them for each reader.

Inputs people have: a launch shell script, a YAML/JSON config, a file of Hydra overrides or
flags, or an argv (after ``--`` on the audit's command line). Each launch found becomes an
:class:`~kl_patches.audit.model.AuditInput`: the library, what its reader takes (an argv list or
a dict), where it came from, and what could not be read exactly.

Every library fact (entry points, kl-patches launchers, how a launch's argv becomes the reader's
input, which config mappings are whose) comes from the adapters' descriptors
(:mod:`kl_patches.adapters`); this module only walks commands and files.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from kl_patches import adapters
from kl_patches.adapters.base import AdapterDescriptor, LaunchPayload
from kl_patches.adapters.files import load_mapping, read_text, yaml_module
from kl_patches.audit.model import AuditInput, InputError
from kl_patches.audit.shell import Command, ShellParseError, parse_script

YAML_SUFFIXES = (".yaml", ".yml", ".json")
SHELL_SUFFIXES = (".sh", ".bash", ".zsh", ".slurm", ".sbatch")


def libraries() -> tuple[str, ...]:
    """Libraries the audit can read (each through its adapter's reader)."""
    return adapters.names()


# ----------------------------------------------------------------------------- commands
def _launcher_at(words: list[str], i: int) -> tuple[AdapterDescriptor, int, str, str] | None:
    """(descriptor, first argument, label, name as written) of a kl-patches launcher at ``i``."""
    w = words[i]
    nxt = words[i + 1] if i + 1 < len(words) else ""
    for d in adapters.descriptors():
        for launcher in d.launchers:
            if w in ("-m", "--module") and nxt == launcher.module:
                written = launcher.module
            elif os.path.basename(w) == "kl-patches" and nxt == launcher.command:
                written = f"kl-patches {launcher.command}"
            else:
                continue
            start = i + 2
            if not launcher.subcommands:
                return d, start, launcher.module, written
            sub = words[start] if start < len(words) else ""
            if sub not in launcher.subcommands:
                raise InputError(
                    f"{launcher.module} needs a trainer ({'|'.join(launcher.subcommands)}), "
                    f"got {sub!r}"
                )
            return d, start + 1, f"{launcher.module} {sub}", written
    return None


def _entry_at(words: list[str], i: int) -> tuple[AdapterDescriptor, int, str] | None:
    """(descriptor, first argument, label) of a library's own entry point at ``i``."""
    w = words[i]
    nxt = words[i + 1] if i + 1 < len(words) else ""
    dotted = w[: -len(".py")].replace("/", ".").replace("\\", ".") if w.endswith(".py") else ""
    for d in adapters.descriptors():
        for entry in d.entries:
            if w in ("-m", "--module") and nxt == entry.module:
                return d, i + 2, entry.label
            if dotted and (dotted == entry.module or dotted.endswith("." + entry.module)):
                return d, i + 1, entry.label
            n = len(entry.command)
            if (
                n
                and os.path.basename(w) == entry.command[0]
                and tuple(words[i + 1 : i + n]) == entry.command[1:]
            ):
                return d, i + n, entry.label
    return None


def _from_command(cmd: Command, origin: str, base_dir: Path | None) -> AuditInput | None:
    for i in range(len(cmd.words)):
        launcher = _launcher_at(cmd.words, i)
        if launcher is not None:
            d, start, label, written = launcher
            try:
                lp = d.launcher_payload(label, cmd.words[start:], base_dir, origin)
            except InputError:
                raise
            except ValueError as err:
                raise InputError(f"{origin}: {written} would refuse this launch: {err}") from err
            return _input(d, lp, origin, cmd)
        entry = _entry_at(cmd.words, i)
        if entry is not None:
            d, start, label = entry
            return _input(
                d, d.entry_payload(label, cmd.words[start:], base_dir, origin), origin, cmd
            )
    return None


def _input(d: AdapterDescriptor, lp: LaunchPayload, origin: str, cmd: Command) -> AuditInput:
    return AuditInput(
        library=d.name,
        payload=lp.payload,
        origin=origin,
        kind="shell",
        notes=tuple(dict.fromkeys([*cmd.notes, *lp.notes])),
        warnings=tuple(cmd.warnings),
        dropped=tuple(cmd.dropped),
        unresolved=tuple(cmd.unresolved),
        kl_config=lp.kl_config,
    )


# ----------------------------------------------------------------------------- files
def _check_library(library: str | None) -> None:
    if library is not None and library not in libraries():
        raise InputError(f"unknown library {library!r}; choose one of {list(libraries())}")


def library_of_mapping(data: dict[str, Any]) -> str | None:
    """The first library whose adapter claims a loaded config mapping, None if none does."""
    return next((d.name for d in adapters.descriptors() if d.claims(data)), None)


def inputs_from_mapping(data: dict[str, Any], library: str | None, origin: str) -> list[AuditInput]:
    """A YAML/JSON config (already loaded) as one input."""
    _check_library(library)
    lib = library or library_of_mapping(data)
    if lib is None:
        readable = [d for d in adapters.descriptors() if d.reads_config_files]
        raise InputError(
            f"{origin}: cannot tell which library this config is for ("
            + "; ".join(d.mapping_hint for d in readable)
            + f"); pass --library {'|'.join(d.name for d in readable)}"
        )
    d = adapters.get(lib)
    if d.config_files:
        raise InputError(f"{origin}: {d.config_files}")
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


_OVERRIDE = re.compile(r"^[+~]{0,2}[A-Za-z_][\w.\-/@]*(=|$)")


def _bare(
    words: list[str], library: str | None, origin: str, kind: str, notes: tuple[str, ...]
) -> AuditInput:
    """Flags or overrides without an entry point: the library is given or guessed by form."""
    d = adapters.get(library) if library is not None else None
    extra: tuple[str, ...] = ()
    if d is None:
        if not words:
            raise InputError(f"{origin}: nothing to audit (no flags, overrides or launch)")
        if all(_OVERRIDE.match(w) for w in words) and any("=" in w for w in words):
            form = "overrides"
        elif words[0].startswith("--"):
            form = "flags"
        else:
            form = ""
        d = next((x for x in adapters.descriptors() if form and x.bare_argv == form), None)
        if d is None:
            raise InputError(
                f"{origin}: cannot tell which library {' '.join(words[:3])!r}... is for; "
                f"pass --library with one of {list(libraries())}"
            )
        extra = (d.bare_note,) if d.bare_note else ()
    payload = d.bare_payload(words)
    return AuditInput(d.name, payload, origin, kind, notes + extra)


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
        runs = sorted({" ".join(c.words[:3]) for c in script.commands if len(c.words) > 1})
        raise InputError(
            f"{origin}: no verl, OpenRLHF or TRL launch found (looked for {', '.join(looked_for())}"
            + (f"; {library} only" if library else "")
            + f"); the commands here start {runs[:6]}"
        )
    notes = tuple(dict.fromkeys(n for c in script.commands for n in c.notes))
    unresolved = tuple(dict.fromkeys(u for c in script.commands for u in c.unresolved))
    item = _bare(words, library, origin, "overrides", notes)
    return [AuditInput(item.library, item.payload, origin, "overrides", item.notes, (), unresolved)]


def looked_for() -> list[str]:
    """The launch forms the audit recognises, for the "no launch found" message."""
    modules = sorted(e.module for d in adapters.descriptors() for e in d.entries if not e.command)
    commands: dict[str, list[str]] = {}
    for d in adapters.descriptors():
        for e in d.entries:
            if e.command:
                commands.setdefault(e.command[0], []).append(" ".join(e.command[1:]))
    launchers = sorted(x.module for d in adapters.descriptors() for x in d.launchers)
    return [*modules, *(f"{c} {'|'.join(subs)}" for c, subs in commands.items()), *launchers]


def inputs_from_file(
    path: str | Path, library: str | None = None, variables: dict[str, str] | None = None
) -> list[AuditInput]:
    """Every launch in a file: YAML/JSON config, shell script, or overrides/flags file."""
    _check_library(library)
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in YAML_SUFFIXES:
        return inputs_from_mapping(load_mapping(p), library, str(p))
    text = read_text(p)
    if suffix not in SHELL_SUFFIXES and not text.startswith("#!"):
        data: Any = None
        try:
            yaml = yaml_module()
            data = yaml.safe_load(text)
        except InputError:  # no pyyaml: the file can only be a script or an overrides list
            pass
        except Exception:  # not YAML at all (yaml.YAMLError and friends)
            data = None
        if isinstance(data, dict) and not any(isinstance(k, str) and "=" in k for k in data):
            return inputs_from_mapping(data, library, str(p))
    kind = "shell" if suffix in SHELL_SUFFIXES or text.startswith("#!") else "overrides"
    return inputs_from_text(text, str(p), library, variables, p.parent, kind)
