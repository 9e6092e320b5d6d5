"""Deprecated path: the audit's report is :mod:`kl_patches.audit.report`.

``kl_patches.audit_report.to_json`` and the rest keep working, with a deprecation warning.
"""

from __future__ import annotations

import warnings

from kl_patches.audit.report import *  # noqa: F403
from kl_patches.audit.report import SCHEMA, entry_dict, render, render_plain, summary, to_json

__all__ = ["SCHEMA", "entry_dict", "render", "render_plain", "summary", "to_json"]

warnings.warn(
    "kl_patches.audit_report is deprecated; use kl_patches.audit.report",
    DeprecationWarning,
    stacklevel=2,
)
