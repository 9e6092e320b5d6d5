"""The TRL adapter on the installed TRL release (``nox -s compat`` runs this file against every
release of the compat matrix; ``nox -s trl`` against 1.16.0).

The behaviour canaries pass and what they detect agrees with the recorded patch surface; each
canary fails with a clear error when its TRL function is planted to compute something else; a
planted signature change of each hooked method is refused; unsloth-style and ms-swift-style
trainers and subclasses whose override never calls super() are refused (one that does is
accepted); the liger guard follows the installed TRL; five
GRPO steps with k1-in-reward train through ``apply()``; the recorded known differences are real.
"""

from __future__ import annotations

import os
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
sys.path.insert(0, str(Path(__file__).parent))

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")

from trl_support import harness  # noqa: E402

import kl_patches.trl as klt  # noqa: E402
from kl_patches import KLConfig  # noqa: E402
from kl_patches.adapters.patching import SignatureMismatchError  # noqa: E402
from kl_patches.adapters.support import (  # noqa: E402
    FORCE_ENV,
    TRAINER_FORCE_ENV,
    CanaryError,
)
from kl_patches.adapters.trl import canaries, compat, foreign, hooks, patch, versions  # noqa: E402
from kl_patches.adapters.trl.advantages import rloo_advantages  # noqa: E402

TOL = 1e-6
TRL_ROOT = Path(trl.__file__).resolve().parent


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv(FORCE_ENV, raising=False)
    monkeypatch.delenv(TRAINER_FORCE_ENV, raising=False)
    monkeypatch.delenv(versions.SUPPORT.legacy_force_env, raising=False)
    yield
    klt.revert()


def as_trl_code(source: str, name: str, namespace: dict[str, Any]) -> Any:
    """``source`` compiled as if it were part of the installed TRL (a future release that
    changed the function), so only the check under test can tell."""
    code = compile(textwrap.dedent(source), str(TRL_ROOT / "trainer" / "grpo_trainer.py"), "exec")
    scope = {"__name__": "trl.trainer.grpo_trainer", **namespace}
    exec(code, scope)
    return scope[name]


# ------------------------------------------------------------------ the canaries pass
def test_canaries_pass_and_agree_with_the_recorded_surface() -> None:
    failures = [c.run() for c in canaries.canaries()]
    assert failures == [None] * len(failures)
    surface = compat.surface_at(trl.__version__)
    scaled = "GA/steps_per_generation" in str(surface["grpo.global_token_normalizer"])
    assert canaries.DETECTED["grpo.dapo_normaliser_ga_scaled"] is scaled


def test_version_is_in_the_tested_range() -> None:
    assert versions.SUPPORT.position(trl.__version__) == "inside"
    assert klt.apply("k1-in-reward") == KLConfig()


# ------------------------------------------------------------------ planted canary failures
def _plant_nanstd(monkeypatch: pytest.MonkeyPatch) -> None:
    import trl.trainer.utils as utils

    real = utils.nanstd
    monkeypatch.setattr(utils, "nanstd", lambda t, dim=None, keepdim=False: 0.5 * real(t, dim))


def _plant_grpo_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    """The KL term no longer switched off by beta=0 (the hooks' toggle would not remove it)."""
    plant = as_trl_code(
        """
        def _compute_loss(self, model, inputs):
            saved = self.beta
            self.beta = saved or 0.04
            try:
                return real(self, model, inputs)
            finally:
                self.beta = saved
        """,
        "_compute_loss",
        {"real": canaries.original(trl.GRPOTrainer, "_compute_loss")},
    )
    monkeypatch.setattr(trl.GRPOTrainer, "_compute_loss", plant)


def _plant_rloo_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    """A KL term in RLOO's loss (the hooks add their own: it would count twice)."""
    plant = as_trl_code(
        """
        def _compute_loss(self, model, inputs):
            delta = inputs["ref_per_token_logps"] - inputs["old_logps"][:, None]
            return real(self, model, inputs) + self.beta * (delta.exp() - delta - 1).mean()
        """,
        "_compute_loss",
        {"real": canaries.original(trl.RLOOTrainer, "_compute_loss")},
    )
    monkeypatch.setattr(trl.RLOOTrainer, "_compute_loss", plant)


def _plant_grpo_scoring(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another normalisation of the advantages than advantages.py re-computes."""
    plant = as_trl_code(
        """
        def _generate_and_score_completions(self, inputs):
            out = real(self, inputs)
            out["advantages"] = 2.0 * out["advantages"]
            return out
        """,
        "_generate_and_score_completions",
        {"real": canaries.original(trl.GRPOTrainer, "_generate_and_score_completions")},
    )
    plant.__wrapped__ = canaries.original(trl.GRPOTrainer, "_generate_and_score_completions")
    monkeypatch.setattr(trl.GRPOTrainer, "_generate_and_score_completions", plant)


def _plant_rloo_k3(monkeypatch: pytest.MonkeyPatch) -> None:
    """RLOO's reward penalty switched from k1 to k3 (open upstream PR #7096)."""
    plant = as_trl_code(
        """
        def _generate_and_score_completions(self, inputs):
            out = real(self, inputs)
            mask = out["completion_mask"].float()
            ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
            att = torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1)
            keep = mask.size(1)
            logps = self._get_per_token_logps_and_entropies
            policy = logps(self.model, ids, att, keep)[0]
            ref = logps(self.ref_model, ids, att, keep)[0]
            delta = ref - policy
            k3 = ((delta.exp() - delta - 1) * mask).sum(1)
            rewards = self._calculate_rewards(inputs, None, None, None).sum(1)
            groups = self.num_generations
            out["advantages"] = advantages(rewards, self.beta * k3, groups, None, False)
            return out
        """,
        "_generate_and_score_completions",
        {
            "real": canaries.original(trl.RLOOTrainer, "_generate_and_score_completions"),
            "torch": torch,
            "advantages": rloo_advantages,
        },
    )
    monkeypatch.setattr(trl.RLOOTrainer, "_generate_and_score_completions", plant)


PLANTS = {
    "nanstd": (_plant_nanstd, r"trl\.trainer\.utils\.nanstd computed \[.*per row"),
    "grpo_loss": (
        _plant_grpo_loss,
        r"GRPOTrainer\._compute_loss computed a dapo loss of .* beta=0",
    ),
    "rloo_loss": (_plant_rloo_loss, r"RLOOTrainer\._compute_loss computed a loss of .* beta=0\.05"),
    "grpo_scoring": (
        _plant_grpo_scoring,
        r"GRPOTrainer\._generate_and_score_completions computed advantages .* "
        r"scale_rewards='group'",
    ),
    "rloo_k3": (
        _plant_rloo_k3,
        r"RLOOTrainer\._generate_and_score_completions computed advantages .*k3 summed per seq",
    ),
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_planted_canary_failure_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, plant: str
) -> None:
    install, message = PLANTS[plant]
    install(monkeypatch)
    with pytest.raises(CanaryError, match=message) as info:
        klt.apply("k1-in-reward")
    assert "the adapter assumes" in str(info.value) and FORCE_ENV in str(info.value)
    assert not klt.is_applied()
    with pytest.warns(UserWarning, match="running anyway"):
        klt.apply("k1-in-reward", force=True)


def test_canary_failure_above_the_range_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    _plant_nanstd(monkeypatch)
    monkeypatch.setattr(trl, "__version__", "1.17.0")
    with pytest.raises(RuntimeError, match=r"outside trl>=0\.14\.0.*nanstd computed"):
        klt.apply("k1-in-reward")


# ------------------------------------------------------------------ signatures
HOOKED_TARGETS = [(cls, name) for cls in patch.TRAINERS.values() for name in patch.HOOKED]


@pytest.mark.parametrize(("cls", "name"), HOOKED_TARGETS)
def test_planted_signature_change_is_refused(
    monkeypatch: pytest.MonkeyPatch, cls: str, name: str
) -> None:
    klass = getattr(trl, cls)
    plant = as_trl_code(
        f"""
        def {name}(self, *args, new_option=None, **kwargs):
            return real(self, *args, **kwargs)
        """,
        name,
        {"real": canaries.original(klass, name)},
    )
    monkeypatch.setattr(klass, name, plant)
    with pytest.raises(SignatureMismatchError, match=rf"trl\.{cls}\.{name} has the signature"):
        klt.apply("k1-in-reward")
    assert not klt.is_applied()
    with pytest.warns(UserWarning, match="no tested release has"):
        klt.apply("k1-in-reward", force=True)


def test_recorded_signatures_hold_for_the_installed_release() -> None:
    shapes = patch.REGISTRY.check_signatures(
        {t: patch.signatures(t) for items in patch.targets().values() for t in items}
    )
    assert len(shapes) == len(HOOKED_TARGETS)


# ------------------------------------------------------------------ foreign trainers
def _foreign_class(module: str, path: str) -> type:
    """A class compiled outside TRL with TRL's method names (what unsloth's compiler makes)."""
    source = "class UnslothGRPOTrainer(Trainer):\n" + "".join(
        f"    def {name}(self, *args, **kwargs):\n        return None\n" for name in patch.HOOKED
    )
    import transformers

    scope: dict[str, Any] = {"Trainer": transformers.Trainer, "__name__": module}
    exec(compile(source, path, "exec"), scope)
    return scope["UnslothGRPOTrainer"]  # type: ignore[no-any-return]


def test_unsloth_style_replacement_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import trl.trainer
    import trl.trainer.grpo_trainer

    fake = _foreign_class(
        "unsloth_compiled_cache.UnslothGRPOTrainer",
        str(tmp_path / "unsloth_compiled_cache" / "UnslothGRPOTrainer.py"),
    )
    for holder in (trl, trl.trainer, trl.trainer.grpo_trainer):
        monkeypatch.setattr(holder, "GRPOTrainer", fake)
    with pytest.raises(foreign.ForeignTrainerError) as info:
        klt.apply("k1-in-reward")
    text = str(info.value)
    assert "unsloth_compiled_cache.UnslothGRPOTrainer" in text and "unsloth's patched" in text
    assert "grpo_accumulated_loss" in text and "do not import unsloth" in text
    assert not klt.is_applied()


def test_ms_swift_style_deletion_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "swift", types.ModuleType("swift"))
    monkeypatch.delattr(trl.GRPOTrainer, "__init__")
    with pytest.raises(foreign.ForeignTrainerError, match="no __init__ of its own") as info:
        klt.apply("k1-in-reward")
    assert "ms-swift" in str(info.value) and "--kl_in_reward" in str(info.value)


def _subclass(base: type, module: str) -> type:
    def _compute_loss(self: Any, model: Any, inputs: Any) -> Any:
        return super(klass, self)._compute_loss(model, inputs)

    klass = type("MyGRPOTrainer", (base,), {"_compute_loss": _compute_loss, "__module__": module})
    return klass


def test_ms_swift_subclass_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    swift_trainer = _subclass(trl.GRPOTrainer, "swift.rlhf_trainers.grpo_trainer")
    with pytest.raises(foreign.ForeignTrainerError, match="ms-swift's GRPO trainer"):
        foreign.check_subclass(swift_trainer, trl.GRPOTrainer, patch.HOOKED)


def _no_super(base: type, module: str) -> type:
    def _compute_loss(self: Any, model: Any, inputs: Any) -> Any:
        return torch.zeros((), requires_grad=True)

    return type("NoSuper", (base,), {"_compute_loss": _compute_loss, "__module__": module})


def test_an_override_without_super_is_refused_and_one_with_it_accepted(
    monkeypatch: pytest.MonkeyPatch, dirs: tuple[Path, Path]
) -> None:
    klt.apply("k1-in-reward")
    for base in (trl.GRPOTrainer, klt.GRPOTrainer):  # in place, and the drop-in class
        with pytest.raises(foreign.ForeignTrainerError) as info:
            _build(dirs, _no_super(base, "user_code"))
        text = str(info.value)
        assert "user_code.NoSuper._compute_loss (its code never calls super()._compute_loss" in text
        assert "KL_PATCHES_FORCE_TRAINER=1" in text
        trainer = _build(dirs, _subclass(base, "user_code"), scale_rewards="none")
        harness.perturb(trainer.model)
        harness.scored_batch(trainer)
        assert trainer._metrics["train"][
            "kl_patches/reward_sequence_kl"
        ]  # its override calls super(): hooks run
    monkeypatch.setenv(TRAINER_FORCE_ENV, "1")
    with pytest.warns(UserWarning, match="KL_PATCHES_FORCE_TRAINER=1: building it anyway"):
        _build(dirs, _no_super(trl.GRPOTrainer, "user_code"), scale_rewards="none")


def test_subclass_overriding_only_init_is_accepted(dirs: tuple[Path, Path]) -> None:
    class Init(trl.GRPOTrainer):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)

    klt.apply("k1-in-reward")
    trainer = _build(dirs, Init, scale_rewards="none")
    assert isinstance(trainer, Init) and trainer._kl_config == KLConfig()


def _build(dirs: tuple[Path, Path], cls: type, **overrides: Any) -> Any:
    from kl_patches.experiments import tiny

    args = trl.GRPOConfig(**tiny.common_args(dirs[1], **overrides))
    return cls(
        str(dirs[0]),
        tiny.target_reward,
        args=args,
        train_dataset=tiny.dataset(),
        processing_class=tiny.build_tokenizer(),
    )


# ------------------------------------------------------------------ liger guard
def test_liger_guard_follows_the_installed_trl(monkeypatch: pytest.MonkeyPatch) -> None:
    args = types.SimpleNamespace(
        use_liger_kernel=True, multi_objective_aggregation="sum_then_normalize", loss_type="dapo"
    )
    fused = callable(getattr(trl.GRPOTrainer, "compute_liger_loss", None))
    assert fused is compat.surface_at(trl.__version__)["grpo.liger_bypasses_compute_loss"]
    if not fused:
        hooks.validate("GRPO", args, KLConfig())  # no fused path: the flag changes nothing
        monkeypatch.setattr(
            trl.GRPOTrainer, "compute_liger_loss", lambda self, m, i: None, raising=False
        )
    with pytest.raises(ValueError, match="use_liger_kernel=True computes a fused GRPO loss"):
        hooks.validate("GRPO", args, KLConfig())
    hooks.validate("RLOO", args, KLConfig())  # RLOO has no fused loss
    with pytest.raises(ValueError, match="use_liger_loss=True"):
        hooks.validate("GRPO", types.SimpleNamespace(use_liger_loss=True), KLConfig())


# ------------------------------------------------------------------ a short real run
def test_five_grpo_steps_with_k1_in_reward_through_apply(dirs: tuple[Path, Path]) -> None:
    klt.apply(KLConfig(coef=0.05))
    trainer = harness.make_trainer(*dirs, "GRPO", patched=False, scale_rewards="none", max_steps=5)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 5 and all(torch.isfinite(torch.tensor(h["loss"])) for h in logs)
    assert all(
        "kl_patches/reward_sequence_kl" in h and "kl_patches/reward_penalty" in h for h in logs
    )
    moved = max(
        float((a.detach() - b).abs().max())
        for a, b in zip(trainer.model.parameters(), before, strict=True)
    )
    assert moved > 1e-4
    calls = patch.hook_calls()
    assert all(
        calls.get(n, 0) > 0
        for n in ("__init__", "_generate_and_score_completions", "_compute_loss")
    )


# ------------------------------------------------------------------ known differences, defaults
def test_luspo_difference_is_real_where_recorded(dirs: tuple[Path, Path]) -> None:
    """Before 1.10.0 TRL's luspo k3 counts padded positions; the recorded difference holds
    exactly there, and from 1.10.0 the patched loss equals TRL's."""
    settings = {"beta": 0.04, "loss_type": "luspo", "use_bias_correction_kl": False}
    if compat.surface_at(trl.__version__)["grpo.kl_aggregation.luspo"] is None:  # 0.27: no luspo
        with pytest.raises(ValueError, match="luspo"):
            native = harness.make_trainer(*dirs, "GRPO", patched=False, **settings)
            harness.loss_and_grads(native, harness.scored_batch(native))
        return
    native = harness.make_trainer(*dirs, "GRPO", patched=False, **settings)
    config = klt.from_trl_config(native.args)
    patched = harness.make_trainer(
        *dirs, "GRPO", patched=True, kl=config, **{**settings, "beta": 0.0}
    )
    harness.perturb(native.model)
    harness.perturb(patched.model)
    batch = harness.scored_batch(native)
    assert not bool(batch["completion_mask"].all()), "the difference needs padded positions"
    loss_n, _ = harness.loss_and_grads(native, batch)
    loss_p, _ = harness.loss_and_grads(patched, batch)
    recorded = any("luspo" in d.test for d in compat.known_differences(trl.__version__))
    assert recorded is (
        compat.surface_at(trl.__version__)["grpo.kl_aggregation.luspo"] != "seq_sum_mean"
    )
    assert (abs(float(loss_n - loss_p)) > 1e3 * TOL) is recorded


def test_installed_defaults_match_defaults_at() -> None:
    found = klt.installed_defaults()
    for kind in ("GRPO", "RLOO"):
        assert found[kind] == versions.defaults_at(kind, trl.__version__), kind


def test_rloo_advantages_known_case() -> None:
    """A hand-checked leave-one-out case: rewards [1, 0] in one group, penalty [0.2, 0]:
    1 - 0.2 - 0 = 0.8 and 0 - 0.8 = -0.8."""
    adv = rloo_advantages(torch.tensor([1.0, 0.0]), torch.tensor([0.2, 0.0]), 2, None, False)
    assert torch.allclose(adv, torch.tensor([0.8, -0.8]))
