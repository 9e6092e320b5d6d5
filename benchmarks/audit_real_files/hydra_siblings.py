"""The config files a Hydra launch composes from its checkout: the named config and its
``defaults`` chain, symlinks kept as symlinks.

``derive.py``'s ``siblings()`` lists the files besides a launch file that its reading needs; a
Hydra launch (``python train.py --config-name X``, or a YAML item launched that way) needs the
config it names, found in the entry's ``@hydra.main(config_path=...)`` folder (or
``--config-path``), and every file that config's ``defaults`` list names, recursively: Hydra
looks each entry up in the same config folder (``name`` -> ``name.yaml``, ``group@pkg: name``
-> ``group/name.yaml``; an entry of a config inside ``group/`` is relative to ``group/``
unless it starts with ``/``). A config that is a symlink (RAGEN's ``config/ppo_trainer.yaml``
points into its verl submodule) is listed as the symlink, and its target as a file of the
repository or of an overlay (the submodule's repository at its commit) mounted where the
symlink's target lies; the target's own ``defaults`` are looked up in the config folder, as
Hydra does. Entries with interpolations (``${model_engine}_actor``) are not followed.
Deviation: only files present in the derivation's working tree are listed (an entry found
nowhere is what the composition reports, not a sibling).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

MAX_FILES = 64
"""Config files one chain may list (a cycle or a huge tree stops there)."""


@dataclass(frozen=True)
class ConfigFile:
    """One file of a composed chain, relative to the working tree's root."""

    path: str
    """Its path under the tree root (the symlink's own path for a symlink)."""
    link_target: str | None = None
    """The target, also relative to the tree root, when ``path`` is a symlink."""


def _entries(data: Any) -> list[tuple[str, str]]:
    """(group, name) of each followable ``defaults`` entry (group "" for a plain name)."""
    out: list[tuple[str, str]] = []
    defaults = data.get("defaults") if isinstance(data, dict) else None
    for item in defaults if isinstance(defaults, list) else []:
        if isinstance(item, str):
            if item != "_self_":
                out.append(("", item))
        elif isinstance(item, dict) and len(item) == 1:
            key, value = next(iter(item.items()))
            group = str(key).removeprefix("optional ").removeprefix("override ").strip()
            group = group.partition("@")[0]
            if isinstance(value, str):
                out.append((group, value))
            elif isinstance(value, list):  # a group with several configs
                out.extend((group, str(v)) for v in value)
    return [(g, n) for g, n in out if "${" not in g + n and n not in ("null", "None")]


def _find(config_dir: Path, rel: str) -> Path | None:
    for suffix in ("", ".yaml", ".yml"):
        cand = config_dir / f"{rel}{suffix}"
        if cand.is_file():
            return cand
    return None


def chain(root: Path, config_dir: Path, name: str) -> list[ConfigFile]:
    """The files config ``name`` composes from ``config_dir`` (both inside ``root``), in the
    order Hydra reaches them; [] when ``name`` is not there."""
    root = root.resolve()
    config_dir = Path(os.path.abspath(config_dir))
    out: list[ConfigFile] = []
    seen: set[str] = set()
    todo: list[str] = [name]
    while todo and len(out) < MAX_FILES:
        rel = todo.pop(0)
        found = _find(config_dir, rel)
        if found is None:
            continue
        try:
            own = Path(os.path.abspath(found)).relative_to(root)
        except ValueError:
            continue
        if str(own) in seen:
            continue
        seen.add(str(own))
        target = None
        if found.is_symlink():
            try:
                target = str(found.resolve().relative_to(root))
            except ValueError:
                target = None  # a link leaving the tree: listed, never followed
        out.append(ConfigFile(str(own), target))
        try:
            data = yaml.safe_load(found.read_text(errors="replace"))
        except (OSError, yaml.YAMLError):
            continue
        here = str(Path(rel).parent) if "/" in rel else ""
        for group, entry in _entries(data):
            if group.startswith("/") or (not group and entry.startswith("/")):
                todo.append(f"{group.lstrip('/')}/{entry}".lstrip("/"))
            else:
                todo.append("/".join(p for p in (here, group, entry) if p))
    return out
