"""The OpenRLHF reader: findings for what a ``train_ppo_ray`` command line runs (no OpenRLHF
needed)."""

from __future__ import annotations

from openrlhf_support.harness import REPO, activate

activate()

from kl_patches.adapters.openrlhf import from_args, read  # noqa: E402

RECIPES = REPO / "recipes" / "openrlhf"


def codes(argv: list[str]) -> dict[str, str]:
    return {f.code: f.severity for f in read(argv).findings}


def test_read_findings() -> None:
    off = codes(["--algo.kl.init_coef", "0", "--algo.kl.use_loss"])
    assert off == {"openrlhf.kl_off": "error"}
    assert codes(["--algo.kl.init_coef", "0"]) == {"openrlhf.kl_off": "warning"}
    grpo = ["--algo.advantage.estimator", "group_norm", "--rollout.n_samples_per_prompt", "8"]
    assert "openrlhf.kl_after_baseline" in codes(grpo)
    loss = ["--algo.kl.use_loss", "--algo.kl.estimator", "k3"]
    on_policy = [
        "--rollout.batch_size",
        "16",
        "--rollout.n_samples_per_prompt",
        "8",
        "--train.batch_size",
        "128",
    ]
    assert "openrlhf.off_policy_kl_loss" in codes(loss)  # 0.11.2 defaults: 64 updates/rollout
    assert "openrlhf.off_policy_kl_loss" not in codes(loss + on_policy)
    assert read(loss + on_policy).off_policy is False
    adaptive = codes([*loss, "--algo.kl.target", "6"])
    assert adaptive["openrlhf.adaptive_controller"] == "warning"
    assert "openrlhf.unbiased_gradient_token_level" in codes([*loss, "--algo.kl.unbiased_gradient"])
    reading = read(loss)
    assert reading.library == "openrlhf" and reading.config.placement == "loss"
    fixed = from_args(list(reading.fix[:4]))
    assert (fixed.estimator, fixed.placement, fixed.coef) == ("k1", "reward", 0.01)
    assert "(remove --algo.kl.use_loss)" in reading.fix
