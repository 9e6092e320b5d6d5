"""The adapter contract: what each library adapter tells the rest of kl-patches.

Two kinds of things live here. The *reading types*, :class:`Finding` and :class:`NativeReading`,
are what an adapter's reader returns for a library configuration: the
:class:`~kl_patches.config.KLConfig` the library actually runs, whether its updates are
off-policy, library-specific findings and the exact native flags of the fix. The *descriptor*,
:class:`AdapterDescriptor`, is everything the audit and the CLI need to know about a library
without importing it: its name and version support, the entry points a launch uses, the
kl-patches launchers for it; its reader, recorded defaults and launch-argv parsers are found by
convention in the adapter's folder (:data:`JOBS`), imported on first use.

The audit holds no library knowledge of its own: every library fact comes through a descriptor
from :mod:`kl_patches.adapters` (see :func:`kl_patches.adapters.get`).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kl_patches.adapters.support import VersionSupport
from kl_patches.config import KLConfig

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Finding:
    """One library-specific observation about a KL setup."""

    code: str
    """Stable identifier, prefixed by the library: ``verl.gdpo_drops_kl``, ``trl.kl_off``."""
    severity: str
    """``error`` (the KL is silently dropped or the objective is not what the user set),
    ``warning`` (biased or changed objective), or ``info``."""
    message: str
    """What is wrong and why it matters, in one or two sentences."""
    fix: str = ""
    """The exact native flag(s) or override(s) that fix it, when there is one."""

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(
                f"Finding.severity={self.severity!r} is not valid; choose one of {list(SEVERITIES)}"
            )


@dataclass(frozen=True)
class NativeReading:
    """One trainer's KL setup as read from a library's configuration."""

    library: str
    """``verl``, ``openrlhf`` or ``trl``."""
    version: str | None
    """The library version the reading assumes (installed or the tested one)."""
    trainer: str
    """The trainer or entry point, e.g. ``GRPOTrainer`` or ``main_ppo (grpo)``."""
    config: KLConfig
    """The KLConfig the library actually runs (placement ``none`` when the KL is off)."""
    off_policy: bool
    """True when the policy takes several updates per batch or learns from stale rollouts."""
    settings: dict[str, object] = field(default_factory=dict)
    """The raw library settings that were read, for the report."""
    findings: tuple[Finding, ...] = ()
    """Library-specific findings; the theory's verdict is added by the audit."""
    fix: tuple[str, ...] = ()
    """Native flags/overrides giving k1-in-reward with the same coefficient scale."""
    off_policy_reason: str = ""
    """Why the updates are off-policy (several updates per batch, stale rollouts...); empty
    when on-policy."""
    loss_config: KLConfig | None = None
    """The loss side's KLConfig when it uses another estimator than the reward side (both
    placements on, each side its own estimator); None when :attr:`config` describes both."""
    switch: str = ""
    """The kl-patches change for this launch when the generic k1-in-reward switch cannot serve
    it (under unsloth only the loss side can be patched); empty: the generic switch."""


@dataclass(frozen=True)
class Entry:
    """A way a library's own trainer is started from a command line."""

    module: str
    """The Python module run (``python -m MODULE``, ``deepspeed --module MODULE`` or its ``.py``
    path), e.g. ``verl.trainer.main_ppo``."""
    label: str
    """How the launch is named in reports, e.g. ``trl grpo``; also passed to the argv parser."""
    command: tuple[str, ...] = ()
    """Console-script words that start it too (``("trl", "grpo")``); empty when none."""


@dataclass(frozen=True)
class Launcher:
    """A kl-patches launcher for the library (it adds a KLConfig to a stock launch)."""

    module: str
    """``python -m MODULE`` form, e.g. ``kl_patches.trl``."""
    command: str
    """The ``kl-patches COMMAND`` form, e.g. ``trl``."""
    subcommands: tuple[str, ...] = ()
    """Trainer words the launcher needs right after it (``grpo``/``rloo`` for TRL)."""


@dataclass(frozen=True)
class LaunchPayload:
    """What a launch command hands the library, ready for the adapter's reader."""

    payload: list[str] | dict[str, Any]
    """The reader's input: an argv/override list or a config mapping."""
    notes: tuple[str, ...] = ()
    """What could not be read exactly (options the reader ignores, ...)."""
    kl_config: KLConfig | None = None
    """The KLConfig a kl-patches launcher runs; None for a stock launch (or when the launcher
    writes it into the library's own options, which the reader then reads back)."""
    context: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments for the reader besides the payload (``entry``: the entry point's label;
    ``base``: settings of a config file the launch composes; ``version``: a library version,
    reserved for version-aware reading)."""
    findings: tuple[Finding, ...] = ()
    """What the launch itself shows that the reader cannot see (a config file not found...)."""


@dataclass(frozen=True)
class PythonApi:
    """What a library's Python training scripts look like, for the audit's AST reader.

    The reader never imports or runs a script: it matches these names in its syntax tree."""

    modules: tuple[str, ...]
    """Import roots that mark a script as this library's (``("trl",)``)."""
    trainers: Mapping[str, str]
    """Trainer class -> the trainer label given to :func:`read` (``GRPOTrainer`` -> ``grpo``)."""
    configs: Mapping[str, str]
    """Config class -> the trainer label it configures (``GRPOConfig`` -> ``grpo``)."""
    config_argument: str = "args"
    """The trainer's keyword argument that takes the config object."""
    parsers: tuple[str, ...] = ()
    """Parser classes that fill config classes from the command line (``TrlParser``)."""
    other: Mapping[str, str] = field(default_factory=dict)
    """Trainer class -> what it runs instead of a reference-KL RL trainer (for messages)."""
    kl_methods: tuple[str, ...] = ()
    """Trainer methods whose override in a subclass can change the KL."""
    patchers: Mapping[str, str] = field(default_factory=dict)
    """Imported module -> what importing it does to the library's trainers (``unsloth``)."""
    kl_patches_modules: tuple[str, ...] = ()
    """kl-patches modules whose trainers take ``kl=KLConfig`` (their KL is kl-patches')."""
    kl_argument: str = "kl"
    """The keyword argument of a kl-patches trainer that takes the KLConfig."""


@dataclass(frozen=True)
class TrainerFacts:
    """What one entry point of a library does to the KL, recorded from its code."""

    module: str
    """The module run (``python -m MODULE``), e.g. ``recipe.prime.main_prime``."""
    kind: str = "rl"
    """``rl`` (a reference-KL RL trainer), or what it runs instead: ``distillation`` (a KL to a
    teacher), ``dpo``, ``sft``, ``eval``, ``other``."""
    config: str = ""
    """The config (Hydra config name) it starts from, when it has one."""
    reward_kl: bool = True
    """Whether it applies the reward-side KL when the config switches it on."""
    loss_kl: bool = True
    """Whether its actor adds the loss-side KL when the config switches it on."""
    off_policy: str = ""
    """Why its updates are off-policy by construction (asynchronous rollouts...), if they are."""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """Read settings whose default differs from the library's main config in this entry's."""
    source: str = ""
    """Where this was read (``file:line`` at a tag or commit)."""
    where: str = ""
    """The releases or repositories that ship it."""
    note: str = ""
    """What else to know (shown with the reading)."""


JOBS: dict[str, tuple[str, bool]] = {
    "read": (":read", True),
    "match_entry": (".entries:match_entry", False),
    "installed_defaults": (":installed_defaults", False),
    "entry_payload": (".read:entry_payload", False),
    "bare_payload": (".read:bare_payload", False),
    "claims": (".read:claims", False),
    "recognises": (".read:recognises", False),
    "launcher_payload": (".launch:launcher_payload", True),
    "releases": (".semantics:releases", False),
    "vendored_version": (".semantics:vendored_version", False),
    "semantics": (".semantics:semantics", False),
}
"""The functions every adapter folder provides by convention: job -> (where, relative to the
adapter's package, and whether it is required).

* ``read(payload, **context) -> NativeReading``: what a configuration runs (no library
  needed); ``context`` is a :attr:`LaunchPayload.context`;
* ``entries.match_entry(module) -> Entry | None``: an entry point that is not in
  :attr:`AdapterDescriptor.entries` but follows a pattern (recipes, forks' copies);
* ``installed_defaults()``: the installed library's KL defaults (imports the library);
* ``read.entry_payload(label, argv, base_dir, origin) -> LaunchPayload``: a stock launch's
  argv as the reader's input (default: the argv itself);
* ``read.bare_payload(words)``: a bare argv (no entry point) as the reader's input (default:
  the words themselves);
* ``read.claims(mapping) -> bool``: whether a loaded YAML/JSON config is this library's;
* ``launch.launcher_payload(label, argv, base_dir, origin) -> LaunchPayload``: a kl-patches
  launch's argv as the reader's input plus its KLConfig; ValueError when the launcher would
  refuse the argv;
* ``semantics.releases() -> tuple[str, ...]``: every release the adapter's per-version data
  covers, ascending (the audit reads a range pin as the newest it allows);
* ``semantics.vendored_version(directory) -> (version, file) | None``: a copy of the library
  inside ``directory`` (a vendored checkout) and the version it states;
* ``semantics.semantics(version)``: what a launch means in that release (the reader calls it).
"""


@dataclass(frozen=True)
class AdapterDescriptor:
    """Everything kl-patches needs to know about one library, importable without the library.

    The data is here; the functions are found by convention in the adapter's package (see
    :data:`JOBS`) and imported on first use, so a descriptor costs nothing until the audit or a
    command uses it.
    """

    name: str
    """Library and distribution name: ``verl``, ``openrlhf``, ``trl``."""
    package: str
    """The adapter's public module, e.g. ``kl_patches.adapters.trl``."""
    support: VersionSupport
    """Supported and tested versions of the patch (the version guard)."""
    entries: tuple[Entry, ...]
    """The library's own entry points that launch a trainer with a KL regulariser."""
    launchers: tuple[Launcher, ...] = ()
    """kl-patches' own launchers for the library."""
    covers: Mapping[str, str] = field(default_factory=dict)
    """Adapter finding code -> the audit's library-independent finding code it already says
    (so the audit does not repeat it)."""
    mapping_hint: str = ""
    """What a config file of this library looks like, for error messages."""
    config_files: str = ""
    """Why the library has no config files, when it has none (an error message)."""
    bare_argv: str = ""
    """``overrides`` or ``flags``: the form of a bare argv (no entry point) read as this
    library's when no library is named (the first descriptor with that form wins)."""
    bare_note: str = ""
    """The note attached when a bare argv was guessed to be this library's."""
    other_entries: Mapping[str, str] = field(default_factory=dict)
    """Modules or console commands of the library that are not reference-KL RL trainers ->
    what they run (so "no launch found" can say what a file runs instead)."""
    scripts: Mapping[str, str] = field(default_factory=dict)
    """Script paths (suffixes) that are not shipped modules but are known -> the entry label
    they are read as (the libraries' example scripts, run from a checkout)."""
    argv_markers: tuple[str, ...] = ()
    """Regular expressions on argv words that mark this library's trainer options, so that an
    unknown script forwarding them is read as :attr:`assumed_entry` (with a finding)."""
    assumed_entry: str = ""
    """The entry label an unknown script with this library's options is read as."""
    not_reference_kl: Mapping[str, str] = field(default_factory=dict)
    """Key globs (``*.kl_cov_ratio``) of settings named "KL" that are not the reference KL ->
    what they are (not reported as ignored KL keys; a finding names them)."""
    python: PythonApi | None = None
    """How this library's Python training scripts look (None: not read from Python)."""

    def function(self, job: str) -> Any:
        """The adapter's function for ``job`` (see :data:`JOBS`); None if an optional one is
        missing, ValueError for an unknown job, RuntimeError for a missing required one."""
        if job not in JOBS:
            raise ValueError(f"unknown adapter job {job!r}; choose one of {list(JOBS)}")
        where, required = JOBS[job]
        module, _, attr = (self.package + where).partition(":")
        found = getattr(importlib.import_module(module), attr, None)
        if found is None and required:
            raise RuntimeError(f"the {self.name} adapter has no {module}.{attr}()")
        return found

    def read(self, payload: Any, **context: Any) -> NativeReading:
        """The adapter's reading of ``payload`` (``context``: see :attr:`LaunchPayload.context`)."""
        fn = self.function("read")
        reading: NativeReading = fn(payload, **context) if context else fn(payload)
        return reading

    def match_entry(self, module: str) -> Entry | None:
        """An entry point following one of the adapter's patterns, None if none matches."""
        match = self.function("match_entry")
        if match is None:
            return None
        found: Entry | None = match(module)
        return found

    def installed_defaults(self) -> Any:
        """The installed library's KL defaults; None when the adapter records none."""
        getter = self.function("installed_defaults")
        return None if getter is None else getter()

    def entry_payload(
        self, label: str, argv: list[str], base_dir: Path | None, origin: str
    ) -> LaunchPayload:
        """A stock launch's argv as the reader's payload."""
        parse = self.function("entry_payload")
        if parse is None:
            return LaunchPayload(list(argv))
        result: LaunchPayload = parse(label, argv, base_dir, origin)
        return result

    def launcher_payload(
        self, label: str, argv: list[str], base_dir: Path | None, origin: str
    ) -> LaunchPayload:
        """A kl-patches launch's argv as the reader's payload plus its KLConfig."""
        result: LaunchPayload = self.function("launcher_payload")(label, argv, base_dir, origin)
        return result

    def bare_payload(self, words: list[str]) -> list[str] | dict[str, Any]:
        """A bare argv (flags or overrides without an entry point) as the reader's input."""
        parse = self.function("bare_payload")
        if parse is None:
            return list(words)
        result: list[str] | dict[str, Any] = parse(words)
        return result

    def claims(self, mapping: Mapping[str, Any]) -> bool:
        """Whether a loaded config mapping belongs to this library."""
        claim = self.function("claims")
        return claim is not None and bool(claim(mapping))

    def recognises(self, mapping: Mapping[str, Any]) -> bool:
        """Whether a config file found by walking a folder (``kl-patches audit DIR``) is one of
        this library's RL trainer configs: stricter than :meth:`claims` where that accepts any
        flat mapping (``read.recognises``; default :meth:`claims`)."""
        recognise = self.function("recognises")
        if recognise is None:
            return self.claims(mapping)
        return bool(recognise(mapping))

    def releases(self) -> tuple[str, ...]:
        """Every release the adapter's per-version data covers (its tested ones when it has
        none recorded), ascending."""
        fn = self.function("releases")
        found: tuple[str, ...] = tuple(fn()) if fn is not None else tuple(self.support.tested)
        return found

    def vendored_version(self, directory: Path) -> tuple[str, str] | None:
        """(version, file) of a copy of the library inside ``directory``, None if none."""
        fn = self.function("vendored_version")
        if fn is None:
            return None
        found: tuple[str, str] | None = fn(directory)
        return found

    @property
    def reads_config_files(self) -> bool:
        """True when the adapter reads YAML/JSON configs (it has ``read.claims``)."""
        return self.function("claims") is not None
