"""The paper miniature's sweep: the plan covers the grid, runs resume, reports compute right."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest

from kl_patches.config import KLConfig
from kl_patches.experiments import paper, paper_report
from kl_patches.experiments.paper_train import NATIVE, RunRecord, kl_config


def test_the_grid_has_the_papers_configurations_and_their_kl_configs() -> None:
    for name in ("k1-in-reward", "k3-in-loss", "k1-in-loss", "k3-in-reward", "k1-in-both", "none"):
        assert name in paper.GRID
    assert kl_config("k1-in-reward", 0.3) == KLConfig.parse("k1-in-reward", coef=0.3)
    seq = kl_config("k2-in-loss (sequence)", 0.1)
    assert seq is not None and seq.estimator == "k2" and seq.granularity == "sequence"
    assert seq.placement == "loss"
    assert all(kl_config(n, 0.1) is None for n in NATIVE)  # TRL's own trainer runs these


def test_the_plan_runs_every_configuration_beta_and_seed_once() -> None:
    plan = paper.Plan(betas=(0.1, 1.0), seeds=3)
    jobs = plan.jobs()
    assert len(jobs) == len(set(jobs)) == 3 * ((len(paper.GRID) - 1) * 2 + 1)
    assert {(n, b) for n, b, _ in jobs} == {
        (n, b) for n in paper.GRID for b in ((0.0,) if n == "none" else (0.1, 1.0))
    }
    first = jobs[: len(jobs) // 3]  # seed-major: the first third is seed 0 of everything
    assert {s for _, _, s in first} == {0} and {n for n, _, _ in first} == set(paper.GRID)


def test_bad_plans_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown configurations"):
        paper.Plan(configs=("k9-in-reward",))
    with pytest.raises(ValueError, match="betas"):
        paper.Plan(betas=())


def _fake_record(name: str, beta: float, seed: int, *_: Any) -> RunRecord:
    """A run whose accuracies are a known function of its configuration and seed."""
    acc = 0.5 + 0.1 * seed + (0.2 if name == "k1-in-reward" else 0.0)
    ev = {
        k: {"mean": v, "se": 0.01, "n": 100}
        for k, v in (
            ("acc_id", acc),
            ("acc_ood_length", acc / 2),
            ("acc_ood_ops", acc / 4),
            ("kl_k1", 1.0),
            ("kl_full", beta),
            ("entropy", 0.2),
        )
    }
    ref = {**ev, "acc_id": {"mean": 0.6, "se": 0.0, "n": 1}, "kl_full": {"mean": 0.0}}
    rec = RunRecord(name=name, beta=beta, seed=seed, steps=[0, 10], evals=[ref, ev])
    if name == "k3-in-reward" and seed == 1:
        rec.steps, rec.evals, rec.error = [0], [ref], "NonFiniteKLError: boom"
    return rec


def test_sweep_writes_resumes_and_refuses_other_settings(tmp_path: Path, monkeypatch: Any) -> None:
    plan = paper.Plan(betas=(0.3,), seeds=2, configs=("k1-in-reward", "k3-in-reward", "none"))
    monkeypatch.setattr(
        "kl_patches.experiments.paper_pretrain.pretrained", lambda *a, **k: tmp_path / "ref"
    )
    calls: list[tuple[str, float, int]] = []

    def train(name: str, beta: float, seed: int, *rest: Any) -> RunRecord:
        calls.append((name, beta, seed))
        return _fake_record(name, beta, seed)

    results = tmp_path / "runs.jsonl"
    small = paper.Plan(betas=plan.betas, seeds=1, configs=plan.configs)
    paper.run_sweep(small, results, tmp_path, show_progress=False, train=train)
    assert len(calls) == 3
    records = paper.run_sweep(plan, results, tmp_path, show_progress=False, train=train)
    assert len(calls) == 6 and {c[2] for c in calls[3:]} == {1}  # only the new seed ran
    assert len(records) == 6
    again = paper_report.records_from_json_lines(results.read_text())
    assert [r.as_dict() for r in again] == [r.as_dict() for r in records]
    assert json.loads(results.read_text().splitlines()[0]) == {"plan": plan.key()}
    other = paper.Plan(betas=(0.3,), seeds=2, rl=paper.RLSettings(steps=7))
    with pytest.raises(ValueError, match="other settings"):
        paper.run_sweep(other, results, tmp_path, show_progress=False, train=train)


def test_deadline_stops_starting_runs(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(
        "kl_patches.experiments.paper_pretrain.pretrained", lambda *a, **k: tmp_path / "ref"
    )
    plan = paper.Plan(betas=(0.3,), seeds=2, configs=("k1-in-reward", "none"))
    records = paper.run_sweep(
        plan, tmp_path / "r.jsonl", tmp_path, show_progress=False, deadline=0.0, train=_fake_record
    )
    assert records == []


def test_t_interval_and_summary_on_known_numbers() -> None:
    iv = paper_report.Interval.of([1.0, 2.0, 3.0])
    assert iv.mean == 2.0 and math.isclose(iv.half, 4.303 * 1.0 / math.sqrt(3))
    assert math.isnan(paper_report.Interval.of([1.0]).half)
    records = [_fake_record(n, 0.3, s) for n in ("k1-in-reward", "k3-in-reward") for s in range(3)]
    rows = {r.name: r for r in paper_report.summarise(records)}
    k1 = rows["k1-in-reward"]
    assert math.isclose(k1.acc["id"].mean, 0.8) and k1.runs == 3 and k1.diverged == 0
    assert math.isclose(k1.acc["ood_ops"].mean, 0.2)
    k3 = rows["k3-in-reward"]
    assert k3.diverged == 1 and k3.acc["id"].n == 2  # the errored run counts only as diverged
    assert math.isclose(k3.acc["id"].mean, statistics.fmean([0.5, 0.7]))


def test_collapse_below_half_the_reference_counts_as_diverged() -> None:
    rec = _fake_record("k1-in-loss", 0.3, 0)
    rec.evals[-1]["acc_id"]["mean"] = 0.29
    assert paper_report.diverged(rec, ref_id=0.6)
    rec.evals[-1]["acc_id"]["mean"] = 0.31
    assert not paper_report.diverged(rec, ref_id=0.6)


def test_gain_and_table_name_the_papers_comparison() -> None:
    records = [_fake_record(n, 0.3, s) for n in ("k1-in-reward", "k3-in-loss") for s in range(4)]
    gain = paper_report.ood_gain(records, 0.3, "ood_length")
    assert gain is not None
    assert math.isclose(gain[0], 0.4 / 0.3 * 0 + (0.85 / 2) / (0.65 / 2) - 1)
    assert gain[1] <= gain[0] <= gain[2]
    table = paper_report.format_markdown(records)
    assert "reference (before RL)" in table and "k1-in-reward" in table and "0/4" in table
