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
noted. The keys the project's own files give (:attr:`Composed.keys`) are kept apart from the
library configs placed (:attr:`Composed.mounts`), whose keys the adapter takes from the release
it reads, so that overrides can be checked as Hydra's strict composition checks them. Nothing
is imported or run, and the environment is not read (``${oc.env:X,d}`` is ``d``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
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
    keys: set[str] = field(default_factory=set)
    """Every key path (mappings and leaves) the project's own files give the composed config,
    at the package each file is placed at; the library's configs' keys are not in it."""
    mounts: list[tuple[str, str]] = field(default_factory=list)
    """(library config name, package) of each ``defaults`` entry that places a library config:
    not found beside the files, or the library's own file (under ``verl/trainer/config``,
    directly or through a symlink)."""
    linked: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Library configs a project's own folder holds as a symlink into the library (RAGEN's
    ``config/ppo_trainer.yaml``), each with the group folders on that folder's search path:
    Hydra resolves the linked file's ``defaults`` groups there, so the release decides whether
    they are found."""
    widened: bool = False
    """True when a composed file sets ``hydra.searchpath`` (config folders besides its own:
    a group missing from the project's folder may be found there)."""
    complete: bool = True
    """False when a non-optional ``defaults`` entry was found nowhere: :attr:`keys` and
    :attr:`mounts` then miss part of the config."""


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(_flatten(value, path + "."))
        else:
            out[path] = value
    return out


def find_config(
    name: str, dirs: list[Path], accept: Callable[[Path], bool] = Path.is_file
) -> Path | None:
    """``name`` (without or with ``.yaml``) in the first of ``dirs`` that has it: a file, or
    what ``accept`` takes (``Path.is_symlink``: a link whose target may be absent)."""
    stem = name[:-5] if name.endswith((".yaml", ".yml")) else name
    for d in dirs:
        for suffix in (".yaml", ".yml"):
            candidate = d / f"{stem}{suffix}"
            if accept(candidate):
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
    tree = _compose_file(path, data, out, library_configs, depth=0, prefix="")
    out.flat = _resolve(_flatten(tree), out)
    if out.linked and out.widened:
        # ``hydra.searchpath`` adds folders (``pkg://verl.trainer.config``, ...) where the
        # linked file's groups may be found: a missing group is then not certain
        out.notes.append(
            "hydra.searchpath adds config folders: the linked trainer config's groups may be "
            "found there, so none is reported missing"
        )
        out.linked.clear()
    return out


def _widened(tree: dict[str, Any]) -> bool:
    """Whether the composed config sets ``hydra.searchpath`` (folders besides its own)."""
    hydra = tree.get("hydra")
    return isinstance(hydra, dict) and bool(hydra.get("searchpath"))


def _compose_file(
    path: Path,
    data: dict[str, Any] | None,
    out: Composed,
    library_configs: tuple[str, ...],
    depth: int,
    prefix: str,
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
    if _widened(data):
        out.widened = True
    parts = prefix.split(".") if prefix else []
    out.keys.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    out.keys.update(_key_paths(own, prefix))
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
        short = f"{group}/{name}" if group else name
        placed = package if package is not None else (group or "").replace("/", ".")
        at = ".".join(p for p in (prefix, placed) if p)
        is_library = any(short.endswith(c) for c in library_configs) or name in library_configs
        if is_library:
            link = find_config(name, dirs, Path.is_symlink)
            if link is not None:
                out.linked[name.rsplit("/", 1)[-1]] = _folders(dirs)
        if target is None:
            if is_library:
                out.library.append(short)
                out.mounts.append((name.rsplit("/", 1)[-1], at))
            elif not optional:
                out.notes.append(f"{path}: defaults entry {short!r} not found beside it")
                out.complete = False
            continue
        if is_library and _library_file(target) and not _copy_file(target):
            saved = (set(out.keys), list(out.mounts), out.complete)
            sub = _compose_file(target, None, out, library_configs, depth + 1, at)
            # the release's recorded keys stand for the library's file and what it composes
            out.keys, out.mounts, out.complete = saved
            out.mounts.append((name.rsplit("/", 1)[-1], at))
        else:
            sub = _compose_file(target, None, out, library_configs, depth + 1, at)
        _put(tree, placed, sub)
    if not placed_self:
        _merge(tree, own)
    return tree


def _library_file(path: Path) -> bool:
    """True for the library's own config file: under ``verl/trainer/config``, directly or
    through a symlink (RAGEN's ``config/ppo_trainer.yaml`` links into its verl submodule)."""
    where = path.resolve() if path.is_symlink() else path
    return path.is_symlink() or where.parent.parts[-3:] == ("verl", "trainer", "config")


def _copy_file(path: Path) -> bool:
    """True for a library config file of a vendored copy committed in the project (a plain
    file, not a symlink, under ``<copy>/verl/trainer/config`` beside the copy's
    ``verl/version/version``): Hydra composes that file, so its own keys (a project's: TTRL's
    ``reward_model.reward_kwargs``) are what the overrides may name, not the recorded
    release's."""
    if path.is_symlink():
        return False
    package = path.parent.parent.parent
    return (
        path.parent.parts[-3:] == ("verl", "trainer", "config")
        and (package / "version" / "version").is_file()
    )


def _folders(dirs: list[Path]) -> tuple[str, ...]:
    """The names of the folders in ``dirs`` (config groups Hydra can find there)."""
    names = {c.name for d in dirs if d.is_dir() for c in d.iterdir() if c.is_dir()}
    return tuple(sorted(names))


def _key_paths(tree: dict[str, Any], prefix: str) -> set[str]:
    """Every key path of ``tree`` (mappings and leaves) under ``prefix``."""
    out: set[str] = set()
    for key, value in tree.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        out.add(path)
        if isinstance(value, dict):
            out |= _key_paths(value, path)
    return out


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
