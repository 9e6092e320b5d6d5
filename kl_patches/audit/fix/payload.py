"""Apply a :class:`~.change.Change` to a launch's reader payload (no text is touched).

The fix model (:mod:`.plan`) checks a change set by re-auditing the launch with the changes
applied to what the reader receives: a Hydra override list (verl), an argv (OpenRLHF, TRL's
command line), or a config mapping (a verl or TRL YAML). The text writers then make the same
edits in the file, and the file is re-audited again before anything is written.

Deviation: an ``entry_point`` change is not applied here; :mod:`.plan` gives the re-audit the
kl-patches launcher's KLConfig instead (what the launcher would run).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kl_patches.audit.fix.change import Change

__all__ = ["apply_payload", "override_key"]


def override_key(item: str) -> str:
    """The key of one Hydra override (``+``/``++``/``~`` stripped, value dropped)."""
    return item.lstrip("+~").split("=", 1)[0].strip()


def _hydra(items: list[str], change: Change) -> list[str]:
    if change.action == "rename" and change.key.startswith("+"):  # +key=v -> key=v in place
        return [
            f"{change.new_key}={str(i).split('=', 1)[1]}"
            if str(i).split("=", 1)[0] == change.key and "=" in str(i)
            else i
            for i in items
        ]
    out = [i for i in items if override_key(str(i)) != change.key]
    prefix = next(
        (str(i)[: len(str(i)) - len(str(i).lstrip("+"))] for i in items
         if override_key(str(i)) == change.key and str(i).startswith("+")),
        "",
    )  # fmt: skip
    if change.action == "set":
        out.append(f"{prefix}{change.key}={change.value}")
    elif change.action == "rename":
        old = next((str(i) for i in items if override_key(str(i)) == change.key), None)
        if old is not None:
            out.append(f"{change.new_key}={old.split('=', 1)[1] if '=' in old else ''}")
    return out


def flag_span(argv: Sequence[str], i: int) -> int:
    """How many words the flag at ``argv[i]`` takes (itself and its value)."""
    word = str(argv[i])
    if "=" in word:
        return 1
    if i + 1 < len(argv) and not str(argv[i + 1]).startswith("--"):
        return 2
    return 1


def flag_name(word: str) -> str:
    return str(word).split("=", 1)[0]


def _argv(argv: list[str], change: Change) -> list[str]:
    out: list[str] = []
    found: list[str] | None = None
    i = 0
    while i < len(argv):
        n = flag_span(argv, i)
        if flag_name(argv[i]) == change.key:
            found = [str(w) for w in argv[i : i + n]]
        else:
            out += [str(w) for w in argv[i : i + n]]
        i += n
    if change.action == "set":
        out += [change.key] + ([str(change.value)] if change.value != "" else [])
    elif change.action == "rename" and found is not None:
        out += [str(change.new_key), *found[1:]]
    return out


def as_flag(change: Change) -> Change:
    """A TRL field change as its command-line flag (``beta`` -> ``--beta``)."""
    import dataclasses

    new = f"--{change.new_key}" if change.new_key else None
    return dataclasses.replace(change, key=f"--{change.key}", new_key=new)


def _mapping(tree: dict[str, Any], change: Change) -> dict[str, Any]:
    import copy

    out = copy.deepcopy(tree)
    parts = change.key.split(".")
    node = out
    for p in parts[:-1]:
        nxt = node.get(p)
        if not isinstance(nxt, dict):
            if change.action != "set":
                return out
            nxt = node[p] = {}
        node = nxt
    last = parts[-1]
    old = node.pop(last, None)
    if change.action == "set":
        node[last] = _typed(str(change.value))
    elif change.action == "rename" and old is not None:
        node[str(change.new_key).split(".")[-1]] = old
    return out


def _typed(value: str) -> Any:
    """A command-line value as YAML would load it (``True`` -> True, ``0.001`` -> 0.001)."""
    import yaml

    try:
        return yaml.safe_load(value.lower() if value in ("True", "False") else value)
    except yaml.YAMLError:
        return value


def apply_payload(payload: Any, changes: Sequence[Change]) -> Any:
    """``payload`` with ``changes`` applied (a new object; entry-point changes skipped)."""
    for change in changes:
        if change.action == "entry_point":
            continue
        if isinstance(payload, dict):
            payload = _mapping(payload, change)
        elif change.namespace == "hydra":
            payload = _hydra([str(i) for i in payload], change)
        elif change.namespace == "trl":
            payload = _argv([str(i) for i in payload], as_flag(change))
        else:
            payload = _argv([str(i) for i in payload], change)
    return payload
