"""The README and docs quickstart commands that need TRL, run as written in the TRL session
(the others run in the core session: ``tests/test_readme.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("trl")

from tests import quickstart

TRL = quickstart.of("trl")


@pytest.mark.parametrize(("where", "command"), TRL, ids=[c for _, c in TRL])
def test_command_runs_as_written(where: str, command: str, tmp_path: Path) -> None:
    done = quickstart.run(command, quickstart.ROOT, tmp_path)
    assert done.returncode == 0, (where, command, done.stdout[-2000:], done.stderr[-3000:])
    if "smoke trl" in command:
        assert "KL metrics logged by TRL" in done.stdout
