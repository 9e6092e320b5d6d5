"""Which library version a launch file is read as, and why (``--library-version`` and detection).

The same launch means a different gradient under another release (TRL's GRPO ``beta`` default
went 0.04 -> 0.0 in 0.19.0; verl applies the reward KL whenever the KL loss is off before 0.4.0;
OpenRLHF renamed every flag in 0.10.2), so the audit reads each launch as one version of its
library and says which and why. :func:`choose` decides, in this order:

1. ``given``: ``--library-version [LIB=]VERSION`` (``audit(..., version=...)``);
2. ``pin``: a requirement on the library in the nearest ``requirements*.txt``, ``setup.py``,
   ``setup.cfg``, ``pyproject.toml``, ``environment.yml``, ``uv.lock`` or ``poetry.lock`` in the
   file's directory or above it, inside its repository (the walk stops at a directory holding
   ``.git``); a lock file's resolved version and an exact ``==`` pin are taken as they are, a
   range (``>=0.18,<=0.24``) as the newest recorded release it allows (the audit then reads the
   oldest too and says when the verdict differs across the range);
3. ``vendored``: a copy of the library above the file (``verl/version/version``,
   ``openrlhf/__init__.py`` or OpenRLHF's ``version.txt``, ``trl/__init__.py`` or TRL's
   ``VERSION``; each adapter's ``semantics.vendored_version`` knows its layout);
4. ``installed``: the installed distribution's metadata (the library is not imported);
5. ``newest``: the newest release the adapter is tested against.

When the installed or newest release refuses the launch (a name it lacks), the audit reads it
as the newest release whose names accept it instead (``names``, :mod:`kl_patches.audit.names`).

Nothing here knows a library: the releases and the vendored layouts come from each adapter's
``semantics`` module through its descriptor. Files are read with the audit's size limits and
never executed (``setup.py`` is parsed with :mod:`ast`).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from kl_patches import adapters
from kl_patches.adapters.files import InputError
from kl_patches.audit.pins import PIN_FILES, Pin, shown_path
from kl_patches.audit.pins import allowed as pin_allowed
from kl_patches.audit.pins import scan as pin_scan

__all__ = [
    "PIN_FILES",
    "SOURCES",
    "Pin",
    "PinSearch",
    "VersionChoice",
    "cached",
    "choose",
    "find_pin",
    "find_pins",
    "parse_given",
    "pins_in",
    "shown_path",
]

SOURCES = ("given", "pin", "vendored", "names", "installed", "newest")
"""Where a version can come from, in the order the audit tries them (``names`` is not
:func:`choose`'s: :mod:`kl_patches.audit.names` tells it from a launch the installed or newest
release refuses)."""

MAX_LEVELS = 12
"""Directories walked up from the file at most."""


@dataclass(frozen=True)
class VersionChoice:
    """The version a launch is read as, and where it came from."""

    library: str
    """``verl``, ``openrlhf`` or ``trl``."""
    version: str
    """The version read (a range: the newest recorded release it allows)."""
    source: str
    """One of :data:`SOURCES`."""
    where: str = ""
    """What said so: ``--library-version``, ``path:line``, the vendored file, ``metadata``."""
    spec: str = ""
    """A range pin's specifier as written (empty for an exact version)."""
    allowed: tuple[str, ...] = ()
    """The recorded releases a range pin allows, ascending (empty for an exact version)."""
    snapshot: bool = False
    """True when the code may be newer than the version says (a vendored copy, whose version
    file names the last release until the next one is cut, or a dev/pre-release label)."""
    notes: tuple[str, ...] = field(default_factory=tuple)
    """What detection could not use (a pin that allows no recorded release, ...)."""
    conflict: str = ""
    """Two pins of one file that no single release satisfies, named (empty when none)."""
    copy: str = ""
    """The version file of a vendored copy above the launch whose code runs it: the vendored
    source's own file, or, for a given version, the copy stating that same version (its code
    is read for the rules its version file does not tell; empty when none)."""

    def describe(self) -> str:
        """``0.18.0 (pin: setup.py:12 trl[vllm]==0.18.0)`` for the report."""
        what = {
            "given": "--library-version",
            "pin": "pin",
            "vendored": "vendored copy",
            "names": "names in the launch",
            "installed": "installed",
            "newest": "newest tested release",
        }[self.source]
        detail = f" {self.where}" if self.where and self.source != "given" else ""
        spec = f" {self.spec}" if self.spec else ""
        return f"{self.version} ({what}{':' if detail or spec else ''}{detail}{spec})"


FORMS = "VERSION (0.18.0), LIB=VERSION (trl=0.18.0) or LIB SPECIFIER (trl>=0.18,<=0.24)"
"""The forms ``--library-version`` takes, for its error messages."""


def parse_given(
    values: list[str] | tuple[str, ...] | str | dict[str, str] | None,
) -> dict[str, str]:
    """``["trl=0.18.0", "0.9.1"]`` -> ``{"trl": "0.18.0", "*": "0.9.1"}`` (``*``: every library);
    ``trl>=0.18,<0.19`` / ``trl=>=0.18`` give a library a specifier.

    ValueError naming the valid forms for an empty value (``''``, ``trl=``), naming the
    libraries for an unknown one, for a value that is not a PEP 440 version or specifier, and
    naming both values when one library (or every library) is given two different ones."""
    if values is None:
        return {}
    if isinstance(values, dict):
        items = [f"{k}={v}" if k != "*" else v for k, v in values.items()]
    elif isinstance(values, str):
        items = [values]
    else:
        items = list(values)
    out: dict[str, str] = {}
    written: dict[str, str] = {}
    for item in items:
        item = str(item)
        m = re.fullmatch(r"\s*([A-Za-z_][\w\-]*)\s*(===?|>=|<=|~=|!=|<|>|=)(.*)", item)
        if m is not None:  # trl=0.18.0, trl==0.18.0, trl>=0.18,<0.19
            lib, op, ver = m.group(1), m.group(2), m.group(3).strip()
            if lib not in adapters.names():
                raise ValueError(
                    f"--library-version {item!r}: unknown library {lib!r}; choose one of "
                    f"{list(adapters.names())}"
                )
            if not ver:
                raise ValueError(
                    f"--library-version {item!r}: no version after {op!r}; give {FORMS}"
                )
            ver = ver if op == "=" else op + ver
        else:
            lib, ver = "*", item.strip()
            if not ver:
                raise ValueError(f"--library-version {item!r} is empty; give {FORMS}")
        _check_text(ver, item)
        if lib in out and out[lib] != ver:
            who = "every library" if lib == "*" else lib
            raise ValueError(
                f"--library-version given twice for {who}: {written[lib]!r} and {item!r}; give one"
            )
        out[lib] = ver
        written[lib] = item
    return out


def _check_text(text: str, item: str) -> None:
    try:
        Version(text)
        return
    except InvalidVersion:
        pass
    if pin_allowed(text, ()) is None:
        raise ValueError(
            f"--library-version {item!r}: {text!r} is neither a version nor a specifier; "
            f"give {FORMS}"
        ) from None


# ----------------------------------------------------------------------------- pins
def _boundaries() -> set[Path]:
    """Directories never searched (nor above): the filesystem root, the home and temp dirs."""
    out = {Path("/").resolve()}
    for text in (os.path.expanduser("~"), tempfile.gettempdir()):
        with contextlib.suppress(OSError):
            out.add(Path(text).resolve())
    return out


def _repository_dirs(start: Path) -> tuple[list[Path], str]:
    """``start`` and its parents up to the first one holding ``.git`` (inclusive), never the
    filesystem root, the home directory or the temp directory (nor what is above them), at
    most :data:`MAX_LEVELS`; and a note when the walk stopped at that bound (no repository root
    nor boundary reached), empty otherwise."""
    out: list[Path] = []
    stop = _boundaries()
    here = start
    for _ in range(MAX_LEVELS):
        if here in stop:
            return out, ""
        out.append(here)
        if (here / ".git").exists() or here.parent == here:
            return out, ""
        here = here.parent
    if here in stop:
        return out, ""
    return out, (
        f"looked {MAX_LEVELS} directories up from {shown_path(start)} (to {shown_path(out[-1])}) "
        "without reaching a repository root (.git); pins and vendored copies further up are not "
        "read (pass --library-version to say the version)"
    )


@dataclass
class PinSearch:
    """The pins of the nearest directory that has some, and what the search could not use."""

    pins: list[Pin] = field(default_factory=list)
    """The pins, best first: those whose marker holds here, exact (lock files first) before
    ranges, in :data:`PIN_FILES` order."""
    notes: list[str] = field(default_factory=list)
    """Files or requirements that could not be used, and where the search stopped."""


def _pin_files(directory: Path) -> list[Path]:
    out: list[Path] = []
    for pattern in PIN_FILES:
        if "*" in pattern:
            with contextlib.suppress(OSError):
                out += sorted(p for p in directory.glob(pattern) if not p.is_dir())
        elif os.path.lexists(directory / pattern):
            out.append(directory / pattern)
    return out


_CACHE: contextvars.ContextVar[dict[tuple[str, str, str], Any] | None] = contextvars.ContextVar(
    "kl_patches_version_cache", default=None
)


@contextlib.contextmanager
def cached() -> Iterator[None]:
    """Within the block, each directory's pins and vendored copy are read once per library
    (the CLI audits many files of one tree: without it each file re-reads every directory
    above it, and a directory of N files costs N times its listing per file)."""
    token = _CACHE.set({})
    try:
        yield
    finally:
        _CACHE.reset(token)


def _memo(kind: str, directory: Path, name: str, compute: Callable[[], Any]) -> Any:
    cache = _CACHE.get()
    if cache is None:
        return compute()
    key = (kind, str(directory), name)
    if key not in cache:
        cache[key] = compute()
    return cache[key]


def _directory_pins(directory: Path, name: str) -> tuple[list[Pin], list[str]]:
    def compute() -> tuple[list[Pin], list[str]]:
        pins: list[Pin] = []
        notes: list[str] = []
        for path in _pin_files(directory):
            scanned = pin_scan(path, name)
            pins += scanned.pins
            notes += scanned.notes
        return pins, notes

    return _memo("pins", directory, name, compute)  # type: ignore[no-any-return]


def find_pins(start: Path, name: str) -> PinSearch:
    """The pins on ``name`` in the nearest directory (from ``start`` up to the repository
    root) whose dependency or lock files name a version of it (see :class:`PinSearch`)."""
    out = PinSearch()
    directories, bound = _repository_dirs(start)
    for directory in directories:
        found, notes = _directory_pins(directory, name)
        out.notes += notes
        found = [p for p in found if p.spec or p.exact]
        if found:
            out.pins = sorted(found, key=lambda p: (not p.applies, p.exact is None))
            return out
    if bound:
        out.notes.append(bound)
    return out


def find_pin(start: Path, name: str) -> list[Pin]:
    """:func:`find_pins`' pins (the best first), without its notes."""
    return find_pins(start, name).pins


def pins_in(path: Path, name: str) -> list[Pin]:
    """Every requirement on ``name`` in one dependency or lock file (empty when none; see
    :func:`kl_patches.audit.pins.scan` for the notes)."""
    return pin_scan(path, name).pins


def vendored_copy(start: Path, library: str) -> tuple[str, str] | None:
    """(version, version file) of the nearest copy of ``library`` from ``start`` up to the
    repository root (each directory read once within :func:`cached`); None when none."""
    return _vendored(start, library, [])


def _vendored(start: Path, library: str, notes: list[str]) -> tuple[str, str] | None:
    d = adapters.get(library)

    def one(directory: Path) -> tuple[tuple[str, str] | None, str]:
        try:
            return d.vendored_version(directory), ""
        except InputError as err:  # a version file that is a FIFO, a device, too big
            return None, f"{err}; not read as the vendored {library} version"

    for directory in _repository_dirs(start)[0]:
        found, note = _memo("vendored", directory, library, functools.partial(one, directory))
        if note:
            notes.append(note)
        if found is not None:
            return found
    return None


def _snapshot(version: str) -> bool:
    try:
        v = Version(version)
    except InvalidVersion:
        return False
    return v.is_devrelease or v.is_prerelease or v.local is not None


def _from_spec(library: str, spec: str, where: str, source: str) -> VersionChoice | None:
    """A choice from a specifier: its newest allowed recorded release (None if none)."""
    found = pin_allowed(spec, adapters.get(library).releases())
    if not found:
        return None
    return VersionChoice(library, found[-1], source, where, spec, found)


def _compatible(a: Pin, b: Pin, releases: tuple[str, ...]) -> bool:
    """True when one release can satisfy both pins (a specifier without recorded releases in
    it is not held against the other)."""
    if a.exact is not None and b.exact is not None:
        try:
            return Version(a.exact) == Version(b.exact)
        except InvalidVersion:
            return a.exact == b.exact
    if a.exact is not None or b.exact is not None:
        exact, other = (a, b) if a.exact is not None else (b, a)
        return bool(pin_allowed(other.spec, (str(exact.exact),)))
    first, second = pin_allowed(a.spec, releases), pin_allowed(b.spec, releases)
    return not first or not second or bool(set(first) & set(second))


def _conflict(pins: list[Pin], library: str) -> str:
    """One line naming two pins of one file (with its includes) that no single release
    satisfies, as pip would refuse them; empty when there are none."""
    releases = tuple(adapters.get(library).releases())
    by_group: dict[str, list[Pin]] = {}
    for pin in pins:
        if pin.applies:
            by_group.setdefault(pin.group or pin.where, []).append(pin)
    for group in by_group.values():
        distinct: dict[tuple[str, str], Pin] = {}
        for pin in sorted(group, key=lambda p: _position(p.where)):
            distinct.setdefault((pin.spec, pin.marker), pin)
        found = list(distinct.values())[:MAX_DISTINCT_PINS]
        for i, first in enumerate(found):
            for other in found[i + 1 :]:
                if other.marker != first.marker or _compatible(first, other, releases):
                    continue
                return (
                    f"{first.where} ({first.written or library + first.spec}) and {other.where} "
                    f"({other.written or library + other.spec}) pin {library} to versions no "
                    "one release satisfies (pip refuses to install them together)"
                )
    return ""


MAX_DISTINCT_PINS = 64
"""Different specifiers of one file compared with each other at most (pairs: quadratic)."""


def _position(where: str) -> tuple[str, int]:
    path, _, line = where.rpartition(":")
    return (path, int(line)) if line.isdigit() else (where, 0)


def _same_copy(library: str, path: str | Path | None, given: str) -> str:
    """The version file of the vendored copy above ``path`` when it states ``given`` (its
    public part: ``0.1+vendored`` is the copy saying 0.1), or a specifier ``given`` allows the
    version it states (``0.5.x`` and a copy saying 0.5.7), else empty: a given version that is
    the copy's own is read with the copy's code too."""
    if path is None:
        return ""
    found = _vendored(Path(path).resolve().parent, library, [])
    if found is None:
        return ""
    try:
        public = Version(found[0]).public
    except InvalidVersion:
        return ""
    try:
        same = public == Version(given).public
    except InvalidVersion:
        same = bool(pin_allowed(given, (public,)))
    return shown_path(found[1]) if same else ""


def choose(
    library: str,
    path: str | Path | None = None,
    given: dict[str, str] | None = None,
) -> VersionChoice:
    """The version ``library``'s launch in ``path`` is read as (see the module docstring).

    ``given`` is :func:`parse_given`'s mapping. ValueError for a given specifier that allows no
    recorded release."""
    d = adapters.get(library)
    newest = d.support.tested[-1]
    notes: list[str] = []
    text = (given or {}).get(library) or (given or {}).get("*")
    if text:
        try:
            Version(text)
            copy = _same_copy(library, path, text)
            return VersionChoice(library, text, "given", "--library-version",
                                 snapshot=_snapshot(text), copy=copy)  # fmt: skip
        except InvalidVersion:
            found = _from_spec(library, text, "--library-version", "given")
            if found is None:
                raise ValueError(
                    f"--library-version {library}={text}: allows none of the recorded "
                    f"{library} releases ({d.releases()[0]} ... {d.releases()[-1]})"
                ) from None
            return dataclasses.replace(found, copy=_same_copy(library, path, text))
    start = Path(path).resolve().parent if path is not None else None
    if start is not None:
        search = find_pins(start, library)
        notes += search.notes
        conflict = _conflict(search.pins, library)
        applying = [p for p in search.pins if p.applies]
        if applying:
            notes += [
                f"{p.where}: {p.written} not read: it applies only where {p.marker}"
                for p in search.pins
                if not p.applies
            ]
        for pin in applying or search.pins:
            if not pin.applies:
                notes.append(
                    f"{pin.where}: {pin.written} applies only where {pin.marker}, which does "
                    "not hold here; read anyway (no other pin applies)"
                )
            if pin.exact is not None:
                return VersionChoice(library, pin.exact, "pin", pin.where,
                                     snapshot=_snapshot(pin.exact), notes=tuple(notes),
                                     conflict=conflict)  # fmt: skip
            found = _from_spec(library, pin.spec, pin.where, "pin")
            if found is not None:
                return dataclasses.replace(found, notes=tuple(notes), conflict=conflict)
            notes.append(f"{pin.where}: {library}{pin.spec} allows no recorded release")
        vendored = _vendored(start, library, notes)
        if vendored is not None:
            version, where = vendored
            where = shown_path(where)
            try:
                Version(version)
                return VersionChoice(library, version, "vendored", where, snapshot=True,
                                     notes=tuple(notes), copy=where)  # fmt: skip
            except InvalidVersion:
                notes.append(f"{where}: {version!r} is not a version")
    try:
        installed = metadata.version(library)
    except metadata.PackageNotFoundError:
        installed = None
    if installed is not None:
        return VersionChoice(library, installed, "installed", "package metadata",
                             notes=tuple(notes))  # fmt: skip
    return VersionChoice(library, newest, "newest", "", notes=tuple(notes))
