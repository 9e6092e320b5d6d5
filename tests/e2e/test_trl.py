"""TRL's own GRPO script end to end on CPU, launched as users launch it.

Each configuration is one 3-step run on the tiny task (``harness.trl``): TRL's own
``python -m trl.scripts.grpo`` with ``beta`` for the native k3-in-loss baseline (no kl-patches),
and ``python -m kl_patches.trl grpo --config run.yaml --kl ...`` for k1-in-reward, k2 on the
sequence log-ratio in the loss and k1-in-both with one coefficient; k1-in-reward also runs under
``accelerate launch`` with two CPU ranks (gloo).

Inside the loop (``harness.trl_record``) every rank records, per training step, the task
rewards its reward function returned, the inputs of ``compute_loss`` after it ran (advantages,
reference log-probs, masks), the policy log-probs of the loss forward and the loss. The test
recomputes the advantages (the sequence KL subtracted from the task reward before GRPO's group
baseline) and the loss (TRL's policy term plus the KL term of each configuration) from those
inputs with the formulas, to 1e-5 relative, checks that every rank applied the config (none in
the native run) and that the KL metrics reach TRL's log under the shared ``kl_patches/`` prefix.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e import recompute as rc
from tests.e2e.harness import releases, runs
from tests.e2e.harness import trl as harness

VERSION = releases.check("trl")
COEF = 0.05
EPS = 1e-4  # TRL's GRPO epsilon
PAD = 0  # the tiny tokenizer's <|endoftext|>, TRL's left padding of prompts


@dataclass(frozen=True)
class Config:
    """One run and what the test expects from it."""

    name: str
    flags: tuple[str, ...] = ()
    native: bool = False
    reward: str | None = None
    loss: str | None = None
    granularity: str = "token"
    ranks: int = 1


CONFIGS = [
    Config("native-k3-in-loss", native=True, loss="k3"),
    Config("k1-in-reward", ("--kl", "k1-in-reward", "--kl.coef", str(COEF)), reward="k1"),
    Config(
        "k2-sequence-in-loss",
        ("--kl", "k2-in-loss", "--kl.granularity", "sequence", "--kl.coef", str(COEF)),
        loss="k2",
        granularity="sequence",
    ),
    Config("k1-in-both", ("--kl", "k1-in-both", "--kl.coef", str(COEF)), reward="k1", loss="k1"),
    Config(
        "k1-in-reward-2-ranks",
        ("--kl", "k1-in-reward", "--kl.coef", str(COEF)),
        reward="k1",
        ranks=2,
    ),
]


def _command(config: Config, yaml: Path) -> list[str]:
    target = ["trl.scripts.grpo"] if config.native else ["kl_patches.trl", "grpo"]
    tail = [*target, "--config", str(yaml), *config.flags]
    if config.ranks == 1:
        return [sys.executable, "-m", *tail]
    return [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes",
        str(config.ranks), "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend",
        "no", "-m", *tail,
    ]  # fmt: skip


def _logged(output: str) -> list[dict[str, str]]:
    """TRL's printed log lines (one dict per logging step)."""
    out = []
    for line in output.splitlines():
        if line.startswith("{'loss'"):
            out.append(ast.literal_eval(line))
    return out


@pytest.mark.parametrize("config", CONFIGS, ids=[c.name for c in CONFIGS])
def test_trl_run(config: Config, task, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    yaml = harness.write_config(task, tmp_path, beta=COEF if config.native else 0.0)
    record = tmp_path / "record"
    done = runs.launch(
        _command(config, yaml), harness.environment(record), record, tmp_path / "run.log", 600
    )
    assert done.returncode == 0, done.tail()
    losses = done.records["loss"]
    assert len(losses) == 3 * config.ranks, done.tail()
    assert sorted({r["step"] for r in losses}) == [0, 1, 2]
    assert sorted({r["rank"] for r in losses}) == list(range(config.ranks))

    # every rank reports the config it applied (none in TRL's own run)
    for r in losses:
        if config.native:
            assert r["config"] is None and r["applied"] is None, r["applied"]
        else:
            assert r["config"]["placement"] == (
                "both" if config.reward and config.loss else "reward" if config.reward else "loss"
            )
            assert r["config"]["coef"] == COEF
    if not config.native:
        ranks = [f"kl_patches.trl rank {i}/{config.ranks}" for i in range(config.ranks)]
        assert all(line in done.output for line in ranks), done.tail()
        assert done.output.count("trl patch active in pid") == config.ranks

    # the KL metrics reach TRL's log under the shared prefix (TRL's own run logs none)
    logged = _logged(done.output)
    assert len(logged) == 3, done.tail()
    for entry in logged:
        ours = {k for k in entry if k.startswith("kl_patches/")}
        assert not any(k.startswith("kl/") for k in entry), sorted(entry)
        if config.native:
            assert not ours
            continue
        assert "kl_patches/active" in ours
        if config.reward:
            assert {"kl_patches/reward_sequence_kl", "kl_patches/reward_penalty"} <= ours
        if config.loss:
            assert "kl_patches/loss_kl" in ours

    for step in (0, 1, 2):
        _check_step(config, [r for r in losses if r["step"] == step], step)


def _check_step(config: Config, records: list[dict], step: int) -> None:  # type: ignore[type-arg]
    """Advantages and loss of one step (all ranks' rows together for the group baseline)."""
    import torch

    records = sorted(records, key=lambda r: r["rank"])
    # rows of every rank (each rank pads its own batch: widths differ, so row by row)
    task, penalty, advantages, groups = [], [], [], []
    for r in records:
        inputs = r["inputs"]
        rewards = {cids: value for _, cids, value in r["rewards"]}
        logp, ref, mask = r["log_prob_output"][0], inputs["ref_per_token_logps"], inputs[
            "completion_mask"]  # fmt: skip
        for i, (cids, m) in enumerate(zip(inputs["completion_ids"], mask, strict=True)):
            task.append(rewards[tuple(cids[m.bool()].tolist())])
            groups.append(tuple(t for t in inputs["prompt_ids"][i].tolist() if t != PAD))
        advantages.append(rc.array(inputs["advantages"]))
        if config.reward:
            # on-policy, the sampling policy's log-probs are the (detached) loss-forward ones
            penalty.append(COEF * rc.sequence_estimate(logp, ref, mask, config.reward, "token"))
    assert all(len(g) == records[0]["num_generations"] for g in rc.groups(groups))
    total = rc.np.array(task)
    if config.reward:
        kl = rc.np.concatenate(penalty)
        total = total - kl
        if _moved(records):  # a policy that left the reference has a penalty that varies
            assert kl.std() > 0
    expected = rc.grpo(total, groups, eps=EPS)
    err = rc.relative_error(rc.np.concatenate(advantages), expected)
    assert err < rc.RTOL, (config.name, step, "advantages", err)

    for r in records:  # each rank's loss from its own rows
        inputs = r["inputs"]
        logp, ref = r["log_prob_output"][0], inputs["ref_per_token_logps"]
        mask = inputs["completion_mask"]
        # TRL's own loss term, in its dtype and order of operations (on-policy the ratio is 1,
        # so each token contributes -A); TRL's dapo normaliser is the token count per rank
        per_token = -inputs["advantages"].unsqueeze(1).expand_as(logp)
        if config.native:  # TRL's k3 joins the same per-token sum
            delta = ref - logp
            per_token = per_token + COEF * (torch.exp(delta) - delta - 1)
        normalizer = inputs["num_items_in_batch"].clamp(min=1.0) / r["world"]
        trl_loss = float((per_token * mask).sum() / normalizer)
        kl_term = 0.0
        if config.loss and not config.native:  # kl-patches' term: sum aggregation, row mean
            per_row = rc.sequence_estimate(logp, ref, mask, config.loss, config.granularity)
            kl_term = COEF * float(per_row.mean())
            if _moved([r]):
                assert abs(kl_term) > 0
        loss = float(r["loss"])
        err = rc.relative_error(loss, trl_loss + kl_term)
        assert err < rc.RTOL, (config.name, step, r["rank"], loss, trl_loss, kl_term, err)


def _moved(records: list[dict]) -> bool:  # type: ignore[type-arg]
    """True when the sampling policy's log-probs differ from the reference's on some completion
    token of ``records``: only then must a KL term be non-zero. The policy can still be the
    reference after step 0 (every group's rewards equal, so every advantage and gradient is 0)."""
    for r in records:
        logp, ref = r["log_prob_output"][0], r["inputs"]["ref_per_token_logps"]
        mask = r["inputs"]["completion_mask"].bool()
        gap = (logp.detach() - ref)[mask]
        if gap.numel() and bool(gap.abs().max() > 0):
            return True
    return False
