"""YAML inputs that are not a plain config: cluster job files and Hydra configs with ``defaults``.

Cluster job files (SkyPilot ``run:``/``setup:``, dstack ``commands:``, Ray/Anyscale
``entrypoint:``) carry the launch as shell text: :func:`cluster_commands` returns it with the
variables the file declares (``envs:``/``env:``), for the shell reader.

A Hydra config (a verl trainer config, a recipe's, or a project's own) starts from a
``defaults`` list: :func:`compose` merges it the way Hydra does (each entry in order, the file's
own keys at ``_self_``, implicitly last), following the files found beside it (``name.yaml``,
``group/name.yaml``, ``group@package: name``), then resolves ``${a.b}`` interpolations between
the merged keys. Entries that name the library's own configs (``ppo_trainer``) are left to the
adapter's recorded defaults and listed in :attr:`Composed.library`; entries found nowhere are
noted. Nothing is imported or run, and the environment is not read (``${oc.env:X,d}`` is ``d``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kl_patches.adapters.files import load_mapping_text, read_text
from kl_patches.audit.model import InputError

__all__ = ["Composed", "cluster_commands", "compose", "find_config"]

MAX_FILES = 64
"""Config files one composition may read."""

_CLUSTER_KEYS = ("setup", "run", "commands", "entrypoint", "script")
_ENV_KEYS = ("envs", "env", "environment", "env_vars")
_INTERPOLATION = re.compile(r"\$\{([^{}]+)\}")
_UNRESOLVED = object()
"""An interpolation's target that is not (yet) a value; ``None`` is a value (a null key)."""


def cluster_commands(data: dict[str, Any]) -> tuple[str, dict[str, str]] | None:
    """(shell text, variables) of a cluster job file, None when ``data`` is not one.

    A file is a job file when it has no verl/TRL settings of its own and a string (or list of
    strings) under ``run``, ``setup``, ``commands``, ``entrypoint`` or ``script``."""
    parts: list[str] = []
    for key in _CLUSTER_KEYS:
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            parts.append(value)
        elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            parts.append("\n".join(value))
    if not parts:
        return None
    variables: dict[str, str] = {}
    for key in _ENV_KEYS:
        env = data.get(key)
        if isinstance(env, dict):
            for name, value in env.items():
                if isinstance(name, str) and re.fullmatch(r"[A-Za-z_]\w*", name):
                    if value is None:
                        continue
                    variables[name] = str(value).lower() if isinstance(value, bool) else str(value)
        elif isinstance(env, list):
            for item in env:
                if isinstance(item, str) and "=" in item:
                    name, _, value = item.partition("=")
                    variables[name.strip()] = value
                elif isinstance(item, dict) and "name" in item and "value" in item:
                    variables[str(item["name"])] = str(item["value"])
    return "\n".join(parts) + "\n", variables


@dataclass
class Composed:
    """A Hydra config merged with its ``defaults``."""

    flat: dict[str, Any]
    """Every leaf as ``dotted.key: value`` (interpolations resolved where they can be)."""
    files: list[str] = field(default_factory=list)
    """The files read, in merge order."""
    library: list[str] = field(default_factory=list)
    """``defaults`` entries left to the library's own (recorded) config."""
    notes: list[str] = field(default_factory=list)
    """What could not be followed (a missing file, an interpolation)."""
    linked: list[dict[str, Any]] = field(default_factory=list)
    """``defaults`` entries naming a library config (``library_configs``) that the folder
    holds as a symlink (RAGEN's ``config/ppo_trainer.yaml`` into its verl submodule): the file
    Hydra reads is then the installed library's own, whichever release that is. Each:
    ``{"name", "link", "target", "groups", "closed"}``: the entry, the symlink, its target,
    the config groups (folders) of the primary config's search folders, and whether that
    search path is only those folders (no ``hydra.searchpath`` in the composed files), i.e.
    whether a group missing from ``groups`` is missing for Hydra too."""


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(_flatten(value, path + "."))
        else:
            out[path] = value
    return out


def find_config(name: str, dirs: list[Path]) -> Path | None:
    """``name`` (without or with ``.yaml``) in the first of ``dirs`` that has it."""
    stem = name[:-5] if name.endswith((".yaml", ".yml")) else name
    for d in dirs:
        for suffix in (".yaml", ".yml"):
            candidate = d / f"{stem}{suffix}"
            if candidate.is_file():
                return candidate
    return None


def _search_dirs(data: dict[str, Any], here: Path) -> list[Path]:
    dirs = [here]
    hydra = data.get("hydra")
    paths = hydra.get("searchpath") if isinstance(hydra, dict) else None
    for entry in paths if isinstance(paths, list) else []:
        text = str(entry)
        if text.startswith("file://"):
            raw = Path(text[len("file://") :])
            for base in (here, *here.parents):
                candidate = raw if raw.is_absolute() else base / raw
                if candidate.is_dir():
                    dirs.append(candidate)
                    break
    return dirs


def _put(tree: dict[str, Any], package: str, value: dict[str, Any]) -> None:
    parts = [p for p in package.split(".") if p]
    if not parts:
        _merge(tree, value)
        return
    node = tree
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    last = parts[-1]
    if isinstance(node.get(last), dict):
        _merge(node[last], value)
    else:
        node[last] = value


def _merge(into: dict[str, Any], other: dict[str, Any]) -> None:
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def compose(
    path: Path,
    data: dict[str, Any] | None = None,
    library_configs: tuple[str, ...] = (),
) -> Composed:
    """``path``'s config merged with its ``defaults`` the way Hydra does (see the module
    docstring). ``library_configs`` are config names the library provides itself."""
    out = Composed(flat={})
    tree = _compose_file(path, data, out, library_configs, depth=0)
    out.flat = _resolve(_flatten(tree), out)
    if out.linked:
        primary = data if data is not None else {}
        dirs = _search_dirs(primary, path.parent)
        groups = sorted({c.name for d in dirs for c in d.iterdir() if c.is_dir()})
        closed = not any(_has_searchpath(f) for f in out.files)
        for link in out.linked:
            link.update(groups=groups, closed=closed)
    return out


def _has_searchpath(path: str) -> bool:
    """Whether a composed file sets ``hydra.searchpath`` (a search folder besides its own)."""
    try:
        data = load_mapping_text(read_text(Path(path)), path, path.endswith(".json"))
    except (InputError, OSError):
        return True  # unreadable: not known to be closed
    hydra = data.get("hydra")
    return isinstance(hydra, dict) and "searchpath" in hydra


def _compose_file(
    path: Path,
    data: dict[str, Any] | None,
    out: Composed,
    library_configs: tuple[str, ...],
    depth: int,
) -> dict[str, Any]:
    if depth > 16 or len(out.files) >= MAX_FILES:
        raise InputError(
            f"{path}: Hydra defaults nested too deeply (or more than {MAX_FILES} files)"
        )
    if data is None:
        data = load_mapping_text(read_text(path), str(path), path.suffix == ".json")
    out.files.append(str(path))
    here = path.parent
    dirs = _search_dirs(data, here)
    own = {k: v for k, v in data.items() if k not in ("defaults", "hydra")}
    defaults = data.get("defaults")
    tree: dict[str, Any] = {}
    placed_self = False
    for item in defaults if isinstance(defaults, list) else []:
        if item == "_self_":
            _merge(tree, own)
            placed_self = True
            continue
        group, package, name, optional = _entry(item)
        if name is None or name in ("null", "None"):
            continue
        target = find_config(f"{group}/{name}", dirs) if group else find_config(name, dirs)
        if target is None:
            short = f"{group}/{name}" if group else name
            if any(short.endswith(c) for c in library_configs) or name in library_configs:
                out.library.append(short)
            elif not optional:
                out.notes.append(f"{path}: defaults entry {short!r} not found beside it")
            continue
        stem = target.name.rsplit(".", 1)[0]
        if target.is_symlink() and stem in library_configs and not group:
            out.linked.append({"name": name, "link": str(target), "target": str(target.resolve())})
        sub = _compose_file(target, None, out, library_configs, depth + 1)
        _put(tree, package if package is not None else (group or "").replace("/", "."), sub)
    if not placed_self:
        _merge(tree, own)
    return tree


def _entry(item: Any) -> tuple[str | None, str | None, str | None, bool]:
    """(group, package, name, optional) of one ``defaults`` entry."""
    if isinstance(item, str):
        return None, None, item, False
    if isinstance(item, dict) and len(item) == 1:
        key, value = next(iter(item.items()))
        key = str(key)
        optional = key.startswith("optional ")
        key = key.removeprefix("optional ").removeprefix("override ").strip()
        group, _, package = key.partition("@")
        name = None if value is None else str(value)
        return group, (package or None), name, optional
    return None, None, None, False


def _resolve(flat: dict[str, Any], out: Composed) -> dict[str, Any]:
    """Resolve ``${a.b}`` references between keys (a few passes); drop what cannot be."""
    resolved = dict(flat)
    for _ in range(8):
        changed = False
        for key, value in list(resolved.items()):
            if not isinstance(value, str) or "${" not in value:
                continue
            new = _substitute(value, resolved)
            if new is not value and new != value:
                resolved[key] = new
                changed = True
        if not changed:
            break
    for key, value in list(resolved.items()):
        if isinstance(value, str) and "${" in value:
            out.notes.append(f"{key}: interpolation {value!r} not resolved; the default is used")
            del resolved[key]
    return resolved


def _substitute(value: str, flat: dict[str, Any]) -> Any:
    whole = _INTERPOLATION.fullmatch(value)

    def lookup(expr: str) -> Any:
        expr = expr.strip()
        if expr.startswith("oc.env:"):
            _, _, rest = expr.partition(":")
            _, _, default = rest.partition(",")
            return default.strip().strip("'\"") if default else _UNRESOLVED
        if expr.startswith("oc.select:"):
            _, _, rest = expr.partition(":")
            ref, _, default = rest.partition(",")
            ref = ref.strip()
            if ref in flat and not (isinstance(flat[ref], str) and "${" in flat[ref]):
                return flat[ref]
            return default.strip() if default else _UNRESOLVED
        if expr in flat and not (isinstance(flat[expr], str) and "${" in flat[expr]):
            return flat[expr]
        return _UNRESOLVED

    if whole:
        found = lookup(whole.group(1))
        return found if found is not _UNRESOLVED else value

    def sub(m: re.Match[str]) -> str:
        found = lookup(m.group(1))
        return m.group(0) if found is _UNRESOLVED or found is None else str(found)

    return _INTERPOLATION.sub(sub, value)


def config_dirs(config_path: str | None, bases: list[Path]) -> list[Path]:
    """Directories a Hydra ``--config-path`` may mean, relative to each of ``bases`` (a path
    starting with ``~`` needs the environment's home directory: not followed)."""
    out: list[Path] = []
    for base in bases:
        if config_path is None:
            if base not in out:
                out.append(base)
            continue
        if config_path.startswith("~"):
            return []
        raw = Path(config_path)
        candidate = raw if raw.is_absolute() else base / raw
        if candidate.is_dir() and candidate not in out:
            out.append(candidate)
    return out
