"""TRL 0.14-0.26 (patched through ``beta`` only): the patched trainer equals TRL's own for the
native setting, bit for bit; everything ``beta`` cannot express is refused with the nearest
setting; the canary and the version guard. The pure-logic tests run with any TRL; the ones that
build trainers need a release of :data:`kl_patches.adapters.trl.versions.NATIVE_ONLY` (``nox -s
"compat(library='trl')"`` runs this file for 0.14.0, 0.16.0, 0.19.0 and 0.23.0).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

from kl_patches import KLConfig
from kl_patches.adapters.trl import legacy, versions

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")

INSTALLED = versions.installed_version()  # 0.22.0's trl.__version__ is "unknown"
NATIVE = versions.patch_mode(INSTALLED) == "native"
needs_native = pytest.mark.legacy_trl
"""Tests of the releases patched through ``beta`` and a reward function (0.14-0.26): the compat
steps of those releases run them; the ``trl`` session (TRL 1.16, on the hooks) deselects them
(``-m "not legacy_trl"``), and on a hooks release they fail instead of passing vacuously."""
((_FIRST, _LAST, _),) = versions.REFERENCE_IN_LOSS  # one range of releases
FORCED = f">={_FIRST},<={_LAST}"
"""The releases where the patch forces TRL's policy scoring forward (0.18)."""


@pytest.fixture(autouse=True)
def _on_a_legacy_release(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("legacy_trl") is not None:
        assert NATIVE, f"TRL {INSTALLED} is patched with the hooks: run this on 0.14-0.26"


# ------------------------------------------------------------------ logic (any TRL installed)
def test_modes_of_the_range() -> None:
    assert versions.patch_mode("0.14.0") == "native"
    assert versions.patch_mode("0.26.2") == "native"
    assert versions.patch_mode("0.27.0") == "hooks"
    assert versions.patch_mode("1.16.0") == "hooks"
    assert "_calculate_rewards" in versions.why_not_hooked("0.17.0")
    with pytest.raises(KeyError):
        versions.why_not_hooked("0.27.0")
    assert versions.SUPPORT.position("0.14.0") == "inside"
    assert versions.SUPPORT.position("0.13.2") == "below"


def _args(**values: Any) -> Any:
    return SimpleNamespace(max_completion_length=256, **values)


def test_native_beta_per_release_and_loss_type() -> None:
    # 0.14-0.16: no loss_type, a per-sequence token mean, no importance weight
    seq = KLConfig(
        estimator="k3", placement="loss", coef=0.04, loss_aggregation="seq_mean_token_mean"
    )
    assert legacy.native_beta("GRPO", _args(), seq, "0.14.0") == 0.04
    # 0.17+: reduced like loss_type; dr_grpo divides by max_completion_length itself
    tok = seq.replace(loss_aggregation="token_mean")
    assert legacy.native_beta("GRPO", _args(loss_type="bnpo"), tok, "0.17.0") == 0.04
    total = seq.replace(loss_aggregation="sum", coef=0.001)
    beta = legacy.native_beta("GRPO", _args(loss_type="dr_grpo"), total, "0.23.0")
    assert beta == pytest.approx(0.256)
    assert legacy.native_beta("GRPO", _args(), KLConfig(placement="none"), "0.14.0") == 0.0
    # RLOO (online from 0.22): k1 summed in the reward
    assert legacy.native_beta("RLOO", _args(), KLConfig(coef=0.05), "0.22.0") == 0.05


@pytest.mark.parametrize(
    "config,where",
    [
        (KLConfig(estimator="k3", placement="both"), "0.14.0"),  # a loss side beta cannot run
        (KLConfig(estimator="k3", placement="loss"), "0.16.0"),  # TRL reduces per sequence
        (
            KLConfig(
                estimator="k3",
                placement="loss",
                loss_aggregation="token_mean",
                importance_weighting="token",
            ),
            "0.23.0",
        ),
    ],
)
def test_refuses_what_beta_cannot_express(config: KLConfig, where: str) -> None:
    args = _args(loss_type="bnpo") if where != "0.14.0" and where != "0.16.0" else _args()
    with pytest.raises(ValueError, match="runs a KL config only through its beta") as info:
        legacy.native_beta("GRPO", args, config, where)
    assert "KLConfig(**{" in str(info.value)  # the nearest native config, spelled out
    assert versions.why_not_hooked(where) in str(info.value)


def test_refuses_the_ppo_style_rloo() -> None:
    with pytest.raises(ValueError, match="PPO-style"):
        legacy.native_beta("RLOO", _args(), KLConfig(coef=0.05), "0.21.0")


def test_reward_route_refuses_the_fused_liger_loss() -> None:
    """GRPO's Liger loss is built with ``beta`` at construction, so the reward route (``beta``
    non-zero, switched to 0 only around ``compute_loss``) would keep TRL's k3 term: refused,
    naming the flag; ``use_liger_kernel`` (transformers' kernels, not the loss before 0.25) and
    the ``beta`` route are not concerned."""
    config = KLConfig(coef=0.04)
    with pytest.raises(ValueError, match="use_liger_loss=False"):
        legacy.check("GRPO", _args(use_liger_loss=True), config, "0.18.0")
    legacy.check("GRPO", _args(use_liger_loss=False, use_liger_kernel=True), config, "0.18.0")
    k3 = KLConfig(estimator="k3", placement="loss", coef=0.04, loss_aggregation="token_mean")
    legacy.check("GRPO", _args(use_liger_loss=True, loss_type="bnpo"), k3, "0.18.0")


# ------------------------------------------------------------------ against the installed TRL
@needs_native
def test_canary_reads_the_recorded_body(monkeypatch: pytest.MonkeyPatch) -> None:
    (canary,) = legacy.canaries()
    assert canary.probe() is None
    name = legacy.kl_method(INSTALLED)
    assert legacy.body_hash(trl.GRPOTrainer, name) in legacy.recorded_hashes(f"GRPOTrainer.{name}")
    monkeypatch.setattr(legacy, "recorded_hashes", lambda method: {"000000000000": "0.14.0"})
    problem = canary.probe()
    assert problem is not None and name in problem


def _trainer(dirs: tuple[Path, Path], patched: bool, **overrides: Any) -> Any:
    from trl_support import harness

    return harness.make_trainer(*dirs, "GRPO", patched=patched, **overrides)


def _step_loss(trainer: Any, seed: int = 0) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """TRL's own loss for one generation batch (generated with ``seed``) and its gradients."""
    from trl_support import harness

    trainer.model.train()
    params = [p for p in trainer.model.parameters() if p.requires_grad]
    prompts = harness.generation_inputs(4)
    torch.manual_seed(seed)
    if hasattr(trainer, "_generate_and_score_completions"):  # 0.16+
        inputs: Any = trainer._generate_and_score_completions(prompts)
    elif hasattr(trl.GRPOTrainer, "_get_per_token_logps"):  # 0.15: scoring in _prepare_inputs
        inputs = trainer._prepare_inputs(prompts)
    else:  # 0.14: generation inside compute_loss, one prompt per group
        inputs = [{"prompt": p} for p in harness.GROUP_PROMPTS]
    loss = trainer.compute_loss(trainer.model, inputs)
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return loss.detach(), [
        torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)
    ]


def _overrides() -> dict[str, Any]:
    """Batch shape per release: 0.14 counts prompts per device (each generating
    ``num_generations``), later releases count completions."""
    from packaging.version import Version

    return {"per_device_train_batch_size": 2} if Version(INSTALLED) < Version("0.15") else {}


@needs_native
def test_k3_in_loss_equals_native_bit_for_bit(dirs: tuple[Path, Path]) -> None:
    from trl_support import harness

    import kl_patches.trl as klt

    native = _trainer(dirs, patched=False, beta=0.04, **_overrides())
    config = legacy.native_config_of(native.args)
    assert config.estimator == "k3" and config.placement == "loss" and config.coef == 0.04
    patched = _trainer(dirs, patched=True, kl=config, beta=0.0, **_overrides())
    assert isinstance(patched, klt.GRPOTrainer) and patched.beta == 0.04
    harness.perturb(native.model)
    harness.perturb(patched.model)
    loss_n, grads_n = _step_loss(native)
    loss_p, grads_p = _step_loss(patched)
    assert torch.equal(loss_n, loss_p)
    assert all(torch.equal(a, b) for a, b in zip(grads_n, grads_p, strict=True))
    native.beta = 0.0  # the KL term matters here, so the equality above could fail
    _, grads_0 = _step_loss(native)
    assert max(float((a - b).abs().max()) for a, b in zip(grads_n, grads_0, strict=True)) > 1e-4


@needs_native
def test_apply_sets_beta_and_refuses_at_construction(dirs: tuple[Path, Path]) -> None:
    import kl_patches.trl as klt

    native = _trainer(dirs, patched=False, beta=0.04, **_overrides())
    config = legacy.native_config_of(native.args)
    before = {cls: cls.__dict__["__init__"] for cls in (trl.GRPOTrainer, trl.RLOOTrainer)}
    klt.apply(config)
    try:
        assert klt.applied() == ["trl.GRPOTrainer.__init__", "trl.RLOOTrainer.__init__"]
        trainer = _trainer(dirs, patched=False, beta=0.0, **_overrides())
        assert trainer.beta == 0.04 and trainer._kl_config == config
        klt.apply(KLConfig(reward_shape="reward_to_go"))  # applying again replaces the config
        with pytest.raises(ValueError, match="only through its beta"):
            _trainer(dirs, patched=False, **_overrides())
    finally:
        klt.revert()
    assert {cls: cls.__dict__["__init__"] for cls in before} == before
    assert _trainer(dirs, patched=False, beta=0.0, **_overrides()).beta == 0.0


@needs_native
def test_two_training_steps_with_the_native_kl(dirs: tuple[Path, Path]) -> None:
    """``trainer.train()`` through TRL's own loop: TRL logs its k3 metric, the patch's beta."""
    native = _trainer(dirs, patched=False, beta=0.04, **_overrides())
    config = legacy.native_config_of(native.args)
    trainer = _trainer(dirs, patched=True, kl=config, beta=0.0, **_overrides())
    result = trainer.train()
    assert result.global_step == 2
    logged = [row["kl"] for row in trainer.state.log_history if "kl" in row]
    assert len(logged) == 2 and all(value >= 0.0 for value in logged)
    assert logged[-1] > 0.0  # the policy moved away from the reference


def _plain_logps(trainer: Any, model: Any, ids: torch.Tensor, keep: int) -> torch.Tensor:
    """A model's completion log-probs from a plain forward, no TRL code (TRL's temperature)."""
    with torch.no_grad():
        logits = model(input_ids=ids).logits[:, -keep - 1 : -1].float()
    plain = torch.log_softmax(logits / getattr(trainer, "temperature", 1.0), -1)
    return plain.gather(-1, ids[:, -keep:].unsqueeze(-1)).squeeze(-1)


@needs_native
def test_grpo_k1_in_reward_two_steps_penalty_as_the_core_computes(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The oldest releases' GRPO with k1 in the reward, through ``trainer.train()``: every
    scoring pass's penalty is coef * sum_t (log pi - log pi_ref) over the completion, with the
    policy's log-probs equal to a plain forward's, TRL sums it into the reward before its
    baseline (logged as its own reward function), and the KL metrics are logged."""
    from kl_patches.adapters import metrics
    from kl_patches.adapters.trl import legacy_reward
    from kl_patches.core import reward_penalty

    coef = 0.1
    seen: list[tuple[torch.Tensor, ...]] = []
    real_inputs, real_penalty = legacy_reward._inputs, legacy_reward._penalty

    def spy_inputs(trainer: Any) -> Any:
        calls = trainer._kl_policy_calls if trainer._kl_policy_first else trainer._kl_ref_calls
        ids = calls[-1][0][0]
        policy, ref, mask = real_inputs(trainer)
        keep = mask.size(1)
        for model, found in ((trainer.model, policy), (trainer.ref_model, ref)):
            if trainer._kl_logps_method is None:  # 0.14: the reference arrives as logits
                continue
            assert (
                float(((_plain_logps(trainer, model, ids, keep) - found) * mask).abs().max()) < 1e-5
            )
        seen.append((policy, ref, mask))
        return policy, ref, mask

    returned: list[list[float]] = []

    def spy_penalty(trainer: Any) -> list[float]:
        values = real_penalty(trainer)
        returned.append(values)
        return values

    monkeypatch.setattr(legacy_reward, "_inputs", spy_inputs)
    monkeypatch.setattr(legacy_reward, "_penalty", spy_penalty)
    trainer = _trainer(
        dirs, patched=True, kl=KLConfig(coef=coef), gradient_accumulation_steps=1, **_overrides()
    )
    assert trainer.beta == coef and trainer.ref_model is not None
    from trl_support import harness

    harness.perturb(trainer.model)  # the policy starts away from the reference
    result = trainer.train()
    assert result.global_step == 2 and len(returned) == 2
    for (policy, ref, mask), values in zip(seen, returned, strict=True):
        expected = coef * ((policy - ref) * mask).sum(-1)
        assert float(expected.abs().max()) > 1e-3  # a real penalty
        assert torch.allclose(torch.tensor(values), -expected, atol=1e-6)
        core = reward_penalty(policy, ref, mask, KLConfig(coef=coef))
        assert torch.allclose(core, expected, atol=1e-6)
    logs = [row for row in trainer.state.log_history if metrics.REWARD_PENALTY in row]
    assert len(logs) == 2
    name = f"rewards/{legacy_reward.PENALTY_NAME}"
    for row in logs:  # TRL logs each reward function's mean (as .../mean from 0.19)
        assert row.get(f"{name}/mean", row.get(name)) == pytest.approx(
            -row[metrics.REWARD_PENALTY], abs=1e-6
        )
        assert row[metrics.REWARD_SEQUENCE_KL] == pytest.approx(row[metrics.REWARD_PENALTY] / coef)


@needs_native
def test_rloo_through_beta_or_refused(dirs: tuple[Path, Path]) -> None:
    """The online RLOOTrainer (0.22+): k1 summed in the reward is its own ``beta``, so the
    patched trainer scores exactly like TRL's; the PPO-style one (before 0.22) is refused."""
    from trl_support import harness

    import kl_patches.trl as klt

    if not versions.online_rloo(INSTALLED):
        with pytest.raises(ValueError, match="PPO-style"):
            klt.RLOOTrainer(str(dirs[0]), None, kl=KLConfig(coef=0.05))
        return
    native, patched = harness.pair(dirs, "RLOO", KLConfig(coef=0.05), beta=0.05)
    assert patched.beta == 0.05
    batch_n = harness.scored_batch(native, seed=7)
    batch_p = harness.scored_batch(patched, seed=7)
    assert torch.equal(batch_n["completion_ids"], batch_p["completion_ids"])
    assert torch.equal(batch_n["advantages"], batch_p["advantages"])
    native.beta = 0.0  # the KL changes the advantages, so the equality above could fail
    batch_0 = harness.scored_batch(native, seed=7)
    assert float((batch_n["advantages"] - batch_0["advantages"]).abs().max()) > 1e-4


@needs_native
@pytest.mark.trl_releases(">=0.16")  # 0.14-0.15 score inside compute_loss/_prepare_inputs
@pytest.mark.parametrize("iterations", [1, 2])
def test_grpo_k1_in_reward_leaves_trl_loss_its_own(
    dirs: tuple[Path, Path], iterations: int
) -> None:
    """On the batch the patched trainer scored (the penalty in its advantages), TRL's loss and
    gradients are bit for bit those of native TRL at ``beta=0`` on the same batch: the reward
    route leaves the loss alone (TRL 0.18 included, where the patch forces TRL's policy scoring
    forward and puts ``old_per_token_logps`` back to None, as TRL leaves it; with
    ``num_iterations=2`` TRL runs that forward itself and keeps its output)."""
    from trl_support import harness

    assert hasattr(trl.GRPOTrainer, "_generate_and_score_completions")  # a batch to share
    shape = {**_overrides(), "num_iterations": iterations}
    native = _trainer(dirs, patched=False, beta=0.0, **shape)
    patched = _trainer(dirs, patched=True, kl=KLConfig(coef=0.1), **shape)
    harness.perturb(native.model)
    harness.perturb(patched.model)
    batch = harness.scored_batch(patched, seed=3)
    assert patched._kl_penalty_calls == 1
    own = harness.scored_batch(native, seed=3)
    # beyond TRL's own keys, only the reference log-probs TRL computed for beta != 0 (0.19+),
    # which its loss does not read at beta=0
    assert set(own) <= set(batch) and set(batch) - set(own) <= {"ref_per_token_logps"}
    old, own_old = batch.get("old_per_token_logps"), own.get("old_per_token_logps")
    assert (old is None) == (own_old is None)
    assert (own_old is None) == (iterations == 1)  # TRL's own condition
    assert torch.equal(batch["completion_ids"], own["completion_ids"])
    assert not torch.equal(batch["advantages"], own["advantages"])  # the penalty is in them
    for trainer in (native, patched):
        trainer.current_gradient_accumulation_steps = 1  # read by some releases' loss
    loss_n, grads_n = _loss_on(native, batch)
    loss_p, grads_p = _loss_on(patched, batch)
    assert torch.equal(loss_n, loss_p)
    assert all(torch.equal(a, b) for a, b in zip(grads_n, grads_p, strict=True))
    assert patched._kl_loss_calls == 1 and patched.beta == 0.1


def _loss_on(trainer: Any, batch: dict[str, Any]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    trainer.model.train()
    params = [p for p in trainer.model.parameters() if p.requires_grad]
    loss = trainer.compute_loss(trainer.model, dict(batch))
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return loss.detach(), [
        torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)
    ]


@needs_native
@pytest.mark.trl_releases(FORCED)  # elsewhere the reference forward comes first
def test_grpo_k1_in_reward_fails_loudly_without_trl_policy_forward(
    dirs: tuple[Path, Path],
) -> None:
    """TRL 0.18: where TRL's policy scoring forward is not captured (its internals differ), the
    penalty raises instead of scoring without the KL."""
    from trl_support import harness

    assert versions.reference_in_loss(INSTALLED)
    trainer = _trainer(dirs, patched=True, kl=KLConfig(coef=0.1), **_overrides())
    method = trainer._kl_logps_method
    setattr(trainer, method, getattr(trl.GRPOTrainer, method).__get__(trainer))  # no capture
    with pytest.raises(RuntimeError, match="policy scoring forward did not run"):
        harness.scored_batch(trainer, seed=3)


@needs_native
def test_launcher_check_describes_the_reward_function_route(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``kl_patches.trl grpo --check`` on a 0.14-0.26 release checks what the patched
    ``__init__`` checks there (not the hooks' rules: ``use_liger_kernel`` is transformers'
    kernels here) and reports the reward-function route; ``use_liger_loss`` is refused."""
    from kl_patches.adapters.trl import launch

    recipe = tmp_path / "grpo.yaml"
    recipe.write_text(
        f"model_name_or_path: {tmp_path}\ndataset_name: none\noutput_dir: {tmp_path / 'out'}\n"
        "beta: 0.0\nuse_liger_kernel: true\n"
        "kl:\n  name: k1-in-reward\n  coef: 0.04\n  reward_shape: sequence\n",
        encoding="utf-8",
    )
    argv = ["grpo", "--config", str(recipe), "--bf16", "false", "--use_cpu", "true", "--check"]
    assert launch.main(argv) == 0
    err = capsys.readouterr().err
    assert "coef=0.04" in err and "GRPOConfig.__post_init__ accept the arguments" in err
    assert "one more reward function, kl_patches_penalty" in err and "hooks" not in err
    assert not (tmp_path / "out").exists()
    import dataclasses

    if "use_liger_loss" not in {f.name for f in dataclasses.fields(trl.GRPOConfig)}:
        return  # before 0.17: no fused loss to refuse
    assert launch.main([*argv[:-1], "--use_liger_loss", "true", "--check"]) == 2
    assert "set use_liger_loss=False" in capsys.readouterr().err


@needs_native
def test_launcher_trains_with_the_kl_in_the_reward(
    dirs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m kl_patches.trl grpo --config ...`` through TRL's own script: two steps with
    the penalty logged, and the exit check asks only for what a 0.14-0.26 patch hooks
    (``__init__``; the per-step check is legacy_reward's callback), so the run ends with 0."""
    import json

    from kl_patches.adapters import metrics
    from kl_patches.adapters.trl import launch, patch

    data = tmp_path / "data"
    data.mkdir()
    rows = [json.dumps({"prompt": f"count to {i}:"}) for i in range(16)]
    (data / "train.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    recipe = tmp_path / "grpo.yaml"
    # TRL's 0.14-0.18 scripts build their reward from a reward model (reward_model_name_or_path)
    recipe.write_text(
        f"model_name_or_path: {dirs[0]}\nreward_model_name_or_path: {dirs[0]}\n"
        f"dataset_name: {data}\noutput_dir: {tmp_path / 'out'}\n"
        "per_device_train_batch_size: 8\nnum_generations: 4\nmax_completion_length: 8\n"
        "max_steps: 2\nlogging_steps: 1\nreport_to: none\nsave_strategy: 'no'\n"
        "use_cpu: true\nbf16: false\nbeta: 0.0\n"
        "kl:\n  name: k1-in-reward\n  coef: 0.1\n  reward_shape: sequence\n",
        encoding="utf-8",
    )
    try:
        assert launch.main(["grpo", "--config", str(recipe)]) == 0
    finally:
        patch.revert()
    captured = capsys.readouterr()
    assert "hook calls {'__init__': 1}" in captured.err and "did not run" not in captured.err
    assert (
        captured.out.count(metrics.REWARD_PENALTY) + captured.err.count(metrics.REWARD_PENALTY) >= 2
    )
