"""The OpenRLHF adapter on the installed OpenRLHF release (``nox -s compat`` runs this file against
every release of the compat matrix, 0.8.0-0.11.2; ``nox -s openrlhf`` against 0.11.2).

The behaviour canaries pass and each fails with a clear error when its function is planted to
compute something else; a planted signature change of each patched function is refused; what
the patch follows (flat or dotted args, ``masked_mean`` or ``aggregate_loss``, ``training_step``
with or without ``step`` and ``loss_batch_info``, the scalar reward in ``info["reward"]`` or
``Experience.rewards``, the value clamp) agrees with the recorded change points; the reward side
through the real ``compute_advantages_and_returns`` and the loss side through the real
``training_step`` equal the core on this release, in this release's own args layout.
"""

from __future__ import annotations

import inspect
import warnings
from types import SimpleNamespace
from typing import Any

import pytest
from openrlhf_support.harness import activate, experience_class

activate()

torch = pytest.importorskip("torch")
pytest.importorskip("openrlhf.trainer.ppo_utils.experience_maker")

from openrlhf_support.cases import COEF, actor_batch, args_for  # noqa: E402
from openrlhf_support.harness import (  # noqa: E402
    actor_trainer,
    make_experience,
    release_args,
    step_arguments,
    tiny_actor,
)
from packaging.version import Version  # noqa: E402

from kl_patches import KLConfig, core  # noqa: E402
from kl_patches.adapters.openrlhf import apply, canaries, revert, versions  # noqa: E402  # noqa: E402
from kl_patches.adapters.openrlhf import patch as P  # noqa: E402
from kl_patches.adapters.patching import SignatureMismatchError  # noqa: E402
from kl_patches.adapters.support import FORCE_ENV, CanaryError, UntestedVersionWarning  # noqa: E402

VERSION = Version(versions.installed_version() or "0")
DOTTED = Version(versions.DOTTED_SINCE) <= VERSION
REWARD = KLConfig(estimator="k2", placement="reward", coef=COEF, granularity="sequence")
LOSS = KLConfig(estimator="k2", placement="loss", coef=COEF, granularity="sequence")


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv(FORCE_ENV, raising=False)
    revert()
    yield
    revert()


def test_release_is_in_the_range_and_the_canaries_pass() -> None:
    assert versions.SUPPORT.position(str(VERSION)) == "inside"
    assert [c.run() for c in canaries.canaries()] == [None, None, None]


def test_above_the_range_passing_canaries_warn_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(P, "installed_version", lambda: "0.12.0")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        apply(REWARD)
    assert [w.category for w in caught if w.category is UntestedVersionWarning] == [
        UntestedVersionWarning
    ]


# ------------------------------------------------------------------ what the patch follows
def test_followed_hook_points_agree_with_the_change_points() -> None:
    from openrlhf.trainer.ray.ppo_actor import ActorPPOTrainer

    names = [t.attr for t in P.resolve_targets()]
    assert names[3] == ("aggregate_loss" if Version("0.10.3") <= VERSION else "masked_mean")
    parameters = inspect.signature(ActorPPOTrainer.training_step).parameters
    assert ("loss_batch_info" in parameters) is (Version("0.10.4") <= VERSION)
    assert ("step" in parameters) is (Version("0.8.6") <= VERSION)
    import openrlhf.models.utils as utils

    # The scalar reward: Experience.rewards from 0.8.3, info["reward"] before.
    holds = P._holds_rewards(experience_class()(info={}))
    assert holds is (Version(versions.REWARD_FIELD_SINCE) <= VERSION)
    # The value clamp: +-10 from 0.8.6, none before.
    r = torch.tensor([[-25.0, 0.5]])
    k1 = utils.compute_approx_kl(r, torch.zeros_like(r), kl_estimator="k1")
    assert float(k1[0, 0]) == -(versions.native_kl_clamp(str(VERSION)) or 25.0)

    takes_old = "log_probs_old" in inspect.signature(utils.compute_approx_kl).parameters
    assert takes_old is (Version(versions.UNBIASED_GRADIENT_SINCE) <= VERSION)
    shapes = P.REGISTRY.check_signatures(
        {t: versions.SIGNATURES[P._key(t)] for t in P.resolve_targets()}
    )
    assert len(shapes) == 5


def test_kl_args_reads_both_layouts() -> None:
    flat = SimpleNamespace(use_kl_loss=True, init_kl_coef=0.02, kl_estimator="k3")
    dotted = SimpleNamespace(
        algo=SimpleNamespace(kl=SimpleNamespace(use_loss=False, init_coef=0.1, estimator="k2"))
    )
    assert P.kl_args(flat) == (True, 0.02, "k3")
    assert P.kl_args(dotted) == (False, 0.1, "k2")


# ------------------------------------------------------------------ planted canary failures
def _plant(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, function: Any) -> None:
    function.__module__ = module.__name__
    monkeypatch.setattr(module, name, function)


def _k3_other_clamp(monkeypatch: pytest.MonkeyPatch) -> None:
    """k3 with the clamp this release does not have: none from 0.8.6, +-10 before."""
    import openrlhf.models.utils as utils

    real = utils.compute_approx_kl
    clamped = versions.native_kl_clamp(str(VERSION)) is None

    def compute_approx_kl(log_probs: Any, log_probs_base: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("kl_estimator") == "k3":
            r = log_probs.float() - log_probs_base.float()
            value = (-r).exp() - 1 + r
            return value.clamp(-10, 10) if clamped else value
        return real(log_probs, log_probs_base, *args, **kwargs)

    _plant(monkeypatch, utils, "compute_approx_kl", compute_approx_kl)


def _reward_spread(monkeypatch: pytest.MonkeyPatch) -> None:
    import openrlhf.models.utils as utils

    real = utils.compute_reward

    def compute_reward(r: Any, kl_coef: Any, kl: Any, action_mask: Any = None, **kw: Any) -> Any:
        out = real(r, kl_coef, kl, action_mask=action_mask, **kw)
        return out - (out * action_mask).sum(-1, keepdim=True) / action_mask.sum(-1, keepdim=True)

    _plant(monkeypatch, utils, "compute_reward", compute_reward)


def _mean_is_sum(monkeypatch: pytest.MonkeyPatch) -> None:
    import openrlhf.trainer.ray.ppo_actor as actor

    name = "aggregate_loss" if callable(vars(actor).get("aggregate_loss")) else "masked_mean"
    real = getattr(actor, name)

    def mean(loss: Any, mask: Any, *args: Any, **kwargs: Any) -> Any:
        return real(loss, mask, *args, **kwargs) * mask.sum()

    mean.__name__ = name
    _plant(monkeypatch, actor, name, mean)


PLANTS = {
    "approx_kl": (_k3_other_clamp, r"compute_approx_kl computed .* for kl_estimator='k3'"),
    "reward": (_reward_spread, r"compute_reward computed .*, not the reward on the last"),
    "mean": (_mean_is_sum, r"computed .* from (aggregate_loss|masked_mean)\(kl, mask\)"),
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_planted_canary_failure_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, plant: str
) -> None:
    install, message = PLANTS[plant]
    install(monkeypatch)
    with pytest.raises(CanaryError, match=message) as info:
        apply(REWARD)
    assert "the adapter assumes" in str(info.value) and P.active_config() is None


# ------------------------------------------------------------------ signatures
@pytest.mark.parametrize("index", range(5))
def test_planted_signature_change_is_refused(monkeypatch: pytest.MonkeyPatch, index: int) -> None:
    target = P.resolve_targets()[index]
    holder = P.REGISTRY.holder(target)
    real = getattr(holder, target.attr)

    def changed(*args: Any, new_option: Any = None, **kwargs: Any) -> Any:
        return real(*args, **kwargs)

    changed.__module__ = target.module
    monkeypatch.setattr(holder, target.attr, changed)
    config = LOSS if P.SIDES[target] == "loss" else REWARD
    with pytest.raises(SignatureMismatchError, match=rf"{target.attr} has the signature"):
        apply(config)
    assert P.active_config() is None


# ------------------------------------------------------------------ the real functions, patched
def layout(args: Any) -> Any:
    """``args`` (OpenRLHF 0.10.2+'s dotted namespace) as this release's parser gives it."""
    return release_args(args)


def _maker(args: Any) -> Any:
    from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker
    from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController

    maker = RemoteExperienceMaker.__new__(RemoteExperienceMaker)
    maker.strategy = SimpleNamespace(args=args)
    maker.args = args
    maker.advantage_estimator = (
        args.algo.advantage.estimator if DOTTED else args.advantage_estimator
    )
    maker.kl_ctl = FixedKLController(P.kl_args(args)[1])
    return maker


def _returns(batch: dict[str, Any], args: Any, rewards: Any) -> Any:
    from openrlhf.trainer.ppo_utils import experience_maker

    use_loss, init_coef, estimator = P.kl_args(args)
    exps = []
    for rows in (slice(0, 4), slice(4, 8)):
        exp = make_experience(
            rewards[rows],
            batch["logp"][rows],
            batch["ref"][rows],
            batch["mask"][rows],
            list(range(8))[rows],
        )
        if init_coef > 0 and not use_loss:  # what make_experience does with the KL
            exp.kl = experience_maker.compute_approx_kl(
                exp.action_log_probs, batch["ref"][rows], kl_estimator=estimator
            )
        else:
            exp.kl = torch.zeros_like(exp.action_log_probs)
        exp.base_action_log_probs = batch["ref"][rows].clone() if use_loss else None
        exps.append(exp)
    return torch.cat([e.returns for e in _maker(args).compute_advantages_and_returns(exps)])


@pytest.fixture(scope="module")
def batch() -> dict[str, Any]:
    g = torch.Generator().manual_seed(5)
    logp = -torch.rand(8, 6, generator=g) * 3
    ref = logp + 0.5 * torch.randn(8, 6, generator=g)
    lengths = torch.tensor([6, 4, 5, 3, 6, 2, 4, 5])
    mask = torch.arange(6)[None, :] < lengths[:, None]
    return {"logp": logp, "ref": ref, "mask": mask, "rewards": torch.randn(8, generator=g)}


def test_reward_side_through_the_real_advantages(batch: dict[str, Any]) -> None:
    apply(REWARD)
    patched = _returns(batch, layout(args_for(REWARD, advantage="rloo")), batch["rewards"])
    revert()
    penalty = core.reward_penalty(batch["logp"], batch["ref"], batch["mask"], REWARD)
    off = layout(args_for(KLConfig(placement="none", coef=0.0), advantage="rloo"))
    want = _returns(batch, off, batch["rewards"] - penalty)
    torch.testing.assert_close(patched, want, atol=1e-6, rtol=1e-6)
    native = _returns(batch, layout(args_for(REWARD, advantage="rloo")), batch["rewards"])
    assert not torch.allclose(native, want, atol=1e-4)  # OpenRLHF alone does something else


def test_loss_side_through_the_real_training_step() -> None:
    Experience = experience_class()

    data = actor_batch(seed=2)
    actor = tiny_actor(seed=3)
    args = layout(args_for(LOSS))
    trainer = actor_trainer(actor, args)
    with torch.no_grad():
        logp = actor(data["sequences"], data["action_mask"], attention_mask=data["attention_mask"])
    g = torch.Generator().manual_seed(7)
    ref = logp + 0.4 * torch.randn(logp.shape, generator=g)
    exp = Experience(
        sequences=data["sequences"],
        attention_mask=data["attention_mask"],
        action_mask=data["action_mask"],
        action_log_probs=logp.clone(),
        base_action_log_probs=ref,
        advantages=torch.zeros_like(logp),
        info={},
    )
    apply(LOSS)
    actor.zero_grad()
    trainer.training_step(exp, COEF, *step_arguments())
    loss = trainer.strategy.losses[-1]
    revert()
    live = actor(data["sequences"], data["action_mask"], attention_mask=data["attention_mask"])
    want = core.loss_term(live, ref, data["action_mask"], LOSS, old_logp=logp)  # coef included
    torch.testing.assert_close(loss, want.detach(), atol=1e-6, rtol=1e-5)
    trainer.training_step(
        exp, COEF, *step_arguments()
    )  # native: token-level k2, not the sequence's
    assert abs(float(trainer.strategy.losses[-1] - loss)) > 1e-4


def test_dotted_args_fail_on_flat_releases_and_work_after(batch: dict[str, Any]) -> None:
    """Why the 0.11.2-style tests are deselected before 0.10.2: OpenRLHF's own code reads flat
    args there (and dotted ones from 0.10.2)."""
    dotted = args_for(KLConfig(placement="none", coef=0.0), advantage="rloo")
    if DOTTED:
        assert _returns(batch, dotted, batch["rewards"]).shape == (8, 6)
        return
    with pytest.raises(AttributeError, match=r"n_samples_per_prompt|advantage_estimator"):
        _returns(batch, dotted, batch["rewards"])


def test_every_deselected_test_exists() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    for _, node, _ in versions.KNOWN_DIFFERENCES:
        path, _, name = node.partition("::")
        assert f"def {name}(" in (root / path).read_text(), node


def test_an_unpatched_importer_of_compute_approx_kl_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A module that took OpenRLHF's compute_approx_kl by name (a trainer the patch does not
    know) would run OpenRLHF's own KL: apply refuses and patches nothing."""
    import sys
    import types

    import openrlhf.models.utils as utils

    module = types.ModuleType("openrlhf.trainer.my_new_trainer")
    module.compute_approx_kl = utils.compute_approx_kl  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    with pytest.raises(RuntimeError, match=r"my_new_trainer.*not patched"):
        apply(LOSS)
    assert P.applied() == [] and P.active_config() is None
