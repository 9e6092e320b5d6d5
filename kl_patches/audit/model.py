"""The audit's data model: one input found in a file, one audited trainer, one finding.

Plain frozen dataclasses and the two error types; nothing here reads files or imports an
adapter, so the report (:mod:`.report`) and the engine (:mod:`.run`) both build on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kl_patches.adapters.base import NativeReading
from kl_patches.adapters.files import InputError
from kl_patches.config import KLConfig
from kl_patches.theory import Verdict

__all__ = [
    "STATUSES",
    "AuditEntry",
    "AuditError",
    "AuditFinding",
    "AuditInput",
    "InputError",
]

STATUSES = ("unbiased", "biased", "kl_off", "error")
"""Possible :attr:`AuditEntry.status` values."""


class AuditError(Exception):
    """The audit cannot read an input (exit code 2; the message says why and what to do)."""


@dataclass(frozen=True)
class AuditFinding:
    """A finding in the report: an adapter's, or one the audit derives from the KLConfig."""

    code: str
    """Stable identifier (adapter codes are prefixed by the library, audit codes are not)."""
    severity: str
    """``error``, ``warning`` or ``info`` (see :class:`kl_patches.adapters.base.Finding`)."""
    message: str
    """What is wrong and why it matters."""
    fix: str = ""
    """The native flag(s) that fix it, when there is one."""
    origin: str = "adapter"
    """``adapter`` (library-specific) or ``audit`` (derived from the KLConfig or the input)."""


@dataclass(frozen=True)
class AuditEntry:
    """The audit of one trainer launch."""

    origin: str
    """Where the launch came from (``path:line``, ``path``, ``argv``, ``installed``)."""
    kind: str
    """Input kind: ``shell``, ``yaml``, ``overrides``, ``argv``, ``installed`` or ``object``."""
    reading: NativeReading
    """What the adapter read: the KLConfig the library runs, settings, off-policy flag."""
    verdict: Verdict
    """Theory's verdict on-policy: the expected gradient of this estimator x placement."""
    status: str
    """One of :data:`STATUSES`."""
    findings: tuple[AuditFinding, ...]
    """Adapter findings first, then the audit's own."""
    fix_native: tuple[str, ...]
    """Native flags/overrides giving k1 in the reward at the same coefficient (the adapter's;
    empty where the library cannot express it, e.g. TRL's GRPO: then the switch is the fix)."""
    fix_switch: str
    """The kl-patches launcher command for the same fix (empty when the setup is already
    unbiased)."""
    ignored_keys: tuple[str, ...] = ()
    """Keys/flags of the input that the reader did not use (not KL-relevant, or unknown)."""
    notes: tuple[str, ...] = field(default_factory=tuple)
    """What the audit could not follow exactly (shell substitutions, unresolved variables)."""
    library_version: str | None = None
    """The library version the launch was read as (see :mod:`kl_patches.audit.versions`)."""
    version_source: str = ""
    """Why that version: ``given``, ``pin``, ``vendored``, ``names`` (told from the launch's
    names), ``installed``, ``newest`` (``object`` for a reading an adapter produced itself)."""
    version_where: str = ""
    """What said so: ``--library-version``, the pin's ``path:line`` and specifier, the vendored
    version file, the package metadata."""

    @property
    def kl_on(self) -> bool:
        """True when some KL term reaches the gradient."""
        return self.reading.config.has_reward or self.reading.config.has_loss

    @property
    def refused(self) -> bool:
        """True when the library refuses to start the launch as the audit reads it: an error
        finding that names refused keys/flags/fields (``*_rejected``), an entry point the
        release lacks (``*_not_in_version``), a config group the release's trainer config
        composes and the project's config folder lacks (``*config_group_missing``), or the
        installed release refusing a launch told to be for another (``version_from_names``).
        The reading then shows what would run once the refused names are deleted, not what
        runs."""
        return any(
            f.severity == "error"
            and (
                f.code.endswith("_rejected")
                or f.code.endswith("_not_in_version")
                or f.code.endswith("config_group_missing")
                or f.code == "version_from_names"
            )
            for f in self.findings
        )

    @property
    def fails_strict(self) -> bool:
        """True when ``--strict`` should fail for this trainer."""
        return self.status in ("biased", "error")


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
    context: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for the adapter's reader (entry point, composed config, ...)."""
    findings: tuple[AuditFinding, ...] = ()
    """Findings about the launch that the reader cannot see (an assumed entry point, a config
    file not found, a file only partly read)."""
    branch: tuple[str, ...] = ()
    """Undecidable branches of the script this launch depends on (``if@12=then``)."""
    assumed: tuple[str, ...] = ()
    """Machine facts the script's reading rests on: accelerator probes read as failing
    (:mod:`kl_patches.audit.shell.probes`), each naming the other run."""
    unknown_items: tuple[tuple[str, str], ...] = ()
    """(key, value text) of options whose value comes from a command substitution (never
    run): left out of the reader's input, so the library default stands for them."""
    empty_items: tuple[tuple[str, str], ...] = ()
    """(key, variables) of options that are empty because the variables are never set."""
    vanished: tuple[str, ...] = ()
    """Never-set variables whose whole word disappeared from the launch (bash drops it)."""
    args_forwarded: bool = False
    """True when the launch forwards the script's arguments (``$@``): none in a clean run."""
    version: str | None = None
    """A library version to read the launch as (None: the audit chooses, see
    :mod:`kl_patches.audit.versions`)."""
    path: str | None = None
    """The audited file the launch was found in (where version detection starts)."""
