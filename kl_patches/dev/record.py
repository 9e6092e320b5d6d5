"""Record a release into the adapters' data files, and check the files against the releases.

:func:`extract` reads one release as its :class:`~kl_patches.adapters.releases.RecordSpec`
says; :func:`render` writes the document in a fixed layout (one name per line, sorted, so a
new release's diff against the previous file reads as the list of what changed);
:func:`record` writes ``<data folder>/<release>.json`` in the source tree; :func:`check`
re-extracts and returns the differences from the committed file, as readable lines.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from packaging.version import Version

import kl_patches
from kl_patches.adapters import REGISTRY
from kl_patches.adapters.releases import FORMAT, NameSetSpec, RecordSpec, parse

from . import extract as ex
from .source import Release, installed_version, open_release

_PACKAGE_ROOT = Path(str(kl_patches.__file__)).parent


def _recording_module(library: str) -> Any:
    """``kl_patches/adapters/<library>/recording.py`` loaded from its file, so that the adapter
    package (whose modules load the data) is not imported: a library whose data are missing or
    stale can still be recorded."""
    path = _PACKAGE_ROOT / "adapters" / library / "recording.py"
    spec = importlib.util.spec_from_file_location(f"_kl_patches_recording_{library}", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def specs() -> dict[str, RecordSpec]:
    """Every recordable library (``trl``, ``transformers``, ``verl``, ``openrlhf``) -> its spec,
    from each adapter's ``recording`` module."""
    out: dict[str, RecordSpec] = {}
    for library in REGISTRY:
        for spec in _recording_module(library).SPECS:
            out[spec.library] = spec
    return out


def spec_of(library: str) -> RecordSpec:
    """The spec of ``library``; ValueError naming the recordable libraries otherwise."""
    known = specs()
    if library not in known:
        raise ValueError(f"cannot record {library!r}; choose one of {sorted(known)}")
    return known[library]


def data_folder(spec: RecordSpec) -> Path:
    """The data folder in this source tree (where :func:`record` writes)."""
    relative = spec.data_package.split(".")[1:]  # below kl_patches/
    return _PACKAGE_ROOT.joinpath(*relative, spec.data_folder)


def recorded_releases(spec: RecordSpec) -> list[str]:
    """The releases with a data file, ascending (PEP 440)."""
    folder = data_folder(spec)
    found = [p.stem for p in folder.glob("*.json")] if folder.is_dir() else []
    return sorted(found, key=Version)


# --- extraction ---------------------------------------------------------------------------------


def _name_set(package: ex.Package, release: Release, spec: NameSetSpec) -> dict[str, Any] | None:
    if spec.kind == "dataclass":
        merged: dict[str, Any] = {}
        found = False
        for class_name, files in spec.sources:
            hit = ex.find_class(package, class_name, files)
            if hit is None:
                continue
            found = True
            module, node = hit
            for base in node.bases:
                name = ex.ast.unparse(base)
                if name in spec.bases:
                    base_hit = ex.find_class(package, name)
                    if base_hit is not None:
                        merged.update(ex.dataclass_fields(*base_hit))
            merged.update(ex.dataclass_fields(module, node))
        return merged if found else None
    if spec.kind == "argparse":
        ((_, (path,)),) = spec.sources
        cli = package.module(path)
        return ex.argparse_options(cli) if cli is not None else None
    if spec.kind == "hydra":
        ((config, (folder,)),) = spec.sources
        leaves = ex.hydra_leaves(release.path(folder), config)
        if leaves is None:
            return None
        keys: dict[str, Any] = {}
        for path, value in leaves.items():
            parts = path.split(".")
            for i in range(1, len(parts)):
                keys.setdefault(".".join(parts[:i]), {})
            keys[path] = {"default": value}
        return keys
    raise ValueError(f"unknown name-set kind {spec.kind!r}; choose dataclass, argparse, hydra")


def extract(spec: RecordSpec, release: Release) -> dict[str, Any]:
    """The data document of ``release`` (what :func:`render` writes)."""
    package = ex.Package(release, spec.package)
    return {
        "format": FORMAT,
        "library": spec.library,
        "release": release.version,
        "name_sets": {s.name: _name_set(package, release, s) for s in spec.name_sets},
        "symbols": {s.qualname: ex.symbol(package, s.qualname, s.modules) for s in spec.symbols},
    }


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def render(document: dict[str, Any]) -> str:
    """The document as text: sections indented, one name or symbol field per line, sorted."""
    lines = ["{"]
    lines.append(f'  "format": {_dump(document["format"])},')
    lines.append(f'  "library": {_dump(document["library"])},')
    lines.append(f'  "release": {_dump(document["release"])},')
    lines.append('  "name_sets": {')
    sets = list(document["name_sets"].items())
    for i, (name, entries) in enumerate(sets):
        comma = "," if i < len(sets) - 1 else ""
        if entries is None or not entries:
            lines.append(f"    {_dump(name)}: {_dump(entries)}{comma}")
            continue
        lines.append(f"    {_dump(name)}: {{")
        keys = sorted(entries)
        for j, key in enumerate(keys):
            inner = "," if j < len(keys) - 1 else ""
            lines.append(f"      {_dump(key)}: {_dump(entries[key])}{inner}")
        lines.append(f"    }}{comma}")
    lines.append("  },")
    symbols = list(document["symbols"].items())
    if not symbols:
        lines.append('  "symbols": {}')
    else:
        lines.append('  "symbols": {')
        for i, (name, record) in enumerate(symbols):
            comma = "," if i < len(symbols) - 1 else ""
            if record is None:
                lines.append(f"    {_dump(name)}: null{comma}")
                continue
            lines.append(f"    {_dump(name)}: {{")
            fields = list(record.items())
            for j, (key, value) in enumerate(fields):
                inner = "," if j < len(fields) - 1 else ""
                lines.append(f"      {_dump(key)}: {_dump(value)}{inner}")
            lines.append(f"    }}{comma}")
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


# --- record and check ---------------------------------------------------------------------------


def _open(spec: RecordSpec, version: str, *, installed: bool, download: bool) -> Release:
    return open_release(
        spec.distribution, spec.package, version, installed=installed, download=download
    )


def write(spec: RecordSpec, release: Release, folder: Path | None = None) -> Path:
    """Extract ``release`` and write ``<folder>/<release>.json`` (default folder: the spec's
    data folder in this source tree); returns the file's path."""
    text = render(extract(spec, release))
    parse(text)  # the loader must read what was written
    target = data_folder(spec) if folder is None else folder
    target.mkdir(parents=True, exist_ok=True)
    path = target / f"{release.version}.json"
    path.write_text(text, encoding="utf-8")
    return path


def compare(spec: RecordSpec, release: Release, folder: Path | None = None) -> list[str]:
    """The differences between ``release`` re-extracted and its data file (a missing file is
    one difference)."""
    path = (data_folder(spec) if folder is None else folder) / f"{release.version}.json"
    if not path.is_file():
        return [
            f"{spec.library} {release.version}: not recorded (python -m kl_patches.dev record "
            f"{spec.library} {release.version})"
        ]
    fresh = json.loads(render(extract(spec, release)))
    return diff(json.loads(path.read_text(encoding="utf-8")), fresh)


def record(library: str, version: str, *, installed: bool = True, download: bool = True) -> Path:
    """Extract ``library==version`` and write its data file; returns the file's path."""
    spec = spec_of(library)
    return write(spec, _open(spec, version, installed=installed, download=download))


def _entry_diff(where: str, old: Any, new: Any) -> list[str]:
    out = []
    keys = list(dict.fromkeys([*(old or {}), *(new or {})]))
    for key in keys:
        a, b = (old or {}).get(key, "<absent>"), (new or {}).get(key, "<absent>")
        if a != b:
            out.append(f"{where}: {key} {_dump(a)} -> {_dump(b)}")
    return out


def diff(recorded: dict[str, Any], fresh: dict[str, Any]) -> list[str]:
    """Readable lines for every difference (recorded -> freshly extracted); empty when equal."""
    head = f"{fresh['library']} {fresh['release']}"
    out: list[str] = []
    for key in ("format", "library", "release"):
        if recorded.get(key) != fresh.get(key):
            out.append(f"{head}: {key} {recorded.get(key)!r} -> {fresh.get(key)!r}")
    for section in ("name_sets", "symbols"):
        old_all, new_all = recorded.get(section, {}), fresh.get(section, {})
        for name in dict.fromkeys([*old_all, *new_all]):
            where = f"{head}: {name}"
            if name not in old_all or name not in new_all:
                state = "not recorded" if name not in old_all else "no longer read"
                out.append(f"{where}: {state}")
                continue
            old, new = old_all[name], new_all[name]
            if (old is None) != (new is None):
                out.append(f"{where}: {'absent' if old is None else 'present'} -> "
                           f"{'absent' if new is None else 'present'}")  # fmt: skip
                continue
            if section == "symbols":
                out += _entry_diff(where, old, new)
                continue
            old, new = old or {}, new or {}
            for added in sorted(set(new) - set(old)):
                out.append(f"{where}: + {added} {_dump(new[added])}")
            for removed in sorted(set(old) - set(new)):
                out.append(f"{where}: - {removed}")
            for common in sorted(set(old) & set(new)):
                out += _entry_diff(f"{where}.{common}", old[common], new[common])
    return out


def check(
    library: str,
    versions: Iterable[str] | None = None,
    *,
    installed: bool = True,
    download: bool = True,
) -> list[str]:
    """Re-extract each release (default: every recorded one) and diff it with its data file.

    Returns the difference lines (empty: the data are exactly what the releases ship). A
    release with no data file is a difference too (``record`` it)."""
    spec = spec_of(library)
    problems: list[str] = []
    for version in list(versions) if versions is not None else recorded_releases(spec):
        release = _open(spec, version, installed=installed, download=download)
        problems += compare(spec, release)
    return problems


def installed(library: str) -> str:
    """The installed version of ``library``; RuntimeError when it is not installed."""
    version = installed_version(spec_of(library).distribution)
    if version is None:
        raise RuntimeError(f"{library} is not installed here")
    return version


def unpack(
    library: str, folder: Path, versions: Iterable[str] | None = None, *, download: bool = True
) -> list[Path]:
    """Make ``folder/<version>`` point at each release's files (default: every recorded one),
    the layout the reviewed-row checks read (``KL_PATCHES_TRL_WHEELS``, ``history.
    check_sources``); wheels are unpacked into the cache, ``folder`` holds symbolic links."""
    spec = spec_of(library)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for version in list(versions) if versions is not None else recorded_releases(spec):
        release = _open(spec, version, installed=False, download=download)
        link = folder / version
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(release.root, target_is_directory=True)
        out.append(link)
    return out


def changes(
    library: str,
    new: str,
    old: str | None = None,
    *,
    installed: bool = True,
    download: bool = True,
    lines: bool = False,
) -> list[str]:
    """What release ``new`` changes against the recorded release ``old`` (default: the newest
    recorded one before ``new``): names added and removed, defaults and choices changed, patched
    functions moved, re-signed or rewritten. Line moves (``at``) are left out unless ``lines``.
    ``new`` need not be recorded: this is how a new release is classified before recording."""
    spec = spec_of(library)
    recorded = recorded_releases(spec)
    if old is None:
        before = [r for r in recorded if Version(r) < Version(new)]
        if not before:
            raise ValueError(f"no recorded {library} release before {new}; pass one")
        old = before[-1]
    path = data_folder(spec) / f"{old}.json"
    if not path.is_file():
        raise ValueError(f"{library} {old} is not recorded; choose one of {recorded}")
    previous = json.loads(path.read_text(encoding="utf-8"))
    fresh = json.loads(render(extract(spec, _open(spec, new, installed=installed,
                                                   download=download))))  # fmt: skip
    previous["release"] = fresh["release"]
    found = diff(previous, fresh)
    if not lines:
        found = [line for line in found if ": at " not in line]
    return [line.replace(f"{library} {new}:", f"{library} {old} -> {new}:", 1) for line in found]
