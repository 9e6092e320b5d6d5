"""Test-only timing of kl-patches' KL code inside a running trainer (``KL_E2E_PROFILE``).

Wraps the public functions of :mod:`kl_patches.core` when it is imported (before any adapter
imports them by name) and keeps, per process, the wall time spent in them (outermost calls only)
and the number of calls, rewritten to ``<KL_E2E_PROFILE>/kl-<pid>.json`` after every call. Used by
``benchmarks/e2e_overhead.py``; nothing happens without the variable.
"""

from __future__ import annotations

import functools
import json
import os
import time
from pathlib import Path
from typing import Any

ENV = "KL_E2E_PROFILE"
_TOTAL = {"seconds": 0.0, "calls": 0}
_DEPTH = [0]


def _wrap(function: Any) -> Any:
    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        if _DEPTH[0]:
            return function(*args, **kwargs)
        _DEPTH[0] += 1
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            _DEPTH[0] -= 1
            _TOTAL["seconds"] += time.perf_counter() - start
            _TOTAL["calls"] += 1
            path = Path(os.environ[ENV]) / f"kl-{os.getpid()}.json"
            path.write_text(json.dumps(_TOTAL))

    return timed


def install() -> None:
    """Wrap ``kl_patches.core`` when it is imported (only with ``KL_E2E_PROFILE``)."""
    if not os.environ.get(ENV):
        return
    from kl_patches.adapters.delivery import after_import

    def wrap() -> None:
        from kl_patches import core

        for name in getattr(core, "__all__", []):
            value = getattr(core, name, None)
            if callable(value) and not isinstance(value, type) and not name.startswith("_"):
                setattr(core, name, _wrap(value))

    after_import(["kl_patches.core"], wrap)
