"""One version guard for every adapter: a tested range, behaviour canaries, one force variable.

A patch on an untested release may still run and silently train a different objective (a hook
renamed, an advantage computed elsewhere, an estimator swapped), so each adapter states the range
it was tested in as a ``packaging`` specifier set (:class:`VersionSupport`) and brings
behaviour :class:`Canary` checks: at ``apply()`` each canary calls a library function the patch
relies on, on a tiny synthetic batch, and says what it computed when that is not what the
adapter assumes. The guard (:meth:`VersionSupport.check`) then decides:

* inside the range: the canaries must pass (a failure is a :class:`CanaryError` naming the
  function and what it computed);
* a final release above the range: allowed with one :class:`UntestedVersionWarning` when every
  canary passes, refused otherwise;
* below the range, a pre-release or dev release (``0.10.0rc1`` is not in ``>=0.9.0,<0.10``,
  and is not treated as a release above it), or an unparsable version: refused.

``KL_PATCHES_FORCE=1`` (or ``force=True``) lets every adapter run anyway, with the canary
failures as warnings; the per-library spellings of earlier releases (``KL_PATCHES_TRL_FORCE``)
still work, with a deprecation warning. It forces the version guard and nothing else: accepting
a trainer class the patch cannot check (TRL: a subclass whose override of a hooked method shows
no ``super()`` call, a foreign trainer) is :data:`TRAINER_FORCE_ENV`, which leaves every version
guard on.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

FORCE_ENV = "KL_PATCHES_FORCE"
"""Set to ``1`` to let any adapter patch a library version outside its supported range (or one
whose behaviour canaries fail)."""

TRAINER_FORCE_ENV = "KL_PATCHES_FORCE_TRAINER"
"""Set to ``1`` to build a trainer class the patch cannot check (an override of a hooked method
without a visible ``super()`` call, a foreign trainer); the version guards stay on, and the
hooks are still checked in the first training step."""

Position = Literal["inside", "above", "below", "prerelease", "invalid"]
"""Where a version lies against a :class:`VersionSupport` range."""


class UnsupportedVersionError(RuntimeError):
    """The installed library version is outside the adapter's supported range (or unknown)."""


class CanaryError(RuntimeError):
    """A library function the patch relies on computed something else than the adapter assumes."""


class UntestedVersionWarning(UserWarning):
    """A release above the tested range is patched because every behaviour canary passed."""


@dataclass(frozen=True)
class Canary:
    """One behaviour check: a library function called on a tiny synthetic batch."""

    function: str
    """Dotted name of the library function checked, e.g. ``trl.RLOOTrainer._compute_loss``."""
    assumes: str
    """What the adapter assumes it computes, one line (used in the error)."""
    probe: Callable[[], str | None]
    """Runs the function; returns None when it computes what :attr:`assumes` says, otherwise a
    one-line description of what it computed instead."""

    def run(self) -> str | None:
        """None when the canary passes, else the failure as one line naming the function."""
        try:
            got = self.probe()
        except Exception as exc:  # a canary that cannot run is a failed canary
            return (
                f"{self.function} could not be run on a synthetic batch "
                f"({type(exc).__name__}: {exc}); the adapter assumes {self.assumes}"
            )
        if got is None:
            return None
        return f"{self.function} computed {got}; the adapter assumes {self.assumes}"


def run_canaries(canaries: Iterable[Canary]) -> list[str]:
    """The failures of ``canaries`` (empty when all pass), one line each; run while holding the
    patch lock (:data:`kl_patches.adapters.patching.LOCK`), so no two threads probe the
    library at once."""
    from kl_patches.adapters.patching import LOCK

    with LOCK:
        return [failure for canary in canaries if (failure := canary.run()) is not None]


@dataclass(frozen=True)
class VersionSupport:
    """The releases an adapter's patch accepts, and those it was tested against."""

    library: str
    """Distribution and import name (``trl``, ``verl``, ``openrlhf``)."""
    supported: str
    """PEP 440 specifier set of the tested range, e.g. ``>=1.0.0,<1.17.0``."""
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
        return self.position(version) == "inside"

    def position(self, version: str) -> Position:
        """``inside`` the range, a final release ``above`` it, ``below`` it, a ``prerelease``
        (or dev release) outside it, or ``invalid`` text."""
        try:
            parsed = Version(str(version))
        except InvalidVersion:
            return "invalid"
        if SpecifierSet(self.supported).contains(parsed, prereleases=False):
            return "inside"
        if parsed.is_prerelease or parsed.is_devrelease:
            return "prerelease"
        if self.tested and parsed > max(Version(v) for v in self.tested):
            return "above"
        return "below"

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

    def check(
        self,
        version: str | None = None,
        *,
        force: bool = False,
        canaries: Iterable[Canary] = (),
    ) -> str:
        """``version`` (default: the installed one) when the patch may run, else an error.

        :meth:`gate` then :meth:`verify`: inside the range every canary must pass
        (:class:`CanaryError`); a final release above it is allowed with one
        :class:`UntestedVersionWarning` when every canary passes; anything else is an
        :class:`UnsupportedVersionError` naming the supported range, the tested releases, the
        pip command that installs a supported one, and the force variable. Forced, every
        refusal becomes a warning.
        """
        forced = self.forced(force)  # once: a deprecated variable warns once
        found = self.gate(version, force=forced)
        return self.verify(found, force=forced, canaries=canaries)

    def gate(self, version: str | None = None, *, force: bool = False) -> str:
        """The version, unless it is below the range, a pre-release, unparsable or missing
        (:class:`UnsupportedVersionError`; forced, a version that exists passes)."""
        forced = self.forced(force)
        found = self.installed() if version is None else str(version)
        if found is None:
            raise UnsupportedVersionError(
                f"kl_patches.{self.library}: {self.library} is not installed; "
                f"pip install '{self.library}{self.supported}'"
            )
        if self.position(found) in ("inside", "above") or forced:
            return found
        raise UnsupportedVersionError(
            f"kl_patches.{self.library} supports {self.describe()}, but {self.library} {found} is "
            "installed. Its KL hook points may differ, so the patch refuses rather than silently "
            f"changing the training objective. Install a supported version (pip install "
            f"'{self.library}{self.supported}'), or set {FORCE_ENV}=1 (or pass force=True) to run "
            "anyway; the adapter's regression tests then tell whether the patch still matches."
        )

    def verify(self, found: str, *, force: bool = False, canaries: Iterable[Canary] = ()) -> str:
        """Run the canaries for a version :meth:`gate` let through: inside the range a failure
        is a :class:`CanaryError`; above it, all passing gives one
        :class:`UntestedVersionWarning` and a failure an :class:`UnsupportedVersionError`;
        forced, a failure is a warning."""
        position = self.position(found)
        failures = run_canaries(canaries)
        if not failures:
            if position == "above":
                warnings.warn(
                    f"kl_patches.{self.library}: {self.library} {found} is newer than the tested "
                    f"range {self.describe()}; every behaviour canary passed, so the patch runs. "
                    "Run the adapter's regression tests against it to be sure.",
                    UntestedVersionWarning,
                    stacklevel=3,
                )
            return found
        message = self._canary_message(found, failures)
        if self.forced(force):
            warnings.warn(f"{message} ({FORCE_ENV}=1: running anyway)", stacklevel=3)
            return found
        if position == "inside":
            raise CanaryError(message)
        raise UnsupportedVersionError(message)

    def _canary_message(self, found: str, failures: list[str]) -> str:
        where = "inside" if self.contains(found) else "outside"
        return (
            f"kl_patches.{self.library}: {len(failures)} behaviour canar"
            f"{'y' if len(failures) == 1 else 'ies'} failed on {self.library} {found} ({where} "
            f"{self.describe()}), so the patch would train another objective than it claims: "
            + "; ".join(failures)
            + f". Install a tested release (pip install '{self.library}{self.supported}') or set "
            f"{FORCE_ENV}=1 to run anyway."
        )


@dataclass(frozen=True)
class CompatStep:
    """One release of an adapter's compat matrix, as ``nox -s compat`` installs and tests it."""

    version: str
    """The library release."""
    install: tuple[tuple[str, ...], ...]
    """``pip install`` commands (argument lists, run in order) that put this release into the
    session's venv after the plan's base, e.g. ``(("--no-deps", "trl==1.6.0"),)``."""
    reason: str
    """Why the release is in the matrix: the oldest, the newest, or the change point."""
    deselect: tuple[str, ...] = ()
    """pytest node ids whose assertion does not hold on this release because the library
    computes something else there (each asserted as a difference by the compat tests)."""
    select: str = ""
    """A pytest ``-k`` expression that restricts the tests (a release only its canaries can
    cover here, e.g. one that cannot train on a CPU); empty: all of them."""
    tests: tuple[str, ...] = ()
    """Test files run for this release instead of the plan's :attr:`CompatPlan.tests` (a
    release the adapter supports differently, e.g. natively only); empty: the plan's."""


@dataclass(frozen=True)
class CompatPlan:
    """How ``nox -s compat`` tests one adapter against every release of its matrix, in one venv
    that switches the library version in place."""

    library: str
    """Library name (the session's parameter)."""
    base: tuple[str, ...]
    """``pip install`` arguments after torch and before the first step (the dependencies)."""
    tests: tuple[str, ...]
    """Test files run against each release (the regression and equivalence tests)."""
    steps: tuple[CompatStep, ...]
    """The releases, in the order they are installed."""
    install_env: tuple[tuple[str, str], ...] = ()
    """Environment variables for every install (e.g. ``DS_BUILD_OPS=0`` for deepspeed)."""

    def to_json(self) -> str:
        """The plan as JSON (what the noxfile reads from inside the session's venv)."""
        return json.dumps(asdict(self))
