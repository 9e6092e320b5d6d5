"""OpenRLHF's own ``train_ppo_ray`` end to end on CPU, launched as users launch it.

Each configuration is one run of 3 global steps on the tiny task (``harness.openrlhf``):
OpenRLHF's own ``python -m openrlhf.cli.train_ppo_ray`` with ``--algo.kl.use_loss
--algo.kl.estimator k3`` for the native k3-in-loss baseline (no kl-patches), and
``python -m kl_patches.openrlhf <flags> --kl ...`` for k1-in-reward, k1-in-both with one
coefficient, and k1-in-reward with ``importance_weighting="sequence"`` (two updates per rollout,
so the second is off-policy), all patched.

Inside the loop (``harness.openrlhf_record``) the PPOTrainer actor records what OpenRLHF's
advantage computation received and produced, the model actors the log-probs of every scoring
forward (the reference model's among them), the PolicyModelActor each training step (its
policy log-probs and the KL loss OpenRLHF logged). The test recomputes, from the scores and the
log-probs, the rewards (the sum of k1 over the sequence subtracted before the group baseline),
OpenRLHF's ``group_norm`` advantages and the KL loss term, to 1e-5 relative; it checks that
every process that ran KL code reports the config it applied (none in the native run) and that
the KL metrics reach OpenRLHF's logger under the shared ``kl_patches/`` prefix.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e import recompute as rc
from tests.e2e.harness import openrlhf as harness
from tests.e2e.harness import releases, runs

VERSION = releases.check("openrlhf")
COEF = 0.05
EPS = 1e-9  # OpenRLHF's group_norm epsilon
STEP = re.compile(r"Global step (\d+): (\{.*\})")


@dataclass(frozen=True)
class Config:
    """One run and what the test expects from it."""

    name: str
    flags: tuple[str, ...] = ()
    native: bool = False
    reward: bool = False
    """k1 in the reward, subtracted before the group baseline."""
    loss: str | None = None
    sequence_weighted: bool = False
    extra: tuple[str, ...] = ()
    """OpenRLHF flags of the user."""


CONFIGS = [
    Config(
        "native-k3-in-loss",
        native=True,
        loss="k3",
        extra=(
            "--algo.kl.use_loss",
            "--algo.kl.estimator",
            "k3",
            "--algo.kl.init_coef",
            str(COEF),
        ),
    ),
    Config("k1-in-reward", ("--kl", "k1-in-reward", "--kl.coef", str(COEF)), reward=True),
    Config("k1-in-both", ("--kl", "k1-in-both", "--kl.coef", str(COEF)), reward=True, loss="k1"),
    Config(
        "k1-in-reward-sequence-weighted",
        (
            "--kl",
            "k1-in-reward",
            "--kl.coef",
            str(COEF),
            "--kl.importance_weighting",
            "sequence",
        ),
        sequence_weighted=True,
        extra=("--train.micro_batch_size", "4", "--train.batch_size", "4"),
    ),
]


def _command(config: Config, task, folder: Path) -> list[str]:  # type: ignore[no-untyped-def]
    entry = "openrlhf.cli.train_ppo_ray" if config.native else "kl_patches.openrlhf"
    flags = harness.flags(task, folder)
    for i in range(0, len(config.extra), 2):  # the user's flag replaces the harness's
        if config.extra[i] in flags and i + 1 < len(config.extra):
            k = flags.index(config.extra[i])
            if k + 1 < len(flags) and not flags[k + 1].startswith("--"):
                del flags[k : k + 2]
    return [sys.executable, "-m", entry, *flags, *config.extra, *config.flags]


def _logged(output: str) -> dict[int, dict[str, float]]:
    return {int(m.group(1)): ast.literal_eval(m.group(2)) for m in STEP.finditer(output)}


@pytest.mark.parametrize("config", CONFIGS, ids=[c.name for c in CONFIGS])
def test_openrlhf_run(config: Config, task, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    record = tmp_path / "record"
    done = runs.launch(
        _command(config, task, tmp_path), harness.environment(record), record,
        tmp_path / "run.log", 900,
    )  # fmt: skip
    assert done.returncode == 0, done.tail()
    logged = _logged(done.output)
    assert sorted(logged) == [1, 2, 3], done.tail()
    recs = done.records

    # every process that ran KL code reports the config it applied (none in OpenRLHF's own run)
    roles = {p["role"]: p for p in recs["process"]}
    assert {"experience_maker", "actor"} <= set(roles), sorted(roles)
    for process in roles.values():
        if config.native:
            assert process["config"] is None and not process["status"]["configured"]
        else:
            assert process["config"]["placement"] == ("both" if config.loss else "reward")
            assert process["config"]["coef"] == COEF
    if not config.native:
        assert "openrlhf patch active in pid" in done.output

    # the KL metrics reach OpenRLHF's logger under the shared prefix (none without the patch)
    for step, metrics in logged.items():
        ours = {k for k in metrics if k.startswith("kl_patches/")}
        if config.native:
            assert not ours, (step, ours)
            continue
        assert "kl_patches/active" in ours, (step, sorted(metrics))
        if config.reward and not config.sequence_weighted:
            assert {"kl_patches/reward_sequence_kl", "kl_patches/reward_penalty"} <= ours
        if config.loss:
            assert "kl_patches/loss_kl" in ours
        if config.sequence_weighted:
            assert "kl_patches/is_weight_max" in ours

    reference = _reference(recs)
    _check_advantages(config, recs["advantage"], reference)
    _check_losses(config, recs["loss"], reference)


def _key(sequence) -> tuple[int, ...]:  # type: ignore[no-untyped-def]
    return tuple(int(t) for t in sequence.tolist())


def _reference(recs: dict) -> dict[tuple[int, ...], object]:  # type: ignore[type-arg]
    """Sequence -> the reference model's log-probs (from the process that scores but never
    trains)."""
    trainers = {r.get("pid") for r in recs.get("forward", [])}
    loss_pids = set()
    for p in recs["process"]:
        if p["role"] == "actor":
            loss_pids.add(p["pid"])
    ref_pids = trainers - loss_pids
    assert len(ref_pids) == 1, (trainers, loss_pids)
    out: dict[tuple[int, ...], object] = {}
    for r in recs["forward"]:
        if r["pid"] in ref_pids:
            for seq, lp in zip(r["sequences"], r["log_probs"], strict=True):
                out[_key(seq)] = lp
    return out


def _check_advantages(config: Config, records: list[dict], reference: dict) -> None:  # type: ignore[type-arg]
    """The rewards OpenRLHF's group_norm received and the advantages it produced."""
    import torch

    assert len(records) == 3
    for step, record in enumerate(records, 1):
        exps = record["experiences"]
        n = record["n_samples"]
        scores, penalty, index, advantages, masks = [], [], [], [], []
        for e in exps:
            mask = e["action_mask"]
            old = e["action_log_probs"]
            ref = torch.stack([reference[_key(s)] for s in e["sequences"]])
            ref = ref[:, -old.shape[1] :]
            scores.append(rc.array(e["scores"]))
            penalty.append(COEF * rc.sequence_estimate(old, ref, mask, "k1", "token"))
            index += list(e["index"])
            advantages.append(e["advantages"])
            masks.append(mask)
            if config.reward:  # the sum of k1 over the sequence, subtracted before the baseline
                err = rc.relative_error(e["rewards"], rc.array(e["scores"]) - penalty[-1])
                assert err < rc.RTOL, (config.name, step, "rewards", err)
            else:
                assert rc.relative_error(e["rewards"], e["scores"]) < rc.RTOL
        total = rc.np.concatenate(scores)
        kl = rc.np.concatenate(penalty)
        if config.reward:
            total = total - kl
        if step == 3 and not config.native:
            assert abs(kl).max() > 0  # the policy has moved away from the reference
        groups = [i // n for i in index]  # OpenRLHF groups the samples of a prompt by index
        expected = rc.grpo(total, groups, eps=EPS)
        rows = 0
        for adv, mask in zip(advantages, masks, strict=True):
            b = adv.shape[0]
            m = rc.array(mask)
            want = expected[rows : rows + b, None] * m
            # OpenRLHF's returns-to-go also reach the padding left of each response (the loss
            # masks it): the response tokens are what the update uses
            err = rc.relative_error(rc.array(adv) * m, want)
            assert err < rc.RTOL, (config.name, step, "advantages", err)
            rows += b


def _check_losses(config: Config, records: list[dict], reference: dict) -> None:  # type: ignore[type-arg]
    """The KL loss OpenRLHF logged in each training step, from the policy's log-probs."""
    import torch

    assert len(records) >= 3
    for n, record in enumerate(records, 1):
        metric = record["metrics"].get("kl")
        if config.loss is None:
            continue
        mask = record["action_mask"]
        logp = record["log_prob"]
        ref = torch.stack([reference[_key(s)] for s in record["sequences"]])[:, -logp.shape[1] :]
        info = record["loss_batch_info"]
        if config.native:  # OpenRLHF's k3 (clamped), token mean over the step's tokens
            delta = logp.float() - ref.float()
            values = torch.clamp(
                torch.exp(-delta.clamp(min=-10)) - 1 + delta.clamp(min=-10), -10, 10
            )
            expected = (
                float((rc.array(values) * rc.array(mask)).sum())
                / float(info["batch_num_tokens"])
                * info["dp_size"]
            )
        else:  # KLConfig loss_aggregation="sum": per-sequence sum, mean over the step's rows
            per_row = rc.sequence_estimate(logp, ref, mask, config.loss, "token")
            expected = float(per_row.sum()) / float(info["global_batch_size"]) * info["dp_size"]
        assert metric is not None
        if n == 1:
            assert abs(float(metric)) < 1e-6
            continue
        err = rc.relative_error(float(metric), expected)
        assert err < rc.RTOL or abs(float(metric) - expected) < 1e-9, (
            config.name, n, float(metric), expected, err
        )  # fmt: skip
