"""Requirements on a library in dependency and lock files, read the way the tools that write them
do (for :mod:`.versions`, which picks the version a launch is read as).

Each format follows its own standard, through :mod:`packaging` where one applies:

* ``requirements*.txt``: pip's requirement-file syntax: ``\\``-continued lines, comments (``#``
  at the start of a line or after whitespace), per-requirement options (``--hash=...``, as
  pip-compile writes them), ``-r``/``--requirement`` and ``-c``/``--constraint`` includes
  (followed, relative to the including file, at most :data:`MAX_INCLUDE_DEPTH` deep, each file
  once), other options ignored, ``-e`` editable and URL requirements noted (their version is
  not in the file), ``${VAR}`` noted (pip expands it from the environment, the audit does not);
* PEP 508 requirements with environment markers (``trl==0.18; python_version >= "3.8"``); a pin
  whose marker does not hold in this interpreter is kept behind the ones that do, and said;
* ``pyproject.toml``: PEP 621 ``[project] dependencies`` and ``optional-dependencies``, PEP 735
  ``[dependency-groups]``, and Poetry's ``[tool.poetry.*dependencies]`` in Poetry's own
  constraint grammar (``^``, ``~``, ``*``, ``1.2.*``, comparison ranges, ``||``), converted to
  PEP 440 (:func:`poetry_spec`);
* ``setup.py``: only the requirement arguments of its ``setup(...)`` call (``install_requires``,
  ``extras_require``, ``setup_requires``, ``tests_require``) as literals or module-level names
  bound to literals, never any other string constant; parsed with :mod:`ast`, never run;
* ``setup.cfg``: ``[options]`` ``install_requires`` (and ``setup_requires``,
  ``tests_require``) and every ``[options.extras_require]`` key, with no interpolation (a ``%``
  in a URL is text, as setuptools reads it);
* ``environment.yml``: conda specs (``trl=0.18.0``, ``trl=0.18.0=py_0``, ``conda-forge::trl``)
  and the ``pip:`` list;
* ``uv.lock``/``poetry.lock``: each ``[[package]]``'s resolved version.

What could not be used is a note, never silence: an invalid requirement or version
(``trl==banana``), a Poetry constraint that does not parse (``trl = "~"``), a file over its size
cap or not readable as text, a TOML file nested or dotted too deeply to read. Every file goes
through :func:`kl_patches.adapters.files.read_file` (regular files only, a size cap, UTF-8 with
or without a byte-order mark, UTF-16 with one). Line numbers come from one pass over the text,
so the cost is linear in the file's size however many pins it holds.
"""

from __future__ import annotations

import ast
import bisect
import configparser
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from kl_patches.adapters.files import MAX_INPUT_BYTES, InputError, read_file

__all__ = [
    "MAX_INCLUDE_DEPTH",
    "PIN_FILES",
    "Pin",
    "PinScan",
    "allowed",
    "poetry_spec",
    "scan",
    "shown_path",
]

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

MAX_BYTES: dict[str, int] = {
    "uv.lock": MAX_INPUT_BYTES,
    "poetry.lock": MAX_INPUT_BYTES,
    "setup.py": 256 * 1024,
}
"""Size cap per file name (lock files of large projects run to megabytes; a ``setup.py`` of a
few hundred kilobytes is already far beyond any real one); other files: :data:`MAX_DEFAULT`."""
MAX_DEFAULT = 1024 * 1024
"""Size cap of requirement files, ``setup.cfg``, ``pyproject.toml`` and environment files."""
MAX_INCLUDE_DEPTH = 8
"""``-r``/``-c`` includes followed at most this deep."""
MAX_TOML_KEY_PARTS = 64
"""Parts of one dotted TOML key at most (Python's TOML reader takes quadratic time in them)."""
MAX_SETUP_NODES = 200_000
"""Syntax-tree nodes of a ``setup.py`` looked at, at most."""
MAX_PINS = 10_000
"""Requirements on the library kept per file (a lock file listing it more often is hostile)."""


@dataclass(frozen=True)
class Pin:
    """One requirement on a library found in a file."""

    spec: str
    """The specifier, PEP 440 (``==0.18.0``, ``>=0.18,<=0.24``; ``||`` joins the alternatives
    of a Poetry constraint); empty when the requirement names no version."""
    where: str
    """``path:line`` of the requirement."""
    exact: str | None
    """The version when the pin names exactly one (``==V``, ``===V``, a lock file)."""
    written: str = ""
    """The requirement as written (for messages)."""
    marker: str = ""
    """Its PEP 508 environment marker, empty when it has none."""
    applies: bool = True
    """False when the marker does not hold in this interpreter's environment."""
    group: str = ""
    """The top-level file the pin was read through (``-r`` includes share their includer's)."""


@dataclass
class PinScan:
    """The pins on one library in one file (with the files it includes), and what could not be
    used."""

    pins: list[Pin] = field(default_factory=list)
    """The requirements on the library, in file order."""
    notes: list[str] = field(default_factory=list)
    """What could not be read or used, one line each, naming the file and line."""
    full: bool = False
    """True once :data:`MAX_PINS` pins were kept (the rest are ignored, said once)."""


def shown_path(path: Path | str) -> str:
    """``path`` relative to the working directory when it is inside it, else as it is (what
    the report shows for a pin or a vendored version file)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


# ----------------------------------------------------------------------------- line numbers
class _Lines:
    """Line numbers of text offsets, and successive searches, in linear time overall."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0, *(m.end() for m in re.finditer("\n", text))]
        self.cursor: dict[str, int] = {}

    def line(self, offset: int) -> int:
        """1-based line of ``offset``."""
        return bisect.bisect_right(self.starts, offset)

    def find(self, needle: str) -> int:
        """Line of the next occurrence of ``needle`` after the previous one found (1 when it
        does not occur again)."""
        start = self.cursor.get(needle, 0)
        found = self.text.find(needle, start) if needle else -1
        if found < 0:
            found = self.text.find(needle) if needle and start else -1
            if found < 0:
                return 1
        self.cursor[needle] = found + len(needle)
        return self.line(found)


# ----------------------------------------------------------------------------- requirements
def _same(a: str, b: str) -> bool:
    return canonicalize_name(a) == canonicalize_name(b)


_NAME_AT_START = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._\-]*)")


def _marker_holds(marker: Marker | None) -> bool:
    """True when ``marker`` holds here (or cannot be decided: an ``extra``, an unknown name)."""
    if marker is None or "extra" in str(marker):
        return True
    try:
        return bool(marker.evaluate())
    except (UndefinedComparison, UndefinedEnvironmentName, InvalidMarker, ValueError):
        return True


def _exact(spec: str) -> str | None:
    m = re.fullmatch(r"===?\s*([0-9][0-9A-Za-z.+!\-]*)", spec.strip())
    return m.group(1) if m else None


def _invalid_versions(spec: SpecifierSet) -> list[str]:
    """Versions in ``spec`` that are not PEP 440 (older ``packaging`` accepted legacy ones)."""
    bad = []
    for item in spec:
        text = item.version.rstrip("*").rstrip(".")
        try:
            Version(text)
        except InvalidVersion:
            bad.append(item.version)
    return bad


def requirement(text: str, name: str, where: str, scan: PinScan, group: str = "") -> None:
    """Add the pin of one PEP 508 requirement string on ``name`` to ``scan`` (nothing for a
    requirement on another package; a note for an invalid one on ``name``)."""
    text = text.strip()
    if not text:
        return
    head = _NAME_AT_START.match(text)
    if head is None or not _same(head.group(1), name):
        return
    try:
        req = Requirement(text)
    except InvalidRequirement as err:
        reason = str(err).splitlines()[0]
        scan.notes.append(
            f"{where}: {text!r} is not a valid requirement ({reason}); not used as a pin"
        )
        return
    if not _same(req.name, name):
        return
    if req.url:
        scan.notes.append(
            f"{where}: {name} is installed from {req.url}; the file does not say its version"
        )
        return
    bad = _invalid_versions(req.specifier)
    if bad:
        scan.notes.append(
            f"{where}: {text!r} names {', '.join(map(repr, bad))}, which is not a version "
            "(PEP 440); not used as a pin"
        )
        return
    spec = str(req.specifier)
    marker = str(req.marker) if req.marker is not None else ""
    _add(scan, Pin(spec, where, _exact(spec), text, marker, _marker_holds(req.marker), group))


def _add(scan: PinScan, pin: Pin) -> None:
    if len(scan.pins) < MAX_PINS:
        scan.pins.append(pin)
    elif not scan.full:
        scan.full = True
        scan.notes.append(f"{pin.where}: more than {MAX_PINS} requirements on it; the rest ignored")


# ----------------------------------------------------------------------------- requirement files
def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, text) of each line after joining ``\\``-continuations and dropping
    comments, as pip reads a requirements file."""
    buffer: list[str] = []
    first = 0
    for number, line in enumerate(text.splitlines(), 1):
        if not buffer:
            first = number
        line = "" if re.match(r"^\s*#", line) else re.sub(r"(^|\s+)#.*$", "", line)
        if line.endswith("\\"):
            buffer.append(line[:-1])
            continue
        buffer.append(line)
        yield first, " ".join(buffer).strip()
        buffer = []
    if buffer:
        yield first, " ".join(buffer).strip()


def _split_options(line: str) -> tuple[str, str]:
    """pip's split of a requirement line: the words before the first one starting with ``-``
    are the requirement, the rest its options (``--hash=...``)."""
    words = line.split(" ")
    for i, word in enumerate(words):
        if word.startswith("-"):
            return " ".join(words[:i]).strip(), " ".join(words[i:]).strip()
    return line, ""


_INCLUDE = re.compile(r"^(-r|--requirement|-c|--constraint)(?:\s*=\s*|\s+|(?=\S))(\S+)\s*$")
_EDITABLE = re.compile(r"^(-e|--editable)(?:\s*=\s*|\s+)(\S+)")


def _requirements_file(
    path: Path, name: str, scan: PinScan, group: str, seen: set[Path], depth: int
) -> None:
    text = _read(path, scan)
    if text is None:
        return
    shown = shown_path(path)
    for number, line in _logical_lines(text):
        if not line:
            continue
        where = f"{shown}:{number}"
        include = _INCLUDE.match(line)
        if include:
            target = (path.parent / include.group(2)).resolve()
            if depth >= MAX_INCLUDE_DEPTH:
                scan.notes.append(
                    f"{where}: includes nested more than {MAX_INCLUDE_DEPTH} deep; "
                    f"{include.group(2)} not read"
                )
            elif target not in seen:
                seen.add(target)
                _requirements_file(target, name, scan, group, seen, depth + 1)
            continue
        editable = _EDITABLE.match(line)
        if editable:
            if re.search(rf"(egg=|/){re.escape(name)}\b", editable.group(2), re.I):
                scan.notes.append(
                    f"{where}: {name} is installed editable from {editable.group(2)}; the file "
                    "does not say its version"
                )
            continue
        if line.startswith("-"):
            continue  # --index-url, -f, --pre, ...: not a requirement
        req, _ = _split_options(line)
        if "${" in req and re.match(rf"\s*{re.escape(name)}\b", req, re.I):
            scan.notes.append(
                f"{where}: {req!r} uses an environment variable, which pip expands and the "
                "audit does not read; not used as a pin"
            )
            continue
        if re.search(rf"#egg={re.escape(name)}\b", req, re.I) or req.startswith(
            ("git+", "http:", "https:", "file:")
        ):
            if re.search(rf"(egg=|/){re.escape(name)}\b", req, re.I):
                scan.notes.append(
                    f"{where}: {name} is installed from a URL; the file does not say its version"
                )
            continue
        requirement(req, name, where, scan, group)


# ----------------------------------------------------------------------------- TOML
try:  # Python 3.11+; on 3.10 TOML files (pyproject.toml, uv.lock, poetry.lock) are skipped
    import tomllib as _tomllib
except ImportError:  # pragma: no cover - Python 3.10
    _tomllib = None  # type: ignore[assignment]

_KEY_PART = r"""(?:[A-Za-z0-9_\-]+|"[^"\n]*"|'[^'\n]*')"""
_DOTTED = re.compile(rf"{_KEY_PART}(?:[ \t]*\.[ \t]*{_KEY_PART})+")


def _toml(text: str, shown: str, scan: PinScan) -> dict[str, Any] | None:
    """A TOML document, or None with a note: not TOML, a dotted key of more than
    :data:`MAX_TOML_KEY_PARTS` parts, nesting too deep (or no TOML reader: Python 3.10)."""
    if _tomllib is None:
        scan.notes.append(f"{shown}: Python 3.10 has no TOML reader; its pins are not read")
        return None
    for m in _DOTTED.finditer(text):
        parts = m.group(0).count(".") + 1
        if parts > MAX_TOML_KEY_PARTS:
            line = text.count("\n", 0, m.start()) + 1
            scan.notes.append(
                f"{shown}:{line}: a dotted key of {parts} parts (more than "
                f"{MAX_TOML_KEY_PARTS}); the file's pins are not read"
            )
            return None
    try:
        return _tomllib.loads(text)
    except _tomllib.TOMLDecodeError as err:
        scan.notes.append(f"{shown}: not valid TOML ({err}); its pins are not read")
    except (RecursionError, MemoryError):
        scan.notes.append(f"{shown}: TOML nested too deeply to read; its pins are not read")
    return None


def _pyproject_requirements(doc: dict[str, Any]) -> list[str]:
    out: list[str] = []

    def strings(value: Any) -> list[str]:
        return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

    project = doc.get("project")
    if isinstance(project, dict):
        out += strings(project.get("dependencies"))
        extras = project.get("optional-dependencies")
        if isinstance(extras, dict):
            for deps in extras.values():
                out += strings(deps)
    groups = doc.get("dependency-groups")
    if isinstance(groups, dict):
        for deps in groups.values():
            out += strings(deps)
    tool = doc.get("tool")
    uv = tool.get("uv") if isinstance(tool, dict) else None
    if isinstance(uv, dict):
        out += strings(uv.get("dev-dependencies"))
    return out


def _poetry_groups(doc: dict[str, Any]) -> list[dict[str, Any]]:
    tool = doc.get("tool")
    poetry = tool.get("poetry") if isinstance(tool, dict) else None
    if not isinstance(poetry, dict):
        return []
    out = [poetry.get("dependencies"), poetry.get("dev-dependencies")]
    groups = poetry.get("group")
    if isinstance(groups, dict):
        out += [g.get("dependencies") for g in groups.values() if isinstance(g, dict)]
    return [g for g in out if isinstance(g, dict)]


_POETRY_ONE = re.compile(r"(\^|~=|~|===|==|!=|>=|<=|>|<|=)?\s*(\S+)")


def _release(text: str) -> list[int]:
    """The numeric release parts of a version (``1.2.3rc1`` -> [1, 2, 3]); ValueError if none."""
    m = re.match(r"v?(\d+(?:\.\d+)*)", text.strip())
    if m is None:
        raise ValueError(text)
    return [int(p) for p in m.group(1).split(".")]


def _poetry_one(item: str) -> list[str]:
    """One Poetry constraint as PEP 440 specifiers; ValueError when it does not parse."""
    item = item.strip()
    if item in ("*", ""):
        return []
    m = _POETRY_ONE.fullmatch(item)
    if m is None:
        raise ValueError(item)
    op, version = m.group(1) or "", m.group(2)
    if version in ("*", "x", "X"):
        if op:
            raise ValueError(item)
        return []
    if re.fullmatch(r"\d+(\.\d+)*\.[*xX]", version):
        if op not in ("", "==", "="):
            raise ValueError(item)
        return [f"=={version[:-1]}*"]
    Version(version)  # InvalidVersion (a ValueError) for anything else
    parts = _release(version)
    if op == "^":
        first = next((i for i, p in enumerate(parts) if p), len(parts) - 1)
        upper = parts[: first + 1]
        upper[-1] += 1
        return [f">={version}", f"<{'.'.join(map(str, upper))}"]
    if op == "~":
        upper = parts[:2] if len(parts) > 1 else parts[:1]
        upper[-1] += 1
        return [f">={version}", f"<{'.'.join(map(str, upper))}"]
    if op in ("", "="):
        return [f"=={version}"]
    return [f"{op}{version}"]


def poetry_spec(raw: str) -> str:
    """Poetry's constraint grammar as PEP 440 (``^0.18.0`` -> ``>=0.18.0,<0.19``; ``~0.18``
    -> ``>=0.18,<0.19``; ``*`` -> any; ``>=0.18,<0.20`` or ``>=0.18 <0.20``; alternatives
    joined by ``||``). ValueError naming the part that does not parse (``~`` alone)."""
    alternatives = []
    for alternative in raw.split("||"):
        text = alternative.strip()
        pieces = [p for p in re.split(r"\s*,\s*|\s+(?=[\^~=!<>])", text) if p.strip()]
        specs: list[str] = []
        for piece in pieces or [""]:
            try:
                specs += _poetry_one(piece)
            except (ValueError, InvalidVersion):
                raise ValueError(
                    f"{piece.strip() or raw!r} is not a Poetry version constraint"
                ) from None
        alternatives.append(",".join(specs))
    if len(alternatives) > 1 and "" in alternatives:
        return ""
    return "||".join(alternatives)


def allowed(spec: str, releases: tuple[str, ...] | list[str]) -> tuple[str, ...] | None:
    """The ``releases`` a specifier allows, in their order (``||`` alternatives united; a
    ``0.5.x`` / ``0.5.*`` wildcard read as ``==0.5.*``); None when it is not a specifier."""
    sets = []
    for part in spec.split("||"):
        text = part.strip()
        if re.fullmatch(r"\d+(\.\d+)*\.[x*]", text):
            text = "==" + text[:-1] + "*"
        try:
            sets.append(SpecifierSet(text))
        except InvalidSpecifier:
            return None
    return tuple(r for r in releases if any(s.contains(r, prereleases=True) for s in sets))


def _pyproject(path: Path, text: str, name: str, scan: PinScan) -> None:
    shown = shown_path(path)
    doc = _toml(text, shown, scan)
    if doc is None:
        return
    lines = _Lines(text)
    for item in _pyproject_requirements(doc):
        head = _NAME_AT_START.match(item)
        if head is None or not _same(head.group(1), name):
            continue
        requirement(item, name, f"{shown}:{lines.find(item)}", scan, str(path))
    for group in _poetry_groups(doc):
        for key, value in group.items():
            if not _same(str(key), name):
                continue
            where = f"{shown}:{lines.find(str(key))}"
            entries = value if isinstance(value, list) else [value]
            for entry in entries:
                raw = entry.get("version") if isinstance(entry, dict) else entry
                if not isinstance(raw, str):
                    if isinstance(entry, dict) and any(k in entry for k in ("git", "path", "url")):
                        scan.notes.append(
                            f"{where}: {name} comes from a git/path/url source; the file does "
                            "not say its version"
                        )
                    continue
                try:
                    spec = poetry_spec(raw)
                except ValueError as err:
                    scan.notes.append(f"{where}: {name} = {raw!r}: {err}; not used as a pin")
                    continue
                marker = ""
                if isinstance(entry, dict) and isinstance(entry.get("python"), str):
                    marker = f"python {entry['python']}"
                written = f"{name} = {raw!r}"
                _add(scan, Pin(spec, where, _exact(spec), written, marker, True, str(path)))


def _lock(path: Path, text: str, name: str, scan: PinScan) -> None:
    shown = shown_path(path)
    doc = _toml(text, shown, scan)
    if doc is None:
        return
    lines = _Lines(text)
    packages = doc.get("package")
    for package in packages if isinstance(packages, list) else []:
        if scan.full:
            break
        if not isinstance(package, dict) or not _same(str(package.get("name", "")), name):
            continue
        version = package.get("version")
        needle = 'name = "' + str(package.get("name")) + '"'
        where = f"{shown}:{lines.find(needle)}"
        if not isinstance(version, str):
            continue
        try:
            Version(version)
        except InvalidVersion:
            scan.notes.append(f"{where}: {name} {version!r} is not a version; not used as a pin")
            continue
        _add(scan, Pin(f"=={version}", where, version, f"{name} {version}", group=str(path)))


# ----------------------------------------------------------------------------- setup.py / .cfg
_SETUP_KEYWORDS = ("install_requires", "extras_require", "setup_requires", "tests_require")


class _SetupReader:
    """The requirement strings of a ``setup(...)`` call: literals, names bound to literals at
    module level, ``+`` of those, dict values (``extras_require``)."""

    def __init__(self, tree: ast.Module) -> None:
        self.names: dict[str, ast.expr] = {}
        self.nodes = 0
        self.calls: list[ast.Call] = []
        self._statements(tree.body)

    def _statements(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.nodes += 1
            if self.nodes > MAX_SETUP_NODES:
                raise ValueError(f"more than {MAX_SETUP_NODES} statements")
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
                if isinstance(target, ast.Name):
                    self.names[target.id] = stmt.value
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                if stmt.value is not None:
                    self.names[stmt.target.id] = stmt.value
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                self._call(stmt.value)
            elif isinstance(stmt, ast.If):
                self._statements(stmt.body)
                self._statements(stmt.orelse)
            elif isinstance(stmt, (ast.FunctionDef, ast.With, ast.Try)):
                self._statements(stmt.body)
            if isinstance(stmt, (ast.Assign, ast.Return)) and isinstance(stmt.value, ast.Call):
                self._call(stmt.value)

    def _call(self, call: ast.Call) -> None:
        func = call.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if name == "setup":
            self.calls.append(call)

    def strings(self, node: ast.expr, depth: int = 0) -> Iterator[ast.Constant]:
        """The string constants a requirement argument evaluates to."""
        if depth > 16:
            return
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            for elt in node.elts:
                yield from self.strings(elt, depth + 1)
        elif isinstance(node, ast.Dict):
            for value in node.values:
                yield from self.strings(value, depth + 1)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            yield from self.strings(node.left, depth + 1)
            yield from self.strings(node.right, depth + 1)
        elif isinstance(node, ast.Name) and node.id in self.names:
            yield from self.strings(self.names[node.id], depth + 1)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("dict", "list"):
            for arg in node.args:
                yield from self.strings(arg, depth + 1)
            for kw in node.keywords:
                yield from self.strings(kw.value, depth + 1)

    def requirements(self) -> Iterator[ast.Constant]:
        """Every string of the requirement keywords of every ``setup(...)`` call."""
        for call in self.calls:
            for kw in call.keywords:
                if kw.arg in _SETUP_KEYWORDS:
                    yield from self.strings(kw.value)
                elif kw.arg is None:  # setup(**kwargs)
                    yield from self._from_kwargs(kw.value)

    def _from_kwargs(self, node: ast.expr) -> Iterator[ast.Constant]:
        if isinstance(node, ast.Name) and node.id in self.names:
            node = self.names[node.id]
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value in _SETUP_KEYWORDS:
                    yield from self.strings(value)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "dict":
            for kw in node.keywords:
                if kw.arg in _SETUP_KEYWORDS:
                    yield from self.strings(kw.value)


def _setup_py(path: Path, text: str, name: str, scan: PinScan) -> None:
    shown = shown_path(path)
    try:
        tree = ast.parse(text)
    except SyntaxError as err:
        scan.notes.append(f"{shown}: not valid Python (line {err.lineno}); its pins are not read")
        return
    except (ValueError, RecursionError, MemoryError):
        scan.notes.append(f"{shown}: nested too deeply to parse; its pins are not read")
        return
    try:
        reader = _SetupReader(tree)
        found = list(reader.requirements())
    except (ValueError, RecursionError) as err:
        scan.notes.append(f"{shown}: {err}; its pins are not read")
        return
    for node in found:
        requirement(str(node.value), name, f"{shown}:{node.lineno}", scan, str(path))


_CFG_KEYS = ("install_requires", "setup_requires", "tests_require")


def _setup_cfg(path: Path, text: str, name: str, scan: PinScan) -> None:
    shown = shown_path(path)
    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read_string(text)
    except configparser.Error as err:
        first = str(err).splitlines()[0]
        scan.notes.append(f"{shown}: not a valid setup.cfg ({first}); its pins are not read")
        return
    lines = _Lines(text)
    items: list[str] = []
    if parser.has_section("options"):
        for key in _CFG_KEYS:
            items += parser.get("options", key, fallback="").splitlines()
    if parser.has_section("options.extras_require"):
        for key in parser.options("options.extras_require"):
            items += parser.get("options.extras_require", key, fallback="").splitlines()
    for item in items:
        item = re.sub(r"(^|\s+)[#;].*$", "", item).strip()
        head = _NAME_AT_START.match(item)
        if not item or head is None or not _same(head.group(1), name):
            continue
        requirement(item, name, f"{shown}:{lines.find(item)}", scan, str(path))


# ----------------------------------------------------------------------------- conda
def _conda(item: str, name: str, where: str, scan: PinScan, group: str) -> bool:
    """A conda spec on ``name`` (``trl=0.18.0``, ``trl==0.18``, ``trl>=0.18``,
    ``trl=0.18.0=py_0``, ``conda-forge::trl 0.18.0``); False when it is about another."""
    text = item.split("::", 1)[-1].strip()
    m = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*(.*)", text)
    if m is None or not _same(m.group(1), name):
        return False
    rest = m.group(2).strip()
    if not rest:
        return True
    m2 = re.fullmatch(r"(==|=|>=|<=|>|<|!=|~=)?\s*([^\s=]+)(?:[=\s]+\S+)?", rest)
    if m2 is None:
        scan.notes.append(f"{where}: {item!r} is not a conda spec the audit reads")
        return True
    op, version = m2.group(1) or "=", m2.group(2)
    if op == "=":  # conda's fuzzy match: 0.18 is 0.18.*; a full release is read as exact
        spec = f"=={version}.*" if re.fullmatch(r"\d+(\.\d+)?", version) else f"=={version}"
    else:
        spec = f"{op}{version}"
    requirement(f"{name}{spec}", name, where, scan, group)
    return True


def _environment(path: Path, text: str, name: str, scan: PinScan, seen: set[Path]) -> None:
    shown = shown_path(path)
    for number, line in enumerate(text.splitlines(), 1):
        m = re.match(r"\s*-\s+(.*?)\s*(?:#.*)?$", line)
        if m is None:
            continue
        item = m.group(1).strip().strip("'\"").strip()
        where = f"{shown}:{number}"
        include = _INCLUDE.match(item)
        if include:
            target = (path.parent / include.group(2)).resolve()
            if target not in seen:
                seen.add(target)
                _requirements_file(target, name, scan, str(path), seen, 1)
            continue
        head = _NAME_AT_START.match(item.split("::", 1)[-1])
        if head is None or not _same(head.group(1), name):
            continue
        try:
            Requirement(item)
            requirement(item, name, where, scan, str(path))
        except InvalidRequirement:
            _conda(item, name, where, scan, str(path))


# ----------------------------------------------------------------------------- dispatch
def _read(path: Path, scan: PinScan) -> str | None:
    """A dependency file's text through the guarded reader; None with a note when it cannot
    be read (over its size cap, not text, a FIFO, missing)."""
    limit = MAX_BYTES.get(path.name, MAX_DEFAULT)
    try:
        found = read_file(path, limit)
    except InputError as err:
        scan.notes.append(
            f"{shown_path(path)}: {_after_path(str(err), path)}; its pins are not read"
        )
        return None
    if found.note:
        scan.notes.append(found.note.replace(str(path), shown_path(path), 1))
    return found.text


def _after_path(message: str, path: Path) -> str:
    prefix = f"{path}: "
    return message[len(prefix) :] if message.startswith(prefix) else message


_READERS: dict[str, Callable[[Path, str, str, PinScan], None]] = {
    "uv.lock": _lock,
    "poetry.lock": _lock,
    "setup.py": _setup_py,
    "setup.cfg": _setup_cfg,
    "pyproject.toml": _pyproject,
}


def scan(path: Path, name: str) -> PinScan:
    """Every requirement on ``name`` in one dependency or lock file (and the files a
    requirements file includes), with notes for what could not be used."""
    out = PinScan()
    base = path.name
    if base.startswith("requirements") and base.endswith(".txt"):
        _requirements_file(path, name, out, str(path), {path.resolve()}, 0)
        return out
    text = _read(path, out)
    if text is None:
        return out
    if base in ("environment.yml", "environment.yaml"):
        _environment(path, text, name, out, {path.resolve()})
    elif base in _READERS:
        _READERS[base](path, text, name, out)
    return out
