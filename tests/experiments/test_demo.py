"""``kl-patches demo`` at a small size: every part runs, writes its plots and says what it found."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kl_patches.cli import demo as demo_cli
from kl_patches.experiments import bias, demo
from kl_patches.experiments.reproduce_report import summarise


def _small_bias(monkeypatch: pytest.MonkeyPatch) -> None:
    table, sweep = bias.run_table, bias.run_sweep

    def small_table(
        vocab: int = 3,
        length: int = 2,
        seed: int = 0,
        batch_size: int = 16,
        num_batches: int = 5,
        show_progress: bool = True,
    ) -> Any:
        return table(vocab, length, seed, batch_size, 5, show_progress)

    def small_sweep(**kw: Any) -> Any:
        kw.update(lengths=(1, 2), num_batches=5)
        return sweep(**kw)

    monkeypatch.setattr(bias, "run_table", small_table)
    monkeypatch.setattr(bias, "run_sweep", small_sweep)


def test_demo_runs_and_writes_its_plots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _small_bias(monkeypatch)
    args = ["--out", str(tmp_path), "--steps", "5", "--seeds", "2", "--quiet", "--no-audit"]
    assert demo_cli.main(args) == 0
    out = capsys.readouterr().out
    for part in ("1. Which gradient", "2. Checked by exact", "3. Training", "Summary:"):
        assert part in out
    assert "4. Audit" not in out
    for name in ("bias_vs_length.png", "reproduce_curves.png", "reproduce_summary.png"):
        assert (tmp_path / name).stat().st_size > 0


def test_summaries_quote_this_runs_numbers() -> None:
    runs = demo.run_training(steps=5, seeds=2, show_progress=False)
    rows = summarise(runs, demo.DEMO_BETAS)
    k1 = next(r for r in rows if r.name == "k1-in-reward" and r.beta == max(demo.DEMO_BETAS))
    text = "\n".join(demo.closing_summary(rows) + demo.training_summary(rows))
    assert f"{k1.reverse_kl.mean:.2f} (k1-in-reward)" in text
    assert f"k1-in-reward ends at {k1.objective.mean:.3f}" in text


def test_audit_of_the_shipped_recipes() -> None:
    folder = demo.recipes_folder()
    if folder is None or not any(folder.rglob("*.sh")):
        pytest.fail("recipes/ with launch scripts is part of the source checkout")
    lines = demo.audit_recipes(folder)
    assert lines and "status" in lines[0]
    assert not any(line.startswith("  not read:") for line in lines), lines
    assert "trainers" in lines[-1]


def test_audit_of_the_libraries_defaults() -> None:
    lines = demo.audit_defaults()
    assert "status" in lines[0]
    assert not any("defaults not read" in line for line in lines), lines
    for library in ("verl", "openrlhf", "trl"):
        assert any(line.split()[1:3] == [library, "defaults"] for line in lines[2:]), lines
