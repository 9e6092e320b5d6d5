"""KL hooks against native TRL 1.16 on CPU: the patched trainers' losses, gradients and advantages
equal TRL's own for the same setting (to 1e-6), k1-in-reward matches an independent computation,
and the refusals and guards.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
sys.path.insert(0, str(Path(__file__).parent))

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")

from trl_support import harness  # noqa: E402
from trl_support.harness import max_diff, pair  # noqa: E402

import kl_patches.trl as klt  # noqa: E402
from kl_patches import KLConfig  # noqa: E402
from kl_patches.experiments import tiny  # noqa: E402

TOL = 1e-6


# ------------------------------------------------------------------ native equivalence (GRPO)
@pytest.mark.parametrize(
    "loss_type,bias_correction,off_policy",
    [
        ("dapo", True, False),
        ("dapo", False, False),
        ("grpo", True, False),
        ("grpo", False, True),
        ("bnpo", False, False),
        ("dr_grpo", True, False),
        ("luspo", False, False),
        ("grpo", True, True),
    ],
)
def test_k3_in_loss_equals_native_grpo(
    dirs: tuple[Path, Path], loss_type: str, bias_correction: bool, off_policy: bool
) -> None:
    settings = {"beta": 0.04, "loss_type": loss_type, "use_bias_correction_kl": bias_correction}
    native = harness.make_trainer(*dirs, "GRPO", patched=False, **settings)
    config = klt.from_trl_config(native.args)  # the reader says what TRL runs natively
    assert config.estimator == "k3" and config.placement == "loss"
    patched = harness.make_trainer(
        *dirs, "GRPO", patched=True, kl=config, **{**settings, "beta": 0.0}
    )
    harness.perturb(native.model)
    harness.perturb(patched.model)
    batch = harness.scored_batch(native)
    assert "ref_per_token_logps" in batch
    if off_policy:  # an older sampling policy: the importance ratio is no longer 1
        gen = torch.Generator().manual_seed(3)
        noise = 0.2 * torch.randn(batch["ref_per_token_logps"].shape, generator=gen)
        batch["old_per_token_logps"] = harness.policy_logps(native.model, batch) + noise
    loss_n, grads_n = harness.loss_and_grads(native, batch)
    loss_p, grads_p = harness.loss_and_grads(patched, batch)
    assert abs(float(loss_n - loss_p)) < TOL
    assert max_diff(grads_n, grads_p) < TOL
    # the KL term matters here, so the comparison above could fail
    native.beta = 0.0
    _, grads_0 = harness.loss_and_grads(native, batch)
    assert max_diff(grads_n, grads_0) > 1e3 * TOL
    assert patched.beta == pytest.approx(config.coef)  # restored after the toggle


def test_placement_none_equals_beta_zero(dirs: tuple[Path, Path]) -> None:
    native, patched = pair(dirs, "GRPO", "none", beta=0.0)
    assert patched.ref_model is None and patched.beta == 0.0
    batch_n = harness.scored_batch(native, seed=5)
    batch_p = harness.scored_batch(patched, seed=5)
    assert torch.equal(batch_n["completion_ids"], batch_p["completion_ids"])
    assert torch.equal(batch_n["advantages"], batch_p["advantages"])
    loss_n, grads_n = harness.loss_and_grads(native, batch_n)
    loss_p, grads_p = harness.loss_and_grads(patched, batch_p)
    assert torch.equal(loss_n, loss_p)
    assert all(torch.equal(a, b) for a, b in zip(grads_n, grads_p, strict=True))


# ------------------------------------------------------------------ reward side
@pytest.mark.parametrize("overrides", [{}, {"normalize_advantages": True}])
def test_rloo_k1_in_reward_equals_native(dirs: tuple[Path, Path], overrides: Any) -> None:
    native, patched = pair(dirs, "RLOO", KLConfig(coef=0.05), beta=0.05, **overrides)
    batch_n = harness.scored_batch(native, seed=7)
    batch_p = harness.scored_batch(patched, seed=7)
    assert torch.equal(batch_n["completion_ids"], batch_p["completion_ids"])
    assert float((batch_n["advantages"] - batch_p["advantages"]).abs().max()) < TOL
    # a different estimator changes them (so the equality is not vacuous)
    patched._kl_config = KLConfig(estimator="k3", coef=0.05)
    batch_k3 = harness.scored_batch(patched, seed=7)
    assert float((batch_n["advantages"] - batch_k3["advantages"]).abs().max()) > 1e-3


@pytest.mark.parametrize("scale_rewards", ["none", "group"])
def test_grpo_k1_in_reward_matches_independent_computation(
    dirs: tuple[Path, Path], scale_rewards: str
) -> None:
    beta = 0.1
    trainer = harness.make_trainer(
        *dirs, "GRPO", patched=True, kl=KLConfig(coef=beta), scale_rewards=scale_rewards
    )
    harness.perturb(trainer.model)
    batch = harness.scored_batch(trainer, seed=11)
    mask = batch["completion_mask"].float()
    logp = harness.policy_logps(trainer.model, batch)
    ref = harness.policy_logps(trainer.ref_model, batch)
    tokenizer = tiny.build_tokenizer()
    texts = tokenizer.batch_decode(batch["completion_ids"], skip_special_tokens=True)
    task = torch.tensor(tiny.target_reward(texts))
    reward = task - beta * ((logp - ref) * mask).sum(-1)
    groups = reward.view(-1, 4)
    expected = (groups - groups.mean(1, keepdim=True)).view(-1)
    if scale_rewards == "group":
        expected = expected / (groups.std(1).repeat_interleave(4) + 1e-4)
    assert float((batch["advantages"] - expected).abs().max()) < 1e-5
    table = torch.tensor(list(trainer._logs["advantages"]))  # TRL's completions table
    assert torch.allclose(table, batch["advantages"])
    task_only = (task.view(-1, 4) - task.view(-1, 4).mean(1, keepdim=True)).view(-1)
    assert float((expected - task_only).abs().max()) > 1e-3  # the KL moved the advantages


def test_reward_to_go_spreads_the_sequence_penalty(dirs: tuple[Path, Path]) -> None:
    config = KLConfig(coef=0.1, reward_shape="reward_to_go")
    trainer = harness.make_trainer(*dirs, "GRPO", patched=True, kl=config, scale_rewards="none")
    harness.perturb(trainer.model)
    batch = harness.scored_batch(trainer, seed=13)
    adv = batch["advantages"]
    assert adv.dim() == 2
    trainer._kl_config = config.replace(reward_shape="sequence")
    seq = harness.scored_batch(trainer, seed=13)["advantages"]
    logp = harness.policy_logps(trainer.model, batch)
    ref = harness.policy_logps(trainer.ref_model, batch)
    k1 = (logp - ref) * batch["completion_mask"]
    earlier = torch.cumsum(k1, -1) - k1  # KL of tokens before t: no longer charged to token t
    expected = seq.unsqueeze(1) + 0.1 * earlier
    m = batch["completion_mask"].bool()
    assert float((adv - expected)[m].abs().max()) < 1e-5
    assert torch.allclose(adv[:, 0], seq, atol=1e-6)  # first token: the whole sequence penalty
    loss, _ = harness.loss_and_grads(trainer, batch)  # TRL accepts [B, T] advantages
    assert torch.isfinite(loss)


def test_scale_rewards_warning(dirs: tuple[Path, Path]) -> None:
    with pytest.warns(UserWarning, match="scale_rewards='group'"):
        harness.make_trainer(*dirs, "GRPO", patched=True, kl="k1-in-reward")


# ------------------------------------------------------------------ refusals and guards
def test_refuses_what_it_cannot_express(dirs: tuple[Path, Path]) -> None:
    with pytest.raises(ValueError, match="sum_then_normalize"):
        harness.make_trainer(
            *dirs,
            "GRPO",
            patched=True,
            kl="k1-in-reward",
            multi_objective_aggregation="normalize_then_sum",
        )
    with pytest.raises(ValueError, match="reward_shape='sequence'"):
        harness.make_trainer(*dirs, "RLOO", patched=True, kl=KLConfig(reward_shape="reward_to_go"))
    with pytest.raises(ValueError, match="estimator"):
        harness.make_trainer(*dirs, "GRPO", patched=True, kl="k9-in-reward")


def test_bypassed_loss_fails_loudly(dirs: tuple[Path, Path]) -> None:
    class Bypass(klt.GRPOTrainer):  # a fused loss path that never calls _compute_loss
        def compute_loss(self, model: Any, inputs: Any, *a: Any, **k: Any) -> Any:
            return trl.GRPOTrainer._compute_loss(self, model, inputs)

    trainer = harness.make_trainer(*dirs, "GRPO", patched=True, kl="k3-in-loss")
    trainer.__class__ = Bypass
    with pytest.raises(RuntimeError, match="_compute_loss hook did not run"):
        trainer.train()


@pytest.mark.parametrize("steps_per_generation", [None, 2])
def test_reward_side_forwards(dirs: tuple[Path, Path], steps_per_generation: int | None) -> None:
    """One reference forward per scoring pass, always; one policy forward, and only when TRL
    did not compute the sampling policy's log-probs itself (on-policy)."""
    trainer = harness.make_trainer(
        *dirs, "GRPO", patched=True, kl="k1-in-reward", scale_rewards="none",
        steps_per_generation=steps_per_generation,
    )  # fmt: skip
    models: list[str] = []
    original = trainer._get_per_token_logps_and_entropies

    def counting(model: Any, *args: Any, **kwargs: Any) -> Any:
        models.append("ref" if model is trainer.ref_model else "policy")
        return original(model, *args, **kwargs)

    trainer._get_per_token_logps_and_entropies = counting
    batch = harness.scored_batch(trainer)
    assert models.count("ref") == 1 and models.count("policy") == 1
    assert ("old_per_token_logps" in batch) == (steps_per_generation == 2)


@pytest.mark.parametrize("kind", ["GRPO", "RLOO"])
def test_full_vocab_monitor(dirs: tuple[Path, Path], kind: str) -> None:
    trainer = harness.make_trainer(*dirs, kind, patched=True, kl="k3-in-loss", monitor=True)
    harness.perturb(trainer.model)
    batch = harness.scored_batch(trainer, seed=17)
    logged = trainer._metrics["train"]["kl_patches/full_vocab"][-1]
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    att = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    t = batch["completion_ids"].size(1)
    with torch.no_grad():
        p, q = (
            torch.softmax(m(input_ids=ids, attention_mask=att).logits[:, -t - 1 : -1], -1)
            for m in (trainer.model, trainer.ref_model)
        )
    per_token = (p * (p.log() - q.log())).sum(-1) * batch["completion_mask"]
    expected = float(per_token.sum(-1).mean())
    assert expected > 1e-2
    assert logged == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError, match="separate reference model"):
        harness.make_trainer(*dirs, kind, patched=True, kl="none", monitor=True)
