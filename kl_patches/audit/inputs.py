"""Find the trainer launches in what a user hands the audit, and shape them for each reader.

Inputs people have: a launch shell script, a Python training script, a YAML/JSON config (a
library config, a Hydra config with ``defaults``, or a cluster job file whose ``run:`` block is
shell), a file of Hydra overrides or flags, or an argv (after ``--`` on the audit's command
line). Each launch found becomes an :class:`~kl_patches.audit.model.AuditInput`: the library,
what its reader takes (an argv list or a dict, plus keyword context such as the entry point and
a composed config file), where it came from, and what could not be read exactly.

A launch is found in a shell command by, in this order: a kl-patches launcher; a library entry
point (``python -m MODULE``, its ``.py`` path, a console command, a recipe or a fork's copy that
follows an adapter's pattern); a Python script that the reader can open (read with
:mod:`.python`: the trainer it builds); a known example script of a library checkout; an
unknown script whose arguments carry a library's trainer options (read as that library's main
trainer, with a finding naming the assumption). ``python -c CODE`` and Python fed on a
here-document are read as Python.

Every library fact comes from the adapters' descriptors (:mod:`kl_patches.adapters`); this
module only walks commands and files. Nothing is ever run.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kl_patches import adapters
from kl_patches.adapters.base import AdapterDescriptor, LaunchPayload
from kl_patches.adapters.files import (
    NotALaunchError,
    load_mapping_text,
    read_file,
    try_read_text,
    yaml_module,
)
from kl_patches.audit.ignored import argv_items
from kl_patches.audit.model import AuditFinding, AuditInput, InputError
from kl_patches.audit.pins import shown_path
from kl_patches.audit.python import PyScript, read_python
from kl_patches.audit.shell import (
    Command,
    ShellLimitError,
    ShellParseError,
    ShellScript,
    parse_script,
)
from kl_patches.audit.versions import vendored_copy
from kl_patches.audit.walk import files_under
from kl_patches.audit.yaml_inputs import (
    Composed,
    cluster_commands,
    compose,
    config_dirs,
    find_config,
)

YAML_SUFFIXES = (".yaml", ".yml", ".json")
SHELL_SUFFIXES = (".sh", ".bash", ".zsh", ".slurm", ".sbatch")
PYTHON_SUFFIXES = (".py",)

_LIBRARY_CONFIGS = ("ppo_trainer", "ppo_megatron_trainer")


def libraries() -> tuple[str, ...]:
    """Libraries the audit can read (each through its adapter's reader)."""
    return adapters.names()


@dataclass
class _Scan:
    """What one file's commands run, launches or not (for the "no launch found" message)."""

    runs: list[str] = field(default_factory=list)
    """Descriptions of non-RL entry points and trainers met."""
    notes: list[str] = field(default_factory=list)
    """Script-level notes (parse stops, bounds)."""


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


def _dotted(word: str) -> str:
    """``a/b/c.py`` -> ``a.b.c`` (empty for a word that is not a ``.py`` path)."""
    if not word.endswith(".py"):
        return ""
    return word[: -len(".py")].lstrip("./").replace("/", ".").replace("\\", ".")


def _entry_at(words: list[str], i: int) -> tuple[AdapterDescriptor, int, str, str] | None:
    """(descriptor, first argument, label, how) of a library's own entry point at ``i``;
    ``how`` is ``""`` for a recorded entry, else why an entry was assumed."""
    w = words[i]
    nxt = words[i + 1] if i + 1 < len(words) else ""
    dotted = _dotted(w)
    module = nxt if w in ("-m", "--module") else ""
    for d in adapters.descriptors():
        for entry in d.entries:
            if module and module == entry.module:
                return d, i + 2, entry.label, ""
            if dotted and (dotted == entry.module or dotted.endswith("." + entry.module)):
                return d, i + 1, entry.label, ""
            n = len(entry.command)
            if (
                n
                and os.path.basename(w) == entry.command[0]
                and tuple(words[i + 1 : i + n]) == entry.command[1:]
            ):
                return d, i + n, entry.label, ""
    if module:
        for d in adapters.descriptors():
            found = d.match_entry(module)
            if found is not None:
                return d, i + 2, found.label, "it follows the pattern of the library's trainers"
    return None


def _other_at(words: list[str], i: int) -> str | None:
    """What a non-RL entry point of a library at ``i`` runs (``trl sft``, ``-m ...train_sft``)."""
    w = words[i]
    nxt = words[i + 1] if i + 1 < len(words) else ""
    module = nxt if w in ("-m", "--module") else _dotted(w)
    for d in adapters.descriptors():
        for key, what in d.other_entries.items():
            if module and (module == key or module.endswith("." + key)):
                return f"{key}: {what}"
            parts = key.split()
            if (
                len(parts) > 1
                and os.path.basename(w) == parts[0]
                and words[i + 1 : i + len(parts)] == parts[1:]
            ):
                return f"{key}: {what}"
    return None


@dataclass
class _Ctx:
    """Where a file's commands are read from."""

    origin: str
    base_dir: Path | None
    script: ShellScript | None = None
    library: str | None = None
    version: str | None = None
    scan: _Scan = field(default_factory=_Scan)


def _where(cmd: Command, ctx: _Ctx) -> str:
    """``path:line`` of a command, with the chain of followed files, the function calls, loop
    values and undecidable branches it is in: ``run.sh:9 -> inner.sh:2 [f@4, seed=1]``."""
    if cmd.file is None:
        where = f"{ctx.origin}:{cmd.line}"
    else:
        chain = [ctx.origin + hop if hop.startswith(":") else hop for hop in cmd.via]
        where = " -> ".join([*chain, f"{cmd.file}:{cmd.line}"])
    labels = [*cmd.calls, *cmd.loop, *cmd.branch]
    return where + (f" [{', '.join(labels)}]" if labels else "")


def _drop_unknown(
    cmd: Command, start: int
) -> tuple[list[str], tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """The launch's argv from ``start`` without the options whose value is unknown (command
    substitutions, input the script reads), with (key, text) of those (key ``""`` for a whole
    argument of unknown value: it may be any option) and (key, variables) of empty-by-unset
    ones."""
    argv = cmd.words[start:]
    unknown = {i - start: v for i, v in cmd.unknown.items() if i >= start}
    unset = {i - start: v for i, v in cmd.unset_in.items() if i >= start}
    if not unknown and not unset:
        return list(argv), (), ()
    drop: set[int] = set()
    lost: list[tuple[str, str]] = []
    empty: list[tuple[str, str]] = []
    covered: set[int] = set()
    for key, a, b in argv_items(argv):
        idx = range(a, b)
        covered.update(idx)
        texts = [t for k in idx for t in unknown.get(k, [])]
        if texts:
            drop.update(idx)
            lost.append((key, " ".join(dict.fromkeys(texts))))
        names = [n for k in idx for n in unset.get(k, [])]
        if names and not texts:
            empty.append((key, ", ".join("$" + n for n in dict.fromkeys(names))))
    for k, texts in sorted(unknown.items()):  # a whole argument of unknown value
        if k not in covered:
            drop.add(k)
            lost.append(("", " ".join(dict.fromkeys(texts))))
    kept = [t for k, t in enumerate(argv) if k not in drop]
    return kept, tuple(lost), tuple(empty)


def _make_input(
    d: AdapterDescriptor,
    lp: LaunchPayload,
    cmd: Command,
    ctx: _Ctx,
    lost: tuple[tuple[str, str], ...] = (),
    empty: tuple[tuple[str, str], ...] = (),
    findings: tuple[AuditFinding, ...] = (),
    notes: tuple[str, ...] = (),
    kind: str = "shell",
) -> AuditInput:
    context = dict(lp.context)
    extra = list(findings)
    extra += [AuditFinding(f.code, f.severity, f.message, f.fix, "adapter") for f in lp.findings]
    more_notes = list(notes)
    if "hydra" in context:
        hydra = context.pop("hydra")
        entry = str(context.get("entry", ""))
        base, hydra_findings, hydra_notes, checked = _compose_hydra(hydra, entry, cmd, ctx, d)
        if base:
            context["base"] = base
        context.update(checked)
        extra += hydra_findings
        more_notes += hydra_notes
    if ctx.version is not None:
        context.setdefault("version", ctx.version)
    return AuditInput(
        library=d.name,
        payload=lp.payload,
        origin=_where(cmd, ctx),
        kind=kind,
        notes=tuple(dict.fromkeys([*cmd.notes, *lp.notes, *more_notes])),
        warnings=tuple(cmd.warnings),
        dropped=tuple(cmd.dropped),
        unresolved=tuple(cmd.unresolved),
        kl_config=lp.kl_config,
        context=context,
        findings=tuple(extra),
        branch=tuple(cmd.branch),
        assumed=tuple(cmd.assumed),
        unknown_items=lost,
        empty_items=empty,
        vanished=tuple(cmd.vanished),
        args_forwarded=cmd.args_forwarded,
        version=ctx.version,
    )


MAX_SUFFIX_FILES = 20000
"""The most files :func:`_by_suffix` looks at in a checkout (none is read)."""


def _by_suffix(word: str, bases: list[Path]) -> str | None:
    """The one file of the checkout (the nearest folder of ``bases`` holding ``.git``) whose
    path ends with the relative path ``word``, when no base has it: a script launched from a
    folder the launch file does not ``cd`` into (R1-V's ``src/scripts/run_grpo_vllm.sh`` runs
    ``src/open_r1/grpo.py`` from ``src/r1-v``, as its README says). None when there is no such
    file, several, or no checkout root, or the checkout has more than
    :data:`MAX_SUFFIX_FILES` files."""
    root = next((b for b in bases if (b / ".git").exists()), None)
    if root is None:
        return None
    tail = os.sep + os.path.normpath(word)
    found: list[str] = []
    for seen, path in enumerate(files_under(root), 1):
        if seen > MAX_SUFFIX_FILES:
            return None
        if str(path).endswith(tail):
            found.append(str(path))
            if len(found) > 1:
                return None
    return found[0] if found else None


def _bases(cmd: Command, ctx: _Ctx) -> list[Path]:
    """Directories a relative path of ``cmd`` may be relative to: its working directory, the
    script's directory and the script directory's parents (a repository checkout)."""
    out: list[Path] = []
    if cmd.cwd:
        out.append(Path(cmd.cwd))
    here = Path(cmd.file).parent if cmd.file else ctx.base_dir
    if here is not None:
        here = here.resolve()
        out.append(here)
        out.extend(list(here.parents)[:6])
    return list(dict.fromkeys(out))


def _copy_config_dirs(d: AdapterDescriptor, module_dir: Path, bases: list[Path]) -> list[Path]:
    """The entry module's ``config`` folder inside a copy of the library found from ``bases``
    (the adapter's ``vendored_version``: ``verl/version/version`` or one folder deeper,
    ``verl/verl/version/version``, a checkout installed with ``pip install -e``): Python
    imports that copy, and its ``@hydra.main(config_path="config")`` composes that folder."""
    if not bases:
        return []
    found = vendored_copy(bases[0], d.name)  # memoised per directory (versions.cached)
    if found is None:
        return []
    for above in list(Path(found[1]).parents)[:4]:
        if (above / module_dir / "config").is_dir():
            return [above / module_dir / "config"]
    return []


def _compose_hydra(
    hydra: dict[str, str], entry: str, cmd: Command, ctx: _Ctx, d: AdapterDescriptor | None = None
) -> tuple[dict[str, Any], list[AuditFinding], list[str], dict[str, Any]]:
    """The flat settings of the config file a Hydra launch names (``--config-path``/
    ``--config-name``), or of the entry point's own config when a checkout holds it, and what
    the reader checks the overrides against (:func:`_checked_keys`)."""
    explicit = "config_name" in hydra or "config_path" in hydra
    name = hydra.get("config_name") or hydra.get("default_config")
    if not name:
        return (
            {},
            [],
            [f"Hydra options {hydra} name no config: the library's defaults are read"],
            {},
        )
    bases = _bases(cmd, ctx)
    dirs: list[Path] = []
    if hydra.get("config_dir"):
        dirs += config_dirs(hydra["config_dir"], bases)
    if hydra.get("config_path"):
        dirs += config_dirs(hydra["config_path"], bases)
    if entry and "." in entry and not os.path.isabs(entry):
        module_dir = Path(*entry.split(".")[:-1])
        dirs += [b / module_dir / "config" for b in bases if (b / module_dir / "config").is_dir()]
        if d is not None:
            dirs += _copy_config_dirs(d, module_dir, bases)
    if not hydra.get("config_path"):
        dirs += [b for b in bases if b.is_dir()]
    path = find_config(name, list(dict.fromkeys(dirs)))
    if path is None:
        stem = name.removesuffix(".yaml").removesuffix(".yml")
        if not explicit or stem in _LIBRARY_CONFIGS:
            if stem in _LIBRARY_CONFIGS:  # verl's own config: the release's recorded keys
                return {}, [], [], {"config_name": stem}
            return (
                {},
                [],
                [
                    f"{entry}'s own config {name}.yaml is not beside the script (no checkout "
                    "here): read on the library's recorded defaults"
                ],
                {},
            )
        where = f" under {hydra['config_path']}" if hydra.get("config_path") else ""
        return (
            {},
            [
                AuditFinding(
                    "config_not_found",
                    "warning",
                    f"The launch composes Hydra config {name!r}{where}, which the audit cannot "
                    "find beside the script: its settings (KL settings among them, perhaps) "
                    "are read as the library's defaults. Audit the config file too, or run the "
                    "audit from the repository.",
                    "",
                    "audit",
                )
            ],
            [],
            {"config_check": False},  # its keys are unknown: refuse nothing
        )
    composed = compose(path, library_configs=_LIBRARY_CONFIGS)
    notes = [f"composed the Hydra config {path} ({len(composed.files)} file(s))", *composed.notes]
    if hydra.get("config_dir") or any(
        w.startswith(("hydra.searchpath", "+hydra.searchpath")) for w in cmd.words
    ):
        composed.linked.clear()  # a folder added on the command line may hold the groups
    return composed.flat, [], notes, _checked_keys(composed)


def _checked_keys(composed: Composed) -> dict[str, Any]:
    """The reader's ``config_name``/``config_keys``/``config_check`` for a composed config.

    Hydra composes the primary config with its ``defaults`` and then sets struct mode on the
    result (hydra-core 1.3.8 ``_internal/config_loader_impl.py:270``, in
    ``_load_configuration_impl``: ``OmegaConf.set_struct(cfg, True)`` after merging the
    defaults, then the command-line overrides), so an override of a key that no file of the
    composition has is refused: the keys are the project files' own keys plus the library
    config the ``defaults`` place, whose keys the reader takes from the recorded release it
    reads (the release's file, not the copy in the checkout). Nothing is checked when part of
    the composition was not found, or when a library config sits at a package other than the
    root (the recording is of the root placement)."""
    links = {"config_links": dict(composed.linked)} if composed.linked else {}
    if not composed.complete:
        return {"config_check": False, **links}
    if not composed.mounts:
        return {"config_name": "", "config_keys": tuple(sorted(composed.keys)), **links}
    if len(composed.mounts) == 1 and composed.mounts[0][1] == "":
        name = composed.mounts[0][0]
        return {"config_name": name, "config_keys": tuple(sorted(composed.keys)), **links}
    return {"config_check": False, **links}


def _python_launches(
    text: str,
    origin: str,
    argv: list[str] | None,
    ctx: _Ctx,
    cmd: Command | None,
    script_path: Path | None,
    python_text: bool = False,
) -> list[AuditInput]:
    """The trainers a Python script builds, as inputs (``argv``: the command line it gets)."""
    script = read_python(text, origin)
    out: list[AuditInput] = []
    for run in script.others:
        ctx.scan.runs.append(f"{origin}:{run[0]} {run[1]}")
    for launch in script.launches:
        if ctx.library is not None and launch.library != ctx.library:
            continue
        d = adapters.get(launch.library)
        notes = [*script.notes, *launch.notes]
        findings: list[AuditFinding] = []
        if launch.from_argv and argv is not None:
            label = f"{d.name} {launch.label}"
            base = script_path.parent if script_path else ctx.base_dir
            lp = d.entry_payload(label, list(argv), base, origin)
            payload: Any = lp.payload
            if isinstance(payload, dict):
                payload = {**payload, **launch.kwargs, "trainer": launch.label}
        else:
            payload = {**launch.kwargs, "trainer": launch.label}
            if launch.from_argv:
                notes.append(
                    f"{launch.trainer_class}'s config comes from the command line (a parser): "
                    "read at the config class defaults; audit the launch command for its flags"
                )
        if launch.kl is not None and isinstance(payload, dict):
            payload.update(
                {k if k.startswith("kl_") else f"kl_{k}": v for k, v in launch.kl.items()}
            )
        context: dict[str, Any] = {"entry": origin}
        if script.patchers:
            context["patchers"] = tuple(script.patchers)
        if launch.kl is not None and launch.kl_module:
            context["kl_patch"] = launch.kl_module
        if launch.subclass:
            context["subclass"] = launch.subclass
            context["overrides"] = tuple(launch.overrides)
        if launch.unresolved:
            context["unresolved"] = tuple(launch.unresolved)
        if launch.from_argv and launch.parser_fields:
            context["script_fields"] = dict(launch.parser_fields)
        if launch.from_argv and script.config_copies:
            context["script_copies"] = tuple(script.config_copies)
        where = f"{origin} -> python:{launch.line}" if python_text else f"{origin}:{launch.line}"
        if cmd is not None:
            where = f"{_where(cmd, ctx)} -> {os.path.basename(origin)}:{launch.line}"
        out.append(
            AuditInput(
                library=d.name,
                payload=payload,
                origin=where,
                kind="python",
                notes=tuple(dict.fromkeys(notes + (list(cmd.notes) if cmd else []))),
                context=context,
                findings=tuple(findings),
                branch=tuple(cmd.branch) if cmd else (),
                assumed=tuple(cmd.assumed) if cmd else (),
                unresolved=tuple(cmd.unresolved) if cmd else (),
                version=ctx.version,
            )
        )
    return out


def _hydra_app(
    script: PyScript, path: Path, cmd: Command, start: int, ctx: _Ctx, word: str
) -> AuditInput | None:
    """A Python script that is a Hydra app importing a library that takes overrides (a fork's
    copy of ``main_ppo``): read as that library's assumed entry, on the config it names."""
    if script.hydra is None:
        return None
    for d in adapters.descriptors():
        if d.name in script.libraries and d.assumed_entry and d.bare_argv == "overrides":
            kept, lost, empty = _drop_unknown(cmd, start)
            lp = d.entry_payload(d.assumed_entry, kept, path.parent, str(path))
            context = dict(lp.context)
            hydra = dict(script.hydra)
            given = context.pop("hydra", {})
            if isinstance(given, dict):
                given.pop("default_config", None)
                hydra.update(given)
            if hydra.get("config_path") and not os.path.isabs(hydra["config_path"]):
                hydra["config_path"] = str(path.parent / hydra["config_path"])
            context["hydra"] = hydra
            context["entry"] = word
            context["assumed"] = f"a Hydra app importing {d.name}, read as {d.assumed_entry}"
            lp = LaunchPayload(lp.payload, lp.notes, lp.kl_config, context, lp.findings)
            return _make_input(d, lp, cmd, ctx, lost, empty)
    return None


def _script_launch(cmd: Command, i: int, ctx: _Ctx) -> list[AuditInput] | None:
    """``... path/to/script.py ARGS``: read the script if it can be opened, else a known
    example script, else a script whose arguments carry a library's trainer options."""
    word = cmd.words[i]
    argv = cmd.words[i + 1 :]
    found: str | None = None
    text: str | None = None
    opened: PyScript | None = None  # the script, when it could be read
    virtual = ctx.script.files if ctx.script else {}
    for base in _bases(cmd, ctx):
        candidate = os.path.normpath(word if os.path.isabs(word) else str(base / word))
        if candidate in virtual:
            found, text = candidate, virtual[candidate]
            break
        if os.path.isfile(candidate):
            found, text = candidate, try_read_text(candidate)
            break
    if found is None and not os.path.isabs(word) and "/" in word.strip("./"):
        found = _by_suffix(word, _bases(cmd, ctx))
        if found is not None:
            text = try_read_text(found)
            ctx.scan.notes.append(
                f"{word} is not there from the launch's folder or its parents; the checkout's "
                f"one file ending with that path is read ({shown_path(found)}): the launch is "
                "run from the folder above it"
            )
    if found is not None and text is not None:
        try:
            script = read_python(text, found)
        except InputError as err:
            ctx.scan.notes.append(str(err))
            return []
        hydra = _hydra_app(script, Path(found), cmd, i + 1, ctx, word)
        if hydra is not None:
            return [hydra]
        inputs = _python_launches(text, found, argv, ctx, cmd, Path(found))
        if inputs:
            return inputs
        if script.others:
            return []
        opened = script
    dotted = _dotted(word)
    for d in adapters.descriptors():
        matched = d.match_entry(dotted) if dotted else None
        if matched is not None:
            kept, lost, empty = _drop_unknown(cmd, i + 1)
            lp = d.entry_payload(matched.label, kept, ctx.base_dir, ctx.origin)
            context = {**lp.context, "entry": matched.label}
            context["assumed"] = "it follows the pattern of the library's trainers"
            lp = LaunchPayload(lp.payload, lp.notes, lp.kl_config, context, lp.findings)
            return [_make_input(d, lp, cmd, ctx, lost, empty)]
    # a known script's path, unless the file opened builds a trainer class of the project's
    # own (R1-V's src/open_r1/grpo.py, open-r1's path, trains Qwen2VLGRPOTrainer)
    known = () if opened is not None and opened.own_trainers else adapters.descriptors()
    for d in known:
        for suffix, label in d.scripts.items():
            if word.replace("\\", "/").endswith(suffix):
                kept, lost, empty = _drop_unknown(cmd, i + 1)
                lp = d.entry_payload(label, kept, ctx.base_dir, ctx.origin)
                note = f"{word} is {d.name}'s known script {suffix}: read as {label}"
                return [_make_input(d, lp, cmd, ctx, lost, empty, notes=(note,))]
    return _assumed(cmd, i, ctx, word, opened)


def _marker_hits(d: AdapterDescriptor, argv: list[str]) -> list[str]:
    """The words of ``argv`` that are ``d``'s trainer options (its argv markers)."""
    return [a for a in argv if any(re.search(m, a) for m in d.argv_markers)]


def _sibling_hits(
    d: AdapterDescriptor, cmd: Command, word: str, ctx: _Ctx
) -> tuple[int, list[str]]:
    """(line, options) of another command of the file that runs the same unknown script
    ``word`` (same path as written, same working directory) with ``d``'s trainer options;
    (0, []) when none does. One program is one trainer: a launch of it that only sets, say,
    its environment's options (``custom_envs.X=...``) runs the same trainer as the launches
    that show its library's options."""
    if ctx.script is None:
        return 0, []
    for other in ctx.script.commands:
        if other is cmd or other.cwd != cmd.cwd or other.file != cmd.file:
            continue
        for j, x in enumerate(other.words[:-1]):
            if x == word:
                hits = _marker_hits(d, other.words[j + 1 :])
                if hits:
                    return other.line, hits
                break
    return 0, []


def _assumed(
    cmd: Command, i: int, ctx: _Ctx, word: str, script: PyScript | None = None
) -> list[AuditInput] | None:
    """An unknown script read as the main trainer of the library whose trainer options its
    arguments carry, or, when they carry none, whose options another launch of the same
    script in the file carries. ``script``: the script, when it could be read (it builds a
    trainer the reader does not know): the options its own dataclasses add to its parser
    (:attr:`.python.PyScript.parser_fields`, given to the reader as ``script_fields``,
    accepted keys of the launch), the library config classes it binds to its own copies
    (``script_copies``) and the trainer classes of its own it builds (``project_trainer``)."""
    argv = cmd.words[i + 1 :]
    for d in adapters.descriptors():
        if not d.argv_markers or not d.assumed_entry:
            continue
        hits = _marker_hits(d, argv)
        sibling = 0
        if not hits:
            sibling, hits = _sibling_hits(d, cmd, word, ctx)
        own = script is not None and script.own_trainers and d.name in script.libraries
        if not hits and not own:
            continue
        kept, lost, empty = _drop_unknown(cmd, i + 1)
        lp = d.entry_payload(d.assumed_entry, kept, ctx.base_dir, ctx.origin)
        context = dict(lp.context)
        context["entry"] = word
        if script is not None and script.parser_fields:
            context["script_fields"] = dict(script.parser_fields)
        if script is not None and script.config_copies:
            context["script_copies"] = tuple(script.config_copies)
        if script is not None and script.own_trainers:
            context["project_trainer"] = ", ".join(
                f"{cls} ({where})" for cls, where in script.own_trainers.items()
            )
        context["assumed"] = (
            f"it imports {d.name} and trains a trainer class of the project's own, so it is "
            f"read as {d.assumed_entry}"
            if not hits
            else f"its arguments carry {d.name} trainer options ({', '.join(hits[:3])}), so it "
            f"is read as {d.assumed_entry}"
            if not sibling
            else f"its launch at line {sibling} in this file carries {d.name} trainer options "
            f"({', '.join(hits[:3])}), so this launch of the same script is read as "
            f"{d.assumed_entry} too"
        )
        lp = LaunchPayload(lp.payload, lp.notes, lp.kl_config, context, lp.findings)
        return [_make_input(d, lp, cmd, ctx, lost, empty)]
    return None


def _from_command(cmd: Command, ctx: _Ctx) -> list[AuditInput]:
    if cmd.python is not None:
        try:
            return _python_launches(
                cmd.python, _where(cmd, ctx), None, ctx, None, None, python_text=True
            )
        except InputError as err:
            ctx.scan.notes.append(str(err))
            return []
    words = cmd.words
    for i in range(len(words)):
        launcher = _launcher_at(words, i)
        if launcher is not None:
            d, start, label, written = launcher
            kept, lost, empty = _drop_unknown(cmd, start)
            try:
                lp = d.launcher_payload(label, kept, ctx.base_dir, _where(cmd, ctx))
            except InputError:
                raise
            except ValueError as err:
                raise InputError(
                    f"{_where(cmd, ctx)}: {written} would refuse this launch: {err}"
                ) from err
            return [_make_input(d, lp, cmd, ctx, lost, empty)]
        entry = _entry_at(words, i)
        if entry is not None:
            d, start, label, how = entry
            kept, lost, empty = _drop_unknown(cmd, start)
            lp = d.entry_payload(label, kept, ctx.base_dir, _where(cmd, ctx))
            if "entry" not in lp.context:
                lp = LaunchPayload(
                    lp.payload, lp.notes, lp.kl_config, {**lp.context, "entry": label}, lp.findings
                )
            if how:
                context = dict(lp.context)
                context.setdefault("entry", label)
                context["assumed"] = how
                lp = LaunchPayload(lp.payload, lp.notes, lp.kl_config, context, lp.findings)
            notes: tuple[str, ...] = ()
            if words[i].endswith(".py") and not words[i].replace("/", ".").startswith(label):
                notes = (f"{words[i]} is run by path: read as {label}, the module it copies",)
            return [_make_input(d, lp, cmd, ctx, lost, empty, notes=notes)]
        other = _other_at(words, i)
        if other is not None:
            ctx.scan.runs.append(f"{_where(cmd, ctx)} {other}")
            return []
        if words[i].endswith(".py"):
            found = _script_launch(cmd, i, ctx)
            if found is not None:
                return found
            return []
    return []


# ----------------------------------------------------------------------------- files
def _check_library(library: str | None) -> None:
    if library is not None and library not in libraries():
        raise InputError(f"unknown library {library!r}; choose one of {list(libraries())}")


def library_of_mapping(data: dict[str, Any]) -> str | None:
    """The first library whose adapter claims a loaded config mapping, None if none does."""
    return next((d.name for d in adapters.descriptors() if d.claims(data)), None)


def inputs_from_mapping(
    data: dict[str, Any],
    library: str | None,
    origin: str,
    path: Path | None = None,
    version: str | None = None,
    variables: dict[str, str] | None = None,
) -> list[AuditInput]:
    """A YAML/JSON config (already loaded) as one input; a Hydra config's ``defaults`` are
    composed first (files beside ``path``), a cluster job file's commands read as shell (with
    the variables it declares, under ``variables``: the audit's ``--var``)."""
    _check_library(library)
    job = cluster_commands(data)
    if job is not None and library_of_mapping(data) is None:
        text, declared = job
        base = path.parent if path is not None else None
        merged = {**declared, **(variables or {})}
        return inputs_from_text(text, f"{origin}:run", library, merged, base, version=version)
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
    notes: tuple[str, ...] = ()
    payload: dict[str, Any] = data
    composed: Composed | None = None
    if path is not None and isinstance(data.get("defaults"), list):
        composed = compose(path, data, _LIBRARY_CONFIGS)
        payload = _nested(composed.flat)
        notes = (
            f"composed {len(composed.files)} Hydra config file(s)"
            + (f" on the library's {', '.join(composed.library)}" if composed.library else ""),
            *composed.notes,
        )
    elif "hydra" in data or "defaults" in data:
        payload = {k: v for k, v in data.items() if k not in ("hydra", "defaults")}
    context: dict[str, Any] = {"version": version} if version else {}
    if lib == "trl":
        context["config_file"] = True  # a recipe YAML: what TrlParser's --config reads
    if composed is not None and composed.linked:
        context["config_links"] = dict(composed.linked)
    return [
        AuditInput(
            library=lib,
            payload=payload,
            origin=origin,
            kind="yaml",
            notes=notes,
            context=context,
            version=version,
        )
    ]


def _nested(flat: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in flat.items():
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[leaf] = value
    return out


def inputs_from_argv(
    argv: list[str], library: str | None = None, origin: str = "argv"
) -> list[AuditInput]:
    """An argv: a whole launch command, or the flags/overrides of one library."""
    _check_library(library)
    words = [str(w) for w in argv]
    cmd = Command(words=words, line=1)
    ctx = _Ctx(origin, None, library=library)
    found = _from_command(cmd, ctx)
    if found:
        return [
            AuditInput(
                f.library,
                f.payload,
                origin,
                "argv",
                f.notes,
                context=f.context,
                findings=f.findings,
            )
            for f in found
        ]
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
            raise NotALaunchError(f"{origin}: nothing to audit (no flags, overrides or launch)")
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


def _reader_for(ctx: _Ctx) -> Any:
    def read(path: str) -> str | None:
        return try_read_text(path)

    return read


def inputs_from_text(
    text: str,
    origin: str,
    library: str | None = None,
    variables: dict[str, str] | None = None,
    base_dir: Path | None = None,
    kind: str = "shell",
    version: str | None = None,
    script_path: Path | None = None,
) -> list[AuditInput]:
    """Every launch in a shell script (or an overrides/flags file read with shell rules)."""
    _check_library(library)
    ctx = _Ctx(origin, base_dir, library=library, version=version)
    script_dir = str(base_dir.resolve()) if base_dir is not None else None
    try:
        script = parse_script(
            text,
            variables,
            script_dir,
            script_path=str(script_path.resolve()) if script_path is not None else None,
            reader=_reader_for(ctx),
            partial=True,
        )
    except ShellParseError as err:
        raise InputError(f"{origin}: cannot parse shell {err}") from err
    except ShellLimitError as err:
        raise InputError(f"{origin}: {err}") from err
    ctx.script = script
    found: list[AuditInput] = []
    refused: list[AuditInput] = []
    for cmd in script.commands:
        try:
            items = _from_command(cmd, ctx)
        except InputError as err:
            if len(script.commands) == 1:
                raise
            refused.append(_unreadable(cmd, ctx, str(err)))
            continue
        for item in items:
            if library is None or item.library == library:
                found.append(item)
    if refused and not found:
        raise InputError(str(refused[0].context["error"]))
    found += refused
    stop = (
        [
            AuditFinding(
                "script_partly_read",
                "warning",
                f"{script.error}: bash stops there too, so the launches after it never run; the "
                "launches before it are read.",
                "",
                "audit",
            )
        ]
        if script.error
        else []
    )
    if found:
        notes = tuple(n for n in script.notes if not (script.error and n.startswith(script.error)))
        return [
            dataclasses.replace(
                item,
                notes=tuple(dict.fromkeys([*item.notes, *notes])),
                findings=(*item.findings, *stop),
            )
            for item in found
        ]
    # No launch command: a file of overrides or flags (one or many per line).
    words = [w for cmd in script.commands for w in cmd.words]
    if kind == "shell":
        runs = sorted({" ".join(c.words[:3]) for c in script.commands if len(c.words) > 1})
        instead = ""
        if ctx.scan.runs:
            instead = "; it runs " + "; ".join(dict.fromkeys(ctx.scan.runs))
        error = f"; {script.error} (bash stops there too)" if script.error else ""
        raise InputError(
            f"{origin}: no verl, OpenRLHF or TRL launch found (looked for {', '.join(looked_for())}"
            + (f"; {library} only" if library else "")
            + f"){instead}{error}; the commands here start {runs[:6]}"
        )
    notes = tuple(dict.fromkeys(n for c in script.commands for n in c.notes))
    unresolved = tuple(dict.fromkeys(u for c in script.commands for u in c.unresolved))
    item = _bare(words, library, origin, "overrides", notes)
    return [
        AuditInput(
            item.library,
            item.payload,
            origin,
            "overrides",
            item.notes,
            (),
            (),
            unresolved,
            version=version,
        )
    ]


def _unreadable(cmd: Command, ctx: _Ctx, why: str) -> AuditInput:
    """A launch of a multi-launch script that cannot be read, as a marker input (the audit
    reports it as an error entry beside the file's readable launches)."""
    words = cmd.words
    owners = [
        d.name for d in adapters.descriptors() if any(_safe(d, words, i) for i in range(len(words)))
    ]
    return AuditInput(
        library=owners[0] if owners else ctx.library or adapters.names()[0],
        payload=[],
        origin=_where(cmd, ctx),
        kind="unreadable",
        notes=tuple(cmd.notes),
        context={"error": why},
    )


def _safe(d: AdapterDescriptor, words: list[str], i: int) -> bool:
    """True when the launch at ``i`` belongs to ``d`` (a launcher or entry of its own)."""
    try:
        found = _launcher_at(words, i)
    except InputError:
        found = None
    entry = _entry_at(words, i)
    return (found is not None and found[0].name == d.name) or (
        entry is not None and entry[0].name == d.name
    )


def looked_for() -> list[str]:
    """The launch forms the audit recognises, for the "no launch found" message."""
    modules = sorted(e.module for d in adapters.descriptors() for e in d.entries if not e.command)
    shown = [m for m in modules if not m.startswith("recipe.")]
    recipes = len(modules) - len(shown)
    commands: dict[str, list[str]] = {}
    for d in adapters.descriptors():
        for e in d.entries:
            if e.command:
                commands.setdefault(e.command[0], []).append(" ".join(e.command[1:]))
    launchers = sorted(x.module for d in adapters.descriptors() for x in d.launchers)
    return [
        *shown,
        *([f"{recipes} verl recipes (recipe.<name>.main_*)"] if recipes else []),
        *(f"{c} {'|'.join(subs)}" for c, subs in commands.items()),
        *launchers,
        "Python scripts that build a TRL trainer",
    ]


def _looks_like_python(text: str) -> bool:
    if not re.search(r"^\s*(import |from \S+ import |def |class |if __name__)", text, re.M):
        return False
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def inputs_from_python(
    text: str, origin: str, library: str | None = None, version: str | None = None
) -> list[AuditInput]:
    """The trainers a Python file builds (its config as written; flags from a command line
    are not known here)."""
    ctx = _Ctx(origin, Path(origin).parent, library=library, version=version)
    script = read_python(text, origin)
    found = _python_launches(text, origin, None, ctx, None, Path(origin))
    if found:
        return found
    instead = "; ".join(f"{origin}:{line} {what}" for line, what in script.others)
    libs = ", ".join(script.libraries) or "none of verl, OpenRLHF, TRL"
    raise NotALaunchError(
        f"{origin}: no trainer with a reference KL built here (imports {libs})"
        + (f"; it runs {instead}" if instead else "")
        + (
            "; a Hydra app: audit the command that launches it with its overrides"
            if script.hydra is not None
            else ""
        )
    )


def inputs_from_file(
    path: str | Path,
    library: str | None = None,
    variables: dict[str, str] | None = None,
    version: str | None = None,
) -> list[AuditInput]:
    """Every launch in a file: shell script, Python script, YAML/JSON config or cluster job
    file, or overrides/flags file. ``version`` is reserved for version-aware reading. The file
    is read through the guarded reader (:func:`kl_patches.adapters.files.read_file`); bytes
    that are not UTF-8 are a note on every launch found."""
    _check_library(library)
    p = Path(path)
    found = read_file(p)
    inputs = inputs_from_source(found.text, str(p), p, library, variables, version)
    if found.note:
        inputs = [dataclasses.replace(i, notes=(*i.notes, found.note)) for i in inputs]
    return inputs


def inputs_from_source(
    text: str,
    origin: str,
    path: Path | None,
    library: str | None = None,
    variables: dict[str, str] | None = None,
    version: str | None = None,
) -> list[AuditInput]:
    """Every launch in ``text`` (a file's, or standard input's when ``path`` is None: then its
    kind is told from its content alone and relative paths are read from the working
    directory)."""
    _check_library(library)
    p = path if path is not None else Path.cwd() / origin
    suffix = p.suffix.lower() if path is not None else ""
    first = text.split("\n", 1)[0]
    if suffix in PYTHON_SUFFIXES or (first.startswith("#!") and "python" in first):
        return inputs_from_python(text, origin, library, version)
    if suffix in YAML_SUFFIXES:
        data = load_mapping_text(text, origin, suffix == ".json")
        return inputs_from_mapping(data, library, origin, p, version, variables)
    if suffix not in SHELL_SUFFIXES and not text.startswith("#!"):
        if _looks_like_python(text):
            return inputs_from_python(text, origin, library, version)
        mapping: dict[str, Any] | None = None
        try:
            yaml_module()
            mapping = load_mapping_text(text, origin)
        except InputError:  # no pyyaml, or not a YAML mapping: a script or an overrides list
            mapping = None
        if mapping and not any(isinstance(k, str) and "=" in k for k in mapping):
            return inputs_from_mapping(mapping, library, origin, p, version, variables)
    kind = "shell" if suffix in SHELL_SUFFIXES or text.startswith("#!") else "overrides"
    script = p if path is not None else None
    return inputs_from_text(text, origin, library, variables, p.parent, kind, version, script)
