"""User trainer subclasses on real TRL: an override that calls ``super()`` runs around the
kl-patches hooks and is accepted; one that skips ``super()`` on the path a run takes stops the
first training step, naming itself; a loss override that reads the advantages before
``super()`` sees penalised ones, or one warning says where they become final; accepting a
trainer never turns off a version guard."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")

from trl_support import harness  # noqa: E402

import kl_patches.trl as klt  # noqa: E402
from kl_patches.adapters.support import (  # noqa: E402
    FORCE_ENV,
    TRAINER_FORCE_ENV,
    UnsupportedVersionError,
)
from kl_patches.adapters.trl import foreign, hooks  # noqa: E402
from kl_patches.experiments import tiny  # noqa: E402


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv(FORCE_ENV, raising=False)
    monkeypatch.delenv(TRAINER_FORCE_ENV, raising=False)
    yield
    klt.revert()


def _build(dirs: tuple[Path, Path], cls: type, **overrides: Any) -> Any:
    args = trl.GRPOConfig(**tiny.common_args(dirs[1], scale_rewards="none", **overrides))
    return cls(
        str(dirs[0]),
        tiny.target_reward,
        args=args,
        train_dataset=tiny.dataset(),
        processing_class=tiny.build_tokenizer(),
    )


class Recording(trl.GRPOTrainer):  # type: ignore[misc]
    """The usual research-trainer pattern: extra work around ``super()``."""

    seen: list[tuple[str, Any]]

    def _generate_and_score_completions(self, inputs: Any) -> Any:
        out = super()._generate_and_score_completions(inputs)
        runs = hooks.hook_runs(self).get("_generate_and_score_completions", 0)
        self.seen.append(("scored", runs))  # the hook already ran inside super()
        return out

    def _compute_loss(self, model: Any, inputs: Any) -> Any:
        before = inputs["advantages"].clone()
        loss = super()._compute_loss(model, inputs)
        self.seen.append(("advantages", (before, inputs["advantages"].clone())))
        return loss


def test_source_check_reads_super_calls() -> None:
    def plain(self: Any, model: Any, inputs: Any) -> Any:
        return super(Recording, self)._compute_loss(model, inputs)

    def by_name(self: Any, model: Any, inputs: Any) -> Any:
        return trl.GRPOTrainer._compute_loss(self, model, inputs)  # skips the hooks' class

    def other(self: Any, model: Any, inputs: Any) -> Any:
        return super().compute_loss(model, inputs)

    assert foreign.calls_super(Recording.__dict__["_compute_loss"], "_compute_loss") is True
    assert foreign.calls_super(plain, "_compute_loss") is True
    assert foreign.calls_super(by_name, "_compute_loss") is False
    assert foreign.calls_super(other, "_compute_loss") is False
    scope: dict[str, Any] = {}
    exec("def f(self, m, i):\n    return super().f(m, i)\n", scope)  # no source to read
    assert foreign.calls_super(scope["f"], "f") is None


def test_an_override_calling_super_trains_with_the_hooks_inside_it(
    dirs: tuple[Path, Path],
) -> None:
    klt.apply("k1-in-reward")
    trainer = _build(dirs, Recording, max_steps=2, num_iterations=2)
    trainer.seen = []
    harness.perturb(trainer.model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no advantages warning: they are final
        trainer.train()
    assert isinstance(trainer, Recording)
    assert next(runs for tag, runs in trainer.seen if tag == "scored") == 1
    for name in hooks.STEP_METHODS:
        assert hooks.hook_runs(trainer).get(name, 0) > 0, name
    pairs = [pair for tag, pair in trainer.seen if tag == "advantages"]
    assert pairs, trainer.seen
    assert all(torch.equal(before, after) for before, after in pairs)
    assert any(
        entry.get("kl_patches/reward_sequence_kl", 0) > 0 for entry in trainer.state.log_history
    )


def test_advantages_read_before_super_warn_once_where_they_become_final(
    dirs: tuple[Path, Path],
) -> None:
    """steps_per_generation=1 defers the penalty to the loss forward: the advantages an
    override reads before super() are TRL's, and one warning says where they become final."""
    klt.apply("k1-in-reward")
    trainer = _build(dirs, Recording, max_steps=2)
    trainer.seen = []
    harness.perturb(trainer.model)
    with pytest.warns(UserWarning, match=r"become final inside super\(\)\._compute_loss\(\)") as w:
        trainer.train()
    ours = [str(x.message) for x in w if "become final" in str(x.message)]
    assert len(ours) == 1 and "test_subclasses.Recording._compute_loss" in ours[0]
    pairs = [pair for tag, pair in trainer.seen if tag == "advantages"]
    assert any(not torch.equal(before, after) for before, after in pairs)  # final after super()


class Sometimes(trl.GRPOTrainer):  # type: ignore[misc]
    """Calls super() on one branch only: accepted from its code, caught at run time."""

    use_super = False

    def _compute_loss(self, model: Any, inputs: Any) -> Any:
        if self.use_super:
            return super()._compute_loss(model, inputs)
        return trl.GRPOTrainer._compute_loss(self, model, inputs)  # skips the kl-patches hook


@pytest.mark.parametrize("kl", ["k1-in-reward", "none"])
def test_an_override_that_skips_super_at_run_time_stops_the_first_step(
    kl: str, dirs: tuple[Path, Path]
) -> None:
    klt.apply(kl)
    trainer = _build(dirs, Sometimes, max_steps=1)
    with pytest.raises(RuntimeError) as info:
        trainer.train()
    text = str(info.value)
    assert "test_subclasses.Sometimes._compute_loss" in text and "super()._compute_loss()" in text
    assert trainer.state.global_step <= 1


def test_accepting_a_trainer_never_turns_off_the_version_guard(
    monkeypatch: pytest.MonkeyPatch, dirs: tuple[Path, Path]
) -> None:
    class NoSuper(trl.GRPOTrainer):  # type: ignore[misc]
        def _compute_loss(self, model: Any, inputs: Any) -> Any:
            return torch.zeros((), requires_grad=True)

    monkeypatch.setenv(TRAINER_FORCE_ENV, "1")
    monkeypatch.setattr(trl, "__version__", "0.9.0")
    with pytest.raises(UnsupportedVersionError, match="KL_PATCHES_FORCE=1"):
        klt.apply("k1-in-reward")
    monkeypatch.undo()
    klt.apply("k1-in-reward")
    monkeypatch.setenv(FORCE_ENV, "1")  # the old way still accepts it, and says so
    with pytest.warns(FutureWarning, match="set KL_PATCHES_FORCE_TRAINER=1 instead"):
        _build(dirs, NoSuper)
