"""The README and docs quickstart commands that need verl, run as written in the verl
session (the others run in the core session: ``tests/test_readme.py``).

The one such command is ``kl-patches smoke verl``: verl's own trainer for 3 steps on the
CPU, launched by the trial as a user launches it
(``kl-patches verl --kl k1-in-reward --kl.coef 0.05 -- <overrides>``)
with the package's CPU stand-ins. The test reads the run's log (``--output-dir``, added by
:func:`tests.quickstart.run`) and checks what smoke printed against it: the estimate first, the
launcher's own KL block, a progress line per step, and one table row per KL metric holding the
values verl logged at each step.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("verl")

from kl_patches.cli import smoke
from kl_patches.experiments.cpu import verl_trial
from tests import quickstart

COMMANDS = quickstart.of("verl")
STEPS = [1, 2, 3]


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[c for _, c in COMMANDS])
def test_command_runs_as_written(where: str, command: str, tmp_path: Path) -> None:
    done = quickstart.run(command, quickstart.ROOT, tmp_path)
    assert done.returncode == 0, (where, command, done.stdout[-2000:], done.stderr[-3000:])
    if command == "kl-patches smoke verl":
        _check_smoke(done.stdout, done.stderr, tmp_path / "smoke")


def _check_smoke(out: str, err_text: str, folder: Path) -> None:
    err = err_text.splitlines()
    assert err[0].startswith("kl-patches smoke verl: 3 steps of verl's own trainer"), err[0]
    assert " on two cores" in err[0]
    assert "kl-patches verl: KL regulariser for verl" in err  # the launcher's own block
    assert "  KL as run:    k1-in-reward, coef=0.05" in "\n".join(err)
    assert [line.split()[1] for line in err if line.startswith("  step ")] == ["1", "2", "3"]

    logged = verl_trial.logged((folder / "run.log").read_text())
    assert sorted(logged) == STEPS
    table = out.split("KL metrics logged by verl", 1)[1].split("kl-patches smoke", 1)[0]
    rows = {line.split()[0]: line.split()[1:] for line in table.splitlines() if "kl" in line}
    for key, cells in rows.items():  # each row holds what verl logged at each step
        assert cells == [smoke.cell(logged[s].get(key)) for s in STEPS], key
    # k1-in-reward is verl's own (use_kl_in_reward, kl_penalty=kl): verl's metrics, no patch
    for metrics in logged.values():
        assert float(metrics["actor/reward_kl_penalty_coeff"]) == 0.05
        assert not [k for k in metrics if "kl_patches/" in k]
    assert {"actor/reward_kl_penalty", "actor/reward_kl_penalty_coeff"} <= set(rows)
    assert "kl-patches smoke verl: 3 steps with k1-in-reward in " in out
    assert (folder / "tiny" / "model" / "config.json").exists()
