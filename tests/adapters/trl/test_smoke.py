"""``kl-patches smoke trl``: real TRL GRPO steps on the CPU with a tiny model built here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")


def test_smoke_trl_trains_and_prints_the_kl_metrics(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "kl_patches", "smoke", "trl", "--steps", "2",
               "--output-dir", str(tmp_path)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.startswith("kl-patches smoke trl: KL regulariser for TRL\n"), done.stderr
    assert "KL as run:    k1-in-reward, coef=0.05" in done.stderr
    assert "updates:      on-policy: num_iterations=1" in done.stderr  # TRL's GRPOConfig read
    assert "\r" not in done.stderr  # stderr is a pipe here: no progress bars redrawn in place
    table = done.stdout.split("KL metrics logged by TRL", 1)[1]
    rows = [line.split() for line in table.splitlines() if line.strip()[:1].isdigit()]
    assert [row[0] for row in rows] == ["1", "2"]  # one row per training step
    header = next(line for line in table.splitlines() if "step" in line).split()
    assert any(name.startswith("kl") for name in header)
    assert "kl-patches smoke trl: 2 steps with k1-in-reward" in done.stdout
    assert (tmp_path / "model" / "config.json").exists()  # kept: --output-dir


def test_smoke_takes_the_kl_flags(capsys: pytest.CaptureFixture[str]) -> None:
    from kl_patches.cli import smoke

    assert smoke.main(["trl", "--steps", "0"]) == 2  # checked before anything is built
    assert "--steps" in capsys.readouterr().err
