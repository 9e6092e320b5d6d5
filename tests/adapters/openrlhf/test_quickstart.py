"""The README and docs quickstart commands that need OpenRLHF, run as written in the OpenRLHF
session (the others run in the core session: ``tests/test_readme.py``).

The one such command is ``kl-patches smoke openrlhf``: OpenRLHF's own trainer for 3 steps on the
CPU, launched by the trial as a user launches it
(``python -m kl_patches.openrlhf <flags> --kl k1-in-reward --kl.coef 0.05``)
with the package's CPU stand-ins. The test reads the run's log (``--output-dir``, added by
:func:`tests.quickstart.run`) and checks what smoke printed against it: the estimate first, the
launcher's own KL block, a progress line per step, and one table row per KL metric holding the
values OpenRLHF logged at each step.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("openrlhf")

from kl_patches.cli import smoke
from kl_patches.experiments.cpu import openrlhf_trial
from tests import quickstart

COMMANDS = quickstart.of("openrlhf")
STEPS = [1, 2, 3]


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[c for _, c in COMMANDS])
def test_command_runs_as_written(where: str, command: str, tmp_path: Path) -> None:
    done = quickstart.run(command, quickstart.ROOT, tmp_path)
    assert done.returncode == 0, (where, command, done.stdout[-2000:], done.stderr[-3000:])
    if command == "kl-patches smoke openrlhf":
        _check_smoke(done.stdout, done.stderr, tmp_path / "smoke")


def _check_smoke(out: str, err_text: str, folder: Path) -> None:
    err = err_text.splitlines()
    assert err[0].startswith("kl-patches smoke openrlhf: 3 steps of OpenRLHF's own trainer"), err[0]
    assert " on two cores" in err[0]
    assert "kl_patches.openrlhf: KL regulariser for OpenRLHF" in err  # the launcher's own block
    assert "  KL as run:    k1-in-reward, coef=0.05" in "\n".join(err)
    assert [line.split()[1] for line in err if line.startswith("  step ")] == ["1", "2", "3"]

    logged = openrlhf_trial.logged((folder / "run.log").read_text())
    assert sorted(logged) == STEPS
    table = out.split("KL metrics logged by OpenRLHF", 1)[1].split("kl-patches smoke", 1)[0]
    rows = {line.split()[0]: line.split()[1:] for line in table.splitlines() if "kl" in line}
    for key, cells in rows.items():  # each row holds what OpenRLHF logged at each step
        assert cells == [smoke.cell(logged[s].get(key)) for s in STEPS], key
    # k1-in-reward is patched in OpenRLHF: the patch's metrics, under the shared prefix
    for metrics in logged.values():
        assert {"kl_patches/active", "kl_patches/reward_sequence_kl"} <= set(metrics)
    assert {"kl_patches/reward_sequence_kl", "kl_patches/reward_penalty"} <= set(rows)
    assert "kl-patches smoke openrlhf: 3 steps with k1-in-reward in " in out
    assert (folder / "tiny" / "model" / "config.json").exists()
