"""What a training library did to the KL term, release by release, as data.

Most launch code in the wild pins an old release, and the same config means a different gradient
under a different version (TRL's GRPO ``beta`` default went 0.04 -> 0.0, its k3 term gained an
importance weight, verl grew a switch for the reward-side KL). Each adapter therefore keeps a
:class:`History`: a list of :class:`Change` rows, each saying that from release ``since`` on the
dotted key ``key`` has value ``value``, with the ``file:line`` of that release that shows it.
:meth:`History.at` folds the rows into the settings of one release; :meth:`History.change_points`
lists the releases where something changed, which is what a version-aware reader, a patch range
or a compat test matrix needs.

Nothing here imports a training library; versions are ordered with
:class:`packaging.version.Version` (PEP 440, so ``1.0.0rc1 < 1.0.0``).
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import InvalidVersion, Version


@dataclass(frozen=True)
class Change:
    """From release ``since`` on, ``key`` has ``value`` (until a later change of the same key)."""

    since: str
    """First release with this value, PEP 440 text, e.g. ``"0.19.0"``."""
    key: str
    """Dotted semantic key, e.g. ``"grpo.beta_default"``."""
    value: object
    """JSON-able value (None, bool, int, float, str, list/tuple of str); ``None`` says the feature
    does not exist any more."""
    source: str
    """``"path/in/package.py:LINE"`` in the release ``since`` (the line that shows it)."""
    note: str = ""
    """One line: what it means for the KL."""


@dataclass(frozen=True)
class History:
    """Every KL-relevant change of one library over a range of releases."""

    library: str
    """``"trl"``, ``"verl"``, ``"openrlhf"`` (or a sub-history such as ``"trl-patch-surface"``)."""
    releases: tuple[str, ...]
    """Every release covered, ascending (PEP 440)."""
    changes: tuple[Change, ...]
    """The rows; their order does not matter to :meth:`at`."""

    def at(self, version: str) -> dict[str, object]:
        """Fold: for each key, the value of the latest change with since <= version
        (packaging.version ordering; a key absent before its first change is missing from the
        dict)."""
        target = Version(version)
        latest: dict[str, tuple[Version, object]] = {}
        for change in self.changes:
            since = Version(change.since)
            if since > target:
                continue
            seen = latest.get(change.key)
            if seen is None or since >= seen[0]:
                latest[change.key] = (since, change.value)
        return {key: value for key, (_, value) in sorted(latest.items())}

    def latest(self, key: str, release: str) -> Change | None:
        """The row that gives ``key`` its value in ``release`` (None when no row does)."""
        target = Version(release)
        found: Change | None = None
        for change in self.changes:
            newer = found is None or Version(change.since) >= Version(found.since)
            if change.key == key and Version(change.since) <= target and newer:
                found = change
        return found

    def change_points(self, key_prefix: str = "") -> tuple[str, ...]:
        """Releases where some key with that prefix changes value."""
        points: list[str] = []
        previous: dict[str, object] | None = None
        for release in sorted(self.releases, key=Version):
            current = {k: v for k, v in self.at(release).items() if k.startswith(key_prefix)}
            if previous is not None and current != previous:
                points.append(release)
            previous = current
        return tuple(points)


def resolve_release(releases: tuple[str, ...], version: str, library: str, example: str) -> str:
    """The release of ``releases`` (ascending) whose semantics ``version`` has: itself when
    recorded, its public part for a local label (``0.1+vendored``), else the newest release not
    after it, else the oldest. ValueError naming ``library`` and an ``example`` for text that is
    not a PEP 440 version."""
    try:
        target = Version(version)
    except InvalidVersion:
        raise ValueError(
            f"{library} version {version!r} is not a PEP 440 version (e.g. {example})"
        ) from None
    if version in releases:
        return version
    if target.local is not None and target.public in releases:
        return target.public
    older = [r for r in releases if Version(r) <= target]
    return older[-1] if older else releases[0]
