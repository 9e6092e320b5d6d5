"""apply()/revert() on real OpenRLHF 0.11.2: what the flags cannot express runs the core's maths.

Each test runs the real OpenRLHF method with the patch, compares with the core (or with the
real native method on inputs the core prepared), reverts, and checks native behaviour is back.
"""

from __future__ import annotations

import sys

import pytest
from openrlhf_support.harness import activate, experience_class

activate()

torch = pytest.importorskip("torch")
pytest.importorskip("openrlhf.trainer.ppo_utils.experience_maker")

from openrlhf_support.cases import (  # noqa: E402
    COEF,
    actor_batch,
    args_for,
    core_loss_and_grads,
    native_clamp,
    native_loss,
    run_training_step,
)
from openrlhf_support.harness import (  # noqa: E402
    actor_trainer,
    attach_kl_like_make_experience,
    make_args,
    make_experience,
    make_experience_maker,
    step_arguments,
    tiny_actor,
)

from kl_patches import KLConfig, core  # noqa: E402
from kl_patches.adapters.openrlhf import applied, apply, revert, to_args  # noqa: E402
from kl_patches.adapters.openrlhf import patch as P  # noqa: E402

EVERYTHING = KLConfig(estimator="k3", placement="both", coef=COEF, loss_coef=0.05)


@pytest.fixture(autouse=True)
def clean() -> object:
    revert()
    yield
    revert()


def snapshot() -> dict[str, object]:
    return {t.name: vars(P._owner(t))[t.attr] for t in P.resolve_targets()}


@pytest.fixture(scope="module")
def batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    logp = -torch.rand(8, 6, generator=g) * 3
    ref = logp + 0.5 * torch.randn(8, 6, generator=g)
    ref[2, 1] = logp[2, 1] + 12.0  # beyond OpenRLHF's clamp
    lengths = torch.tensor([6, 4, 5, 3, 6, 2, 4, 5])
    mask = torch.arange(6)[None, :] < lengths[:, None]
    return {"logp": logp, "ref": ref, "mask": mask, "rewards": torch.rand(8, generator=g)}


# ----------------------------------------------------------------------------- registry
def test_every_module_that_imported_compute_approx_kl_is_patched_and_restored() -> None:
    import importlib
    import pkgutil

    import openrlhf
    from openrlhf.models import utils

    missing = []
    for info in pkgutil.walk_packages(openrlhf.__path__, "openrlhf."):
        try:
            importlib.import_module(info.name)
        except ModuleNotFoundError:
            missing.append(info.name)
    # serve_rm needs uvicorn, 0.9.x's batch_inference jsonlines; neither holds KL code
    assert set(missing) <= {"openrlhf.cli.serve_rm", "openrlhf.cli.batch_inference"}
    importers = sorted(
        name
        for name, module in list(sys.modules.items())
        if name.startswith("openrlhf")
        and name != "openrlhf.models.utils"
        and getattr(module, "compute_approx_kl", None) is utils.compute_approx_kl
    )
    assert importers == sorted([P.LOSS_MODULE, P.REWARD_MODULE])
    before = snapshot()
    apply(EVERYTHING)
    names = applied()
    assert sorted(names) == sorted(t.name for t in P.resolve_targets())
    for name in importers:
        assert getattr(sys.modules[name].compute_approx_kl, P.MARK)
    assert utils.compute_approx_kl is before[f"{P.REWARD_MODULE}.compute_approx_kl"]
    once = snapshot()
    apply(EVERYTHING)  # twice == once
    assert snapshot() == once
    assert sorted(revert()) == sorted(names)
    after = snapshot()
    assert all(after[k] is before[k] for k in before)
    assert applied() == [] and P.active_config() is None


def test_native_config_patches_nothing_and_sides_are_separate() -> None:
    apply(native_loss("k3"))
    assert applied() == []
    revert()
    reward_only = KLConfig(placement="reward", coef=COEF)  # sequence shape: needs the patch
    apply(reward_only)
    assert {t.split(".")[-2] for t in applied()} == {
        "experience_maker",
        "RemoteExperienceMaker",
    }


def test_new_config_replaces_old_one() -> None:
    apply(EVERYTHING)
    apply(KLConfig(placement="reward", coef=COEF))
    assert P.active_config() == KLConfig(placement="reward", coef=COEF)
    assert all(".ppo_actor" not in name for name in applied())


@pytest.mark.parametrize("version", ["0.7.5", "0.5.8", "0.12.0rc1", "0.11.3.dev0"])
def test_version_guard(version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Below the tested range 0.8.0-0.11.x and pre-releases are refused. (0.10.1, 0.11.0, 0.12.0
    and 1.0 were refused before the range was widened and newer releases got the canaries,
    issue 14, and 0.8.11 and 0.9.9 before issue 36: test_compat.py covers them.)"""
    monkeypatch.delenv("KL_PATCHES_FORCE", raising=False)
    monkeypatch.setattr(P, "installed_version", lambda: version)
    before = snapshot()
    with pytest.raises(RuntimeError, match=r">=0\.8\.0,<0\.12"):
        apply(EVERYTHING)
    assert snapshot() == before


def test_missing_hook_point_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker

    monkeypatch.delattr(RemoteExperienceMaker, "compute_advantages_and_returns")
    with pytest.raises(RuntimeError, match=r"has no .*compute_advantages_and_returns"):
        apply(KLConfig(placement="reward", coef=COEF))


# ----------------------------------------------------------------------------- reward side
def run_maker(batch: dict, args: object, rewards: torch.Tensor | None = None) -> torch.Tensor:
    """Real make_experience KL step + real compute_advantages_and_returns; returns [8, 6]."""
    rewards = batch["rewards"] if rewards is None else rewards
    exps = []
    for rows in (slice(0, 4), slice(4, 8)):
        exp = make_experience(
            rewards[rows],
            batch["logp"][rows],
            batch["ref"][rows],
            batch["mask"][rows],
            list(range(8))[rows],
        )
        attach_kl_like_make_experience(exp, batch["ref"][rows], args)
        exps.append(exp)
    out = make_experience_maker(args).compute_advantages_and_returns(exps)
    return torch.cat([e.returns for e in out])


SEQUENCE_CONFIGS = [
    KLConfig(estimator="k1", placement="reward", coef=COEF),
    KLConfig(estimator="k3", placement="reward", coef=COEF, kl_clamp=10.0),
    KLConfig(estimator="k2", placement="reward", coef=COEF, granularity="sequence"),
    KLConfig(estimator="k1", placement="both", coef=COEF, loss_aggregation="sum"),
]


@pytest.mark.parametrize("advantage", ["rloo", "group_norm", "dr_grpo"])
@pytest.mark.parametrize("config", SEQUENCE_CONFIGS, ids=str)
def test_sequence_penalty_enters_before_group_baseline(
    config: KLConfig, advantage: str, batch: dict
) -> None:
    """Patched == native OpenRLHF run on R - core.reward_penalty with the KL off."""
    apply(config)
    patched = run_maker(batch, args_for(config, advantage=advantage), batch["rewards"])
    revert()
    penalty = core.reward_penalty(batch["logp"], batch["ref"], batch["mask"], config)
    off = args_for(KLConfig(placement="none", coef=0.0), advantage=advantage)
    want = run_maker(batch, off, batch["rewards"] - penalty)
    torch.testing.assert_close(patched, want, atol=1e-6, rtol=1e-6)
    # ... which is not what OpenRLHF does natively with the same flags.
    native = run_maker(batch, args_for(config, advantage=advantage))
    assert not torch.allclose(native, want, atol=1e-4)


def test_sequence_penalty_reaches_the_reward_the_release_reads(batch: dict) -> None:
    """0.8.0-0.8.2 read the scalar reward from info["reward"] (also logged): the patch lowers it
    for the advantages and puts the score back afterwards; from 0.8.3, Experience.rewards
    carries the lowered reward (test_sequence_penalty_enters_before_group_baseline checks the
    returns on every release)."""
    config = KLConfig(estimator="k1", placement="reward", coef=COEF)
    apply(config)
    args = args_for(config, advantage="rloo")
    exps = []
    for rows in (slice(0, 4), slice(4, 8)):
        exp = make_experience(
            batch["rewards"][rows],
            batch["logp"][rows],
            batch["ref"][rows],
            batch["mask"][rows],
            list(range(8))[rows],
        )
        attach_kl_like_make_experience(exp, batch["ref"][rows], args)
        exps.append(exp)
    out = make_experience_maker(args).compute_advantages_and_returns(exps)
    penalty = core.reward_penalty(batch["logp"], batch["ref"], batch["mask"], config)
    if P._holds_rewards(out[0]):
        got = torch.cat([e.rewards for e in out])
        torch.testing.assert_close(got, batch["rewards"] - penalty)
    else:
        assert all(not hasattr(e, "rewards") for e in out)
        torch.testing.assert_close(torch.cat([e.info["reward"] for e in out]), batch["rewards"])
    assert float(penalty.abs().min()) > 1e-4  # the penalty is not trivially zero


def test_other_clamp_reward_to_go_and_native_again_after_revert(batch: dict) -> None:
    """The clamp this release does not have (none from 0.8.6, +-10 before) is patched in."""
    other = 10.0 if native_clamp() is None else None
    config = KLConfig(
        estimator="k1", placement="reward", coef=COEF, reward_shape="reward_to_go", kl_clamp=other
    )
    args = args_for(config, advantage="rloo")
    off = run_maker(batch, args_for(KLConfig(placement="none", coef=0.0), advantage="rloo"))
    native = run_maker(batch, args)
    apply(config)
    patched = run_maker(batch, args)
    revert()
    for cfg, got in ((config, patched), (config.replace(kl_clamp=native_clamp()), native)):
        penalty = core.reward_penalty(batch["logp"], batch["ref"], batch["mask"], cfg)
        torch.testing.assert_close((got - off) * batch["mask"], -penalty, atol=1e-6, rtol=1e-6)
    assert not torch.allclose(patched, native)  # the log-ratio of -12 meets one clamp only
    torch.testing.assert_close(run_maker(batch, args), native)


def test_reward_patch_without_reference_model_fails_loudly(batch: dict) -> None:
    config = KLConfig(placement="reward", coef=COEF)
    apply(config)
    args = make_args(init_coef=COEF, advantage="rloo")
    exps = [
        make_experience(
            batch["rewards"][:4],
            batch["logp"][:4],
            batch["ref"][:4],
            batch["mask"][:4],
            [0, 1, 2, 3],
        )
    ]
    exps[0].kl = torch.zeros(4, 6)  # what make_experience stores without a reference model
    with pytest.raises(RuntimeError, match="neither reference log-probs"):
        make_experience_maker(args).compute_advantages_and_returns(exps)


def test_reward_only_patch_under_use_loss_fails_loudly(batch: dict) -> None:
    config = KLConfig(placement="reward", coef=COEF)
    apply(config)
    with pytest.raises(RuntimeError, match="adds its own KL loss"):
        run_maker(batch, make_args(init_coef=COEF, use_loss=True, advantage="rloo"))


# ----------------------------------------------------------------------------- loss side
@pytest.fixture(scope="module")
def actor() -> object:
    return tiny_actor()


LOSS_CONFIGS = [
    KLConfig(estimator="k3", placement="loss", coef=COEF),  # sum, unclamped
    KLConfig(estimator="k2", placement="loss", coef=COEF, granularity="sequence"),
    KLConfig(estimator="k1", placement="both", coef=COEF, loss_coef=0.05),
    KLConfig(estimator="k3", placement="loss", coef=COEF, importance_weighting="token"),
    KLConfig(estimator="k2", placement="loss", coef=COEF, loss_aggregation="seq_mean_token_mean"),
]


@pytest.mark.parametrize("config", LOSS_CONFIGS, ids=str)
def test_training_step_loss_is_core_loss_term_then_native_after_revert(
    config: KLConfig, actor: object
) -> None:
    data = actor_batch()
    args = args_for(config)
    apply(config)
    loss, grads, _, ref, old = run_training_step(actor, args, data)
    revert()
    want, want_grads = core_loss_and_grads(actor, data, config, ref, old)
    torch.testing.assert_close(loss, want, atol=1e-6, rtol=1e-6)
    for a, b in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    native_loss_value, *_ = run_training_step(actor, args, data)
    # Native: OpenRLHF's token mean of its clamped estimator, times init_coef (= coef).
    native_config = native_loss(config.estimator)
    if config.importance_weighting == "token":  # --algo.kl.unbiased_gradient: value is k3's
        native_config = native_config.replace(estimator="k3")
    native_want, _ = core_loss_and_grads(actor, data, native_config, ref, old)
    torch.testing.assert_close(native_loss_value, native_want, atol=1e-6, rtol=1e-6)
    assert not torch.allclose(native_loss_value, want)


def test_sum_aggregation_uses_openrlhf_global_sample_count(actor: object) -> None:
    """Micro-batch of 4 in an optimiser step of 8 sequences: the core's mean scaled by 4/8."""
    Experience = experience_class()

    config = KLConfig(estimator="k3", placement="loss", coef=COEF)
    data = actor_batch()
    trainer = actor_trainer(actor, args_for(config))
    with torch.no_grad():
        logp = actor(data["sequences"], data["action_mask"], attention_mask=data["attention_mask"])
    ref = logp + 0.3
    exp = Experience(
        sequences=data["sequences"],
        attention_mask=data["attention_mask"],
        action_mask=data["action_mask"],
        action_log_probs=logp,
        base_action_log_probs=ref,
        advantages=torch.zeros_like(logp),
        info={},
    )
    info = {
        "dp_size": 1,
        "batch_num_tokens": torch.tensor(30.0),
        "global_batch_size": torch.tensor(8.0),
    }
    apply(config)
    trainer.training_step(exp, COEF, *step_arguments()[:-1], info)
    want = core.loss_term(logp, ref, data["action_mask"], config) * 4 / 8
    torch.testing.assert_close(trainer.strategy.losses[-1], want, atol=1e-6, rtol=1e-6)


def test_loss_patch_with_flags_that_skip_the_kl_fails_loudly(actor: object) -> None:
    config = KLConfig(estimator="k3", placement="loss", coef=COEF)
    apply(config)
    wrong = make_args(init_coef=COEF, estimator="k3", use_loss=False)
    with pytest.raises(RuntimeError, match="skips the KL loss"):
        run_training_step(actor, wrong, actor_batch())
    assert "--algo.kl.use_loss" in to_args(config)


# ----------------------------------------------------------------------------- make_experience
class FakeGroup:
    """A Ray actor group that answers ``forward`` with fixed per-micro-batch log-probs."""

    def __init__(self, outputs: list[torch.Tensor]) -> None:
        self.outputs = outputs

    def async_run_method_batch(self, method_name: str, **kwargs: object) -> list[object]:
        assert method_name == "forward"
        return [list(self.outputs)]  # one "actor" answering every micro-batch


def run_real_make_experience(
    batch: dict, args: object, monkeypatch: pytest.MonkeyPatch
) -> torch.Tensor:
    """The real make_experience + compute_advantages_and_returns, Ray calls made local."""
    from types import SimpleNamespace

    from openrlhf.trainer.ppo_utils import experience_maker

    Experience = experience_class()

    monkeypatch.setattr(experience_maker, "ray", SimpleNamespace(put=lambda x: x, get=lambda x: x))
    args.train.colocate_all = args.train.colocate_actor_ref = False  # type: ignore[attr-defined]
    args.train.colocate_critic_reward = False  # type: ignore[attr-defined]
    maker = make_experience_maker(args)
    rows = (slice(0, 4), slice(4, 8))
    maker.actor_model_group = FakeGroup([batch["logp"][r] for r in rows])
    has_ref = args.algo.kl.init_coef > 0  # type: ignore[attr-defined]
    maker.initial_model_group = FakeGroup([batch["ref"][r] for r in rows]) if has_ref else None
    maker.critic_model_group = maker.reward_model_group = None
    samples = [
        Experience(
            sequences=torch.zeros(4, 10, dtype=torch.long),
            attention_mask=torch.ones(4, 10, dtype=torch.long),
            action_mask=batch["mask"][r].clone(),
            rewards=batch["rewards"][r].clone(),
            index=list(range(8))[r],
            info={},
        )
        for r in rows
    ]
    out = maker.compute_advantages_and_returns(maker.make_experience(samples))
    return torch.cat([e.returns for e in out])


@pytest.mark.parametrize("config", [SEQUENCE_CONFIGS[0], SEQUENCE_CONFIGS[3]], ids=str)
def test_real_make_experience_path(
    config: KLConfig, batch: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through OpenRLHF's own make_experience (not our emulation of its KL lines)."""
    args = args_for(config, advantage="rloo")
    native = run_real_make_experience(batch, args_for(config, advantage="rloo"), monkeypatch)
    torch.testing.assert_close(native, run_maker(batch, args_for(config, advantage="rloo")))
    apply(config)
    patched = run_real_make_experience(batch, args, monkeypatch)
    revert()
    penalty = core.reward_penalty(batch["logp"], batch["ref"], batch["mask"], config)
    off = args_for(KLConfig(placement="none", coef=0.0), advantage="rloo")
    want = run_maker(batch, off, batch["rewards"] - penalty)
    torch.testing.assert_close(patched, want, atol=1e-6, rtol=1e-6)


# ----------------------------------------------------------------------------- setup hook
def test_hook_patches_already_imported_modules_and_needs_a_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The in-process half of the Ray hook (the worker half is in test_openrlhf_ray.py)."""
    import openrlhf.trainer.ray.ppo_actor  # noqa: F401

    from kl_patches.adapters.openrlhf import delivery as hook

    monkeypatch.delenv(hook.ENV_VAR, raising=False)
    with pytest.raises(RuntimeError, match="KL_PATCHES_OPENRLHF is not set"):
        hook.setup()
    monkeypatch.setenv(hook.ENV_VAR, hook.config_to_env(EVERYTHING))
    try:
        hook.setup()
        hook.setup()  # idempotent: one finder, same patches
        assert sum(type(f).__name__ == "PostImportFinder" for f in sys.meta_path) == 1
        status = hook.status()
        assert status["configured"] and status["hook_installed"]
        assert sorted(applied()) == sorted(t.name for t in P.resolve_targets())
        assert P.active_config() == EVERYTHING
    finally:
        hook.uninstall()
    assert hook.status()["hook_installed"] is False
