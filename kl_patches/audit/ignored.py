"""Which keys of an input the adapter's reader did not use (typos, other libraries' keys).

A key is used when it names one of the reading's settings, or when removing it or giving it a
nonsense value changes the reading (or makes the reader refuse it); otherwise the reader ignored
it. Keys are probed in groups, halved while a group changes the reading, so a config of a
thousand keys takes a few hundred reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kl_patches.adapters.base import NativeReading
from kl_patches.audit.model import AuditInput


def _safe_read(read: Callable[[Any], NativeReading], payload: Any) -> NativeReading | None:
    try:
        return read(payload)
    except Exception:
        return None


def argv_items(argv: list[str]) -> list[tuple[str, int, int]]:
    """(key, start, end) of each flag or override: ``--flag v1 v2`` or ``key=value``."""
    items: list[tuple[str, int, int]] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok.startswith("--"):
            j = i + 1
            if "=" not in tok:
                while j < len(argv) and not argv[j].startswith("--") and "=" not in argv[j]:
                    j += 1
            items.append((tok[2:].split("=", 1)[0], i, j))
            i = j
        elif "=" in tok:
            items.append((tok.split("=", 1)[0].lstrip("+~"), i, i + 1))
            i += 1
        else:
            i += 1
    return items


def _leaves(data: dict[str, Any], prefix: str = "") -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for k, v in data.items():
        if isinstance(v, dict) and v:
            out.extend((str(k), *rest) for rest in _leaves(v))
        else:
            out.append((str(k),))
    return out


def _without(data: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    out = dict(data)
    if len(path) == 1:
        out.pop(path[0], None)
    else:
        out[path[0]] = _without(out[path[0]], path[1:])
    return out


def _matches_setting(key: str, settings: Iterable[str]) -> bool:
    key = key.lstrip("-+~")
    return any(key == s or s.endswith("." + key) or key.endswith("." + s) for s in settings)


_PROBE = "__kl_patches_probe__"
"""A value no reader accepts as a real setting: a key whose probe changes nothing is not read."""


def _unchanged(read: Callable[[Any], NativeReading], payload: Any, reading: NativeReading) -> bool:
    other = _safe_read(read, payload)
    return other is not None and other == reading


def ignored_keys(inp: AuditInput, reading: NativeReading) -> tuple[str, ...]:
    """Keys of the input the reader did not use.

    A key is used when it names one of the reading's settings, or when removing it or giving it
    a nonsense value changes the reading (or makes the reader refuse it); otherwise the reader
    ignored it (not KL-relevant, or unknown to the library: a typo). Keys are tested in groups
    (halved while a group changes the reading), so a config of a thousand keys takes a few
    hundred reads, not two thousand.
    """
    from kl_patches import adapters

    descriptor = adapters.get(inp.library)

    def read(payload: Any) -> NativeReading:
        return descriptor.read(payload, **inp.context)

    settings = [str(s) for s in reading.settings]
    payload = inp.payload
    if isinstance(payload, list):
        argv = list(payload)
        items = [it for it in argv_items(argv) if not _matches_setting(it[0], settings)]

        def removed(group: list[Any]) -> Any:
            drop = {k for _, a, b in group for k in range(a, b)}
            return [t for k, t in enumerate(argv) if k not in drop]

        def probed(group: list[Any]) -> Any:
            out = list(argv)
            for _, a, b in group:
                if "=" in argv[a]:
                    out[a] = argv[a].split("=", 1)[0] + "=" + _PROBE
                else:
                    out[a + 1 : b] = [_PROBE] * (b - a - 1)
            return out

        unused = _unused_groups(read, reading, items, removed, probed)
        return tuple(dict.fromkeys(key for key, _, _ in unused))
    if isinstance(payload, dict):
        data = payload
        paths = [p for p in _leaves(data) if not _matches_setting(".".join(p), settings)]

        def removed_d(group: list[Any]) -> Any:
            out = data
            for path in group:
                out = _without(out, path)
            return out

        def probed_d(group: list[Any]) -> Any:
            out = data
            for path in group:
                out = _with(out, path, _PROBE)
            return out

        unused = _unused_groups(read, reading, paths, removed_d, probed_d)
        return tuple(dict.fromkeys(".".join(p) for p in unused))
    return ()


def _unused_groups(
    read: Callable[[Any], NativeReading],
    reading: NativeReading,
    items: list[Any],
    removed: Callable[[list[Any]], Any],
    probed: Callable[[list[Any]], Any],
) -> list[Any]:
    """The items whose removal and probing (as a group) leave the reading unchanged."""
    if not items:
        return []
    if _unchanged(read, removed(items), reading) and _unchanged(read, probed(items), reading):
        return items
    if len(items) == 1:
        return []
    half = len(items) // 2
    return _unused_groups(read, reading, items[:half], removed, probed) + _unused_groups(
        read, reading, items[half:], removed, probed
    )


def _with(data: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out = dict(data)
    out[path[0]] = value if len(path) == 1 else _with(out[path[0]], path[1:], value)
    return out
