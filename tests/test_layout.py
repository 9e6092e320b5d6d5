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


SOURCE_SUFFIXES = {".py", ".md", ".json", ".yaml", ".yml", ".sh", ".toml", ".txt"}
NOT_SOURCE = {"__pycache__", ".nox", ".git", ".venv", ".venv-test", ".mypy_cache", ".ruff_cache",
              ".pytest_cache", "build", "dist", "out"}  # fmt: skip


def test_no_source_file_is_git_ignored() -> None:
    """A file the package or its tests read must reach a clean clone: a too-wide .gitignore
    pattern (``site/`` once hid the e2e harness's ``startup`` hook) fails here, in the working
    tree where the file exists, instead of in CI where it is silently absent."""
    import subprocess

    roots = ("kl_patches", "tests", "benchmarks", "docs", "recipes", ".ci")
    files = [
        str(p.relative_to(ROOT))
        for r in roots
        for p in (ROOT / r).rglob("*")
        if p.is_file() and p.suffix in SOURCE_SUFFIXES and not NOT_SOURCE & set(p.parts)
        and not any(part.endswith(".egg-info") for part in p.parts)
    ]  # fmt: skip
    assert files
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"], cwd=ROOT, input="\n".join(files),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr  # 1: nothing ignored
    assert done.stdout.split() == []
