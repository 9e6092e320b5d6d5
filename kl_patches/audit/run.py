"""``kl-patches audit``: which KL gradient a real verl, OpenRLHF or TRL setup follows, and the fix.

The audit reads a launch (shell script, YAML, override list, argv, a TRL config object, or the
installed libraries' defaults) through the library's adapter reader
(``kl_patches.adapters.<library>.read -> NativeReading``), asks :func:`kl_patches.theory.verdict`
which expected gradient that configuration has, and reports it with the adapter's findings and
the exact native flags that give k1 in the reward at the same coefficient.

It holds no library knowledge itself: flag names, defaults, entry points and quirks come from
the adapters' descriptors (:mod:`kl_patches.adapters`); the input side (:mod:`.inputs`) only
walks files and commands. The audit adds a few library-independent findings derived from the
KLConfig (:mod:`.findings`: clamps, token-mean loss, off-policy updates, two coefficients, KL
off, KL-looking keys the reader ignored). The report is :mod:`.report`; the command line
is :mod:`kl_patches.cli.audit`.

Status of each trainer (``--strict`` exits 1 on ``biased`` or ``error``):

* ``unbiased``: KL on, the on-policy expected gradient is coef * grad KL(pi || pi_ref);
* ``biased``: KL on, any other expected gradient (theory's verdict names it);
* ``kl_off``: no KL term reaches the gradient, and the adapter raised no error about it;
* ``error``: an adapter finding of severity ``error`` (KL silently dropped, or the objective is
  not what the flags say).

Off-policy updates never make the status ``biased`` by themselves (almost every PPO setup takes
several mini-batch steps per batch); they are reported as a finding and in the JSON.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kl_patches import adapters
from kl_patches.adapters.base import NativeReading
from kl_patches.audit.findings import (
    IGNORED_KL_KEY,
    audit_findings,
    input_findings,
    not_reference_findings,
    status_of,
    switch_fix,
)
from kl_patches.audit.ignored import ignored_keys
from kl_patches.audit.inputs import inputs_from_argv, inputs_from_file, inputs_from_mapping
from kl_patches.audit.model import AuditEntry, AuditError, AuditFinding, AuditInput, InputError
from kl_patches.audit.verdicts import verdict_of
from kl_patches.config import KLConfig


def reader_for(library: str) -> Callable[[Any], NativeReading]:
    """The ``read`` function of a library's adapter (without importing the library)."""
    if library not in adapters.names():
        raise AuditError(f"unknown library {library!r}; choose one of {list(adapters.names())}")
    return adapters.get(library).read


def _read(inp: AuditInput) -> NativeReading:
    d = adapters.get(inp.library) if inp.library in adapters.names() else None
    if d is None:
        raise AuditError(f"unknown library {inp.library!r}; choose one of {list(adapters.names())}")
    try:
        return d.read(inp.payload, **inp.context)
    except RecursionError as err:
        raise AuditError(f"{inp.origin}: the input is nested too deeply to read") from err
    except (ValueError, KeyError, TypeError) as err:
        msg = str(err).strip("'\"")
        hint = ""
        if inp.unresolved:
            names = ", ".join("$" + u for u in (inp.vanished or inp.unresolved))
            hint = (
                f" (the script uses {names}, which it never sets; pass "
                f"--var {inp.unresolved[0]}=VALUE)"
            )
        raise AuditError(
            f"{inp.origin}: the {inp.library} reader cannot read it: {msg}{hint}"
        ) from err


def audit_reading(
    reading: NativeReading,
    origin: str = "object",
    kind: str = "object",
    notes: Iterable[str] = (),
    extra: Iterable[AuditFinding] = (),
    ignored: Iterable[str] = (),
) -> AuditEntry:
    """Audit a reading an adapter already produced (``extra``: findings about the input)."""
    on_policy = verdict_of(reading, off_policy=False)
    as_run = verdict_of(reading, off_policy=reading.off_policy)
    findings = [
        AuditFinding(f.code, f.severity, f.message, f.fix, "adapter") for f in reading.findings
    ]
    findings += extra
    findings += audit_findings(reading, as_run)
    ignored = tuple(ignored)
    other_kl, other_finding = not_reference_findings(reading.library, ignored)
    if other_finding is not None:
        findings.append(other_finding)
    kl_like = [
        k
        for k in ignored
        if k not in other_kl
        and (
            "kl" in k.lower().replace(".", "_").split("_")
            or "kl_" in k.lower()
            or "_kl" in k.lower()
        )
    ]
    if kl_like:
        findings.append(
            AuditFinding(
                IGNORED_KL_KEY,
                "warning",
                f"{', '.join(kl_like)} look KL-related but the {reading.library} reader does "
                "not read them: a typo, or a key this library version does not have.",
                "",
                "audit",
            )
        )
    status = status_of(reading, on_policy, findings)
    fix_switch = "" if status == "unbiased" else switch_fix(reading.config)
    fix_native = () if status == "unbiased" else tuple(reading.fix)
    return AuditEntry(
        origin=origin,
        kind=kind,
        reading=reading,
        verdict=on_policy,
        status=status,
        findings=tuple(findings),
        fix_native=fix_native,
        fix_switch=fix_switch,
        ignored_keys=ignored,
        notes=tuple(notes),
    )


def launched_reading(native: NativeReading, config: KLConfig) -> NativeReading:
    """A launch through a kl-patches launcher: the library's reading with the patched KL.

    The adapter's findings and fix describe the library's own KL code, which the patch
    replaces, so they are dropped; the audit's own findings (from the KLConfig) still apply.
    """
    return dataclasses.replace(
        native,
        trainer=f"{native.trainer} (kl-patches)",
        config=config,
        findings=(),
        fix=(),
    )


def audit_input(inp: AuditInput, check_keys: bool = True) -> AuditEntry:
    """Read one launch through its adapter and audit it."""
    reading = _read(inp)
    if reading.loss_config is not None and inp.kl_config is not None:
        reading = dataclasses.replace(reading, loss_config=None)
    ignored = ignored_keys(inp, reading) if check_keys else ()
    notes = list(inp.notes)
    if inp.kl_config is not None:
        reading = launched_reading(reading, inp.kl_config)
        notes.append(
            "launched through kl-patches: the KL is kl-patches' core maths for this KLConfig; "
            f"the library's own KL settings were read only for the rest ({reading.library} "
            "findings about its native KL code do not apply)"
        )
    if ignored:
        notes.append(
            f"{len(ignored)} key(s) not read by the {inp.library} reader (not KL-relevant, or "
            f"unknown): {', '.join(ignored[:8])}{' ...' if len(ignored) > 8 else ''}"
        )
    return audit_reading(
        reading, inp.origin, inp.kind, notes, input_findings(inp, reading), ignored
    )


def _library_of_object(obj: object) -> str | None:
    for cls in type(obj).__mro__:
        root = cls.__module__.split(".")[0]
        if root in adapters.names():
            return root
    return None


def audit(
    source: Any,
    library: str | None = None,
    variables: dict[str, str] | None = None,
    version: str | None = None,
) -> list[AuditEntry]:
    """Audit a file path, an argv list, a config mapping, a NativeReading or a config object.

    ``version`` is reserved for version-aware reading (threaded to the readers; today they read
    the tested release). Raises :class:`AuditError` for input it cannot read (the CLI turns
    that into exit code 2), including input nested too deeply for the reader.
    """
    try:
        return _audit(source, library, variables, version)
    except RecursionError as err:
        raise AuditError(
            f"{source if isinstance(source, (str, Path)) else 'input'}: nested too deeply to read"
        ) from err


def _audit(
    source: Any, library: str | None, variables: dict[str, str] | None, version: str | None
) -> list[AuditEntry]:
    try:
        if isinstance(source, NativeReading):
            return [audit_reading(source)]
        if isinstance(source, (str, Path)):
            inputs = inputs_from_file(source, library, variables, version)
        elif isinstance(source, (list, tuple)):
            inputs = inputs_from_argv([str(s) for s in source], library)
        elif isinstance(source, dict):
            inputs = inputs_from_mapping(source, library, "mapping")
        else:
            lib = library or _library_of_object(source)
            if lib is None:
                raise AuditError(
                    f"cannot tell which library a {type(source).__name__} belongs to; pass "
                    f"library= one of {list(adapters.names())}"
                )
            reading = _read(AuditInput(lib, source, type(source).__name__, "object"))
            return [audit_reading(reading, type(source).__name__, "object")]
    except InputError as err:
        raise AuditError(str(err)) from err
    return [audit_input(inp) for inp in inputs]


def audit_installed() -> tuple[list[AuditEntry], list[str]]:
    """The defaults of each installed library's trainers, read through its adapter.

    Libraries that are not installed are skipped with a note. An adapter's
    ``installed_defaults()`` (reads the installed code) is used when it has one: it may return
    readings, or ``{trainer: settings}`` mappings that are given to ``read`` with
    ``trainer=<name>``; without it the adapter's recorded defaults (empty input) are shown.
    """
    entries: list[AuditEntry] = []
    notes: list[str] = []
    for d in adapters.descriptors():
        lib = d.name
        if importlib.util.find_spec(lib) is None:
            notes.append(f"{lib}: not installed in this environment; skipped")
            continue
        origin = f"installed {lib}"
        try:
            defaults = d.installed_defaults()
            if defaults is None:
                reading = d.read([])
                entries.append(
                    audit_reading(
                        reading,
                        origin,
                        "installed",
                        [
                            f"the {lib} adapter has no installed_defaults(): these are the "
                            f"defaults written down in the adapter (version {reading.version})"
                        ],
                    )
                )
                continue
            for reading in _readings_from_defaults(d.read, defaults):
                entries.append(audit_reading(reading, origin, "installed"))
        except Exception as err:
            notes.append(
                f"{lib}: installed, but its defaults could not be read: {type(err).__name__}: {err}"
            )
    return entries, notes


def _readings_from_defaults(
    read: Callable[[Any], NativeReading], defaults: Any
) -> list[NativeReading]:
    if isinstance(defaults, NativeReading):
        return [defaults]
    if isinstance(defaults, (list, tuple)) and all(isinstance(r, NativeReading) for r in defaults):
        return list(defaults)
    if isinstance(defaults, dict) and all(isinstance(v, dict) for v in defaults.values()):
        return [read({**values, "trainer": str(name).lower()}) for name, values in defaults.items()]
    return [read(defaults)]
