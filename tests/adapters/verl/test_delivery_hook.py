"""Delivery without the entry point: Ray's ``RAY_RUNTIME_ENV_HOOK`` in a real local Ray worker.

verl 0.4-0.5 build their ``ray.init`` runtime env themselves (no Hydra key reaches it) and no
verl before 0.9 loads the ``verl.plugins`` entry point. The driver here starts Ray as verl's own
``main_ppo.run_ppo`` does (``get_ppo_ray_runtime_env()`` from 0.5.0, 0.4's fixed dict before),
with ``RAY_RUNTIME_ENV_HOOK`` and ``KL_PATCHES_VERL`` in its environment only; an actor that,
like verl's TaskRunner, imports ``ray_trainer`` runs the marker reward through the patched
``apply_kl_penalty``. ``nox -s compat`` runs this file on verl 0.4.0, ``nox -s verl`` on 0.9.1.
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

from kl_patches import core  # noqa: E402
from kl_patches.adapters.verl import delivery, versions  # noqa: E402
from kl_patches.config import KLConfig  # noqa: E402

CONFIG = KLConfig(estimator="k2", placement="reward", coef=0.1, granularity="sequence")
VERL_04_ENV = {
    "TOKENIZERS_PARALLELISM": "true",
    "NCCL_DEBUG": "WARN",
    "VLLM_LOGGING_LEVEL": "WARN",
    "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "true",
}
"""verl 0.4.x ``main_ppo.run_ppo``'s ``ray.init(runtime_env=...)`` (main_ppo.py:34 in 0.4.0)."""


def verl_runtime_env() -> dict[str, object]:
    """The runtime env the installed verl's ``main_ppo`` passes to ``ray.init`` by default."""
    try:
        from verl.trainer.constants_ppo import get_ppo_ray_runtime_env
    except ImportError:  # verl 0.4.x
        return {"env_vars": dict(VERL_04_ENV)}
    found = get_ppo_ray_runtime_env()
    if not isinstance(found, dict):  # an OmegaConf node in some releases
        from omegaconf import OmegaConf

        found = OmegaConf.to_container(found)
    found.pop("py_executable", None)
    return found


@ray.remote(num_cpus=1)
class TaskRunnerLike:
    """Imports verl's ray_trainer (as verl's TaskRunner does) and runs the marker reward."""

    def reward(self) -> dict[str, object]:
        from verl.trainer.ppo import core_algos, ray_trainer
        from verl_support.batches import make_rollout, to_dataproto

        from kl_patches.adapters.verl import versions

        r = make_rollout(seed=41)
        data, metrics = ray_trainer.apply_kl_penalty(
            to_dataproto(r), core_algos.FixedKLController(0.1), versions.MARKER
        )
        function = ray_trainer.apply_kl_penalty
        return {
            "pid": os.getpid(),
            "apply_kl_penalty": f"{function.__module__}.{function.__qualname__}",
            "sums": data.batch["token_level_rewards"].sum(-1).tolist(),
            "active": metrics["kl_patches/active"],
        }


@pytest.fixture(scope="module")
def cluster():  # type: ignore[no-untyped-def]
    support = str(Path(__file__).parent)
    repo = str(Path(__file__).resolve().parents[3])
    env = verl_runtime_env()
    env_vars = dict(env.get("env_vars") or {})  # type: ignore[call-overload]
    env_vars["PYTHONPATH"] = os.pathsep.join([support, repo, os.environ.get("PYTHONPATH", "")])
    env_vars["HF_HUB_OFFLINE"] = "1"
    env["env_vars"] = env_vars
    assert versions.ENV_VAR not in env_vars  # verl's own runtime env does not carry it
    saved = {k: os.environ.get(k) for k in (delivery.RAY_HOOK_VAR, versions.ENV_VAR)}
    os.environ[delivery.RAY_HOOK_VAR] = delivery.RUNTIME_ENV_HOOK
    os.environ[versions.ENV_VAR] = delivery.PatchSpec(CONFIG).to_json()
    try:
        ray.init(num_cpus=2, runtime_env=env, include_dashboard=False, log_to_driver=False)
        yield
    finally:
        ray.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_runtime_env_hook_adds_the_setup_hook_and_the_configuration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = delivery.PatchSpec(CONFIG).to_json()
    monkeypatch.delenv(versions.ENV_VAR, raising=False)
    assert delivery.runtime_env_hook({"env_vars": {"A": "1"}}) == {"env_vars": {"A": "1"}}
    found = delivery.runtime_env_hook({"env_vars": {"A": "1", versions.ENV_VAR: spec}})
    assert found == {
        "env_vars": {"A": "1", versions.ENV_VAR: spec},
        "worker_process_setup_hook": delivery.SETUP_HOOK,
    }
    with pytest.raises(ValueError, match="worker_process_setup_hook"):
        delivery.runtime_env_hook(
            {"env_vars": {versions.ENV_VAR: spec}, "worker_process_setup_hook": "my.hook"}
        )
    with pytest.raises(ValueError, match="KL_PATCHES_VERL"):
        delivery.runtime_env_hook({"env_vars": {versions.ENV_VAR: '{"estimator": "k5"}'}})
    monkeypatch.setenv(versions.ENV_VAR, spec)  # from the driver's environment
    assert delivery.runtime_env_hook(None)["env_vars"] == {versions.ENV_VAR: spec}


def test_patch_reaches_a_worker_through_verls_own_ray_init(cluster) -> None:  # type: ignore[no-untyped-def]
    found = ray.get(TaskRunnerLike.remote().reward.remote(), timeout=300)
    assert found["pid"] != os.getpid()
    assert found["apply_kl_penalty"] == "kl_patches.adapters.verl.patch._apply_kl_penalty"
    assert found["active"] == 1.0
    r = make_rollout(seed=41)
    expected = r.score - core.reward_penalty(r.old_logp, r.ref_logp, r.mask, CONFIG)
    assert max(abs(a - b) for a, b in zip(found["sums"], expected.tolist(), strict=True)) < 1e-5
