"""``kl-patches smoke verl``: verl's own trainer on the CPU, launched as users launch it.

Runs the command as a user types it (a subprocess of ``python -m kl_patches smoke verl``), which
launches ``kl-patches verl --kl k1-in-reward --kl.coef 0.05 -- <overrides>`` with the package's
CPU stand-ins, and checks what it printed against the run's own log: the estimate first, the
launcher's KL block, one table row per KL metric with the values verl logged at each step.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl")

from kl_patches.cli import smoke  # noqa: E402
from kl_patches.experiments.cpu import trial, verl_trial  # noqa: E402

if trial.missing("verl") or trial.release_problem("verl"):
    pytest.skip(
        f"the CPU trial needs {trial.missing('verl') or trial.release_problem('verl')}",
        allow_module_level=True,
    )


def test_smoke_verl_runs_verls_trainer_and_prints_its_kl_metrics(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "kl_patches", "smoke", "verl", "--steps", "2",
               "--output-dir", str(tmp_path)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, (done.stderr[-3000:], done.stdout[-2000:])
    err = done.stderr.splitlines()
    assert err[0].startswith("kl-patches smoke verl: 2 steps of verl's own trainer on the CPU")
    assert " on two cores" in err[0]
    assert "kl-patches verl: KL regulariser for verl" in err  # the launcher's own block
    assert "  config:    k1-in-reward, coef=0.05" in err
    assert any(line.startswith("  step 2 logged after ") for line in err)

    logged = verl_trial.logged((tmp_path / "run.log").read_text())
    assert sorted(logged) == [1, 2]
    # k1-in-reward is verl's own (use_kl_in_reward, kl_penalty=kl): verl's metric, no patch
    assert float(logged[1]["actor/reward_kl_penalty_coeff"]) == 0.05
    assert "kl_patches/active" not in logged[1]
    table = done.stdout.split("KL metrics logged by verl", 1)[1]
    rows = {line.split()[0]: line.split()[1:] for line in table.splitlines() if "/" in line}
    assert set(rows) >= {"actor/reward_kl_penalty", "actor/reward_kl_penalty_coeff"}
    for key, cells in rows.items():
        assert cells == [smoke.cell(logged[s].get(key)) for s in (1, 2)], key
    assert "kl-patches smoke verl: 2 steps with k1-in-reward" in done.stdout
    assert (tmp_path / "tiny" / "model" / "config.json").exists()  # kept: --output-dir
