"""Fixtures shared by the audit tests."""

from __future__ import annotations

import pytest

from kl_patches.audit import versions as audit_versions


@pytest.fixture
def nothing_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Version detection sees no installed package (an adapter session installs one):
    ``importlib.metadata.version`` is what both the detection and ``VersionSupport`` ask. Used
    by a module with ``pytestmark = pytest.mark.usefixtures("nothing_installed")``."""

    def missing(name: str) -> str:
        raise audit_versions.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(audit_versions.metadata, "version", missing)
