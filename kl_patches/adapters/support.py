"""One version guard for every adapter: PEP 440 specifiers and one force variable.

A patch on an untested release may still run and silently train a different objective (a hook
renamed, an advantage computed elsewhere), so each adapter refuses versions outside its
supported range unless forced. :class:`VersionSupport` holds the range as a ``packaging``
specifier set (pre-releases are outside a range unless it names one: ``0.10.0rc1`` is not in
``>=0.9.0,<0.10``) and the releases the regression tests ran against.

``KL_PATCHES_FORCE=1`` (or ``force=True``) lets every adapter run on an unsupported version;
the per-library spellings of earlier releases (``KL_PATCHES_TRL_FORCE``) still work, with a
deprecation warning.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from importlib import metadata

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

FORCE_ENV = "KL_PATCHES_FORCE"
"""Set to ``1`` to let any adapter patch a library version outside its supported range."""


class UnsupportedVersionError(RuntimeError):
    """The installed library version is outside the adapter's supported range (or unknown)."""


@dataclass(frozen=True)
class VersionSupport:
    """The releases an adapter's patch accepts, and those it was tested against."""

    library: str
    """Distribution and import name (``trl``, ``verl``, ``openrlhf``)."""
    supported: str
    """PEP 440 specifier set the patch accepts, e.g. ``>=1.16.0,<1.17.0``."""
    tested: tuple[str, ...]
    """Releases the regression tests ran against (each inside :attr:`supported`)."""
    legacy_force_env: str = ""
    """An older per-library force variable still honoured (deprecated)."""

    def __post_init__(self) -> None:
        try:
            spec = SpecifierSet(self.supported)
        except InvalidSpecifier as err:
            raise ValueError(f"VersionSupport.supported={self.supported!r}: {err}") from err
        outside = [v for v in self.tested if not spec.contains(v, prereleases=True)]
        if outside:
            raise ValueError(f"tested releases {outside} lie outside {self.supported!r}")

    def contains(self, version: str) -> bool:
        """True when ``version`` is inside the supported range (False for unparsable text)."""
        try:
            return SpecifierSet(self.supported).contains(Version(version), prereleases=False)
        except InvalidVersion:
            return False

    def installed(self) -> str | None:
        """The installed distribution's version (from its metadata), or None."""
        try:
            return metadata.version(self.library)
        except metadata.PackageNotFoundError:
            return None

    def forced(self, force: bool = False) -> bool:
        """True when the guard is overridden by ``force`` or an environment variable."""
        if force or os.environ.get(FORCE_ENV, "") == "1":
            return True
        if self.legacy_force_env and os.environ.get(self.legacy_force_env, "") == "1":
            warnings.warn(
                f"{self.legacy_force_env}=1 is deprecated; set {FORCE_ENV}=1 instead",
                FutureWarning,
                stacklevel=3,
            )
            return True
        return False

    def describe(self) -> str:
        """``trl>=1.16.0,<1.17.0 (tested: 1.16.0)``."""
        return f"{self.library}{self.supported} (tested: {', '.join(self.tested)})"

    def check(self, version: str | None = None, *, force: bool = False) -> str:
        """``version`` (default: the installed one), or :class:`UnsupportedVersionError`.

        The error names the supported range, the tested releases, the pip command that installs
        a supported one, and the force variable.
        """
        found = self.installed() if version is None else str(version)
        if found is None:
            raise UnsupportedVersionError(
                f"kl_patches.{self.library}: {self.library} is not installed; "
                f"pip install '{self.library}{self.supported}'"
            )
        if self.contains(found) or self.forced(force):
            return found
        raise UnsupportedVersionError(
            f"kl_patches.{self.library} supports {self.describe()}, but {self.library} {found} is "
            "installed. Its KL hook points may differ, so the patch refuses rather than silently "
            f"changing the training objective. Install a supported version (pip install "
            f"'{self.library}{self.supported}'), or set {FORCE_ENV}=1 (or pass force=True) to run "
            "anyway; the adapter's regression tests then tell whether the patch still matches."
        )
