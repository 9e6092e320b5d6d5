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
import functools
import importlib.util
import shlex
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kl_patches import adapters
from kl_patches.adapters.base import NativeReading
from kl_patches.audit.findings import (
    IGNORED_KL_KEY,
    LAUNCH_UNREADABLE,
    VERSION_FROM_NAMES,
    VERSION_INSTALLED_DIFFERS,
    VERSION_NEWEST_DIFFERS,
    VERSION_PIN_CONFLICT,
    VERSION_RANGE_DIFFERS,
    audit_findings,
    input_findings,
    not_reference_findings,
    status_of,
    switch_fix,
)
from kl_patches.audit.ignored import ignored_keys
from kl_patches.audit.inputs import (
    inputs_from_argv,
    inputs_from_file,
    inputs_from_mapping,
    inputs_from_source,
)
from kl_patches.audit.model import AuditEntry, AuditError, AuditFinding, AuditInput, InputError
from kl_patches.audit.names import Inferred, infer, release_ranges
from kl_patches.audit.verdicts import describe_reading, verdict_of
from kl_patches.audit.versions import VersionChoice, choose, parse_given
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
    except OverflowError as err:
        raise AuditError(
            f"{inp.origin}: the {inp.library} reader cannot read it: a number in it is too "
            f"large for a float ({err})"
        ) from err
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
    fix_switch = (
        ""
        if status == "unbiased"
        else (reading.switch or switch_fix(reading.config, reading.library, reading.trainer))
    )
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
        library_version=reading.version,
        version_source="object",
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


def _with_version(inp: AuditInput, choice: VersionChoice) -> AuditInput:
    """``inp`` with the reader's version context of ``choice``."""
    context = dict(inp.context)
    context["version"] = choice.version
    if choice.snapshot:
        context["version_snapshot"] = True
    if choice.copy:
        context["version_file"] = choice.copy
    return dataclasses.replace(inp, context=context, version=choice.version)


def _at(inp: AuditInput, version: str, keep_copy: bool = False) -> NativeReading | None:
    """The reading of ``inp`` as another ``version`` runs it (None if it cannot be read);
    ``keep_copy``: still with the vendored copy's code (``version_file``), for the other
    releases a range pin allows of the copy that runs the launch."""
    context = {
        k: v
        for k, v in inp.context.items()
        if not k.startswith("version") or (keep_copy and k == "version_file")
    }
    context["version"] = version
    try:
        return _read(dataclasses.replace(inp, context=context, version=version))
    except AuditError:
        return None


def _kl_text(reading: NativeReading) -> str:
    """``k3-in-loss, coef 0.04`` / ``no KL`` for the version findings."""
    c = reading.config
    if not (c.has_reward or c.has_loss):
        return "no KL"
    coef = c.coef if c.has_reward else c.loss_coef_value
    text = f"{describe_reading(reading)}, coef {coef:g}"
    refused = [f.code for f in reading.findings if f.severity == "error"]
    return text + (f" ({', '.join(refused)})" if refused else "")


def _same(a: NativeReading, b: NativeReading) -> bool:
    errors_a = sorted(f.code for f in a.findings if f.severity == "error")
    errors_b = sorted(f.code for f in b.findings if f.severity == "error")
    return (
        a.config == b.config
        and a.loss_config == b.loss_config
        and a.off_policy == b.off_policy
        and errors_a == errors_b
    )


def _changed_settings(a: NativeReading, b: NativeReading) -> list[str]:
    out = []
    for key, value in a.settings.items():
        if key in b.settings and b.settings[key] != value:
            out.append(f"{key} {value!r} -> {b.settings[key]!r}")
    return out


MAX_RANGE_READS = 64
"""Releases of a range pin read at most, to tell whether the verdict differs across it."""


def _audit_as(library: str, path: str | None) -> str:
    """The audit command that reads ``path`` as the release the user runs."""
    where = shlex.quote(path) if path else "<file>"
    return f"kl-patches audit --library-version {library}=<the release you run> {where}"


def version_findings(
    inp: AuditInput, choice: VersionChoice, reading: NativeReading
) -> list[AuditFinding]:
    """Findings only a version-aware reader can give: a range pin across which the same file
    runs differently, and a pinned or vendored version that runs the file differently from the
    installed one (or, with none installed, from the newest tested release)."""
    out: list[AuditFinding] = []
    lib = inp.library
    if len(choice.allowed) > 1:
        groups: list[tuple[list[str], str]] = []
        for release in choice.allowed[-MAX_RANGE_READS:]:
            other = reading if release == choice.version else _at(inp, release, keep_copy=True)
            text = "unreadable" if other is None else _kl_text(other)
            if groups and groups[-1][1] == text:
                groups[-1][0].append(release)
            else:
                groups.append(([release], text))
        if len(groups) > 1:
            parts = [
                f"{g[0]}" + (f"-{g[-1]}" if len(g) > 1 else "") + f": {text}" for g, text in groups
            ]
            out.append(
                AuditFinding(
                    VERSION_RANGE_DIFFERS,
                    "warning",
                    f"The pin {lib}{choice.spec} ({choice.where}) allows releases that run this "
                    f"file differently: {'; '.join(parts)}. It is read as {choice.version}, the "
                    "newest the pin allows. Pin one release, or audit with the release you run.",
                    f"pip install {lib}=={choice.version} or " + _audit_as(lib, inp.path),
                    "audit",
                )
            )
    if choice.source not in ("pin", "vendored", "given"):
        return out
    d = adapters.get(lib)
    installed = d.support.installed()
    other_version = installed or d.support.tested[-1]
    if other_version == choice.version:
        return out
    other = _at(inp, other_version)
    if other is None or _same(reading, other):
        return out
    changed = _changed_settings(reading, other)
    what = (
        f"the installed {lib} {installed}"
        if installed
        else f"{lib} {other_version} (the newest tested release)"
    )
    why = {"pin": "pinned", "vendored": "vendored", "given": "given"}[choice.source]
    out.append(
        AuditFinding(
            VERSION_INSTALLED_DIFFERS if installed else VERSION_NEWEST_DIFFERS,
            "warning" if installed else "info",
            f"This file is read as {lib} {choice.version} ({why}: {choice.where}), where it runs "
            f"{_kl_text(reading)}; on {what} the same file runs {_kl_text(other)}"
            + (f" (settings that differ: {', '.join(changed[:4])})" if changed else "")
            + ".",
            f"pip install {lib}=={choice.version}" if installed else "",
            "audit",
        )
    )
    return out


def _named_choice(
    inp: AuditInput, choice: VersionChoice, refused: NativeReading, inferred: Inferred
) -> tuple[VersionChoice, AuditFinding]:
    """The version told from the launch's names, and the finding saying so and that the
    installed (or newest) release ``choice`` refuses the launch (``refused``: its reading)."""
    lib = inp.library
    d = adapters.get(lib)
    span = release_ranges(d.releases(), inferred.accepting)
    named = VersionChoice(
        lib,
        inferred.release,
        "names",
        f"{span} accept every name",
        notes=choice.notes,
    )
    what = (
        f"the installed {lib} {choice.version}"
        if choice.source == "installed"
        else f"{lib} {choice.version} (the newest tested release)"
    )
    why = " ".join(f.message for f in refused.findings if f.code.endswith("_rejected"))
    renames = d.renames(inp.payload, choice.version)
    fix = f"pin the release it was written for ({lib}=={inferred.release})"
    if renames:
        fix += f", or rename for {choice.version}: " + "; ".join(renames)
    else:
        fix += f", or rename or delete what {choice.version} refuses"
    finding = AuditFinding(
        VERSION_FROM_NAMES,
        "error" if choice.source == "installed" else "warning",
        f"No pin or vendored copy says which {lib} release this launch is for; only {lib} "
        f"{span} accept every name it uses, so it is read as {inferred.release}, the newest of "
        f"them. The launch is refused by {what}: {why}",
        fix,
        "audit",
    )
    return named, finding


def audit_input(
    inp: AuditInput,
    check_keys: bool = True,
    versions: dict[str, str] | None = None,
) -> AuditEntry:
    """Read one launch through its adapter and audit it, as the version :func:`choose`
    picks for it (``versions``: :func:`~kl_patches.audit.versions.parse_given`'s mapping)."""
    try:
        choice = choose(inp.library, inp.path, versions)
    except ValueError as err:
        raise AuditError(str(err)) from err
    inp = _with_version(inp, choice)
    reading = _read(inp)
    names_finding: AuditFinding | None = None
    if choice.source in ("installed", "newest") and inp.kl_config is None:
        inferred = infer(inp.library, reading, functools.partial(_at, inp))
        if inferred is not None:
            choice, names_finding = _named_choice(inp, choice, reading, inferred)
            inp = _with_version(inp, choice)
            reading = inferred.reading
    if reading.loss_config is not None and inp.kl_config is not None:
        reading = dataclasses.replace(reading, loss_config=None)
    ignored = ignored_keys(inp, reading) if check_keys else ()
    notes = list(inp.notes)
    notes += list(choice.notes)
    extra = list(input_findings(inp, reading))
    if choice.conflict:
        extra.append(
            AuditFinding(
                VERSION_PIN_CONFLICT,
                "warning",
                f"{choice.conflict}; the launch is read as {inp.library} {choice.version} "
                f"({choice.where}).",
                _audit_as(inp.library, inp.path),
                "audit",
            )
        )
    if names_finding is not None:
        extra.append(names_finding)
    if inp.kl_config is None:
        extra += version_findings(inp, choice, reading)
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
    entry = audit_reading(reading, inp.origin, inp.kind, notes, extra, ignored)
    entry = dataclasses.replace(
        entry,
        library_version=choice.version,
        version_source=choice.source,
        version_where=(choice.where + (f" {choice.spec}" if choice.spec else "")).strip(),
    )
    return _without_refused_route(entry, inp)


def _without_refused_route(entry: AuditEntry, inp: AuditInput) -> AuditEntry:
    """``entry`` without its "with kl-patches" command where kl-patches' patch would refuse
    this launch (a release outside its support, unsloth's trainer, the project's own trainer):
    the fix producer's own route (:func:`kl_patches.audit.fix.plan.producer`'s ``patched``)
    decides, so the report never prints a command the launcher then refuses, in its fix line
    or a finding's. A note says why."""
    if not entry.fix_switch.startswith("kl-patches ") or inp.kl_config is not None:
        return entry  # none, or another route (unsloth's own patch: kl_patches.adapters...)
    if inp.library not in adapters.names():
        return entry
    lib = importlib.import_module(f"kl_patches.adapters.{inp.library}.fix")  # fix.plan.producer
    c = entry.reading.config
    coef = c.coef if c.has_reward else c.loss_coef_value if c.has_loss else KLConfig().coef
    try:
        changes, _ = lib.patched(entry, inp, coef)
    except (AuditError, ValueError):
        return entry
    if changes:
        return entry
    why = getattr(lib, "route_refusal", lambda e, i: None)(entry, inp) or (
        f"{inp.library} {entry.library_version} is outside the patch's support"
    )
    note = f"no kl-patches route for this launch: {why}"
    findings = tuple(
        dataclasses.replace(f, fix="") if _kl_patches_route(f.fix) else f for f in entry.findings
    )
    return dataclasses.replace(entry, fix_switch="", findings=findings, notes=(*entry.notes, note))


def _kl_patches_route(fix: str) -> bool:
    """A fix string that runs the launch through kl-patches (its launcher or module)."""
    return fix.startswith(("kl-patches ", "python -m kl_patches", "python3 -m kl_patches"))


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
    version: str | list[str] | tuple[str, ...] | dict[str, str] | None = None,
) -> list[AuditEntry]:
    """Audit a file path, an argv list, a config mapping, a NativeReading or a config object.

    ``version`` is the library version to read launches as: ``"0.18.0"`` (every library),
    ``"trl=0.18.0"``, a list of those, a ``{library: version}`` mapping, or a specifier
    (``"trl>=0.18,<=0.24"``); without it the version is detected per launch (pins, a vendored
    copy, the installed package, else the newest tested release: see
    :mod:`kl_patches.audit.versions`), and each entry says which and why. Raises
    :class:`AuditError` for input it cannot read (the CLI turns that into exit code 2),
    including input nested too deeply for the reader.
    """
    try:
        given = parse_given(version)
    except ValueError as err:
        raise AuditError(str(err)) from err
    try:
        return _audit(source, library, variables, given)
    except RecursionError as err:
        raise AuditError(
            f"{source if isinstance(source, (str, Path)) else 'input'}: nested too deeply to read"
        ) from err


def audit_text(
    text: str,
    origin: str = "<stdin>",
    library: str | None = None,
    variables: dict[str, str] | None = None,
    version: str | list[str] | tuple[str, ...] | dict[str, str] | None = None,
) -> list[AuditEntry]:
    """Audit text that has no file (standard input: ``kl-patches audit -``), as
    :func:`audit` audits a file: its kind is told from its content, relative paths and the
    version pins are looked up from the working directory."""
    try:
        given = parse_given(version)
        inputs = [
            dataclasses.replace(inp, path=str(Path.cwd() / origin))
            for inp in inputs_from_source(text, origin, None, library, variables)
        ]
    except (InputError, ValueError) as err:
        raise AuditError(str(err)) from err
    except RecursionError as err:
        raise AuditError(f"{origin}: nested too deeply to read") from err
    return _audit_inputs(inputs, given)


def _audit(
    source: Any, library: str | None, variables: dict[str, str] | None, given: dict[str, str]
) -> list[AuditEntry]:
    try:
        if isinstance(source, NativeReading):
            return [audit_reading(source)]
        if isinstance(source, (str, Path)):
            inputs = [
                dataclasses.replace(inp, path=str(source))
                for inp in inputs_from_file(source, library, variables)
            ]
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
            choice = choose(lib, None, given)
            inp = _with_version(AuditInput(lib, source, type(source).__name__, "object"), choice)
            reading = _read(inp)
            entry = audit_reading(reading, type(source).__name__, "object")
            return [
                dataclasses.replace(
                    entry,
                    library_version=choice.version,
                    version_source=choice.source,
                    version_where=choice.where,
                )
            ]
    except InputError as err:
        raise AuditError(str(err)) from err
    except ValueError as err:
        raise AuditError(str(err)) from err
    return _audit_inputs(inputs, given)


def _audit_inputs(inputs: list[AuditInput], given: dict[str, str]) -> list[AuditEntry]:
    entries: list[AuditEntry] = []
    failed: list[tuple[AuditInput, str]] = []
    for inp in inputs:
        if inp.kind == "unreadable":
            failed.append((inp, str(inp.context.get("error", "unreadable"))))
            continue
        try:
            entries.append(audit_input(inp, versions=given))
        except AuditError as err:
            if len(inputs) == 1:
                raise
            failed.append((inp, str(err)))
        except RecursionError as err:
            if len(inputs) == 1:
                raise AuditError(f"{inp.origin}: nested too deeply to read") from err
            failed.append((inp, f"{inp.origin}: nested too deeply to read"))
    if not entries and failed:
        raise AuditError(failed[0][1])
    return entries + [unreadable_entry(inp, why) for inp, why in failed]


def unreadable_entry(inp: AuditInput, why: str) -> AuditEntry:
    """An ``error`` entry for one launch of a file that could not be read (the file's other
    launches are read): nothing is known about its KL."""
    reading = NativeReading(
        library=inp.library,
        version=None,
        trainer="(unreadable launch)",
        config=KLConfig(placement="none", coef=0.0),
        off_policy=False,
    )
    finding = AuditFinding(
        LAUNCH_UNREADABLE,
        "error",
        f"This launch could not be read: {why}. The file's other launches are reported.",
        "",
        "audit",
    )
    entry = audit_reading(reading, inp.origin, inp.kind, inp.notes, [finding])
    # only the refusal: the placeholder reading's "no KL" is not a finding about the launch
    return dataclasses.replace(entry, findings=(finding,), library_version=None, version_source="")


def audit_installed() -> tuple[list[AuditEntry], list[str]]:
    """The defaults of each installed library's trainers, read through its adapter as the
    installed version (its package metadata) runs them.

    Libraries that are not installed are skipped with a note. An adapter's
    ``installed_defaults()`` (reads the installed code) is used when it has one: it may return
    readings, or ``{trainer: settings}`` mappings that are given to ``read`` with
    ``trainer=<name>``; without it the adapter's per-version tables give the defaults of the
    installed version (empty input).
    """
    entries: list[AuditEntry] = []
    notes: list[str] = []
    for d in adapters.descriptors():
        lib = d.name
        if importlib.util.find_spec(lib) is None:
            notes.append(f"{lib}: not installed in this environment; skipped")
            continue
        origin = f"installed {lib}"
        version = d.support.installed()
        source = "installed" if version else "newest"
        version = version or d.support.tested[-1]

        def read(payload: Any, _d: Any = d, _v: str = version) -> NativeReading:
            return _d.read(payload, version=_v)  # type: ignore[no-any-return]

        found: list[AuditEntry] = []
        try:
            defaults = d.installed_defaults()
            if defaults is None:
                reading = read([])
                found.append(
                    audit_reading(
                        reading,
                        origin,
                        "installed",
                        [
                            f"the {lib} adapter has no installed_defaults(): these are the "
                            f"defaults of {lib} {reading.version} in the adapter's per-version "
                            "tables"
                        ],
                    )
                )
            else:
                for reading in _readings_from_defaults(read, defaults):
                    found.append(audit_reading(reading, origin, "installed"))
        except Exception as err:
            notes.append(
                f"{lib}: installed, but its defaults could not be read: {type(err).__name__}: {err}"
            )
            continue
        where = "package metadata" if source == "installed" else ""
        entries += [
            dataclasses.replace(e, library_version=version, version_source=source,
                                version_where=where)
            for e in found
        ]  # fmt: skip
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
