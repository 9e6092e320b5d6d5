"""Deprecated path: ``Finding`` and ``NativeReading`` live in :mod:`kl_patches.adapters.base`.

``from kl_patches.reading import Finding, NativeReading`` keeps working, with a deprecation
warning.
"""

from __future__ import annotations

import warnings

from kl_patches.adapters.base import SEVERITIES, Finding, NativeReading

__all__ = ["SEVERITIES", "Finding", "NativeReading"]

warnings.warn(
    "kl_patches.reading is deprecated; import Finding and NativeReading from "
    "kl_patches.adapters.base",
    DeprecationWarning,
    stacklevel=2,
)
