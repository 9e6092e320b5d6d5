"""One structured edit of a launch (:class:`Change`) and the merged set for one launch.

A change names a setting the way the library reads it (a Hydra dotted key for verl, an
argparse flag for OpenRLHF, a config field for TRL), never a text position: the writers find
where the file writes that setting (a bash variable, an array element, the command line, a YAML
key, a Python keyword argument) and edit it there. Values are strings as the library's parser
receives them on a command line (``"False"``, ``"0.001"``, ``"k1"``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["ACTIONS", "LABELS", "NAMESPACES", "Change", "ChangeSet"]

ACTIONS = ("set", "unset", "rename", "entry_point")
"""``set`` a key to a value (adding it when absent), ``unset`` it (remove it, so the library's
default applies), ``rename`` a key the release no longer accepts to ``new_key`` (value kept),
``entry_point``: run the launch through the kl-patches launcher named in ``value`` (words
starting with ``kl_patches``), or, where the release renamed the entry module ``key``, through
its module ``value`` (one dotted name: :attr:`Change.module_switch`)."""

NAMESPACES = ("hydra", "argparse", "trl")
"""How ``key`` is spelled: a verl Hydra override key (``algorithm.use_kl_in_reward``), an
OpenRLHF argparse flag with its dashes (``--init_kl_coef``; a store-true flag is set with
value ``""`` and unset to turn it off), a TRL config field (``beta``)."""

LABELS = ("native", "with kl-patches")
"""``native``: the library alone accepts the changed launch (checked with its own parser);
``with kl-patches``: the change needs the kl-patches launcher or patch."""


@dataclass(frozen=True)
class Change:
    """One edit of one setting of a launch."""

    action: str
    """One of :data:`ACTIONS`."""
    namespace: str
    """One of :data:`NAMESPACES`: how :attr:`key` is spelled."""
    key: str
    """The setting, spelled as the library reads it (see :data:`NAMESPACES`)."""
    value: str | None = None
    """The new value for ``set`` (``""`` for a store-true flag), the launcher for
    ``entry_point``; ``None`` for ``unset`` and ``rename``."""
    new_key: str | None = None
    """For ``rename`` only: the name the release accepts."""
    reason: str = ""
    """The finding code(s) this change resolves (``verl.k3_in_loss``), for the report."""

    @property
    def module_switch(self) -> bool:
        """True for an ``entry_point`` change to the library's own module (a release's new
        name for the launch's entry), not to a kl-patches launcher."""
        value = str(self.value or "")
        return (
            self.action == "entry_point"
            and re.fullmatch(r"[\w.]+", value) is not None
            and not value.startswith("kl_patches")
        )

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"unknown change action {self.action!r}; valid: {', '.join(ACTIONS)}")
        if self.namespace not in NAMESPACES:
            raise ValueError(
                f"unknown change namespace {self.namespace!r}; valid: {', '.join(NAMESPACES)}"
            )
        if not self.key:
            raise ValueError("a change needs the key it edits")
        if self.action in ("set", "entry_point") and self.value is None:
            raise ValueError(f"a {self.action!r} change needs a value ({self.key})")
        if (self.action == "rename") != (self.new_key is not None):
            raise ValueError(f"new_key is for a 'rename' change only ({self.key})")


@dataclass(frozen=True)
class ChangeSet:
    """Every change of one launch, merged: applied together, the re-audit is clean."""

    changes: tuple[Change, ...]
    """The edits, at most one per key."""
    label: str
    """One of :data:`LABELS`."""
    user_choices: tuple[str, ...] = field(default_factory=tuple)
    """What only the user can decide (each with its options), left as findings after the fix."""

    def __post_init__(self) -> None:
        if self.label not in LABELS:
            raise ValueError(f"unknown fix label {self.label!r}; valid: {', '.join(LABELS)}")
        keys = [(c.namespace, c.key) for c in self.changes]
        if len(keys) != len(set(keys)):
            raise ValueError(f"a change set edits each key once: {keys}")
