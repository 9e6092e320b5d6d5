"""apply/revert from two threads at once on real TRL (issue 32): every symbol is patched once and
restored exactly, and TRL's module-level gathers are never left replaced.

Before the fix, the behaviour canaries swapped ``gather``/``gather_object`` of TRL's grpo and rloo
trainer modules for the identity without a lock: two threads applying at once left them replaced
(10 of 10 trials), ``revert()`` then reported nothing applied and restored nothing, and every
later multi-rank run, native or patched, computed group advantages from the local rank only.
Each trial starts both threads on a barrier so that their canaries overlap; 100 trials must
all pass.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")

import kl_patches.trl as klt  # noqa: E402
from kl_patches import KLConfig  # noqa: E402
from kl_patches.adapters.trl import patch  # noqa: E402

TRIALS = 100
GATHERS = ("gather", "gather_object", "broadcast_object_list")
MODULES = ("trl.trainer.grpo_trainer", "trl.trainer.rloo_trainer")


def _module_state() -> dict[tuple[str, str], Any]:
    import importlib

    return {
        (m, n): vars(importlib.import_module(m)).get(n)
        for m in MODULES
        for n in GATHERS
        if n in vars(importlib.import_module(m))
    }


def _class_state() -> dict[tuple[type, str], Any]:
    classes = (trl.GRPOTrainer, trl.RLOOTrainer)
    return {(c, n): c.__dict__.get(n) for c in classes for n in patch.HOOKED}


def _together(action: Any, args: tuple[Any, Any]) -> list[BaseException]:
    """Run ``action(args[i])`` in two threads released together; the exceptions raised."""
    barrier = threading.Barrier(2)
    raised: list[BaseException] = []

    def run(arg: Any) -> None:
        try:
            barrier.wait(timeout=60)
            action(arg)
        except BaseException as err:  # re-raised by the test
            raised.append(err)

    threads = [threading.Thread(target=run, args=(a,)) for a in args]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    return raised


def test_two_threads_apply_and_revert_at_once_restore_everything() -> None:
    klt.revert()
    gathers = _module_state()
    classes = _class_state()
    assert set(gathers) >= {(m, "gather") for m in MODULES}
    configs = (KLConfig.parse("k1-in-reward", coef=0.05), KLConfig.parse("k1-in-reward", coef=0.05))
    bad: list[str] = []
    for trial in range(TRIALS):
        raised = _together(klt.apply, configs)
        applied = klt.applied()
        after_apply = _module_state()
        active = klt.active_config()
        raised += _together(lambda _: klt.revert(), (None, None))
        problems = [f"raised {type(e).__name__}: {e}" for e in raised]
        if sorted(applied) != sorted(t.name for ts in patch.targets().values() for t in ts):
            problems.append(f"applied() after two applies: {applied}")
        if after_apply != gathers:
            problems.append("a TRL gather was replaced after apply")
        if active != configs[0]:
            problems.append(f"active config {active}")
        if _module_state() != gathers:
            problems.append("a TRL gather was left replaced after revert")
        if _class_state() != classes:
            problems.append("a trainer method was not restored by revert")
        if klt.applied():
            problems.append("still applied after revert")
        if problems:
            bad.append(f"trial {trial}: {'; '.join(problems)}")
            for key, value in gathers.items():  # repair, so the next trial starts clean
                setattr(sys.modules[key[0]], key[1], value)
            klt.revert()
    assert not bad, f"{len(bad)} of {TRIALS} trials failed: {bad[:3]}"
