"""The paper miniature's RL run (``kl-patches reproduce --paper``) through TRL's real trainer.

``paper_train.train_run`` records an exception as a diverged run instead of raising it (a
diverging configuration is a result of the sweep). That would also hide a broken adapter or a
TRL change behind a "diverged" row, so this runs a few real updates of each kind of trainer the
sweep uses (the kl-patches ``GRPOTrainer`` for a patched configuration, ``trl.GRPOTrainer`` for
the native k3-in-loss and for no KL) on a tiny pre-trained reference and checks that every run
finishes without an error, with one logged reward per update and finite evaluations.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kl_patches.experiments import paper_pretrain, paper_train
from kl_patches.experiments.paper import Plan
from kl_patches.experiments.paper_task import ModelSize, PretrainSettings

STEPS = 2


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    settings = PretrainSettings(
        steps=5, batch_size=8, size=ModelSize(hidden=16, layers=1, heads=2, intermediate=32)
    )
    return paper_pretrain.pretrained(Plan().split, settings, tmp_path_factory.mktemp("ref"))


@pytest.mark.parametrize("name", ["k1-in-reward", "k2-in-loss (sequence)", "k3-in-loss", "none"])
def test_a_few_real_updates_finish_without_error(name: str, reference: Path) -> None:
    settings = paper_train.RLSettings(
        steps=STEPS,
        prompts_per_step=2,
        group=2,
        max_completion=6,
        eval_every=STEPS,
        eval_prompts=2,
        final_repeats=1,
    )
    record = paper_train.train_run(name, 0.1, 0, reference, Plan().split, settings)
    assert record.error is None, record.error
    assert len(record.train_reward) == STEPS
    assert record.steps == [0, STEPS]
    final = paper_train.final(record)
    assert final is not None
    for key, value in final.items():
        if isinstance(value, dict) and "mean" in value:
            assert math.isfinite(value["mean"]), key
