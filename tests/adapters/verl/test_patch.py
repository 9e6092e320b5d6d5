"""verl adapter, patch side: apply/revert on real verl 0.9.1 modules, and the patched KL maths.

What verl cannot express (sequence-level k2, importance-weighted loss KL, the KL kept out of
GRPO's std normalisation) runs through verl's own ``ppo_loss`` / ``apply_kl_penalty`` /
``compute_advantage`` after ``apply``; the numbers must be the core's. After ``revert`` every
patched symbol is verl's original again and the marker estimator fails loudly.
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

import pytest
import torch

pytest.importorskip("verl")
sys.path.insert(0, str(Path(__file__).parent))

from verl.trainer.ppo import core_algos, ray_trainer

try:
    from verl.workers.utils import losses
except ImportError:  # verl < 0.7: no engine loss (its legacy actor computes the KL loss)
    losses = None
from verl_support.batches import (
    actor_config,
    last_token,
    make_rollout,
    ppo_loss_inputs,
    to_dataproto,
)
from verl_support.configs import PATCHED, overlay, with_verl_clamps

from kl_patches import core
from kl_patches.adapters import verl as kv
from kl_patches.adapters.verl import delivery, patch, plugin, translate, versions
from kl_patches.config import KLConfig

TOL = {"atol": 1e-6, "rtol": 1e-6}
SLOTS = [*patch.SOURCES, *patch.KNOWN_IMPORTERS]


@pytest.fixture(autouse=True)
def _reverted():  # type: ignore[no-untyped-def]
    patch.revert()
    yield
    patch.revert()


def snapshot() -> dict[tuple[str, str], object]:
    for module, _ in SLOTS:
        importlib.import_module(module)
    return {(m, a): getattr(sys.modules[m], a) for m, a in SLOTS}


def grad(value: torch.Tensor, leaf: torch.Tensor) -> torch.Tensor:
    (g,) = torch.autograd.grad(value, leaf)
    return g


def actor_for(config: KLConfig):  # type: ignore[no-untyped-def]
    from verl.utils.config import omega_conf_to_dataclass

    micro = "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4"
    return omega_conf_to_dataclass(
        overlay([*kv.to_overrides(config), micro]).actor_rollout_ref.actor
    )


# ----------------------------------------------------------------------------- registry
def test_apply_patches_every_importer_and_revert_restores_all() -> None:
    before = snapshot()
    late = types.ModuleType("user_code_late_importer")
    late.apply_kl_penalty = ray_trainer.apply_kl_penalty  # a user's `from ... import` before apply
    sys.modules[late.__name__] = late
    try:
        kv.apply(PATCHED[0])
        after = snapshot()
        wrappers = {getattr(patch, w) for w in patch.SOURCES.values()}
        assert all(after[slot] in wrappers for slot in SLOTS)
        assert after[("verl.workers.engine_workers", "ppo_loss")] is patch._ppo_loss
        assert late.apply_kl_penalty is patch._apply_kl_penalty
        state = (patch.REGISTRY.originals(), patch.patched_symbols())
        kv.apply(PATCHED[0])  # twice == once
        assert (patch.REGISTRY.originals(), patch.patched_symbols()) == state
        assert kv.check().config == PATCHED[0]
        # A module importing the name after apply copies the wrapper; revert restores it too.
        later = types.ModuleType("user_code_after_apply")
        later.ppo_loss = losses.ppo_loss
        sys.modules[later.__name__] = later
        kv.revert()
        assert snapshot() == before
        assert late.apply_kl_penalty is before[("verl.trainer.ppo.ray_trainer", "apply_kl_penalty")]
        assert later.ppo_loss is before[("verl.workers.utils.losses", "ppo_loss")]
        assert kv.active() is None
        with pytest.raises(patch.PatchNotActiveError):
            kv.check()
    finally:
        sys.modules.pop("user_code_late_importer", None)
        sys.modules.pop("user_code_after_apply", None)


def test_version_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below the tested range, and pre-releases (``0.10.0rc1``, issue 15), are refused. (This
    test refused 0.8.2 before the range became 0.7.0-0.9.x, issue 14, and 0.6.1 before it
    became 0.4.0-0.9.x, issue 36.)"""
    import verl

    monkeypatch.delenv("KL_PATCHES_FORCE", raising=False)
    for refused in ("0.3.0.post1", "0.10.0rc1"):
        monkeypatch.setattr(verl, "__version__", refused)
        with pytest.raises(RuntimeError, match=r">=0\.4\.0,<0\.10"):
            kv.apply(PATCHED[0])
        assert kv.active() is None


def test_marker_fails_loudly_without_patch() -> None:
    """Unpatched verl raises on the marker: a patch missing in a process cannot pass silently."""
    r = make_rollout()
    with pytest.raises(NotImplementedError):
        ray_trainer.apply_kl_penalty(
            to_dataproto(r), core_algos.FixedKLController(0.1), versions.MARKER
        )


def test_marker_fails_loudly_in_the_engine_loss_without_patch() -> None:
    """The same in verl's engine loss (0.7+; before, test_compat checks the legacy refusal)."""
    r = make_rollout()
    out, data = ppo_loss_inputs(r, torch.zeros_like(r.old_logp))
    with pytest.raises(NotImplementedError):
        losses.ppo_loss(actor_for(PATCHED[0]), out, data)


def test_wrapper_without_active_config_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    kv.apply(PATCHED[0])
    monkeypatch.setattr(patch, "_ACTIVE", None)
    r = make_rollout()
    out, data = ppo_loss_inputs(r, torch.zeros_like(r.old_logp))
    with pytest.raises(patch.PatchNotActiveError, match="KL_PATCHES_VERL"):
        losses.ppo_loss(actor_for(PATCHED[0]), out, data)


def test_plugin_setup_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(versions.ENV_VAR, raising=False)
    assert plugin.setup() is None and kv.active() is None
    monkeypatch.setenv(versions.ENV_VAR, delivery.PatchSpec(PATCHED[1]).to_json())
    assert plugin.setup() == delivery.PatchSpec(PATCHED[1]) == kv.active()
    monkeypatch.setenv(versions.ENV_VAR, '{"estimator": "k5"}')
    with pytest.raises(ValueError, match="k5"):
        plugin.setup()
    assert isinstance(plugin.LOAD_ERROR, ValueError)


# ----------------------------------------------------------------------------- patched maths
@pytest.mark.parametrize("config", [PATCHED[0], PATCHED[1], PATCHED[3]], ids=str)
def test_patched_ppo_loss_is_core_loss_term(config: KLConfig) -> None:
    kv.apply(config)
    actor = actor_for(config)
    assert actor.kl_loss_type == versions.MARKER
    plain = actor_config(loss_agg_mode=actor.loss_agg_mode)
    r = make_rollout(seed=11)
    adv = torch.randn(r.mask.shape, generator=torch.Generator().manual_seed(3))
    total_kl = torch.zeros(())
    for rows in (slice(0, 5), slice(5, 8)):  # micro-batches with verl's global counts
        out, data = ppo_loss_inputs(r, adv, rows)
        loss, metrics = losses.ppo_loss(actor, out, data)
        out2, data2 = ppo_loss_inputs(r, adv, rows)
        pg_only, _ = losses.ppo_loss(plain, out2, data2)
        assert metrics["kl_patches/active"] == 1.0
        total_kl = total_kl + (loss - pg_only)
    whole = core.loss_term(r.logp, r.ref_logp, r.mask, config, old_logp=r.old_logp)
    torch.testing.assert_close(total_kl, whole, **TOL)
    r.logp.grad = None
    torch.testing.assert_close(grad(total_kl, r.logp), grad(whole, r.logp), **TOL)


def test_native_loss_unchanged_while_patch_active() -> None:
    native_cfg = KLConfig(estimator="k3", placement="loss", coef=0.1, loss_aggregation="token_mean")
    r = make_rollout(seed=12)
    adv = torch.randn(r.mask.shape)
    out, data = ppo_loss_inputs(r, adv)
    before, _ = losses.ppo_loss(actor_for(native_cfg), out, data)
    kv.apply(PATCHED[0])
    out, data = ppo_loss_inputs(r, adv)
    after, metrics = losses.ppo_loss(actor_for(native_cfg), out, data)
    assert torch.equal(before, after) and "kl_patches/active" not in metrics


def test_coefficient_mismatch_raises() -> None:
    kv.apply(PATCHED[0])
    r = make_rollout()
    out, data = ppo_loss_inputs(r, torch.zeros_like(r.old_logp))
    with pytest.raises(ValueError, match="kl_loss_coef"):
        losses.ppo_loss(actor_for(PATCHED[0].replace(coef=0.3)), out, data)


def _grpo(config: KLConfig, r, kl_outside_std: bool = False, estimator: str = "grpo"):  # type: ignore[no-untyped-def]
    overrides = [
        *kv.to_overrides(config, kl_outside_std=kl_outside_std),
        f"algorithm.adv_estimator={estimator}",
    ]
    cfg = overlay(overrides)
    kv.apply(translate.patch_spec_of(translate.settings_of(cfg)))
    data, metrics = ray_trainer.apply_kl_penalty(
        to_dataproto(r),
        core_algos.get_kl_controller(cfg.algorithm.kl_ctrl),
        cfg.algorithm.kl_penalty,
    )
    assert metrics["kl_patches/active"] == 1.0
    return ray_trainer.compute_advantage(data, estimator, num_repeat=4, config=cfg.algorithm)


def test_sequence_level_k2_reward_through_grpo() -> None:
    config = PATCHED[2]
    r = make_rollout(seed=13)
    data = _grpo(config, r)
    penalty = core.reward_penalty(r.old_logp, r.ref_logp, r.mask, config)
    torch.testing.assert_close(data.batch["token_level_rewards"].sum(-1), r.score - penalty, **TOL)
    kv.revert()
    ref = to_dataproto(r)
    ref.batch["token_level_rewards"] = last_token(r.score - penalty, r.mask)
    ref = ray_trainer.compute_advantage(ref, "grpo", num_repeat=4)
    torch.testing.assert_close(data.batch["advantages"], ref.batch["advantages"], **TOL)


GRPO_ESTIMATORS = ["grpo"] + [
    e for e in versions.GRPO_LIKE[1:] if e in getattr(core_algos, "ADV_ESTIMATOR_REGISTRY", {})
]
"""verl's GRPO estimators in the installed release (grpo_vectorized from 0.6.0)."""


@pytest.mark.parametrize("estimator", GRPO_ESTIMATORS)
def test_kl_outside_grpo_std(estimator: str) -> None:
    """A_i = (R_i - mean R) / (std R + 1e-6) - (P_i - mean P) within each group of 4, for both
    of verl's GRPO estimators; the rewards carry the penalty on the last token."""
    config = KLConfig(estimator="k1", placement="reward", coef=0.1)
    r = make_rollout(seed=14)
    data = _grpo(config, r, kl_outside_std=True, estimator=estimator)
    penalty = core.reward_penalty(r.old_logp, r.ref_logp, r.mask, config)
    score, pen = r.score.view(-1, 4), penalty.view(-1, 4)
    scaled = (score - score.mean(1, keepdim=True)) / (score.std(1, keepdim=True) + 1e-6)
    expected = (scaled - (pen - pen.mean(1, keepdim=True))).reshape(-1)
    torch.testing.assert_close(data.batch["advantages"], expected[:, None] * r.mask, **TOL)
    assert torch.equal(data.batch["returns"], data.batch["advantages"])
    placed = last_token(r.score - penalty, r.mask)
    torch.testing.assert_close(data.batch["token_level_rewards"], placed, **TOL)
    assert torch.equal(data.batch["token_level_scores"], r.token_scores)  # not written to
    assert patch.PENALTY_KEY not in data.batch
    # And it differs from verl's native GRPO, which divides the KL by the std as well.
    kv.revert()
    native_data = to_dataproto(r)
    native_data.batch["token_level_rewards"] = placed
    native_adv = ray_trainer.compute_advantage(native_data, estimator, num_repeat=4).batch[
        "advantages"
    ]
    assert (native_adv - data.batch["advantages"]).abs().max() > 1e-3


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
def test_patched_path_matches_verl_where_verl_expresses_it(estimator: str) -> None:
    """The marker path with verl's numerics (k3 clamps) reproduces verl's own reward and loss."""
    config = with_verl_clamps(KLConfig(estimator=estimator, placement="both", coef=0.1))
    r = make_rollout(seed=15, spread=3.0)
    kv.apply(config)
    ctrl = core_algos.FixedKLController(0.1)
    ours, _ = ray_trainer.apply_kl_penalty(to_dataproto(r), ctrl, versions.MARKER)
    theirs, _ = ray_trainer.apply_kl_penalty(to_dataproto(r), ctrl, estimator)
    torch.testing.assert_close(
        ours.batch["token_level_rewards"], theirs.batch["token_level_rewards"], **TOL
    )
    adv = torch.randn(r.mask.shape)
    for name in (versions.MARKER, estimator):
        actor = actor_config(
            use_kl_loss=True,
            kl_loss_type=name,
            kl_loss_coef=0.1,
            loss_agg_mode="seq-mean-token-sum",
        )
        loss, _ = losses.ppo_loss(actor, *ppo_loss_inputs(r, adv))
        if name == versions.MARKER:
            patched_loss, patched_grad = loss, grad(loss, r.logp)
    torch.testing.assert_close(patched_loss, loss, **TOL)
    torch.testing.assert_close(patched_grad, grad(loss, r.logp), **TOL)


# ----------------------------------------------------------------------------- overhead rewrites
def _ragged_masks() -> list[torch.Tensor]:
    """A float mask with a hole (multi-turn), an empty row and a full row; bool and int copies."""
    mask = torch.tensor(
        [[1, 1, 0, 1, 0, 0], [0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1], [1, 0, 0, 0, 0, 0]],
        dtype=torch.float32,
    )
    return [mask, mask.bool(), mask.long(), mask.double()]


@pytest.mark.parametrize("which", range(4), ids=["float", "bool", "long", "double"])
@pytest.mark.parametrize("shared_counts", [False, True], ids=["own-counts", "caller-counts"])
def test_last_token_subtraction_equals_core_placement(which: int, shared_counts: bool) -> None:
    """The reward path adds minus the penalty on the last token: the bits of subtracting the
    placed penalty (counts computed here, or handed over by the caller)."""
    mask = _ragged_masks()[which]
    values = torch.tensor([0.5, float("nan"), -2.0, 3.0])  # NaN on the row with no valid token
    rewards = torch.randn(mask.shape, generator=torch.Generator().manual_seed(20))
    rewards[1, 0] = 0.0  # an empty row's first slot: +0.0 must stay +0.0
    rewards[3, 2] = float("nan")  # a NaN reward elsewhere stays where it is
    counts = mask.float().sum(-1, keepdim=True) if shared_counts else None
    ours = patch._plus_on_last_token(rewards, values.neg(), mask, counts)
    theirs = rewards - core.on_last_token(values, mask)
    assert torch.equal(ours.isnan(), theirs.isnan())
    assert torch.equal(ours.nan_to_num(), theirs.nan_to_num())  # bit for bit, NaNs aside
    assert not torch.signbit(ours[1, 0])
    assert ours[0, 3] == rewards[0, 3] - 0.5 and ours[2, 5] == rewards[2, 5] + 2.0  # could fail
    assert ours[3, 0] == rewards[3, 0] - 3.0 and torch.equal(ours[1], rewards[1])
    assert ours.data_ptr() != rewards.data_ptr()  # a new tensor: verl's scores stay as they are
    with pytest.raises(ValueError, match="values must be"):
        patch._plus_on_last_token(rewards, values[:2], mask)


def _last_valid_brute_force(mask: torch.Tensor) -> tuple[list[int], list[bool]]:
    rows = [[j for j, m in enumerate(row) if m != 0] for row in mask.tolist()]
    return [r[-1] if r else 0 for r in rows], [bool(r) for r in rows]


@pytest.mark.parametrize("length", [6, 4097], ids=["prefix-test", "beyond-exact-float32-sums"])
@pytest.mark.parametrize("holes", [False, True], ids=["right-padded", "with-holes"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bool, torch.long, torch.float64])
def test_last_positions_equal_a_brute_force_search(
    length: int, holes: bool, dtype: torch.dtype
) -> None:
    """Right-padded rows take the count-based path (its test must not pass a row with a hole,
    e.g. 0 1 1, whose count is also 2); any hole, or sums past float32's exact integers, the
    search."""
    lengths = torch.tensor([length, 0, 1, length // 2, 2])
    mask = torch.arange(length).unsqueeze(0) < lengths.unsqueeze(1)
    if holes:
        mask[4] = False
        mask[4, 1:3] = True  # 0 1 1 0 ...: two valid tokens, the last at 2, not 1
    index, has = patch._last_positions(mask.to(dtype))
    expected_index, expected_has = _last_valid_brute_force(mask)
    assert index.view(-1).tolist() == expected_index and has.view(-1).tolist() == expected_has
    assert index.shape == has.shape == (5, 1) and index.dtype == torch.long


def test_last_positions_under_reduced_matmul_precision() -> None:
    """With float32 matrix products allowed in bfloat16, the count test is not used (its sums
    would not be exact): the search gives the answer."""
    mask = torch.zeros(3, 600, dtype=torch.bool)
    mask[0, :599] = True
    mask[1, 1:600] = True  # one hole at 0: sum of (2j + 1) is 599**2 + 2 * 599
    mask[2, :300] = True
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    try:
        assert not patch._ieee_matmul()
        index, has = patch._last_positions(mask.float())
    finally:
        torch.set_float32_matmul_precision(before)
    assert patch._ieee_matmul() == (before == "highest")
    assert index.view(-1).tolist() == [598, 599, 299] and has.all()


def test_group_centring_equals_verl_grpo_without_std() -> None:
    """Uneven, interleaved groups and a group of one: verl's own loop is the reference."""
    import numpy as np

    g = torch.Generator().manual_seed(21)
    values = torch.randn(9, generator=g)
    uid = np.array(["a", "b", "a", "c", "b", "a", "b", "d", "a"], dtype=object)
    mask = torch.ones(9, 3)
    theirs, _ = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=last_token(values, mask.bool()),
        response_mask=mask,
        index=uid,
        norm_adv_by_std_in_grpo=False,
    )
    ours = patch._group_centred(values, uid)
    assert ours.shape == (9, 1)
    torch.testing.assert_close(ours * mask, theirs, atol=1e-7, rtol=0)
    assert torch.equal(patch._group_centred(values.neg(), uid), ours.neg())  # exact under -
    assert ours[7] == values[7]  # "d" is alone: verl leaves its value (mean 0)
    assert abs(float(ours[[0, 2, 5, 8]].sum())) < 1e-6  # "a" is centred


@pytest.mark.parametrize(
    "uid",
    [
        ["a", "a", "a", "b", "b", "b", "c", "c", "c"],  # contiguous blocks: the reshaped means
        ["a", "a", "a", "b", "b", "b", "a", "a", "a"],  # "a" in two blocks: one group of 6
        ["a", "a", "b", "b", "b", "b", "c", "c", "c"],  # uneven blocks
    ],
    ids=["blocks", "split-group", "uneven"],
)
def test_group_centring_with_block_hint_equals_verl(uid: list[str]) -> None:
    """The block fast path (group=3) only where it is verl's grouping; verl's loop decides."""
    import numpy as np

    values = torch.randn(9, generator=torch.Generator().manual_seed(23))
    index = np.array(uid, dtype=object)
    mask = torch.ones(9, 2)
    theirs, _ = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=last_token(values, mask.bool()),
        response_mask=mask,
        index=index,
        norm_adv_by_std_in_grpo=False,
    )
    for hint in (0, 3):
        ours = patch._group_centred(values, index, hint)
        torch.testing.assert_close(ours * mask, theirs, atol=1e-7, rtol=0)
        assert torch.equal(patch._group_centred(values.neg(), index, hint), ours.neg())
    if uid[6] == "a":  # could fail: the split group is centred on all six of its rows
        assert abs(float(patch._group_centred(values, index, 3)[[0, 1, 2, 6, 7, 8]].sum())) < 1e-6


def test_marker_ppo_loss_pads_the_log_probs_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """verl re-pads the flat log-probs once; the KL term reuses them (no second pass)."""
    from verl.workers.utils import padding

    calls: list[int] = []
    real = padding.no_padding_2_padding

    def counting(tensor, data):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(tensor, data)

    monkeypatch.setattr(padding, "no_padding_2_padding", counting)
    monkeypatch.setattr(losses, "no_padding_2_padding", counting)
    config = PATCHED[0]
    kv.apply(config)
    calls.clear()  # apply's behaviour canaries run verl's ppo_loss too (issue 14)
    actor = actor_for(config)
    r = make_rollout(seed=22)
    adv = torch.randn(r.mask.shape, generator=torch.Generator().manual_seed(4))
    loss, metrics = losses.ppo_loss(actor, *ppo_loss_inputs(r, adv))
    assert metrics["kl_patches/active"] == 1.0 and len(calls) == 1
    assert patch.CAPTURE_LOSS_MODE not in core_algos.POLICY_LOSS_REGISTRY  # only during a call
    plain_actor = actor_config(loss_agg_mode=actor.loss_agg_mode)
    plain, _ = losses.ppo_loss(plain_actor, *ppo_loss_inputs(r, adv))
    whole = core.loss_term(r.logp, r.ref_logp, r.mask, config, old_logp=r.old_logp)
    torch.testing.assert_close(loss - plain, whole, **TOL)


def test_capture_policy_loss_refuses_calls_outside_the_patch() -> None:
    with pytest.raises(RuntimeError, match="outside the patch"):
        patch._capturing_policy_loss(log_prob=torch.zeros(1))


@pytest.mark.parametrize(
    "config",
    [
        KLConfig(estimator="k3", placement="reward", coef=0.1),
        KLConfig(estimator="k2", placement="reward", coef=0.1, granularity="sequence"),
    ],
    ids=str,
)
def test_reward_metrics_are_the_core_monitors(config: KLConfig) -> None:
    r = make_rollout(seed=23)
    kv.apply(config)
    _, metrics = ray_trainer.apply_kl_penalty(
        to_dataproto(r), core_algos.FixedKLController(config.coef), versions.MARKER
    )
    mask = r.mask.float()
    per_token = core.per_token_kl(r.old_logp, r.ref_logp, mask, config).mean().item()
    sequence = core.sequence_kl(r.old_logp, r.ref_logp, mask, config).mean().item()
    assert metrics["actor/reward_kl_penalty"] == pytest.approx(per_token, rel=1e-6, abs=1e-9)
    assert metrics["kl_patches/reward_sequence_kl"] == pytest.approx(sequence, rel=1e-6, abs=1e-9)
    assert abs(sequence) > 1e-3  # the monitors are not trivially zero
