"""Is a printed fix accepted? Each fix runs through the parser it is written for.

A fix text (a finding's ``fix``, the audit's native fix, the kl-patches switch, the launchers'
notes) is one or more *alternatives* joined by :data:`OR`; each alternative is one of

* a kl-patches command (``kl-patches verl --kl k1-in-reward --kl.coef 0.001 -- <your
  overrides>``, ``python -m kl_patches.trl grpo ...``): checked with kl-patches' own argument
  parsing for that command (:func:`check_command`), the library not needed;
* ``pip install REQUIREMENT``: each requirement read with ``packaging``;
* a Python expression of kl-patches' API (``KLConfig.parse('k1-in-reward', coef=0.04)``,
  ``kl_patches.adapters.trl.unsloth.apply(KLConfig.parse(...))``): each ``KLConfig.parse`` call
  is built (:func:`check_python`);
* native settings in the library's own syntax: verl Hydra overrides ``key=value``, OpenRLHF
  flags ``--flag [value]`` (``(remove --flag)`` for a switch to delete), TRL config fields
  ``key=value`` (a ``trl grpo|rloo`` prefix switches the script): checked with the installed
  library's own parser (:func:`check_native`): Hydra's compose of verl's trainer config (as
  ``kl-patches verl --check`` composes it), OpenRLHF ``train_ppo_ray``'s argparse parser
  (:func:`kl_patches.adapters.openrlhf.launch.parser_of`), TRL's ``TrlParser`` over the
  script's dataclasses (their ``__post_init__`` runs).

A :class:`~kl_patches.audit.fix.change.ChangeSet` is checked the same way
(:func:`check_changes`, :func:`change_set_label`). ``<...>`` is a placeholder for the user's own
launch arguments and is left out of the check. A library that is not installed is never
claimed checked: the result says :data:`NOT_INSTALLED` (:func:`check_syntax` checks the form
alone). TRL's parser runs with ``--use_cpu True --bf16 False`` first on a machine without CUDA
(TRL's bf16 default refuses it there: the machine's setting, not the fix's).

Deviation: the native check parses the fix's settings over the library's
defaults, not over the user's whole launch (the launch's other settings are the user's, and
an unrelated refusal of theirs is not the fix's); verl's ``validate_config`` and OpenRLHF's
post-parse checks, which need a complete launch, are ``--check``'s.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib.util
import io
import re
import shlex
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kl_patches.audit.fix.change import LABELS, Change, ChangeSet
from kl_patches.audit.model import AuditEntry

__all__ = [
    "NOT_INSTALLED",
    "OR",
    "Check",
    "alternatives",
    "change_set_check",
    "change_set_label",
    "check_changes",
    "check_command",
    "check_fix",
    "check_native",
    "check_pip",
    "check_python",
    "check_syntax",
    "fix_label",
    "installed",
    "installed_version",
    "native_check",
    "register_command_check",
]

OR = " or "
"""Joins the alternatives of one fix text."""
NOT_INSTALLED = "not checked (library not installed)"
"""The label of a native fix whose library is not installed here."""
NATIVE, WITH_KL_PATCHES = LABELS

_PLACEHOLDER = re.compile(r"<[^<>]*>")
_MODULES = {"verl": ("verl", "hydra"), "openrlhf": ("openrlhf",), "trl": ("trl",)}
_TRL_SCRIPTS = {"grpo": "trl.scripts.grpo", "rloo": "trl.scripts.rloo"}


@dataclass(frozen=True)
class Check:
    """What a parser said about one fix (or one alternative of it)."""

    accepted: bool | None
    """True: the parser accepts it; False: it refuses it; None: not checked (see message)."""
    message: str
    """The parser that ran and its words (the refusal), or why nothing was checked."""

    @property
    def checked(self) -> bool:
        """True when a parser ran."""
        return self.accepted is not None


def installed(library: str) -> bool:
    """Whether ``library``'s parser can run here: an installed distribution (its metadata
    names a release) whose modules are importable (not imported). A folder named after the
    library in the working directory (a vendored copy's namespace package, without metadata)
    is not the library: its parser is not run."""
    if library not in _MODULES:
        raise ValueError(f"unknown library {library!r}; valid: {', '.join(_MODULES)}")
    if installed_version(library) is None:
        return False
    return all(importlib.util.find_spec(m) is not None for m in _MODULES[library])


def alternatives(fix: str) -> list[str]:
    """The alternatives of a fix text (split at :data:`OR`), stripped, empty ones dropped."""
    return [a.strip() for a in fix.split(OR) if a.strip()]


def _words(text: str) -> list[str]:
    """Shell words of ``text`` without ``<...>`` placeholders."""
    return [w for w in shlex.split(_PLACEHOLDER.sub(" ", text)) if w]


# ----------------------------------------------------------------------------- native
def _items(overrides: Sequence[str] | Mapping[str, str] | str) -> list[str]:
    """Words of the settings, placeholders dropped."""
    if isinstance(overrides, str):
        return _words(overrides)
    if isinstance(overrides, Mapping):
        return [f"{k}={v}" for k, v in overrides.items()]
    return [w for o in overrides for w in _words(o)]


def check_native(
    library: str,
    overrides: Sequence[str] | Mapping[str, str] | str,
    *,
    entry: str | None = None,
) -> Check:
    """Whether the installed ``library`` alone accepts the settings ``overrides``.

    ``overrides``: verl Hydra overrides (``key=value``), OpenRLHF argv words (``--flag value``,
    ``(remove --flag)``), TRL fields (``key=value``); a mapping is ``{key: value}`` in the
    library's spelling (``{"--init_kl_coef": "0.01"}``, ``""`` for a switch). ``entry``: verl's
    config name (default ``ppo_trainer``), OpenRLHF's module (default ``train_ppo_ray``), TRL's
    script (``grpo``/``rloo``, or the trainer's name; default ``grpo``).
    """
    if not installed(library):
        return Check(None, f"{NOT_INSTALLED}: {library}")
    if library == "verl":
        items = _items(overrides)
        return _verl(tuple(items), entry or "ppo_trainer")
    if library == "openrlhf":
        words = _openrlhf_words(overrides)
        return _openrlhf(tuple(words), entry or "openrlhf.cli.train_ppo_ray")
    items = _items(overrides)
    return _trl(tuple(items), _trl_script(entry))


@functools.lru_cache(maxsize=256)
def _verl(overrides: tuple[str, ...], config_name: str) -> Check:
    from kl_patches.adapters.verl.hydra_config import compose
    from kl_patches.adapters.verl.versions import installed_version

    where = f"verl {installed_version()}'s Hydra config ({config_name})"
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            compose(list(overrides), config_name=config_name)
    except Exception as err:  # Hydra's composition errors: the overrides are refused
        return Check(False, f"{where} refuses it: {str(err).strip().splitlines()[0]}")
    return Check(True, f"accepted by {where}")


def _openrlhf_words(overrides: Sequence[str] | Mapping[str, str] | str) -> list[str]:
    if isinstance(overrides, Mapping):
        out: list[str] = []
        for key, value in overrides.items():
            out += [key] + ([str(value)] if value != "" else [])
        return out
    return _items(overrides)


@functools.lru_cache(maxsize=256)
def _openrlhf(words: tuple[str, ...], module: str) -> Check:
    from kl_patches.adapters.openrlhf.launch import parser_of
    from kl_patches.adapters.openrlhf.versions import installed_version

    where = f"OpenRLHF {installed_version()}'s {module.rsplit('.', 1)[-1]} parser"
    argv, removed, i = [], [], 0
    while i < len(words):  # "(remove --flag)": the flag must be one the parser knows
        if words[i] == "(remove" and i + 1 < len(words):
            removed.append(words[i + 1].rstrip(")"))
            i += 2
            continue
        argv.append(words[i])
        i += 1
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parser = parser_of(module)
    try:
        with contextlib.redirect_stderr(err):
            parser.parse_args(argv)
    except SystemExit:
        lines = err.getvalue().strip().splitlines()
        return Check(False, f"{where} refuses it: {lines[-1] if lines else 'exit 2'}")
    known = {o for a in parser._actions for o in a.option_strings}
    unknown = [f for f in removed if f not in known]
    if unknown:
        return Check(False, f"{where} has no {', '.join(unknown)} to remove")
    return Check(True, f"accepted by {where}")


def _trl_script(entry: str | None) -> str:
    name = (entry or "grpo").lower().removesuffix("trainer").removesuffix("config")
    if name not in (*_TRL_SCRIPTS, "ppo"):
        raise ValueError(f"unknown TRL entry {entry!r}; valid: grpo, rloo, ppo")
    return name


@functools.lru_cache(maxsize=256)
def _trl(items: tuple[str, ...], script: str) -> Check:
    import torch
    from trl import TrlParser, __version__

    if script not in _TRL_SCRIPTS or importlib.util.find_spec(_TRL_SCRIPTS[script]) is None:
        return Check(None, f"not checked: TRL {__version__} has no {script} script to parse it")

    module = importlib.import_module(_TRL_SCRIPTS[script])
    where = f"TRL {__version__}'s TrlParser ({script}: {' '.join(_trl_types(module))})"
    argv: list[str] = []
    if not torch.cuda.is_available():  # this machine's, not the fix's: TRL's bf16 default
        argv += ["--use_cpu", "True", "--bf16", "False"]
    for item in items:  # field=value as in a --config YAML, or the CLI's --field value
        key, sep, value = item.partition("=")
        argv += [f"--{key}", value] if sep and not item.startswith("-") else [item]
    err = io.StringIO()
    parser = TrlParser(module.make_parser().dataclass_types)
    try:
        with contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parser.parse_args_and_config(argv)
    except SystemExit:
        lines = err.getvalue().strip().splitlines()
        return Check(False, f"{where} refuses it: {lines[-1] if lines else 'exit 2'}")
    except (ValueError, TypeError) as exc:  # the dataclasses' __post_init__
        return Check(False, f"{where} refuses it: {exc}")
    return Check(True, f"accepted by {where}")


def _trl_types(module: object) -> list[str]:
    return [t.__name__ for t in module.make_parser().dataclass_types]  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------- kl-patches
_LAUNCHERS = {
    "kl_patches.openrlhf": "openrlhf",
    "kl_patches.trl": "trl",
    "kl_patches": "",
}


def command_words(text: str | Sequence[str]) -> list[str] | None:
    """``kl-patches COMMAND ...`` words of a kl-patches command line or its words (``python -m
    kl_patches.trl`` is ``kl-patches trl``); None when ``text`` is not one."""
    if isinstance(text, str):
        words = shlex.split(text.replace("<", "'<").replace(">", ">'"))
    else:
        words = list(text)
    if words[:1] == ["kl-patches"]:
        return words[1:]
    if words[:2] == ["python", "-m"] and len(words) > 2 and words[2] in _LAUNCHERS:
        sub = _LAUNCHERS[words[2]]
        return ([sub] if sub else []) + words[3:]
    return None


_COMMAND_CHECK: list[Callable[[str | Sequence[str]], Check]] = []
"""kl-patches' own check of its command lines, registered by :mod:`kl_patches.cli.fix_commands`
(the CLI sits above the audit, so the audit never imports it)."""


def register_command_check(check: Callable[[str | Sequence[str]], Check]) -> None:
    """Install the CLI's check of kl-patches command lines (:func:`check_command` calls it)."""
    _COMMAND_CHECK[:] = [check]


def check_command(text: str | Sequence[str]) -> Check:
    """Whether kl-patches' own argument parsing accepts the command line ``text`` (or its shell
    words; placeholders ``<...>`` dropped). Not checked when the CLI is not loaded (the audit
    used as a library without :mod:`kl_patches.cli`): never claimed accepted unchecked."""
    if not _COMMAND_CHECK:
        return Check(
            None, "not checked (kl-patches' command line is not loaded: import kl_patches.cli)"
        )
    return _COMMAND_CHECK[0](text)


# ----------------------------------------------------------------------------- python
def check_python(text: str) -> Check:
    """Whether a kl-patches Python expression is valid: it parses, names kl-patches' API, and
    each ``KLConfig.parse(...)`` in it builds a KLConfig."""
    from kl_patches.config import KLConfig

    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as err:
        return Check(False, f"not a Python expression: {err.msg}")
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "KLConfig.parse"
    ]
    if not calls:
        return Check(False, "no KLConfig.parse(...) in the expression")
    head = ast.unparse(tree.body.func) if isinstance(tree.body, ast.Call) else ""
    if head != "KLConfig.parse" and not head.startswith("kl_patches."):
        return Check(False, f"{head or text!r} is not kl-patches' API")
    if head.startswith("kl_patches."):
        module, _, attr = head.rpartition(".")
        if not hasattr(importlib.import_module(module), attr):
            return Check(False, f"{module} has no {attr}")
    for call in calls:
        try:
            args = [ast.literal_eval(a) for a in call.args]
            kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
            KLConfig.parse(*args, **kwargs)
        except (ValueError, TypeError) as err:
            return Check(False, f"{ast.unparse(call)}: {err}")
    return Check(True, "a valid kl-patches expression (KLConfig.parse builds)")


# ----------------------------------------------------------------------------- one fix
_HYDRA_OVERRIDE = re.compile(r"^(\+\+|\+|~)?[A-Za-z_][\w.@/-]*(=.*)?$")
_TRL_FIELD = re.compile(r"^[a-z_][a-z0-9_]*=\S+$")


def check_syntax(library: str, alternative: str) -> Check:
    """Whether native settings are well formed in ``library``'s syntax, without its parser (for
    where it is not installed): verl ``key=value`` overrides (``~key`` deletes), OpenRLHF
    ``--flag [value]`` words and ``(remove --flag)``, TRL ``field=value`` (or ``trl grpo|rloo
    --field value``), ``python -m <library module> ...`` for an entry point."""
    words = _words(alternative)
    if not words:
        return Check(False, "no settings")
    if words[:2] == ["python", "-m"]:
        ok = len(words) > 2 and words[2].split(".")[0] == library
        return Check(ok, f"{library} entry point {words[2:3]}")
    if library == "verl":
        bad = [w for w in words if not _HYDRA_OVERRIDE.match(w) or ("=" not in w and w[0] != "~")]
    elif library == "openrlhf":
        text = " ".join(words)
        text = re.sub(r"\(remove --[\w.-]+\)", " ", text)
        bad = [] if text.split() and text.split()[0].startswith("--") else text.split()[:1]
    else:
        if words[0] == "trl":
            ok = len(words) > 2 and words[1] in _TRL_SCRIPTS and words[2].startswith("--")
            return Check(ok, f"TRL's CLI: {' '.join(words[:2])}")
        bad = [w for w in words if not _TRL_FIELD.match(w)]
    if bad:
        return Check(False, f"not {library} settings: {' '.join(bad)}")
    return Check(True, f"well-formed {library} settings")


def check_pip(text: str) -> Check:
    """Whether ``pip install REQUIREMENT...`` names valid requirements (nothing installed)."""
    from packaging.requirements import InvalidRequirement, Requirement

    words = _words(text)
    if words[:2] != ["pip", "install"] or len(words) < 3:
        return Check(False, f"not a pip install command: {text!r}")
    try:
        for word in words[2:]:
            Requirement(word)
    except InvalidRequirement as err:
        return Check(False, f"pip cannot read {word!r}: {err}")
    return Check(True, "a valid pip install command")


def kind_of(alternative: str) -> str:
    """``kl-patches`` (a command), ``python`` (kl-patches' API), ``pip`` (an install) or
    ``native`` (the library's settings or entry point)."""
    text = alternative.strip()
    if text.startswith("pip install "):
        return "pip"
    if command_words(text) is not None:
        return "kl-patches"
    if text.startswith(("KLConfig.", "kl_patches.")):
        return "python"
    return "native"


def check_fix(library: str, fix: str, *, entry: str | None = None) -> list[Check]:
    """Each alternative of ``fix`` through its parser (:func:`kind_of`)."""
    out = []
    for alternative in alternatives(fix):
        kind = kind_of(alternative)
        if kind == "kl-patches":
            out.append(check_command(alternative))
        elif kind == "python":
            out.append(check_python(alternative))
        elif kind == "pip":
            out.append(check_pip(alternative))
        else:
            words = _words(alternative)
            script = entry
            if library == "trl" and words[:1] == ["trl"] and len(words) > 1:
                script, words = words[1], words[2:]  # TRL's CLI: trl grpo|rloo FLAGS
            elif words[:2] == ["python", "-m"] and len(words) > 2:  # the library's entry point
                if library == "openrlhf":
                    script = words[2]
                elif not words[2].startswith(library + "."):
                    out.append(Check(False, f"{words[2]} is not a {library} entry point"))
                    continue
                words = words[3:]
            out.append(check_native(library, words, entry=script))
    return out


def _entry_of(entry: AuditEntry) -> str | None:
    if entry.reading.library == "trl":
        trainer = entry.reading.trainer
        return "rloo" if "RLOO" in trainer else "ppo" if "PPO" in trainer else "grpo"
    return None


def installed_version(library: str) -> str | None:
    """The installed release of ``library`` (its metadata; nothing imported)."""
    support = importlib.import_module(f"kl_patches.adapters.{library}.versions").SUPPORT
    found = support.installed()
    return None if found is None else str(found)


def _release_differs(entry: AuditEntry) -> str:
    """Why the installed release cannot check this entry's native fix ("" when it can): the
    fix is spelled for the release the launch is read as."""
    library = entry.reading.library
    read_as = entry.library_version or entry.reading.version
    here = installed_version(library)
    if read_as and here and read_as != here:
        return f"not checked (read as {library} {read_as}; {library} {here} is installed)"
    return ""


def native_check(entry: AuditEntry) -> Check:
    """The audit entry's native fix through its library's parser (not checked: none, or the
    library is not installed here)."""
    if not entry.fix_native:
        return Check(None, "no native fix")
    if entry.reading.library not in _MODULES:
        return Check(None, f"no parser for {entry.reading.library}")
    if not installed(entry.reading.library):
        return Check(None, NOT_INSTALLED)
    differs = _release_differs(entry)
    if differs:
        return Check(None, differs)
    checks = check_fix(entry.reading.library, " ".join(entry.fix_native), entry=_entry_of(entry))
    if any(c.accepted is False for c in checks):
        return next(c for c in checks if c.accepted is False)
    if any(c.accepted is None for c in checks):
        return next(c for c in checks if c.accepted is None)
    return checks[0]


def fix_label(entry: AuditEntry) -> str:
    """``native`` only when the library's own parser accepts the entry's native fix; ``with
    kl-patches`` when it refuses it or there is none; ``not checked (...)`` when no parser of
    the release can run here (:data:`NOT_INSTALLED`, or another release installed): never
    claimed native unchecked."""
    check = native_check(entry)
    if check.accepted:
        return NATIVE
    if check.accepted is None and entry.fix_native and entry.reading.library in _MODULES:
        return check.message if check.message.startswith("not checked") else NOT_INSTALLED
    return WITH_KL_PATCHES


# ----------------------------------------------------------------------------- change sets
_NATIVE_NAMESPACE = {"verl": "hydra", "openrlhf": "argparse", "trl": "trl"}


def _change_words(change: Change) -> list[str]:
    """One change as the library's parser takes it (the ``set``/``unset``/``rename`` of
    :data:`~kl_patches.audit.fix.change.ACTIONS`)."""
    key, value = change.key, change.value
    if change.namespace == "hydra":
        if change.action == "set":
            return [f"{key}={value}"]
        # a rename: the release has the new key (the old one is what it refuses)
        return [f"~{key}"] if change.action == "unset" else [f"{change.new_key}=null"]
    if change.namespace == "argparse":
        if change.action == "set":
            return [key] + ([value] if value else [])
        return [f"(remove {key})"]
    if change.action == "set":
        return [f"{key}={value}"]
    return []  # a TRL field unset or renamed: its default applies, nothing to parse


def check_changes(library: str, changes: ChangeSet, *, entry: str | None = None) -> Check:
    """Whether ``library`` alone accepts the change set: an entry-point change (to a kl-patches
    launcher) or a change spelled for another library's parser is not native; the rest goes
    through :func:`check_native`."""
    if any(c.action == "entry_point" and not c.module_switch for c in changes.changes):
        return Check(False, "the change set switches to a kl-patches launcher")
    entry = next((str(c.value) for c in changes.changes if c.module_switch), entry)
    foreign = [c.key for c in changes.changes if c.namespace != _NATIVE_NAMESPACE.get(library)]
    if foreign:
        return Check(False, f"not {library}'s settings: {', '.join(foreign)}")
    words = [w for c in changes.changes for w in _change_words(c)]
    if not words:
        return Check(None, "no setting for the library's parser to read")
    return check_native(library, words, entry=entry)


def change_set_label(library: str, changes: ChangeSet, *, entry: str | None = None) -> str:
    """The :data:`~kl_patches.audit.fix.change.LABELS` label a change set has earned:
    ``native`` only when :func:`check_changes` accepted it; :data:`NOT_INSTALLED` when no
    parser could run (never claimed native unchecked); ``with kl-patches`` otherwise."""
    found = check_changes(library, changes, entry=entry)
    if found.accepted:
        return NATIVE
    if found.accepted is None and found.message.startswith(NOT_INSTALLED):
        return NOT_INSTALLED
    return WITH_KL_PATCHES


def change_set_check(entry: AuditEntry, changes: ChangeSet) -> str:
    """What the library's own parser said of a launch's native change set, for the ``--fix``
    summary: accepted, refused with its message, or not checked (library not installed, or the
    launch read as another release than the installed one). Empty for a kl-patches route."""
    if changes.label != NATIVE:
        return ""
    library = entry.reading.library
    if library not in _MODULES:
        return f"not checked (no parser for {library})"
    if not installed(library):
        return NOT_INSTALLED
    differs = _release_differs(entry)
    if differs:
        return differs
    found = check_changes(library, changes, entry=_entry_of(entry))
    if found.accepted:
        return f"accepted by {library} {installed_version(library)}'s own parser"
    if found.accepted is None:
        return f"not checked ({found.message})"
    return f"REFUSED by {library} {installed_version(library)}'s own parser: {found.message}"
