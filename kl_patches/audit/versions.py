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

Nothing here knows a library: the releases and the vendored layouts come from each adapter's
``semantics`` module through its descriptor. Files are read with the audit's size limits and
never executed (``setup.py`` is parsed with :mod:`ast`).
"""

from __future__ import annotations

import ast
import configparser
import contextlib
import os
import re
import tempfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from kl_patches import adapters
from kl_patches.adapters.files import try_read_text

__all__ = [
    "PIN_FILES",
    "SOURCES",
    "Pin",
    "VersionChoice",
    "choose",
    "find_pin",
    "parse_given",
    "pins_in",
    "shown_path",
]

SOURCES = ("given", "pin", "vendored", "installed", "newest")
"""Where a version can come from, in the order :func:`choose` tries them."""

PIN_FILES = (
    "uv.lock",
    "poetry.lock",
    "requirements*.txt",
    "setup.py",
    "setup.cfg",
    "pyproject.toml",
    "environment.yml",
    "environment.yaml",
)
"""Files searched for a pin, in each directory from the file's up to its repository root."""

try:  # Python 3.11+; on 3.10 TOML files (pyproject.toml, uv.lock, poetry.lock) are skipped
    import tomllib as _toml
except ImportError:  # pragma: no cover - Python 3.10
    _toml = None  # type: ignore[assignment]


def _toml_loads(text: str) -> dict[str, Any] | None:
    """A TOML document, None when it does not parse (or Python has no TOML reader)."""
    if _toml is None:
        return None
    try:
        return _toml.loads(text)
    except _toml.TOMLDecodeError:
        return None


MAX_LEVELS = 12
"""Directories walked up from the file at most."""


@dataclass(frozen=True)
class Pin:
    """One requirement on a library found in a file."""

    spec: str
    """The specifier as written (``==0.18.0``, ``>=0.18,<=0.24``; a lock file's ``==V``)."""
    where: str
    """``path:line`` of the requirement."""
    exact: str | None
    """The version when the pin names exactly one (``==V``, ``===V``, a lock file)."""


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

    def describe(self) -> str:
        """``0.18.0 (pin: setup.py:12 trl[vllm]==0.18.0)`` for the report."""
        what = {
            "given": "--library-version",
            "pin": "pin",
            "vendored": "vendored copy",
            "installed": "installed",
            "newest": "newest tested release",
        }[self.source]
        detail = f" {self.where}" if self.where and self.source != "given" else ""
        spec = f" {self.spec}" if self.spec else ""
        return f"{self.version} ({what}{':' if detail or spec else ''}{detail}{spec})"


def parse_given(
    values: list[str] | tuple[str, ...] | str | dict[str, str] | None,
) -> dict[str, str]:
    """``["trl=0.18.0", "0.9.1"]`` -> ``{"trl": "0.18.0", "*": "0.9.1"}`` (``*``: every library);
    ``trl>=0.18,<0.19`` / ``trl=>=0.18`` give a library a specifier.

    ValueError naming the libraries for an unknown one, and for a value that is not a PEP 440
    version or specifier."""
    if values is None:
        return {}
    if isinstance(values, dict):
        items = [f"{k}={v}" if k != "*" else v for k, v in values.items()]
    elif isinstance(values, str):
        items = [values]
    else:
        items = list(values)
    out: dict[str, str] = {}
    for item in items:
        m = re.fullmatch(r"\s*([A-Za-z_][\w\-]*)\s*(===?|>=|<=|~=|!=|<|>|=)(.*)", item)
        if m is not None:  # trl=0.18.0, trl==0.18.0, trl>=0.18,<0.19
            lib, op, ver = m.group(1), m.group(2), m.group(3).strip()
            ver = ver if op == "=" else op + ver
            if lib not in adapters.names():
                raise ValueError(
                    f"--library-version {item!r}: unknown library {lib!r}; choose one of "
                    f"{list(adapters.names())}"
                )
        else:
            lib, ver = "*", item.strip()
        _check_text(ver, item)
        out[lib] = ver
    return out


def _check_text(text: str, item: str) -> None:
    try:
        Version(text)
        return
    except InvalidVersion:
        pass
    try:
        SpecifierSet(_wildcard(text))
    except InvalidSpecifier:
        raise ValueError(
            f"--library-version {item!r}: {text!r} is neither a version (0.18.0) nor a "
            "specifier (>=0.18,<=0.24)"
        ) from None


def _wildcard(text: str) -> str:
    """``0.5.x`` / ``0.5.*`` -> ``==0.5.*``; a specifier is returned as it is."""
    if re.fullmatch(r"\d+(\.\d+)*\.[x*]", text):
        return "==" + text[:-1] + "*"
    return text


# ----------------------------------------------------------------------------- pins
def _requirement(text: str, name: str) -> str | None:
    """The specifier of a requirement string on ``name`` (None if it is about another)."""
    text = text.split("#", 1)[0].strip().strip(",").strip("'\"")
    if not text or text.startswith(("-", "git+", "http")):
        return None
    try:
        req = Requirement(text)
    except InvalidRequirement:
        return None
    if canonicalize_name(req.name) != canonicalize_name(name):
        return None
    return str(req.specifier)


def _conda(text: str, name: str) -> str | None:
    """A conda spec (``trl=0.18.0``, ``trl==0.18``, ``trl>=0.18``) on ``name``."""
    m = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)\s*(==?|>=|<=|>|<|!=|~=)?\s*([^\s#=]*)\s*", text)
    if m is None or canonicalize_name(m.group(1)) != canonicalize_name(name):
        return None
    op, ver = m.group(2) or "", m.group(3)
    if not ver:
        return ""
    if op == "=":
        return f"=={ver}"
    return f"{op}{ver}"


def _exact(spec: str) -> str | None:
    m = re.fullmatch(r"===?\s*([0-9][0-9A-Za-z.+!\-]*)", spec.strip())
    return m.group(1) if m else None


def pins_in(path: Path, name: str) -> list[Pin]:
    """Every requirement on ``name`` in one dependency or lock file (empty when none)."""
    text = try_read_text(str(path))
    if text is None:
        return []
    base = path.name
    shown = shown_path(path)
    out: list[Pin] = []
    if base in ("uv.lock", "poetry.lock"):
        doc = _toml_loads(text)
        if doc is None:
            return []
        for package in doc.get("package", []) if isinstance(doc.get("package"), list) else []:
            if (
                isinstance(package, dict)
                and canonicalize_name(str(package.get("name", ""))) == canonicalize_name(name)
                and isinstance(package.get("version"), str)
            ):
                number = _line_of(text, f'name = "{package["name"]}"')
                version = package["version"]
                out.append(Pin(f"=={version}", f"{shown}:{number}", version))
        return out
    if base.startswith("requirements") and base.endswith(".txt"):
        for number, line in enumerate(text.splitlines(), 1):
            spec = _requirement(line, name)
            if spec is not None:
                out.append(Pin(spec, f"{shown}:{number}", _exact(spec)))
        return out
    if base == "setup.py":
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return []
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                spec = _requirement(node.value, name)
                if spec is not None:
                    out.append(Pin(spec, f"{shown}:{node.lineno}", _exact(spec)))
        return out
    if base == "setup.cfg":
        parser = configparser.ConfigParser()
        try:
            parser.read_string(text)
        except configparser.Error:
            return []
        for section in parser.sections():
            for key in ("install_requires", *parser[section]):
                for item in parser[section].get(key, "").splitlines():
                    spec = _requirement(item, name)
                    if spec is not None:
                        out.append(Pin(spec, f"{shown}:{_line_of(text, item.strip())}",
                                       _exact(spec)))  # fmt: skip
        return list({p.where: p for p in out}.values())
    if base == "pyproject.toml":
        doc = _toml_loads(text)
        if doc is None:
            return []
        for item in _pyproject_requirements(doc):
            spec = _requirement(item, name)
            if spec is not None:
                out.append(Pin(spec, f"{shown}:{_line_of(text, item)}", _exact(spec)))
        poetry = doc.get("tool", {}).get("poetry", {}) if isinstance(doc.get("tool"), dict) else {}
        for group in _poetry_groups(poetry):
            for key, value in group.items():
                if canonicalize_name(str(key)) != canonicalize_name(name):
                    continue
                raw = value.get("version") if isinstance(value, dict) else value
                if isinstance(raw, str):
                    spec = _poetry_spec(raw)
                    out.append(Pin(spec, f"{shown}:{_line_of(text, str(key))}", _exact(spec)))
        return out
    if base in ("environment.yml", "environment.yaml"):
        for number, line in enumerate(text.splitlines(), 1):
            m = re.match(r"\s*-\s+(.*)$", line)
            if m is None:
                continue
            item = m.group(1).strip().strip("'\"")
            spec = _requirement(item, name)
            if spec is None:
                spec = _conda(item, name)
            if spec is not None:
                out.append(Pin(spec, f"{shown}:{number}", _exact(spec)))
        return out
    return out


def shown_path(path: Path | str) -> str:
    """``path`` relative to the working directory when it is inside it, else as it is (what
    the report shows for a pin or a vendored version file)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


def _line_of(text: str, needle: str) -> int:
    for number, line in enumerate(text.splitlines(), 1):
        if needle and needle in line:
            return number
    return 1


def _pyproject_requirements(doc: dict[str, Any]) -> list[str]:
    out: list[str] = []
    project = doc.get("project")
    if isinstance(project, dict):
        deps = project.get("dependencies")
        if isinstance(deps, list):
            out += [d for d in deps if isinstance(d, str)]
        extras = project.get("optional-dependencies")
        if isinstance(extras, dict):
            for deps in extras.values():
                if isinstance(deps, list):
                    out += [d for d in deps if isinstance(d, str)]
    groups = doc.get("dependency-groups")
    if isinstance(groups, dict):
        for deps in groups.values():
            if isinstance(deps, list):
                out += [d for d in deps if isinstance(d, str)]
    return out


def _poetry_groups(poetry: Any) -> list[dict[str, Any]]:
    if not isinstance(poetry, dict):
        return []
    out = [poetry.get("dependencies"), poetry.get("dev-dependencies")]
    groups = poetry.get("group")
    if isinstance(groups, dict):
        out += [g.get("dependencies") for g in groups.values() if isinstance(g, dict)]
    return [g for g in out if isinstance(g, dict)]


def _poetry_spec(raw: str) -> str:
    """Poetry's ``^0.18.0`` / ``~0.18`` / ``0.18.0`` as a PEP 440 specifier."""
    raw = raw.strip()
    if raw.startswith("^"):
        parts = [int(p) for p in re.findall(r"\d+", raw)[:3]] or [0]
        first = next((i for i, p in enumerate(parts) if p), len(parts) - 1)
        upper = parts[: first + 1]
        upper[-1] += 1
        return f">={raw[1:]},<{'.'.join(map(str, upper))}"
    if raw.startswith("~") and not raw.startswith("~="):
        parts = re.findall(r"\d+", raw)
        upper = [int(p) for p in parts[:2]] if len(parts) > 1 else [int(parts[0]) + 1]
        if len(parts) > 1:
            upper[-1] += 1
        return f">={raw[1:]},<{'.'.join(map(str, upper))}"
    if re.fullmatch(r"[0-9][0-9A-Za-z.+\-]*", raw):
        return f"=={raw}"
    return raw


def _boundaries() -> set[Path]:
    """Directories never searched (nor above): the filesystem root, the home and temp dirs."""
    out = {Path("/").resolve()}
    for text in (os.path.expanduser("~"), tempfile.gettempdir()):
        with contextlib.suppress(OSError):
            out.add(Path(text).resolve())
    return out


def _repository_dirs(start: Path) -> list[Path]:
    """``start`` and its parents up to the first one holding ``.git`` (inclusive), never the
    filesystem root, the home directory or the temp directory (nor what is above them)."""
    out: list[Path] = []
    stop = _boundaries()
    here = start
    for _ in range(MAX_LEVELS):
        if here in stop:
            break
        out.append(here)
        if (here / ".git").exists() or here.parent == here:
            break
        here = here.parent
    return out


def find_pin(start: Path, name: str) -> list[Pin]:
    """The pins on ``name`` in the nearest directory (from ``start`` up to the repository
    root) whose dependency or lock files mention it; the best first: exact pins (lock files
    first) before ranges, in :data:`PIN_FILES` order."""
    for directory in _repository_dirs(start):
        found: list[Pin] = []
        for pattern in PIN_FILES:
            for path in sorted(directory.glob(pattern)) if "*" in pattern else [
                directory / pattern
            ]:  # fmt: skip
                if path.is_file():
                    found += pins_in(path, name)
        found = [p for p in found if p.spec or p.exact]
        if found:
            return sorted(found, key=lambda p: p.exact is None)
    return []


def _vendored(start: Path, library: str) -> tuple[str, str] | None:
    d = adapters.get(library)
    for directory in _repository_dirs(start):
        found = d.vendored_version(directory)
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
    releases = adapters.get(library).releases()
    try:
        specifier = SpecifierSet(_wildcard(spec))
    except InvalidSpecifier:
        return None
    allowed = tuple(r for r in releases if specifier.contains(r, prereleases=True))
    if not allowed:
        return None
    return VersionChoice(library, allowed[-1], source, where, spec, allowed)


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
            return VersionChoice(library, text, "given", "--library-version",
                                 snapshot=_snapshot(text))  # fmt: skip
        except InvalidVersion:
            found = _from_spec(library, text, "--library-version", "given")
            if found is None:
                raise ValueError(
                    f"--library-version {library}={text}: allows none of the recorded "
                    f"{library} releases ({d.releases()[0]} ... {d.releases()[-1]})"
                ) from None
            return found
    start = Path(path).resolve().parent if path is not None else None
    if start is not None:
        for pin in find_pin(start, library):
            if pin.exact is not None:
                return VersionChoice(library, pin.exact, "pin", pin.where,
                                     snapshot=_snapshot(pin.exact))  # fmt: skip
            found = _from_spec(library, pin.spec, pin.where, "pin")
            if found is not None:
                return found
            notes.append(f"{pin.where}: {library}{pin.spec} allows no recorded release")
        vendored = _vendored(start, library)
        if vendored is not None:
            version, where = vendored
            where = shown_path(where)
            try:
                Version(version)
                return VersionChoice(library, version, "vendored", where, snapshot=True,
                                     notes=tuple(notes))  # fmt: skip
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
