"""``kl-patches smoke openrlhf``: OpenRLHF's own trainer on the CPU, launched as users launch it.

Runs the command as a user types it (a subprocess of ``python -m kl_patches smoke openrlhf``),
which launches ``python -m kl_patches.openrlhf <flags> --kl k1-in-reward --kl.coef 0.05`` with
the package's CPU stand-ins, and checks what it printed against the run's own log: the estimate
first, the launcher's KL block, one table row per KL metric with the values OpenRLHF logged at
each step, the patch's metrics among them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openrlhf")

from kl_patches.cli import smoke  # noqa: E402
from kl_patches.experiments.cpu import openrlhf_trial, trial  # noqa: E402

if trial.missing("openrlhf") or trial.release_problem("openrlhf"):
    pytest.skip(
        f"the CPU trial needs {trial.missing('openrlhf') or trial.release_problem('openrlhf')}",
        allow_module_level=True,
    )


def test_smoke_openrlhf_runs_openrlhfs_trainer_and_prints_its_kl_metrics(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "kl_patches", "smoke", "openrlhf", "--steps", "2",
               "--output-dir", str(tmp_path)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, (done.stderr[-3000:], done.stdout[-2000:])
    err = done.stderr.splitlines()
    assert err[0].startswith("kl-patches smoke openrlhf: 2 steps of OpenRLHF's own trainer")
    assert " on two cores" in err[0]
    assert "kl_patches.openrlhf: KL regulariser for OpenRLHF" in err  # the launcher's block
    assert "  config:    k1-in-reward, coef=0.05" in err
    assert any(line.startswith("  step 2 logged after ") for line in err)

    logged = openrlhf_trial.logged((tmp_path / "run.log").read_text())
    assert sorted(logged) == [1, 2]
    for metrics in logged.values():  # the patch ran and logged under the shared prefix
        assert {"kl_patches/active", "kl_patches/reward_sequence_kl"} <= set(metrics)
    table = done.stdout.split("KL metrics logged by OpenRLHF", 1)[1]
    rows = {line.split()[0]: line.split()[1:] for line in table.splitlines() if "kl" in line}
    assert "kl_patches/reward_penalty" in rows
    for key, cells in rows.items():
        assert cells == [smoke.cell(logged[s].get(key)) for s in (1, 2)], key
    assert "kl-patches smoke openrlhf: 2 steps with k1-in-reward" in done.stdout
