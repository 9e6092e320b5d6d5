"""The README and docs quickstart commands that need OpenRLHF, run as written in the OpenRLHF session
(``kl-patches smoke openrlhf``: OpenRLHF's own trainer on the CPU; the others run in the core session:
``tests/test_readme.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("openrlhf")

from tests import quickstart  # noqa: E402

COMMANDS = quickstart.of("openrlhf")


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[c for _, c in COMMANDS])
def test_command_runs_as_written(where: str, command: str, tmp_path: Path) -> None:
    done = quickstart.run(command, quickstart.ROOT, tmp_path)
    assert done.returncode == 0, (where, command, done.stdout[-2000:], done.stderr[-3000:])
    if "smoke openrlhf" in command:
        assert "KL metrics logged by OpenRLHF" in done.stdout
