"""Shared test settings: no hub access, deterministic torch."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    """Tests marked ``library(NAME)`` need that library's own code; they run in its nox session
    (which sets ``KL_PATCHES_TEST_LIBRARY=NAME``) and are deselected, not skipped, where it is
    not installed. In the session of that library, a missing install is an error."""
    import importlib.util

    import pytest

    session_library = os.environ.get("KL_PATCHES_TEST_LIBRARY", "")
    keep, drop = [], []
    for item in items:
        marker = item.get_closest_marker("library")
        if marker is None:
            keep.append(item)
            continue
        name = marker.args[0]
        if importlib.util.find_spec(name) is not None:
            keep.append(item)
        elif name == session_library:
            raise pytest.UsageError(f"{item.nodeid} needs {name}, which this session lacks")
        else:
            drop.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
