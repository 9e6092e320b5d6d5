"""Delivery into Ray workers: the launcher's setup hook patches OpenRLHF inside a real actor.

One local CPU Ray cluster (num_cpus=2) is started through ``kl_patches.openrlhf.ray_init``, the
function the launcher uses. An actor of that job must find OpenRLHF patched with the launcher's
configuration; an actor of a second job on the same cluster started without a configuration must
find it native; a worker whose configuration is broken must fail loudly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from openrlhf_support.harness import TESTS, activate

activate()

ray = pytest.importorskip("ray")
pytest.importorskip("openrlhf")

from openrlhf_support.ray_probe import Probe  # noqa: E402

from kl_patches import KLConfig  # noqa: E402
from kl_patches.adapters.openrlhf import delivery as hook  # noqa: E402
from kl_patches.adapters.openrlhf import patch as P  # noqa: E402
from kl_patches.openrlhf import ray_init  # noqa: E402

CONFIG = KLConfig(estimator="k3", placement="both", coef=0.1, reward_shape="sequence")


@pytest.fixture(scope="module")
def cluster() -> object:
    info = ray_init(CONFIG, num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield info
    finally:
        ray.shutdown()
        hook.uninstall()
        P.revert()
        os.environ.pop(hook.ENV_VAR, None)


def test_patch_is_active_inside_an_actor(cluster: object) -> None:
    report = ray.get(Probe.remote().report.remote(), timeout=300)
    assert report["pid"] != os.getpid()
    assert report["config"] == CONFIG.to_dict()
    status = report["status"]
    assert status["configured"] and status["hook_installed"]
    assert status["patched"] == {
        P.REWARD_MODULE: [
            "RemoteExperienceMaker.compute_advantages_and_returns",
            "compute_approx_kl",
        ],
        P.LOSS_MODULE: ["ActorPPOTrainer.training_step", "aggregate_loss", "compute_approx_kl"],
    }
    assert report["reward_kl"] == [[12.0, 0.5]]  # the raw log-ratio, not OpenRLHF's clamp at 10


def test_patch_absent_in_a_job_without_configuration(cluster: object) -> None:
    address = cluster.address_info["address"]  # type: ignore[attr-defined]
    env = {k: v for k, v in os.environ.items() if k != hook.ENV_VAR}
    out = subprocess.run(
        [sys.executable, "-m", "openrlhf_support.ray_probe", address],
        cwd=TESTS,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["config"] is None
    assert report["status"] == {
        "configured": False,
        "hook_installed": False,
        "patched": {P.REWARD_MODULE: [], P.LOSS_MODULE: []},
    }
    assert report["reward_kl"] == [[10.0, 0.5]]  # native: k1 clamped to [-10, 10]


def test_worker_with_broken_configuration_fails_loudly(cluster: object) -> None:
    probe = Probe.options(runtime_env={"env_vars": {hook.ENV_VAR: '{"placement": "sideways"}'}})
    with pytest.raises(ray.exceptions.RayError, match="not a valid KLConfig"):
        ray.get(probe.remote().report.remote(), timeout=300)
