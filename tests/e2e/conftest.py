"""Shared fixtures of the end-to-end runs: the tiny task, built once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e import recompute
from tests.e2e.harness import tiny


@pytest.fixture(scope="session")
def task(tmp_path_factory: pytest.TempPathFactory) -> tiny.TinyTask:
    """The tiny model, tokenizer, datasets and reward file (built once, reused by every run)."""
    return tiny.build(Path(tmp_path_factory.mktemp("tiny")))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The largest in-loop relative error of each run (what the recomputation found)."""
    if recompute.LARGEST:
        terminalreporter.section("in-loop recomputation: largest relative error per run")
        for test, error in sorted(recompute.LARGEST.items()):
            terminalreporter.write_line(f"{error:9.2e}  {test}")
