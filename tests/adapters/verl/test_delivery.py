"""Delivery into Ray workers: the patch is active inside a Ray actor, the way verl starts them.

One local CPU Ray cluster (num_cpus=2) is started by the test module with the runtime_env that
verl's ``main_ppo.run_ppo`` builds from our overrides (verl's ``get_ppo_ray_runtime_env`` merged
with ``ray_kwargs.ray_init.runtime_env``). Actors import verl fresh, so the patch can only come
from the ``verl.plugins`` entry point reading ``KL_PATCHES_VERL``. Like verl's worker groups,
each actor adds its own ``runtime_env`` env vars, which Ray merges with the job's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("verl")
sys.path.insert(0, str(Path(__file__).parent))

from verl_support.batches import make_rollout  # noqa: E402
from verl_support.configs import PATCHED, composed  # noqa: E402

from kl_patches import core  # noqa: E402
from kl_patches.adapters import verl as kv  # noqa: E402
from kl_patches.adapters.verl import delivery, versions  # noqa: E402

CONFIG = PATCHED[1]  # importance-weighted k3 in the loss: only the patch runs it


@ray.remote(num_cpus=1)
class Probe:
    """Stands in for a verl worker: imports verl and reports what it runs."""

    def state(self) -> dict[str, object]:
        import verl  # noqa: F401 - runs the verl.plugins entry points
        from verl.workers.utils import losses

        from kl_patches.adapters.verl import patch

        spec = patch.active()
        if spec is not None:
            patch.check()
        return {
            "pid": os.getpid(),
            "spec": None if spec is None else spec.to_json(),
            "ppo_loss": f"{losses.ppo_loss.__module__}.{losses.ppo_loss.__qualname__}",
        }

    def loss_kl(self, overrides: list[str]) -> float:
        """The KL part of verl's ppo_loss for the marker estimator, inside this process."""
        import torch
        from verl.utils.config import omega_conf_to_dataclass
        from verl.workers.utils import losses
        from verl_support.batches import actor_config, make_rollout, ppo_loss_inputs
        from verl_support.configs import overlay

        micro = "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4"
        actor = omega_conf_to_dataclass(overlay([*overrides, micro]).actor_rollout_ref.actor)
        r = make_rollout(seed=21)
        adv = torch.zeros_like(r.old_logp)
        with_kl, _ = losses.ppo_loss(actor, *ppo_loss_inputs(r, adv))
        pg_only, _ = losses.ppo_loss(
            actor_config(loss_agg_mode=actor.loss_agg_mode), *ppo_loss_inputs(r, adv)
        )
        return float(with_kl - pg_only)


@pytest.fixture(scope="module")
def cluster():  # type: ignore[no-untyped-def]
    from omegaconf import OmegaConf
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    cfg = composed(kv.to_overrides(CONFIG))
    # What verl's main_ppo.run_ppo passes to ray.init (plus the test's import path).
    runtime_env = OmegaConf.merge(get_ppo_ray_runtime_env(cfg), cfg.ray_kwargs.ray_init.runtime_env)
    runtime_env = OmegaConf.to_container(runtime_env)
    assert runtime_env["env_vars"][versions.ENV_VAR] == delivery.PatchSpec(CONFIG).to_json()
    support = str(Path(__file__).parent)
    repo = str(Path(__file__).resolve().parents[3])  # this module is tests.adapters.verl....
    runtime_env["env_vars"]["PYTHONPATH"] = os.pathsep.join(
        [support, repo, os.environ.get("PYTHONPATH", "")]
    )
    runtime_env["env_vars"]["HF_HUB_OFFLINE"] = "1"
    runtime_env.pop("py_executable", None)
    ray.init(num_cpus=2, runtime_env=runtime_env, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_patch_active_in_worker_and_absent_when_not_configured(cluster) -> None:  # type: ignore[no-untyped-def]
    configured = Probe.options(runtime_env={"env_vars": {"WG_PREFIX": "actor"}}).remote()
    unconfigured = Probe.options(runtime_env={"env_vars": {versions.ENV_VAR: ""}}).remote()
    on, off = ray.get([configured.state.remote(), unconfigured.state.remote()], timeout=300)
    assert on["pid"] != os.getpid() and off["pid"] != os.getpid()
    assert on["spec"] == delivery.PatchSpec(CONFIG).to_json()
    assert on["ppo_loss"] == "kl_patches.adapters.verl.patch._ppo_loss"
    assert off["spec"] is None
    assert off["ppo_loss"] == "verl.workers.utils.losses.ppo_loss"
    # The worker computes the core's importance-weighted k3 term through verl's own ppo_loss.
    value = ray.get(configured.loss_kl.remote(kv.to_overrides(CONFIG)), timeout=300)
    r = make_rollout(seed=21)
    expected = core.loss_term(r.logp.detach(), r.ref_logp, r.mask, CONFIG, old_logp=r.old_logp)
    assert abs(value - expected.item()) < 1e-6
    # Without the patch the same overrides fail loudly in the worker.
    with pytest.raises(ray.exceptions.RayTaskError, match="NotImplementedError"):
        ray.get(unconfigured.loss_kl.remote(kv.to_overrides(CONFIG)), timeout=300)
