"""importance_weighting='sequence' in OpenRLHF 0.11.2: the reward-side KL in the actor's loss.

Each test runs the real ``ActorPPOTrainer.training_step`` (tiny random actor, zero advantages so
the PPO loss has no gradient and the recorded loss is the KL part alone) with the flags of
``to_args`` and the patch applied, and compares with the maths written out here or taken from
kl_patches.core on the same tensors: on-policy (behaviour == current) the gradient of the
k1-in-reward REINFORCE estimator without baseline, off-policy that of sum_t log pi_t * P_t / B
(to 1e-6).
"""

from __future__ import annotations

from typing import Any

import pytest
from openrlhf_support.harness import activate

activate()

torch = pytest.importorskip("torch")
pytest.importorskip("openrlhf.trainer.ppo_utils.experience_maker")

from openrlhf_support.cases import COEF, actor_batch, args_for  # noqa: E402
from openrlhf_support.harness import actor_trainer, make_args, tiny_actor  # noqa: E402

from kl_patches import KLConfig, core  # noqa: E402
from kl_patches.adapters.openrlhf import apply, is_native, revert, to_args  # noqa: E402
from kl_patches.adapters.openrlhf.patch import needed_sides  # noqa: E402
from kl_patches.adapters.openrlhf.translate import native_gaps, parse_settings  # noqa: E402

SEQ = KLConfig(coef=COEF, importance_weighting="sequence")
TOL = {"atol": 1e-6, "rtol": 1e-5}


@pytest.fixture(autouse=True)
def clean() -> object:
    revert()
    yield
    revert()


@pytest.fixture(scope="module")
def actor() -> object:
    return tiny_actor()


def _forward(actor: Any, data: dict[str, torch.Tensor]) -> torch.Tensor:
    return actor(data["sequences"], data["action_mask"], attention_mask=data["attention_mask"])  # type: ignore[no-any-return]


def _step(
    actor: Any,
    config: KLConfig,
    data: dict[str, torch.Tensor],
    old_noise: float,
    info: dict[str, Any] | None = None,
    args: Any = None,
) -> tuple[Any, ...]:
    """One real training step; returns (recorded loss, grads, status, current, ref, old)."""
    from openrlhf.trainer.ppo_utils.experience import Experience

    trainer = actor_trainer(actor, args_for(config) if args is None else args)
    actor.zero_grad()
    with torch.no_grad():
        current = _forward(actor, data)
    g = torch.Generator().manual_seed(1)
    ref = current + 0.4 * torch.randn(current.shape, generator=g)
    old = current + old_noise * torch.randn(current.shape, generator=g)
    exp = Experience(
        sequences=data["sequences"],
        attention_mask=data["attention_mask"],
        action_mask=data["action_mask"],
        action_log_probs=old,
        base_action_log_probs=ref,
        advantages=torch.zeros_like(current),
        info={},
    )
    status = trainer.training_step(exp, COEF, 0, info)
    grads = [p.grad.clone() for p in actor.parameters()]
    return trainer.strategy.losses[-1], grads, status, current, ref, old


def _grads_of(actor: Any, data: dict[str, torch.Tensor], build: Any) -> tuple[Any, list[Any]]:
    actor.zero_grad()
    value = build(_forward(actor, data))
    value.backward()
    return value.detach(), [p.grad.clone() for p in actor.parameters()]


def _close(a: list[Any], b: list[Any]) -> None:
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, **TOL)


# ----------------------------------------------------------------------------- flags
def test_flags_keep_the_reference_and_move_the_kl_out_of_the_reward() -> None:
    args = to_args(SEQ)
    settings, _ = parse_settings(args)
    assert settings["algo.kl.use_loss"] and settings["algo.kl.init_coef"] == COEF
    assert not is_native(SEQ)
    assert needed_sides(SEQ) == ("loss",)  # no reward-time patch: no KL in the reward at all
    assert native_gaps(SEQ)["loss"][0].startswith("importance_weighting='sequence'")
    both = KLConfig.parse("k3-in-both", coef=COEF, importance_weighting="sequence")
    assert needed_sides(both) == ("loss",)
    assert not any("'token'" in g for g in native_gaps(both)["loss"])


# ----------------------------------------------------------------------------- gradients
def test_on_policy_is_reinforce_k1_without_baseline(actor: object) -> None:
    data = actor_batch()
    apply(SEQ)
    loss, grads, status, current, ref, _ = _step(actor, SEQ, data, old_noise=0.0)
    mask = data["action_mask"].float()
    seq_k1 = ((current - ref) * mask).sum(-1, keepdim=True)
    b = mask.shape[0]
    want, want_grads = _grads_of(actor, data, lambda logp: COEF * (logp * mask * seq_k1).sum() / b)
    torch.testing.assert_close(loss, want, **TOL)
    _close(grads, want_grads)
    assert max(float(g.abs().max()) for g in want_grads) > 1e-3
    weights = status["metrics"]["kl_patches/is_weight"]
    torch.testing.assert_close(weights, torch.ones_like(weights))


@pytest.mark.parametrize(
    "cfg",
    [SEQ, SEQ.replace(reward_shape="reward_to_go"), SEQ.replace(is_clip=1.1)],
    ids=["sequence", "reward_to_go", "clip"],
)
def test_off_policy_is_the_core_target(actor: object, cfg: KLConfig) -> None:
    data = actor_batch(seed=3)
    apply(cfg)
    loss, grads, status, current, ref, old = _step(actor, cfg, data, old_noise=0.3)
    mask = data["action_mask"]
    target = core.importance_weighted_penalty(current, ref, old, mask, cfg)
    b = mask.shape[0]
    want, want_grads = _grads_of(actor, data, lambda logp: (logp * target * mask).sum() / b)
    torch.testing.assert_close(loss, want, **TOL)
    _close(grads, want_grads)
    on = core.importance_weighted_penalty(current, ref, current, mask, cfg)
    assert float((on - target).abs().max()) > 1e-3  # the weights matter here
    assert status["metrics"]["kl_patches/is_weight_max"] > 1.0
    assert status["weights"]["kl_patches/reward_sequence_kl"] == "sample"
    seq_kl = ((current - ref) * mask).sum(-1)
    torch.testing.assert_close(status["metrics"]["kl"], seq_kl / mask.sum(-1), **TOL)


def test_global_sequence_count_and_both(actor: object) -> None:
    """Micro-batch of 4 in a step of 8 sequences; 'both' adds the prefix-weighted loss side."""
    cfg = KLConfig.parse("k3-in-both", coef=COEF, importance_weighting="sequence")
    data = actor_batch(seed=4)
    info = {
        "dp_size": 1,
        "batch_num_tokens": torch.tensor(30.0),
        "global_batch_size": torch.tensor(8.0),
    }
    apply(cfg)
    loss, grads, _, current, ref, old = _step(actor, cfg, data, old_noise=0.3, info=info)
    mask = data["action_mask"]

    def build(logp: torch.Tensor) -> torch.Tensor:
        reward = core.importance_weighted_surrogate(logp, ref, old, mask, cfg, num_sequences=8.0)
        return reward + core.loss_term(logp, ref, mask, cfg, old_logp=old, num_sequences=8.0)

    want, want_grads = _grads_of(actor, data, build)
    torch.testing.assert_close(loss, want, **TOL)
    _close(grads, want_grads)
    local = core.importance_weighted_surrogate(current, ref, old, mask, cfg) + core.loss_term(
        current, ref, mask, cfg, old_logp=old
    )  # the micro-batch's own mean over its 4 rows: twice the step's sum over 8
    torch.testing.assert_close(2 * want, local, **TOL)
    assert float(want.abs()) > 1e-4


# ----------------------------------------------------------------------------- refusals
def test_flags_without_the_reference_fail_loudly(actor: object) -> None:
    apply(SEQ)
    wrong = make_args(init_coef=COEF, estimator="k1", use_loss=False)
    with pytest.raises(RuntimeError, match=r"runs its reward-side KL in the loss.*skips the KL"):
        _step(actor, SEQ, actor_batch(), old_noise=0.0, args=wrong)


def test_adaptive_coefficient_is_refused(actor: object) -> None:
    other = SEQ.replace(coef=0.3)  # flags for coef 0.3, trainer passes kl_ctl = COEF
    apply(other)
    with pytest.raises(RuntimeError, match=r"importance_weighting='sequence' with coef=0\.3"):
        _step(actor, other, actor_batch(), old_noise=0.0)
