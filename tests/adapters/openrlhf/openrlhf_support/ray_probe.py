"""A Ray actor that reports, from inside a worker, what kl_patches did to OpenRLHF there.

Also runnable as a separate Ray driver (``python -m openrlhf_support.ray_probe ADDRESS``) that
joins an existing cluster through the launcher's ``ray_init`` *without* a KL configuration, and
prints the probe's report as JSON: a second job on the same cluster, without the setup hook.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import ray


@ray.remote(num_cpus=1)
class Probe:
    """Imports the two OpenRLHF modules that hold the KL code, then reports."""

    def report(self) -> dict[str, Any]:
        import os

        import openrlhf.trainer.ppo_utils.experience_maker
        import openrlhf.trainer.ray.ppo_actor  # noqa: F401
        import torch
        from openrlhf.trainer.ppo_utils import experience_maker

        from kl_patches.adapters.openrlhf import active_config
        from kl_patches.adapters.openrlhf import delivery as hook

        logp = torch.tensor([[-1.0, -2.0]])
        ref = torch.tensor([[-13.0, -2.5]])  # log-ratios 12 and 0.5
        config = active_config()
        return {
            "pid": os.getpid(),
            "status": hook.status(),
            "config": None if config is None else config.to_dict(),
            # Patched: the raw log-ratio (12 is not clamped); native: k1 clamped to 10.
            "reward_kl": experience_maker.compute_approx_kl(logp, ref).tolist(),
        }


def main(address: str) -> int:
    from openrlhf_support.harness import activate

    activate()
    from kl_patches.openrlhf import ray_init

    ray_init(None, address=address, log_to_driver=False)
    print(json.dumps(ray.get(Probe.remote().report.remote())))
    ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
