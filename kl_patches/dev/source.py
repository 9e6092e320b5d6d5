"""The files of one release of a library: the installed distribution, or its wheel (cached).

:func:`open_release` prefers the installed distribution when its version is the one asked for
(no network: this is what the library test sessions use); otherwise it downloads the wheel with
``pip download --no-deps`` into a cache folder and unpacks it there once. The cache is
``$KL_PATCHES_CACHE`` or ``$XDG_CACHE_HOME/kl-patches`` (``~/.cache/kl-patches``); it is never
part of the repository. A wheel whose package sits under ``<name>-<version>.data/purelib``
(OpenRLHF's) is found there. Nothing here imports the library.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version


def cache_dir() -> Path:
    """Where wheels and their unpacked trees are kept (created on first use)."""
    explicit = os.environ.get("KL_PATCHES_CACHE")
    if explicit:
        base = Path(explicit)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = (Path(xdg) if xdg else Path.home() / ".cache") / "kl-patches"
    base.mkdir(parents=True, exist_ok=True)
    return base


@dataclass(frozen=True)
class Release:
    """One release's package files, read from ``root`` (the folder holding the package)."""

    distribution: str
    """The distribution name on the index, e.g. ``"trl"``."""
    version: str
    """The release, as asked for (PEP 440 text)."""
    root: Path
    """The folder that holds the top-level package folder."""
    origin: str
    """``"installed"`` or the wheel's file name."""

    def path(self, relative: str) -> Path:
        """The file ``relative`` (``"trl/trainer/grpo_config.py"``) of this release."""
        return self.root / relative

    def read(self, relative: str) -> str | None:
        """The text of ``relative``, or None when the release has no such file."""
        file = self.path(relative)
        return file.read_text(encoding="utf-8") if file.is_file() else None

    def python_files(self, package: str) -> list[str]:
        """Every ``.py`` file under ``package`` (relative paths, sorted)."""
        base = self.root / package
        return sorted(p.relative_to(self.root).as_posix() for p in base.rglob("*.py"))


def installed_version(distribution: str) -> str | None:
    """The installed version of ``distribution``, or None when it is not installed."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _same(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def _installed_root(distribution: str, package: str) -> Path | None:
    dist = importlib.metadata.distribution(distribution)
    for file in dist.files or ():
        parts = Path(str(file)).parts
        if len(parts) == 2 and parts[0] == package and parts[1] == "__init__.py":
            return Path(str(dist.locate_file(file))).parent.parent
    return None


_PLATFORMS: tuple[str, ...] = (
    *("--platform", "manylinux1_x86_64"),
    *("--platform", "manylinux2014_x86_64"),
    *("--platform", "any"),
)


def cached_wheel(distribution: str, version: str, *, download: bool = True) -> Path:
    """The wheel of ``distribution==version`` in the cache, downloaded first if missing.

    RuntimeError when it is missing and ``download`` is False, or pip cannot get it."""
    folder = cache_dir() / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    wanted = canonicalize_name(distribution)

    def find() -> Path | None:
        for wheel in sorted(folder.glob("*.whl")):
            try:
                name, found, _, _ = parse_wheel_filename(wheel.name)
            except ValueError:
                continue
            if name == wanted and _same(str(found), version):
                return wheel
        return None

    wheel = find()
    if wheel is not None:
        return wheel
    if not download:
        raise RuntimeError(f"{distribution} {version}: no wheel in {folder} and download is off")
    base = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q"]
    spec = f"{distribution}=={version}"
    attempts = (
        [*base, "-d", str(folder), spec],
        # A wheel built for one interpreter (OpenRLHF's cp311 manylinux wheels) from another.
        [*base, "--python-version", "3.11", "-d", str(folder), *_PLATFORMS, spec],
    )
    errors = []
    for command in attempts:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        wheel = find()
        if wheel is not None:
            return wheel
        errors.append(done.stderr.strip().splitlines()[-1:] or ["(no message)"])
    raise RuntimeError(f"pip could not download a wheel of {spec}: {errors}")


def unpacked(wheel: Path, package: str) -> Path:
    """The folder holding ``package`` inside ``wheel``, unpacked into the cache once."""
    target = cache_dir() / "unpacked" / wheel.stem
    marker = target / ".complete"
    if not marker.exists():
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(target)
        marker.touch()
    for candidate in (target, *sorted(target.glob("*.data/purelib")), *target.glob("*.data/*")):
        if (candidate / package / "__init__.py").is_file():
            return candidate
    raise RuntimeError(f"{wheel.name} has no {package}/__init__.py")


def open_release(
    distribution: str,
    package: str,
    version: str,
    *,
    installed: bool = True,
    download: bool = True,
) -> Release:
    """The files of ``distribution==version``: the installed copy when it is that version (and
    ``installed``), else the cached wheel (downloaded when missing and ``download``)."""
    if installed:
        current = installed_version(distribution)
        if current is not None and _same(current, version):
            root = _installed_root(distribution, package)
            if root is not None:
                return Release(distribution, version, root, "installed")
    wheel = cached_wheel(distribution, version, download=download)
    return Release(distribution, version, unpacked(wheel, package), wheel.name)
