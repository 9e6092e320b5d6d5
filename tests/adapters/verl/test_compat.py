"""The verl adapter on the installed verl release (``nox -s compat`` runs this file against every
release 0.7.0-0.9.1; ``nox -s verl`` against 0.9.1).

The behaviour canaries pass; each fails with a clear error when its verl function is planted to
compute something else; a planted signature change of each wrapped function is refused; the
patch follows ``apply_kl_penalty`` / ``compute_advantage`` into a ``trainer_utils`` module (the
open upstream move) and refuses a loaded module that defines its own copy; a loss side that
needs the patch is refused where verl's legacy actor computes the KL loss (before 0.8.0) and
runs through the real ``ppo_loss`` after; the reward side runs through the real
``apply_kl_penalty`` and GRPO ``compute_advantage`` with the patch on every release.
"""

from __future__ import annotations

import inspect
import sys
import types
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("verl")
sys.path.insert(0, str(Path(__file__).parent))

import verl
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from verl.trainer.ppo import core_algos, ray_trainer
from verl_support.batches import last_token, make_rollout, to_dataproto
from verl_support.configs import with_verl_clamps

from kl_patches import core
from kl_patches.adapters import verl as kv
from kl_patches.adapters.patching import SignatureMismatchError
from kl_patches.adapters.support import FORCE_ENV, CanaryError, UntestedVersionWarning
from kl_patches.adapters.verl import canaries, patch, versions
from kl_patches.config import KLConfig

TOL = {"atol": 1e-6, "rtol": 1e-6}
REWARD = KLConfig(estimator="k2", placement="reward", coef=0.1, granularity="sequence")
LOSS = KLConfig(estimator="k2", placement="loss", coef=0.1, granularity="sequence")
_RT = "verl.trainer.ppo.ray_trainer"
LOSS_PATCH = SpecifierSet(versions.LOSS_PATCH).contains(verl.__version__)
ENGINE_LOSS = not patch._absent("verl.workers.utils.losses")


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv(FORCE_ENV, raising=False)
    patch.revert()
    yield
    patch.revert()


def test_installed_release_is_in_the_range_and_the_canaries_pass() -> None:
    assert versions.SUPPORT.position(verl.__version__) == "inside"
    assert [c.run() for c in canaries.canaries(loss_patch=LOSS_PATCH)] == [None] * (4 + LOSS_PATCH)


def test_above_the_range_passing_canaries_warn_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verl, "__version__", "0.10.0")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kv.apply(REWARD)
    assert [w.category for w in caught if w.category is UntestedVersionWarning] == [
        UntestedVersionWarning
    ]


# ------------------------------------------------------------------ planted canary failures
def _plant(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, function: Any) -> None:
    function.__module__ = module.__name__
    monkeypatch.setattr(module, name, function)


def _k3_unclamped(monkeypatch: pytest.MonkeyPatch) -> None:
    real = core_algos.kl_penalty

    def kl_penalty(logprob: Any, ref_logprob: Any, kl_penalty: str) -> Any:
        if kl_penalty in ("low_var_kl", "k3"):  # a release that dropped the clamps
            r = ref_logprob - logprob
            return r.exp() - r - 1
        return real(logprob, ref_logprob, kl_penalty)

    _plant(monkeypatch, core_algos, "kl_penalty", kl_penalty)


def _marker_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    real = core_algos.kl_penalty

    def kl_penalty(logprob: Any, ref_logprob: Any, kl_penalty: str) -> Any:
        return real(logprob, ref_logprob, "kl" if kl_penalty == kv.MARKER else kl_penalty)

    _plant(monkeypatch, core_algos, "kl_penalty", kl_penalty)


def _token_mean_is_seq_mean(monkeypatch: pytest.MonkeyPatch) -> None:
    real = core_algos.agg_loss

    def agg_loss(loss_mat: Any, loss_mask: Any, loss_agg_mode: str, **kw: Any) -> Any:
        mode = "seq-mean-token-mean" if loss_agg_mode == "token-mean" else loss_agg_mode
        return real(loss_mat=loss_mat, loss_mask=loss_mask, loss_agg_mode=mode, **kw)

    _plant(monkeypatch, core_algos, "agg_loss", agg_loss)


def _penalty_unmasked(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ray_trainer.apply_kl_penalty

    def apply_kl_penalty(data: Any, kl_ctrl: Any, kl_penalty: str = "kl") -> Any:
        out, metrics = real(data, kl_ctrl, kl_penalty)
        out.batch["token_level_rewards"] = out.batch["token_level_rewards"] - kl_ctrl.value
        return out, metrics

    _plant(monkeypatch, ray_trainer, "apply_kl_penalty", apply_kl_penalty)


def _grpo_always_std(monkeypatch: pytest.MonkeyPatch) -> None:
    real = core_algos.compute_grpo_outcome_advantage

    def compute_grpo_outcome_advantage(*args: Any, **kwargs: Any) -> Any:
        kwargs["norm_adv_by_std_in_grpo"] = True
        return real(*args, **kwargs)

    _plant(
        monkeypatch, core_algos, "compute_grpo_outcome_advantage", compute_grpo_outcome_advantage
    )


PLANTS = {
    "k3_unclamped": (_k3_unclamped, r"core_algos\.kl_penalty computed .* for 'low_var_kl'"),
    "marker_accepted": (_marker_accepted, r"kl_penalty computed a value for the name 'kl_patches'"),
    "agg_loss": (_token_mean_is_seq_mean, r"core_algos\.agg_loss computed .* for 'token-mean'"),
    "apply_kl_penalty": (_penalty_unmasked, r"apply_kl_penalty computed token_level_rewards"),
    "grpo": (_grpo_always_std, r"compute_grpo_outcome_advantage computed advantages .* without"),
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_planted_canary_failure_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, plant: str
) -> None:
    install, message = PLANTS[plant]
    install(monkeypatch)
    with pytest.raises(CanaryError, match=message) as info:
        kv.apply(REWARD)
    assert "the adapter assumes" in str(info.value) and kv.active() is None


def test_planted_ppo_loss_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    """From 0.8.0 a loss config runs the ppo_loss canary; before, the legacy-actor refusal comes
    first (the planted function is never reached; verl < 0.7 has no engine loss to plant)."""
    if ENGINE_LOSS:
        from verl.workers.utils import losses

        real = losses.ppo_loss

        def ppo_loss(config: Any, model_output: Any, data: Any, dp_group: Any = None) -> Any:
            loss, metrics = real(config, model_output, data, dp_group=dp_group)
            return loss + 0.5, metrics  # a KL-like term whatever use_kl_loss says

        _plant(monkeypatch, losses, "ppo_loss", ppo_loss)
    error, message = (
        (CanaryError, r"losses\.ppo_loss computed a loss of .* with use_kl_loss off")
        if LOSS_PATCH
        else (RuntimeError, "legacy actor")
    )
    with pytest.raises(error, match=message):
        kv.apply(LOSS)


# ------------------------------------------------------------------ signatures
SIGNED = {
    "apply_kl_penalty": "verl.trainer.ppo.ray_trainer",
    "compute_advantage": "verl.trainer.ppo.ray_trainer",
    **({"ppo_loss": "verl.workers.utils.losses"} if ENGINE_LOSS else {}),
}
"""The wrapped functions of the installed release (verl < 0.7 has no engine ``ppo_loss``)."""


@pytest.mark.parametrize("name", sorted(SIGNED))
def test_planted_signature_change_is_refused(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    module = sys.modules[SIGNED[name]]
    real = getattr(module, name)

    def changed(*args: Any, new_option: Any = None, **kwargs: Any) -> Any:
        return real(*args, **kwargs)

    _plant(monkeypatch, module, name, changed)
    with pytest.raises(SignatureMismatchError, match=rf"{SIGNED[name]}\.{name} has the signature"):
        kv.apply(REWARD)
    assert kv.active() is None
    monkeypatch.setenv(FORCE_ENV, "1")
    with pytest.warns(UserWarning, match="no tested release has"):
        kv.apply(REWARD)


# ------------------------------------------------------------------ where the functions live
def _move_to_trainer_utils(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """What open upstream PR #7237 does: both functions defined in trainer_utils, imported back
    by name into ray_trainer (and the v1 trainer)."""
    home = types.ModuleType("verl.trainer.ppo.trainer_utils")
    for name in ("apply_kl_penalty", "compute_advantage"):
        real = getattr(ray_trainer, name)
        moved = types.FunctionType(
            real.__code__, real.__globals__, name, real.__defaults__, real.__closure__
        )
        moved.__module__ = home.__name__
        moved.__kwdefaults__ = real.__kwdefaults__
        setattr(home, name, moved)
        monkeypatch.setattr(ray_trainer, name, moved)
    monkeypatch.setitem(sys.modules, home.__name__, home)
    return home


def test_functions_moved_to_trainer_utils_are_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    home = _move_to_trainer_utils(monkeypatch)
    moved = home.apply_kl_penalty
    kv.apply(REWARD)
    modules = {t.attr: t.module for t in patch.REGISTRY.targets()}
    assert modules["apply_kl_penalty"] == modules["compute_advantage"] == home.__name__
    assert home.apply_kl_penalty is patch._apply_kl_penalty
    assert ray_trainer.apply_kl_penalty is patch._apply_kl_penalty  # the importer, too
    assert patch.REGISTRY.original(patch._BY_ATTR["apply_kl_penalty"]) is moved
    _reward_side_matches_core(REWARD)
    kv.revert()
    assert home.apply_kl_penalty is moved and ray_trainer.apply_kl_penalty is moved


def test_a_loaded_copy_the_patch_cannot_reach_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    recipe = types.ModuleType("recipe.my_trainer")
    source = ray_trainer.apply_kl_penalty
    copy = types.FunctionType(source.__code__, source.__globals__, "apply_kl_penalty")
    copy.__module__ = recipe.__name__
    recipe.apply_kl_penalty = copy  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, recipe.__name__, recipe)
    with pytest.raises(RuntimeError, match=r"recipe\.my_trainer\.apply_kl_penalty.*own copy"):
        kv.apply(REWARD)


# ------------------------------------------------------------------ the real functions, patched
def _reward_side_matches_core(config: KLConfig) -> None:
    r = make_rollout(seed=21)
    data, metrics = ray_trainer.apply_kl_penalty(
        to_dataproto(r), core_algos.FixedKLController(config.coef), kv.MARKER
    )
    assert metrics["kl_patches/active"] == 1.0
    penalty = core.reward_penalty(r.old_logp, r.ref_logp, r.mask, config)
    torch.testing.assert_close(data.batch["token_level_rewards"].sum(-1), r.score - penalty, **TOL)
    data = ray_trainer.compute_advantage(data, "grpo", num_repeat=4)
    ref = to_dataproto(r)
    ref.batch["token_level_rewards"] = last_token(r.score - penalty, r.mask)
    ref = patch.REGISTRY.original(patch._BY_ATTR["compute_advantage"])(ref, "grpo", num_repeat=4)
    torch.testing.assert_close(data.batch["advantages"], ref.batch["advantages"], **TOL)


def test_reward_side_through_the_real_functions_with_the_patch() -> None:
    kv.apply(REWARD)
    _reward_side_matches_core(REWARD)


def test_loss_side_needs_ppo_loss_as_the_kl_site(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before 0.8.0 (legacy actor) a loss side needing the patch is refused, with the way out;
    from 0.8.0 it is accepted (test_patch.py runs it through the real ppo_loss)."""
    assert (patch._legacy_loss_site() is None) is LOSS_PATCH
    if LOSS_PATCH:
        kv.apply(LOSS)
        assert kv.active_config() == LOSS
        kv.revert()
        monkeypatch.setattr(patch, "_legacy_loss_site", lambda: "verl.workers.actor.dp_actor")
    with pytest.raises(
        RuntimeError, match=r"legacy actor \(verl\.workers\.actor\.dp_actor"
    ) as info:
        kv.apply(LOSS)
    assert "use_legacy_worker_impl" in str(info.value) and ">=0.8.0" in str(info.value)
    assert kv.active() is None
    kv.apply(REWARD)  # the reward side still runs
    monkeypatch.setenv(FORCE_ENV, "1")
    with pytest.warns(UserWarning, match="legacy actor"):
        kv.apply(LOSS)


def test_straight_through_names_crash_before_0_8_and_take_the_k2_gradient_after() -> None:
    """'k3+' etc.: verl 0.7 hands the name with its '+' to kl_penalty_forward, which raises; 0.8.0
    strips it (the reason test_regression's '+' test is deselected on 0.7.x)."""
    r = make_rollout(seed=3)
    if not LOSS_PATCH:
        with pytest.raises(NotImplementedError):
            core_algos.kl_penalty(r.logp, r.ref_logp, "k3+")
        return
    value = core_algos.kl_penalty(r.logp, r.ref_logp, "k3+")
    (grad,) = torch.autograd.grad((value * r.mask).sum(), r.logp)
    torch.testing.assert_close(grad, (r.logp - r.ref_logp).detach() * r.mask, **TOL)


def test_every_deselected_test_exists() -> None:
    root = Path(__file__).resolve().parents[3]
    nodes = {n for step in versions.SWEEP_PLAN.steps for n in step.deselect}
    assert set(versions.NO_ENGINE_LOSS_DESELECT) <= nodes
    for node in nodes:
        path, _, name = node.partition("::")
        assert (root / path).is_file(), node
        assert not name or f"def {name}(" in (root / path).read_text(), node


def test_no_engine_loss_exactly_where_the_legacy_deselection_applies() -> None:
    """verl 0.4-0.6 have no workers.utils.losses (the tests needing it are deselected there)."""
    assert ENGINE_LOSS is (Version(verl.__version__) >= Version("0.7.0"))
    step = next(s for s in versions.SWEEP_PLAN.steps if s.version == verl.__version__)
    engine_tests = set(versions.NO_ENGINE_LOSS_DESELECT) - set(versions.LEGACY_ACTOR_DESELECT)
    assert engine_tests.isdisjoint(step.deselect) is ENGINE_LOSS
    assert "ppo_loss" not in {t.attr for t in patch.resolve_targets()} or ENGINE_LOSS


def test_every_by_name_importer_of_this_release_gets_the_wrapper() -> None:
    import importlib

    importers = versions.IMPORTERS[verl.__version__]
    modules = {m: importlib.import_module(m) for m, _ in importers}
    originals = {(m, a): getattr(modules[m], a) for m, a in importers}
    kv.apply(REWARD)
    wrappers = {
        "apply_kl_penalty": patch._apply_kl_penalty,
        "compute_advantage": patch._compute_advantage,
        "ppo_loss": patch._ppo_loss,
    }
    assert {(m, a): getattr(modules[m], a) for m, a in importers} == {
        (m, a): wrappers[a] for m, a in importers
    }
    kv.revert()
    assert {(m, a): getattr(modules[m], a) for m, a in importers} == originals


# ------------------------------------------------------------------ the 0.4.x call shapes
MULTI_TURN_ARG = (
    "multi_turn" in inspect.signature(canaries.original(_RT, "apply_kl_penalty")).parameters
)
"""verl 0.4.x: apply_kl_penalty and compute_advantage take multi_turn (and slice their masks)."""


def _with_loss_mask(r: Any) -> Any:
    """``to_dataproto(r)`` plus a multi-turn ``loss_mask`` with a hole (tool tokens) in row 0."""
    data = to_dataproto(r)
    loss_mask = data.batch["attention_mask"].clone()
    loss_mask[0, -3] = 0
    data.batch["loss_mask"] = loss_mask
    return data


def test_multi_turn_argument_exactly_in_0_4() -> None:
    assert MULTI_TURN_ARG is (Version(verl.__version__) < Version("0.5.0"))


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
@pytest.mark.parametrize("multi_turn", [None, False, True], ids=["absent", "false", "true"])
def test_marker_reward_is_verls_own_where_verl_expresses_it(
    estimator: str, multi_turn: bool | None
) -> None:
    """The marker's reward with verl's numerics is verl's apply_kl_penalty on every release,
    with the mask each release reads (0.4.x: the response part of attention_mask, or of
    loss_mask for multi-turn data); a multi_turn argument the release lacks is refused."""
    config = with_verl_clamps(KLConfig(estimator=estimator, placement="reward", coef=0.1))
    r = make_rollout(seed=31, spread=3.0)
    options = {} if multi_turn is None else {"multi_turn": multi_turn}
    ctrl = core_algos.FixedKLController(0.1)
    kv.apply(config)
    if options and not MULTI_TURN_ARG:
        with pytest.raises(TypeError, match="multi_turn"):
            ray_trainer.apply_kl_penalty(_with_loss_mask(r), ctrl, kv.MARKER, **options)
        return
    ours, metrics = ray_trainer.apply_kl_penalty(_with_loss_mask(r), ctrl, kv.MARKER, **options)
    theirs, _ = ray_trainer.apply_kl_penalty(_with_loss_mask(r), ctrl, estimator, **options)
    assert metrics["kl_patches/active"] == 1.0
    rewards = ours.batch["token_level_rewards"]
    torch.testing.assert_close(rewards, theirs.batch["token_level_rewards"], **TOL)
    hole = bool(multi_turn) and MULTI_TURN_ARG
    assert bool(rewards[0, -3] == r.token_scores[0, -3]) is hole  # no penalty on the hole


def test_kl_outside_std_centres_on_grpos_own_mask() -> None:
    """kl_outside_std: the group-centred penalty lands on the tokens verl's GRPO broadcasts to
    (0.4.x with multi_turn: loss_mask's response part, so not on the hole)."""
    config = KLConfig(estimator="k1", placement="reward", coef=0.1)
    r = make_rollout(seed=32)
    kv.apply(kv.PatchSpec(config, kl_outside_std=True))
    options = {"multi_turn": True} if MULTI_TURN_ARG else {}
    data, _ = ray_trainer.apply_kl_penalty(
        _with_loss_mask(r), core_algos.FixedKLController(0.1), kv.MARKER
    )
    data = ray_trainer.compute_advantage(data, "grpo", num_repeat=4, **options)
    penalty = core.reward_penalty(r.old_logp, r.ref_logp, r.mask, config).view(-1, 4)
    score = r.score.view(-1, 4)
    scaled = (score - score.mean(1, keepdim=True)) / (score.std(1, keepdim=True) + 1e-6)
    expected = (scaled - (penalty - penalty.mean(1, keepdim=True))).reshape(-1)
    mask = r.mask.float()
    if MULTI_TURN_ARG:
        mask[0, -3] = 0.0
    torch.testing.assert_close(data.batch["advantages"], expected[:, None] * mask, **TOL)
