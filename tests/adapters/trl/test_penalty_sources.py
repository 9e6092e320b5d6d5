"""Where GRPO's reward penalty takes the sampling policy's log-probs from, against TRL 1.16 (CPU).

Each source must give the advantages and the loss of the extra-forward implementation (to 1e-6)
on the same batch: the deferred penalty (computed in the loss step from the loss forward's
detached log-probs, rows shuffled the way TRL shuffles them), the sampling engine's log-probs
(opt-in; a ``rollout_func`` stands in for vLLM on CPU), TRL's own old log-probs. The number of
policy and reference forwards per step is counted, in whole training runs too, and compared
with native TRL's. Groups that span data-parallel ranks are checked with two simulated ranks.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
sys.path.insert(0, str(Path(__file__).parent))

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")

from trl.trainer.utils import shuffle_sequence_dict  # noqa: E402
from trl_support import harness  # noqa: E402
from trl_support.harness import max_diff  # noqa: E402

import kl_patches.trl as klt  # noqa: E402
from kl_patches import KLConfig  # noqa: E402
from kl_patches.adapters.trl import hooks  # noqa: E402
from kl_patches.adapters.trl.advantages import grpo_advantages  # noqa: E402
from kl_patches.experiments import tiny  # noqa: E402

TOL = 1e-6

CONFIGS = {
    "k1-in-reward": KLConfig(coef=0.1),
    "k3-in-both": KLConfig(estimator="k3", placement="both", coef=0.1),
    "k1-reward-to-go": KLConfig(coef=0.1, reward_shape="reward_to_go"),
}


def _trainer(dirs: tuple[Path, Path], kl: KLConfig, **overrides: Any) -> Any:
    trainer = harness.make_trainer(*dirs, "GRPO", patched=True, kl=kl, **overrides)
    harness.perturb(trainer.model)
    return trainer


def _in_step_batch(trainer: Any, seed: int) -> dict[str, Any]:
    """A scored batch as TRL builds it inside a training step (where deferring is allowed)."""
    trainer._kl_in_step = True
    try:
        return harness.scored_batch(trainer, seed=seed)
    finally:
        trainer._kl_in_step = False


def _loss_and_grads_in_place(trainer: Any, batch: dict[str, Any]) -> tuple[Any, list[Any]]:
    """Like ``harness.loss_and_grads`` but on ``batch`` itself, so the advantages the loss step
    writes into it can be read back."""
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 2
    params = [p for p in trainer.model.parameters() if p.requires_grad]
    loss = trainer._compute_loss(trainer.model, batch)
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return loss.detach(), [
        torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)
    ]


def _rows(batch: dict[str, Any], rows: torch.Tensor) -> dict[str, Any]:
    """``batch`` with its row tensors reordered by ``rows`` (scalars kept)."""
    return {
        k: v[rows] if isinstance(v, torch.Tensor) and v.dim() > 0 else v for k, v in batch.items()
    }


# ------------------------------------------------------------------ deferred penalty
@pytest.mark.parametrize("scale_rewards", ["none", "group", "batch"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_deferred_penalty_equals_extra_forward(
    dirs: tuple[Path, Path], name: str, scale_rewards: str
) -> None:
    trainer = _trainer(dirs, CONFIGS[name], scale_rewards=scale_rewards)
    before = hooks.forward_counts(trainer)
    extra = harness.scored_batch(trainer, seed=31)  # a direct call: the extra forward
    assert hooks.penalty_sources(trainer) == {"extra_forward": 1}
    deferred = _in_step_batch(trainer, seed=31)
    assert hooks.penalty_sources(trainer) == {"extra_forward": 1, "loss_forward": 1}
    assert torch.equal(extra["completion_ids"], deferred["completion_ids"])
    counts = hooks.forward_counts(trainer)
    # two scorings: one reference forward each; a policy forward only for the extra one
    assert counts["reference"] - before.get("reference", 0) == 2
    assert counts["policy"] - before.get("policy", 0) == 1 and counts["extra"] == 1
    # before the loss the batch carries TRL's KL-free advantages, so resolving them matters
    assert max_diff([deferred["advantages"]], [extra["advantages"]]) > 1e-3

    torch.manual_seed(5)
    shuffled = shuffle_sequence_dict(deferred)  # what TRL's _prepare_inputs does
    rows = shuffled[hooks.DEFER_ROWS].clone()
    assert not torch.equal(rows, torch.arange(rows.numel()))
    table_before = list(trainer._logs["advantages"])
    loss_d, grads_d = _loss_and_grads_in_place(trainer, shuffled)
    assert hooks.DEFER_ROWS not in shuffled and hooks.DEFER_REWARDS not in shuffled
    assert max_diff([shuffled["advantages"]], [extra["advantages"][rows]]) < TOL
    assert hooks.forward_counts(trainer)["policy"] == counts["policy"] + 1  # the loss forward
    loss_e, grads_e = harness.loss_and_grads(trainer, _rows(extra, rows))
    assert abs(float(loss_d - loss_e)) < TOL
    assert max_diff(grads_d, grads_e) < TOL
    # the completions table shows the advantages with the penalty, in generation order
    table = torch.tensor(list(trainer._logs["advantages"])[-rows.numel() :])
    expected = extra["advantages"] if extra["advantages"].dim() == 1 else None
    if expected is not None:
        assert torch.allclose(table, expected, atol=TOL)
        assert len(trainer._logs["advantages"]) == len(table_before)
    # the same metrics are logged, once per generation batch
    metrics = trainer._metrics["train"]
    assert len(metrics["kl_patches/reward_penalty"]) == 2
    assert metrics["kl_patches/reward_penalty"][0] == pytest.approx(
        metrics["kl_patches/reward_penalty"][1], 1e-6
    )


def test_second_iteration_reuses_the_resolved_batch(dirs: tuple[Path, Path]) -> None:
    """num_iterations > 1: the buffered batch is resolved once; later losses see its advantages."""
    trainer = _trainer(dirs, CONFIGS["k1-in-reward"], scale_rewards="none")
    batch = _in_step_batch(trainer, seed=32)
    first, _ = _loss_and_grads_in_place(trainer, batch)
    advantages = batch["advantages"].clone()
    second, _ = _loss_and_grads_in_place(trainer, batch)
    assert torch.equal(batch["advantages"], advantages)
    assert abs(float(first - second)) < TOL
    assert len(trainer._metrics["train"]["kl_patches/reward_penalty"]) == 1


def test_unresolved_deferral_fails_loudly(dirs: tuple[Path, Path]) -> None:
    trainer = _trainer(dirs, CONFIGS["k1-in-reward"], scale_rewards="none")
    trainer.current_gradient_accumulation_steps = 1
    batch = _in_step_batch(trainer, seed=33)
    # a loss forward that bypasses the log-prob hook cannot resolve the penalty
    trainer._get_per_token_logps_and_entropies = functools.partial(
        trl.GRPOTrainer._get_per_token_logps_and_entropies, trainer
    )
    with pytest.raises(RuntimeError, match="deferred penalty"):
        trainer._compute_loss(trainer.model, dict(batch))
    del trainer._get_per_token_logps_and_entropies
    # a training step whose loss never saw the deferred batch
    other = harness.scored_batch(trainer, seed=34)

    def step_without_that_loss(*_: Any, **__: Any) -> Any:
        _in_step_batch(trainer, seed=35)
        return trainer._compute_loss(trainer.model, dict(other))

    with pytest.raises(RuntimeError, match="deferred reward penalty"):
        hooks.training_step(trainer, step_without_that_loss, (), {})


# ------------------------------------------------------------------ whole training runs
def _count_native(trainer: Any) -> dict[str, int]:
    counts = {"policy": 0, "reference": 0}
    original = trainer._get_per_token_logps_and_entropies

    def counting(model: Any, *args: Any, **kwargs: Any) -> Any:
        counts["reference" if model is trainer.ref_model else "policy"] += 1
        return original(model, *args, **kwargs)

    trainer._get_per_token_logps_and_entropies = counting
    return counts


@pytest.mark.parametrize("name", ["k1-in-reward", "k3-in-both"])
def test_training_forwards_and_result(
    dirs: tuple[Path, Path], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three optimizer steps: the deferred run has native's forward count (one policy, one
    reference per step) and ends where the extra-forward run ends (to 1e-6)."""
    steps = {"max_steps": 3, "scale_rewards": "none"}
    native = harness.make_trainer(*dirs, "GRPO", patched=False, beta=0.04, **steps)
    native_counts = _count_native(native)
    native.train()
    assert native_counts == {"policy": 3, "reference": 3}

    deferred = harness.make_trainer(*dirs, "GRPO", patched=True, kl=CONFIGS[name], **steps)
    deferred.train()
    assert hooks.forward_counts(deferred) == {"policy": 3, "reference": 3}
    assert hooks.penalty_sources(deferred) == {"loss_forward": 3}

    monkeypatch.setattr(hooks, "_no_defer_reason", lambda trainer: "forced by the test")
    extra = harness.make_trainer(*dirs, "GRPO", patched=True, kl=CONFIGS[name], **steps)
    extra.train()
    assert hooks.forward_counts(extra) == {"policy": 6, "reference": 3, "extra": 3}
    assert hooks.penalty_sources(extra) == {"extra_forward": 3}

    params_d = list(deferred.model.parameters())
    params_e = list(extra.model.parameters())
    assert max_diff(params_d, params_e) < TOL
    start = harness.make_trainer(*dirs, "GRPO", patched=True, kl=CONFIGS[name], **steps)
    assert max_diff(params_d, list(start.model.parameters())) > 1e-3  # training moved them
    for key in ("kl_patches/reward_sequence_kl", "reward"):
        got = [row[key] for row in deferred.state.log_history if key in row]
        want = [row[key] for row in extra.state.log_history if key in row]
        assert len(got) == len(want) == 3  # logged at every step, as before
        assert got == pytest.approx(want, rel=1e-6, abs=1e-7)


def test_gradient_accumulation_keeps_the_extra_forward_and_says_why(
    dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """steps_per_generation=2 (TRL's default when gradient_accumulation_steps=2): micro-batches
    split the groups, TRL computes no old log-probs, so one extra forward per generation."""
    trainer = harness.make_trainer(
        *dirs, "GRPO", patched=True, kl=CONFIGS["k1-in-reward"], scale_rewards="none",
        max_steps=2, gradient_accumulation_steps=2, per_device_train_batch_size=4,
    )  # fmt: skip
    assert trainer.args.steps_per_generation == 2
    with caplog.at_level(logging.WARNING, logger="kl_patches.trl"):
        trainer.train()
    assert hooks.penalty_sources(trainer) == {"extra_forward": 2}
    assert hooks.forward_counts(trainer) == {"policy": 4 + 2, "reference": 2, "extra": 2}
    said = [r.getMessage() for r in caplog.records if "extra no-grad policy forward" in r.message]
    assert len(said) == 1 and "steps_per_generation=2" in said[0]


def test_trl_old_logps_are_used_when_trl_computes_them(dirs: tuple[Path, Path]) -> None:
    trainer = _trainer(dirs, CONFIGS["k1-in-reward"], steps_per_generation=2)
    batch = _in_step_batch(trainer, seed=36)
    assert "old_per_token_logps" in batch and hooks.DEFER_ROWS not in batch
    assert hooks.penalty_sources(trainer) == {"old_per_token_logps": 1}
    assert "extra" not in hooks.forward_counts(trainer)


# ------------------------------------------------------------------ sampling engine's log-probs
def _rollout_func(nan_row: int | None = None) -> Any:
    """A stand-in for vLLM: fixed random completions and their log-probs under the current
    policy, computed with a plain forward (TRL's tiny prompts share one length: no padding)."""

    def rollout(prompts: list[str], trainer: Any) -> dict[str, Any]:
        tok = trainer.processing_class
        prompt_ids = [tok(p)["input_ids"] for p in prompts]
        gen = torch.Generator().manual_seed(len(trainer._logs["prompt"]))
        length = trainer.args.max_completion_length
        completions = torch.randint(2, len(tok), (len(prompts), length), generator=gen)
        ids = torch.cat([torch.tensor(prompt_ids), completions], dim=1)
        with torch.no_grad():
            logits = trainer.model(input_ids=ids).logits[:, -length - 1 : -1]
        logp = torch.log_softmax(logits / trainer.temperature, -1)
        logp = logp.gather(-1, completions.unsqueeze(-1)).squeeze(-1).tolist()
        if nan_row is not None:
            logp[nan_row][2] = None  # vLLM's "no log-prob for this token"
        return {"prompt_ids": prompt_ids, "completion_ids": completions.tolist(), "logprobs": logp}

    return rollout


def _rollout_trainer(dirs: tuple[Path, Path], nan_row: int | None = None) -> Any:
    args = trl.GRPOConfig(**tiny.common_args(dirs[1], scale_rewards="none"))
    trainer = klt.GRPOTrainer(
        str(dirs[0]),
        tiny.target_reward,
        args=args,
        train_dataset=tiny.dataset(),
        processing_class=tiny.build_tokenizer(),
        rollout_func=_rollout_func(nan_row),
        kl=CONFIGS["k1-in-reward"],
    )
    harness.perturb(trainer.model)
    return trainer


@pytest.mark.parametrize("nan_row", [None, 3])
def test_sampling_logps_opt_in(
    dirs: tuple[Path, Path], nan_row: int | None, caplog: pytest.LogCaptureFixture
) -> None:
    """Opted in, the engine's log-probs replace the extra forward and give its advantages; a
    token the engine could not score sends the batch back to the forward (said once)."""
    plain = _rollout_trainer(dirs, nan_row)
    opted = _rollout_trainer(dirs, nan_row)
    hooks.use_sampling_logps(opted)
    batch_p = harness.scored_batch(plain, seed=37)
    with caplog.at_level(logging.WARNING, logger="kl_patches.trl"):
        batch_o = harness.scored_batch(opted, seed=37)
    assert "sampling_per_token_logps" in batch_o
    assert torch.equal(batch_p["completion_ids"], batch_o["completion_ids"])
    assert hooks.penalty_sources(plain) == {"extra_forward": 1}
    assert max_diff([batch_o["advantages"]], [batch_p["advantages"]]) < TOL
    if nan_row is None:
        assert hooks.penalty_sources(opted) == {"sampling_per_token_logps": 1}
        assert "extra" not in hooks.forward_counts(opted)
        task = torch.tensor(list(opted._logs["rewards"]["target_reward"])[-8:])
        moved = batch_o["advantages"] - (task - task.view(-1, 4).mean(1).repeat_interleave(4))
        assert float(moved.abs().max()) > 1e-3  # the penalty is in there
    else:
        assert hooks.penalty_sources(opted) == {"extra_forward": 1}
        assert any("NaN" in r.getMessage() for r in caplog.records)
    loss_p, grads_p = harness.loss_and_grads(plain, batch_p)
    loss_o, grads_o = harness.loss_and_grads(opted, batch_o)
    assert abs(float(loss_p - loss_o)) < TOL and max_diff(grads_p, grads_o) < TOL


def test_sampling_logps_opt_in_from_environment(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(hooks.SAMPLING_LOGPS_ENV, "1")
    assert _trainer(dirs, CONFIGS["k1-in-reward"])._kl_sampling_logps is True
    monkeypatch.setenv(hooks.SAMPLING_LOGPS_ENV, "0")
    assert _trainer(dirs, CONFIGS["k1-in-reward"])._kl_sampling_logps is False
    with pytest.raises(TypeError, match="KL config"):
        hooks.use_sampling_logps(object())


# ------------------------------------------------------------------ groups across ranks
class _Rank:
    """One simulated data-parallel rank: gather/reduce meet the other rank at a barrier."""

    def __init__(self, index: int, world: list[Any], barrier: threading.Barrier) -> None:
        self.process_index, self.num_processes = index, len(world)
        self._world, self._barrier = world, barrier

    def _exchange(self, x: Any) -> list[Any]:
        self._barrier.wait()
        self._world[self.process_index] = x
        self._barrier.wait()
        values = list(self._world)
        self._barrier.wait()
        return values

    def gather(self, x: Any) -> Any:
        return torch.cat([v.reshape(-1) if v.dim() == 0 else v for v in self._exchange(x)])

    def reduce(self, x: Any, reduction: str = "sum") -> Any:
        return torch.stack(self._exchange(x)).sum(0)


class _FakeTrainer:
    def __init__(self, accelerator: _Rank, config: KLConfig, scale_rewards: str) -> None:
        self.accelerator = accelerator
        self.model = torch.nn.Linear(1, 1)
        self.num_generations = 4
        self.scale_rewards = scale_rewards
        self._metrics: dict[str, Any] = {"train": defaultdict(list)}
        self._logs: dict[str, Any] = {}
        hooks.init_state(self, config)


@pytest.mark.parametrize("scale_rewards", ["group", "batch"])
def test_deferred_groups_spanning_two_ranks(scale_rewards: str) -> None:
    """12 rows, groups of 4, 6 rows per rank: the middle group has members on both ranks, and
    each rank's micro-batch is shuffled. The result is the whole-batch computation."""
    config = KLConfig(coef=0.1)
    g = torch.Generator().manual_seed(38)
    n, t = 12, 5
    policy = -torch.rand(n, t, generator=g)
    ref = policy + 0.5 * torch.randn(n, t, generator=g)
    mask = (torch.rand(n, t, generator=g) > 0.2).long()
    rewards = torch.randn(n, generator=g)
    penalty = 0.1 * ((policy - ref) * mask).sum(-1)
    expected, _ = grpo_advantages(rewards, penalty, 4, scale_rewards)

    world: list[Any] = [None, None]
    barrier = threading.Barrier(2)
    results: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    errors: list[BaseException] = []

    def rank(index: int) -> None:
        try:
            trainer = _FakeTrainer(_Rank(index, world, barrier), config, scale_rewards)
            local = torch.arange(6 * index, 6 * index + 6)
            order = local[torch.randperm(6, generator=torch.Generator().manual_seed(index))]
            batch = {
                hooks.DEFER_ROWS: order,
                hooks.DEFER_REWARDS: rewards[order],
                "ref_per_token_logps": ref[order],
                "completion_mask": mask[order],
            }
            hooks._resolve_deferred(trainer, batch, policy[order])
            results[index] = (order, batch["advantages"])
        except BaseException as err:  # re-raised in the main thread
            errors.append(err)
            barrier.abort()

    threads = [threading.Thread(target=rank, args=(i,)) for i in (0, 1)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    if errors:
        raise errors[0]
    for order, advantages in results.values():
        assert max_diff([advantages], [expected[order]]) < TOL
    assert len(results) == 2
