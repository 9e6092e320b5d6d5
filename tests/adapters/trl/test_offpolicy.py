"""importance_weighting='sequence' in TRL 1.16's GRPOTrainer and RLOOTrainer on CPU.

The KL runs at loss time (kl_patches.adapters.trl.offpolicy). Through TRL's real ``_compute_loss``:
the patched gradient minus native TRL's (beta=0, same batch, same advantages) is, on-policy, the
gradient of the k1-in-reward REINFORCE estimator without a baseline computed from an independent
forward, and off-policy that of sum_t log pi_t * P_t with P_t from kl_patches.core on the same
tensors (to 1e-6); a short real GRPO run with num_iterations=2 trains with weights != 1.
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
from trl_support.harness import max_diff  # noqa: E402

from kl_patches import KLConfig, core  # noqa: E402
from kl_patches.adapters.trl import hooks  # noqa: E402

TOL = 1e-6
COEF = 0.2
SEQ = KLConfig(coef=COEF, importance_weighting="sequence")
ACCUMULATION = 2  # harness.loss_and_grads' default: the loss is divided by it


def _logps_with_grad(model: Any, batch: dict[str, Any]) -> torch.Tensor:
    """Completion log-probs from a plain forward with grad (no TRL code)."""
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    att = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    t = batch["completion_ids"].size(1)
    logits = model(input_ids=ids, attention_mask=att).logits[:, -t - 1 : -1]
    logp = torch.log_softmax(logits, dim=-1)
    return logp.gather(-1, batch["completion_ids"].unsqueeze(-1)).squeeze(-1)


def _trl_logps(trainer: Any, batch: dict[str, Any]) -> torch.Tensor:
    """The current log-probs as TRL's loss computes them (its own function, with grad): the
    tensors the adapter's term is built from (TRL returns them in float32)."""
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    att = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    out = trainer._get_per_token_logps_and_entropies(
        trainer.model, ids, att, batch["completion_ids"].size(1)
    )
    return out[0]  # type: ignore[no-any-return]


def _grads(model: Any, objective: torch.Tensor, retain: bool = False) -> list[torch.Tensor]:
    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(objective, params, allow_unused=True, retain_graph=retain)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)]


def _pair(dirs: tuple[Path, Path], kind: str, kl: KLConfig, **overrides: Any) -> tuple[Any, Any]:
    """(native TRL with beta=0, patched) in float64, so the gradient differences are exact to
    well below the tolerance (in float32 they carry ~1e-6 of round-off from the task loss)."""
    native = harness.make_trainer(*dirs, kind, patched=False, beta=0.0, **overrides)
    patched = harness.make_trainer(*dirs, kind, patched=True, kl=kl, **overrides)
    for trainer in (native, patched):
        trainer.model.double()
        if trainer.ref_model is not None:
            trainer.ref_model.double()
        harness.perturb(trainer.model)
    return native, patched


def _added_grads(native: Any, patched: Any, batch: dict[str, Any]) -> list[torch.Tensor]:
    """Patched minus native gradient of TRL's loss on the same batch (the adapter's KL)."""
    _, grads_n = harness.loss_and_grads(native, batch, accumulation=ACCUMULATION)
    _, grads_p = harness.loss_and_grads(patched, batch, accumulation=ACCUMULATION)
    return [p - n for p, n in zip(grads_p, grads_n, strict=True)]


def _close(added: list[torch.Tensor], expected: list[torch.Tensor]) -> bool:
    """Equal to TOL relative to the largest gradient entry (at least 1): TRL returns float32
    log-probs, so entries of size ~8 carry ~1e-6 of float32 round-off (measured: 1.6e-6 at a
    largest entry of 8.2, RLOO sequence shape)."""
    scale = max(1.0, max(float(g.abs().max()) for g in expected))
    return max_diff(added, expected) < TOL * scale


def _norm(grads: list[torch.Tensor]) -> float:
    return float(torch.sqrt(sum((g.double() ** 2).sum() for g in grads)))


# ------------------------------------------------------------------ GRPO
@pytest.mark.parametrize("old", ["absent", "equal"])
def test_grpo_on_policy_is_reinforce_k1_without_baseline(dirs: tuple[Path, Path], old: str) -> None:
    native, patched = _pair(dirs, "GRPO", SEQ, scale_rewards="group")
    batch = harness.scored_batch(patched, seed=3)
    # the KL is not in the advantages: they are TRL's own for the task reward
    assert torch.allclose(batch["advantages"], harness.scored_batch(native, seed=3)["advantages"])
    assert "old_per_token_logps" not in batch  # TRL: one update per batch, on-policy
    if old == "equal":
        batch["old_per_token_logps"] = _trl_logps(patched, batch).detach()
    added = _added_grads(native, patched, batch)
    # independent: coef * mean_i sum_t grad log pi_t * sum_u k1_u, / accumulation
    mask = batch["completion_mask"].float()
    ref = batch["ref_per_token_logps"]
    logp = _logps_with_grad(patched.model, batch)
    seq_k1 = ((logp.detach() - ref) * mask).sum(-1, keepdim=True)
    objective = COEF * (logp * mask * seq_k1).sum(-1).mean() / ACCUMULATION
    expected = _grads(patched.model, objective)
    assert _norm(expected) > 1e3 * TOL  # the check could fail
    assert _close(added, expected)


@pytest.mark.parametrize(
    "cfg",
    [SEQ, SEQ.replace(reward_shape="reward_to_go"), SEQ.replace(is_clip=1.2)],
    ids=["sequence", "reward_to_go", "clip"],
)
def test_grpo_off_policy_is_the_core_target(dirs: tuple[Path, Path], cfg: KLConfig) -> None:
    native, patched = _pair(dirs, "GRPO", cfg, scale_rewards="none")
    batch = harness.scored_batch(patched, seed=4)
    logp = _trl_logps(patched, batch)
    current = logp.detach()
    gen = torch.Generator().manual_seed(5)
    behaviour = current + 0.3 * torch.randn(current.shape, generator=gen, dtype=current.dtype)
    batch["old_per_token_logps"] = behaviour
    added = _added_grads(native, patched, batch)
    mask = batch["completion_mask"]
    ref = batch["ref_per_token_logps"]
    target = core.importance_weighted_penalty(current, ref, behaviour, mask, cfg)
    objective = (logp * target * mask).sum(-1).mean() / ACCUMULATION
    expected = _grads(patched.model, objective, retain=True)
    assert _close(added, expected)
    # the weights matter: the on-policy target gives another gradient
    on = core.importance_weighted_penalty(current, ref, current, mask, cfg)
    other = _grads(patched.model, (logp * on * mask).sum(-1).mean() / ACCUMULATION)
    assert max_diff(other, expected) > 1e3 * TOL
    logged = patched._metrics["train"]
    assert (
        logged["kl_patches/is_weight_mean"]
        and logged["kl_patches/reward_penalty"]
        and logged["kl_patches/reward_sequence_kl"]
    )
    assert logged["kl_patches/is_weight_max"][-1] > 1.0


def test_grpo_both_adds_the_prefix_weighted_loss_side(dirs: tuple[Path, Path]) -> None:
    cfg = KLConfig.parse("k3-in-both", coef=COEF, importance_weighting="sequence")
    native, patched = _pair(dirs, "GRPO", cfg, scale_rewards="none", loss_type="grpo")
    batch = harness.scored_batch(patched, seed=6)
    logp = _trl_logps(patched, batch)
    current = logp.detach()
    gen = torch.Generator().manual_seed(7)
    behaviour = current + 0.3 * torch.randn(current.shape, generator=gen, dtype=current.dtype)
    batch["old_per_token_logps"] = behaviour
    added = _added_grads(native, patched, batch)
    mask = batch["completion_mask"]
    ref = batch["ref_per_token_logps"]
    reward_side = core.importance_weighted_surrogate(logp, ref, behaviour, mask, cfg)
    loss_side = core.loss_term(logp, ref, mask, cfg, old_logp=behaviour)
    expected = _grads(patched.model, (reward_side + loss_side) / ACCUMULATION, retain=True)
    assert _close(added, expected)
    assert _norm(_grads(patched.model, loss_side)) > 1e3 * TOL


def test_grpo_without_reference_log_probs_says_so(dirs: tuple[Path, Path]) -> None:
    _, patched = _pair(dirs, "GRPO", SEQ, scale_rewards="none")
    batch = harness.scored_batch(patched, seed=8)
    del batch["ref_per_token_logps"]
    with pytest.raises(ValueError, match="importance_weighting='sequence' needs the reference"):
        harness.loss_and_grads(patched, batch)


def test_grpo_sequence_weighting_does_not_warn_about_reward_scaling(
    dirs: tuple[Path, Path],
) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        harness.make_trainer(*dirs, "GRPO", patched=True, kl=SEQ, scale_rewards="group")
    with pytest.warns(UserWarning, match="scale_rewards"):
        harness.make_trainer(*dirs, "GRPO", patched=True, kl=KLConfig(coef=COEF))


# ------------------------------------------------------------------ RLOO
@pytest.mark.parametrize("shape", ["sequence", "reward_to_go"])
def test_rloo_off_policy_is_the_core_target(dirs: tuple[Path, Path], shape: str) -> None:
    cfg = SEQ.replace(reward_shape=shape)
    native, patched = _pair(dirs, "RLOO", cfg)
    batch = harness.scored_batch(patched, seed=9)
    logp = _trl_logps(patched, batch)
    current = logp.detach()
    assert torch.allclose(batch[hooks.OLD_KEY], current, atol=1e-5)  # the scoring forward's
    gen = torch.Generator().manual_seed(10)
    behaviour = current + 0.3 * torch.randn(current.shape, generator=gen, dtype=current.dtype)
    batch[hooks.OLD_KEY] = behaviour
    batch["old_per_token_logps"] = behaviour  # what native RLOO's ratio reads
    added = _added_grads(native, patched, batch)
    mask = batch["completion_mask"]
    ref = batch[hooks.REF_KEY]
    target = core.importance_weighted_penalty(current, ref, behaviour, mask, cfg)
    expected = _grads(patched.model, (logp * target * mask).sum(-1).mean())  # not pre-scaled
    assert _norm(expected) > 1e3 * TOL
    assert _close(added, expected)


# ------------------------------------------------------------------ a real run
def test_grpo_trains_with_two_iterations_per_batch(dirs: tuple[Path, Path]) -> None:
    trainer = harness.make_trainer(
        *dirs, "GRPO", patched=True, kl=SEQ, scale_rewards="none", num_iterations=2, max_steps=4
    )
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 4
    assert all(torch.isfinite(torch.tensor(h["loss"])) for h in logs)
    assert all(
        "kl_patches/is_weight_mean" in h and "kl_patches/reward_sequence_kl" in h for h in logs
    )
    # the second pass over each batch runs after an update: the prefix weights move off 1
    assert any(abs(h["kl_patches/is_weight_mean"] - 1.0) > 1e-3 for h in logs[1::2])
    after = list(trainer.model.parameters())
    assert max(float((a.detach() - b).abs().max()) for a, b in zip(after, before, strict=True)) > 0
