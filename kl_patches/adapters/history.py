"""Library behaviour across releases, as data: what each release does with the KL.

A :class:`History` is a list of :class:`Change` rows, one per release where something that
matters for the KL regulariser took a new value (a default, a flag name, an estimator's clamp,
where the KL goes). :meth:`History.at` folds the rows into the state of any release, so a reader
that knows which version a launch runs can ask what that version does instead of assuming the
newest release. Every row names the file and line of the release that shows it.

Nothing here imports a training library.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import Version


@dataclass(frozen=True)
class Change:
    """From release ``since`` on, ``key`` has ``value`` (until a later row for the same key)."""

    since: str
    """First release with this value, PEP 440 text, e.g. ``"0.4.0"``."""
    key: str
    """Dotted semantic key, e.g. ``"reward.gated_by_use_kl_in_reward"``."""
    value: object
    """JSON-able value (None, bool, int, float, str, list/tuple of str)."""
    source: str
    """``"path/in/package.py:LINE"`` in the release ``since`` (the line that shows it)."""
    note: str = ""
    """One line: what it means for the KL."""


@dataclass(frozen=True)
class History:
    """Every KL-relevant change of one library over the releases it covers."""

    library: str
    """``"trl"``, ``"verl"`` or ``"openrlhf"``."""
    releases: tuple[str, ...]
    """Every release covered, ascending (PEP 440)."""
    changes: tuple[Change, ...]
    """The rows, in any order."""

    def at(self, version: str) -> dict[str, object]:
        """Fold: for each key, the value of the latest change with since <= version.

        packaging.version ordering; a key absent before its first change is missing from the
        dict.
        """
        target = Version(version)
        latest: dict[str, tuple[Version, object]] = {}
        for change in self.changes:
            since = Version(change.since)
            if since > target:
                continue
            seen = latest.get(change.key)
            if seen is None or since >= seen[0]:
                latest[change.key] = (since, change.value)
        return {key: value for key, (_, value) in latest.items()}

    def change_points(self, key_prefix: str = "") -> tuple[str, ...]:
        """Releases where some key with that prefix changes value."""
        points = []
        previous: dict[str, object] = {}
        for release in self.releases:
            state = {k: v for k, v in self.at(release).items() if k.startswith(key_prefix)}
            if state != previous:
                points.append(release)
            previous = state
        return tuple(points)
