"""The tree reads as its layers: every adapter folder has the same jobs, and tests mirror them.

A library adapter is one folder with one file per job; the audit and the CLI rely on those
files by name (see ``kl_patches.adapters.base.JOBS``). Each job of each adapter has a test file
of the same name in ``tests/adapters/<library>/``, so a missing layer shows as a missing file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches import adapters

ROOT = Path(__file__).resolve().parents[1]
JOBS = ("translate", "read", "patch", "delivery", "launch", "versions", "descriptor", "recording")
TESTED_JOBS = ("translate", "read", "patch", "delivery", "launch")
LAYERS = ("adapters", "audit", "experiments", "cli", "dev")


@pytest.mark.parametrize("library", adapters.names())
def test_every_adapter_has_every_job_and_its_tests(library: str) -> None:
    folder = ROOT / "kl_patches" / "adapters" / library
    assert sorted(j for j in JOBS if not (folder / f"{j}.py").exists()) == []
    tests = ROOT / "tests" / "adapters" / library
    assert sorted(j for j in TESTED_JOBS if not (tests / f"test_{j}.py").exists()) == []


def test_every_layer_has_a_test_folder() -> None:
    for layer in LAYERS:
        assert (ROOT / "kl_patches" / layer / "__init__.py").exists(), layer
        assert any((ROOT / "tests" / layer).glob("test_*.py")), layer


def test_shared_adapter_modules_have_tests() -> None:
    shared = [
        p.stem for p in (ROOT / "kl_patches" / "adapters").glob("*.py") if p.stem != "__init__"
    ]
    tested = {p.stem.removeprefix("test_") for p in (ROOT / "tests" / "adapters").glob("test_*.py")}
    assert sorted(set(shared) - tested - {"base"}) == []  # base: through test_registry
