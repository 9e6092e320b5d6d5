"""Shared fixtures of the end-to-end runs: the tiny task, built once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.harness import tiny


@pytest.fixture(scope="session")
def task(tmp_path_factory: pytest.TempPathFactory) -> tiny.TinyTask:
    """The tiny model, tokenizer, datasets and reward file (built once, reused by every run)."""
    return tiny.build(Path(tmp_path_factory.mktemp("tiny")))
