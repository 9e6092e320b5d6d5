"""TRL adapter against real TRL 1.16 code on CPU (tiny random Qwen2, local tokenizer).

Equivalence tests run TRL's native trainer and the kl-patches trainer on the same batch and the
same weights and compare losses, gradients and advantages; the independent test recomputes
k1-in-reward advantages from plain model forwards. Policies are first moved away from the
reference (``perturb``) so every KL term is non-zero and the comparisons can fail.
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

from trl_support import harness, tiny  # noqa: E402

import kl_patches.trl as klt  # noqa: E402
from kl_patches import KLConfig  # noqa: E402
from kl_patches.adapters.trl import native, patching  # noqa: E402

TOL = 1e-6


@pytest.fixture(scope="session")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("trl")
    return tiny.build_model_dir(root / "model"), root / "out"


def pair(dirs: tuple[Path, Path], kind: str, kl: Any, **overrides: Any) -> tuple[Any, Any]:
    """(native, patched) trainers whose policies carry the same perturbation."""
    native = harness.make_trainer(*dirs, kind, patched=False, **overrides)
    patched = harness.make_trainer(*dirs, kind, patched=True, kl=kl, **overrides)
    harness.perturb(native.model)
    harness.perturb(patched.model)
    return native, patched


def max_diff(a: list[Any], b: list[Any]) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a, b, strict=True))


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


# ------------------------------------------------------------------ training
@pytest.mark.parametrize(
    "kind,kl", [("GRPO", "k1-in-reward"), ("GRPO", "k3-in-loss"), ("RLOO", "k3-in-both")]
)
def test_training_run(dirs: tuple[Path, Path], kind: str, kl: str) -> None:
    config = KLConfig.parse(kl, coef=0.05)
    extra = {"scale_rewards": "none"} if kind == "GRPO" else {}
    trainer = harness.make_trainer(*dirs, kind, patched=True, kl=config, max_steps=10, **extra)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 10
    assert all(torch.isfinite(torch.tensor(h["loss"])) for h in logs)
    after = list(trainer.model.parameters())
    assert (
        max(float((a.detach() - b).abs().max()) for a, b in zip(after, before, strict=True)) > 1e-4
    )
    if config.has_reward:
        assert all(f"kl/{config.estimator}_reward" in h and "kl/reward_penalty" in h for h in logs)
        assert any(h["kl/reward_penalty"] > 0 for h in logs)
    if config.has_loss:
        assert all(f"kl/{config.estimator}_loss" in h for h in logs)


# ------------------------------------------------------------------ apply / revert
def test_apply_revert_restores_every_symbol(dirs: tuple[Path, Path]) -> None:
    classes = (trl.GRPOTrainer, trl.RLOOTrainer)
    before = {(c, n): c.__dict__.get(n) for c in classes for n in patching.HOOKED}
    klt.apply("k3-in-loss")
    patched_once = {(c, n): c.__dict__.get(n) for c in classes for n in patching.HOOKED}
    klt.apply("k1-in-reward")  # twice == once, with the newer config
    try:
        assert {(c, n): c.__dict__.get(n) for c in classes for n in patching.HOOKED} == patched_once
        assert all(patched_once[k] is not before[k] for k in before)
        assert klt.active_config() == KLConfig()
        trainer = harness.make_trainer(*dirs, "GRPO", patched=False, scale_rewards="none")
        assert trainer._kl_config == KLConfig() and trainer.beta == 0.05
        harness.perturb(trainer.model)
        batch = harness.scored_batch(trainer, seed=2)
        assert "kl/k1_reward" in trainer._metrics["train"]
        assert "ref_per_token_logps" in batch
    finally:
        klt.revert()
    assert {(c, n): c.__dict__.get(n) for c in classes for n in patching.HOOKED} == before
    assert not klt.is_applied() and klt.active_config() is None
    plain = harness.make_trainer(*dirs, "GRPO", patched=False)
    assert "_kl_config" not in plain.__dict__ and plain.beta == 0.0


def test_version_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trl, "__version__", "1.17.0")
    monkeypatch.delenv(native.FORCE_ENV, raising=False)
    with pytest.raises(RuntimeError, match=r"trl>=1\.16\.0,<1\.17\.0"):
        klt.apply("k1-in-reward")
    assert not klt.is_applied()
    klt.apply("k1-in-reward", force=True)
    klt.revert()


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


# ------------------------------------------------------------------ arguments and reader
def test_kl_arguments_with_trl_parser(tmp_path: Path) -> None:
    from trl import GRPOConfig, TrlParser

    parser = TrlParser((GRPOConfig, klt.KLArguments))
    argv = [
        "--output_dir",
        str(tmp_path),
        "--kl_estimator",
        "k3",
        "--kl_placement",
        "both",
        "--kl_coef",
        "0.1",
        "--use_cpu",
        "true",
        "--bf16",
        "false",
    ]
    _, kl_args = parser.parse_args_and_config(argv)
    assert kl_args.to_config() == KLConfig(estimator="k3", placement="both", coef=0.1)
    assert klt.KLArguments.from_config(kl_args.to_config()) == kl_args
    with pytest.raises(ValueError, match="placement"):
        klt.KLArguments(kl_placement="advantage").to_config()


def test_installed_defaults_match_the_written_ones() -> None:
    found = klt.installed_defaults()
    assert found["GRPO"] == native.GRPO_DEFAULTS
    assert found["RLOO"] == native.RLOO_DEFAULTS


def test_reader_reads_a_patched_trainer(dirs: tuple[Path, Path]) -> None:
    trainer = harness.make_trainer(*dirs, "RLOO", patched=True, kl="k3-in-loss")
    reading = klt.read(trainer)
    assert reading.config == KLConfig.parse("k3-in-loss")
    assert reading.trainer == "RLOOTrainer (kl-patches)"
    native_reading = klt.read(trainer.args)  # the args say beta=0.05: TRL's own k1-in-reward
    assert native_reading.config == KLConfig(coef=0.05)


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


def test_reader_findings() -> None:
    off = klt.read({"beta": 0.0})
    assert off.config.placement == "none"
    assert [f.code for f in off.findings] == ["trl.kl_off"]
    seq = klt.read({"beta": 0.04, "importance_sampling_level": "sequence", "loss_type": "grpo"})
    codes = {f.code for f in seq.findings}
    assert {"trl.sequence_ratio_on_token_kl", "token_mean_loss"} <= codes
    assert klt.read({"beta": 0.04, "num_iterations": 2}).off_policy
    assert klt.read({"trainer": "rloo", "beta": 0.1}).config == KLConfig(coef=0.1)
    with pytest.raises(ValueError, match="loss_type"):
        klt.from_trl_config({"beta": 0.1, "loss_type": "ppo"})


@pytest.mark.parametrize("kind", ["GRPO", "RLOO"])
def test_full_vocab_monitor(dirs: tuple[Path, Path], kind: str) -> None:
    trainer = harness.make_trainer(*dirs, kind, patched=True, kl="k3-in-loss", monitor=True)
    harness.perturb(trainer.model)
    batch = harness.scored_batch(trainer, seed=17)
    logged = trainer._metrics["train"]["kl/full_vocab"][-1]
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
