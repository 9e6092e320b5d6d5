"""The launch files of a folder, for ``kl-patches audit DIR`` (users point it at a repository).

:func:`launch_files` walks the folder and keeps the files the audit recognises as a launch of
one of the libraries, without running anything:

* shell scripts (``.sh``, ``.bash``, or a shell shebang) and ``.py`` files that name one of the
  libraries' entry points, console commands or kl-patches launchers (the adapters' descriptors
  say which), or, for Python, import a library's module;
* ``.overrides`` files (verl's Hydra overrides, one per line);
* YAML and JSON configs that an adapter recognises as its RL trainer config
  (:meth:`~kl_patches.adapters.base.AdapterDescriptor.recognises`: a flat CI or tool config is
  not taken for a TRL one).

What git ignores is skipped: ``git check-ignore`` when the folder is inside a git work tree,
otherwise the ``.gitignore`` files through ``pathspec`` when it is installed (a note says when
neither is available). Version-control, virtual-environment and cache folders are never
entered, nor are symbolic links to folders. At most :data:`MAX_FILES` candidates are read.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

SCRIPT_SUFFIXES = (".sh", ".bash")
"""Shell scripts (a file without a suffix counts when its first line is a shell shebang)."""
CONFIG_SUFFIXES = (".yaml", ".yml", ".json")
"""Config files an adapter may recognise."""
OVERRIDE_SUFFIXES = (".overrides",)
"""verl's Hydra override lists."""
SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", ".nox", ".tox", ".venv", "venv", "node_modules", "__pycache__",
     "site-packages", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
)  # fmt: skip
"""Folders never entered (whatever .gitignore says)."""
MAX_FILES = 5000
"""The most candidate files read in one walk (a note says when there were more)."""
MAX_BYTES = 1_000_000
"""Larger files are not read (a launch file is small)."""


@lru_cache(maxsize=1)
def _markers() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(words that mark a launch, Python import roots), from the adapters' descriptors."""
    from kl_patches import adapters

    words: set[str] = set()
    roots: set[str] = {"kl_patches"}
    for d in adapters.descriptors():
        for entry in d.entries:
            words.add(entry.module)
            if entry.command:
                words.add(" ".join(entry.command))
        for launcher in d.launchers:
            words.add(launcher.module)
            words.add(f"kl-patches {launcher.command}")
        if d.python is not None:
            roots.update(d.python.modules)
    return tuple(sorted(words)), tuple(sorted(roots))


def _text(path: Path) -> str | None:
    try:
        if path.stat().st_size > MAX_BYTES:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _is_shell(path: Path, text: str) -> bool:
    if path.suffix in SCRIPT_SUFFIXES:
        return True
    first = text.split("\n", 1)[0]
    shebang = re.search(r"\b(ba|z)?sh\b", first) is not None
    return path.suffix == "" and first.startswith("#!") and shebang


def recognised(path: Path) -> bool:
    """Whether the audit should read ``path`` as a launch file (see the module docstring)."""
    suffix = path.suffix.lower()
    if suffix in OVERRIDE_SUFFIXES:
        return True
    if suffix not in (*SCRIPT_SUFFIXES, *CONFIG_SUFFIXES, ".py", ""):
        return False
    text = _text(path)
    if text is None:
        return False
    words, roots = _markers()
    if suffix == ".py":
        imports = re.compile(rf"^\s*(from|import)\s+({'|'.join(map(re.escape, roots))})\b", re.M)
        return bool(imports.search(text)) or any(w in text for w in words)
    if suffix in CONFIG_SUFFIXES:
        return _config_recognised(path, text)
    return _is_shell(path, text) and any(w in text for w in words)


def _config_recognised(path: Path, text: str) -> bool:
    from kl_patches import adapters
    from kl_patches.adapters.files import load_mapping_text

    try:
        mapping = load_mapping_text(text, str(path), path.suffix.lower() == ".json")
    except Exception:  # not a mapping, not valid YAML: not a config the audit reads
        return False
    return any(d.recognises(mapping) for d in adapters.descriptors())


def files_under(root: Path) -> Iterable[Path]:
    """Every file under ``root``, folders and files in name order, without descending into
    :data:`SKIP_DIRS` or ``*.egg-info`` (the files a launch-file walk looks at)."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info"))
        for name in sorted(files):
            yield Path(folder) / name


def _git_ignored(root: Path, paths: list[Path]) -> set[Path] | None:
    """The paths git ignores, or None when ``root`` is not in a git work tree (or no git)."""
    git = shutil.which("git")
    if git is None or not paths:
        return None if git is None else set()
    inside = subprocess.run(
        [git, "-C", str(root), "rev-parse", "--is-inside-work-tree"],
        capture_output=True,
        text=True,
        check=False,
    )
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        return None
    done = subprocess.run(
        [git, "-C", str(root), "check-ignore", "--stdin", "-z"],
        input="\0".join(str(p.resolve()) for p in paths) + "\0",
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode not in (0, 1):  # 1: nothing ignored
        return None
    return {Path(p) for p in done.stdout.split("\0") if p}


def _spec(pathspec: Any, lines: list[str]) -> Any:
    """A gitignore spec (pathspec >= 0.12 names the style ``gitignore``; older ones
    ``gitwildmatch``)."""
    try:
        return pathspec.PathSpec.from_lines("gitignore", lines)
    except KeyError:
        return pathspec.PathSpec.from_lines("gitwildmatch", lines)


def _pathspec_ignored(root: Path, paths: list[Path]) -> set[Path] | None:
    """The paths the ``.gitignore`` files under ``root`` ignore, through ``pathspec``; None
    when pathspec is not installed."""
    try:
        import pathspec
    except ImportError:
        return None
    ignored: set[Path] = set()
    specs = []
    for gitignore in sorted(root.rglob(".gitignore")):
        lines = (_text(gitignore) or "").splitlines()
        specs.append((gitignore.parent, _spec(pathspec, lines)))
    for path in paths:
        for base, spec in specs:
            try:
                relative = path.relative_to(base)
            except ValueError:
                continue
            if spec.match_file(str(relative)):
                ignored.add(path.resolve())
    return ignored


def launch_files(root: Path) -> tuple[list[Path], list[str]]:
    """The launch files under ``root`` the audit recognises, and notes on what was skipped."""
    notes: list[str] = []
    candidates: list[Path] = []
    for path in files_under(root):
        if len(candidates) >= MAX_FILES:
            notes.append(f"{root}: more than {MAX_FILES} files; the rest were not read")
            break
        candidates.append(path)
    ignored = _git_ignored(root, candidates)
    how = "git check-ignore"
    if ignored is None:
        ignored = _pathspec_ignored(root, candidates)
        how = ".gitignore (pathspec)"
    if ignored is None:
        ignored = set()
        if any(root.rglob(".gitignore")):
            notes.append(
                f"{root}: not a git work tree and pathspec is not installed: .gitignore not "
                "applied (pip install pathspec)"
            )
    kept = [p for p in candidates if p.resolve() not in ignored]
    skipped = len(candidates) - len(kept)
    if skipped:
        notes.append(f"{root}: {skipped} file(s) ignored by {how} were not read")
    found = [p for p in kept if recognised(p)]
    if not found:
        notes.append(f"{root}: no launch file of verl, OpenRLHF or TRL recognised")
    return found, notes
