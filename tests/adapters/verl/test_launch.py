"""``kl-patches verl`` and recipes/verl: every recipe composes with verl 0.9.1's real config and
reads back as the KLConfig it promises; the launcher adds the overrides, warns, refuses clashes
and hands the patch configuration to the trainer process."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl")
sys.path.insert(0, str(Path(__file__).parent))

from verl_support.configs import composed, overlay, with_verl_clamps

from kl_patches import cli
from kl_patches.adapters import verl as kv
from kl_patches.adapters.verl import delivery, launch, versions
from kl_patches.config import KLConfig

RECIPES = Path(__file__).resolve().parents[3] / "recipes" / "verl"


def recipe_overrides(path: Path) -> list[str]:
    lines = [line.strip() for line in path.read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


@pytest.mark.parametrize("path", sorted(RECIPES.glob("*.overrides")), ids=lambda p: p.name)
def test_override_recipes_compose_and_read_as_k1_in_reward(path: Path) -> None:
    text = path.read_text()
    assert "Launch" in text and "verl.trainer.main_ppo" in text
    overrides = recipe_overrides(path)
    cfg = composed(overrides)
    assert kv.from_config(cfg) == KLConfig(estimator="k1", placement="reward", coef=0.001)
    reading = kv.read(overrides)
    assert [f for f in reading.findings if f.severity != "info"] == []


def test_recipes_exist() -> None:
    names = {p.name for p in RECIPES.iterdir()}
    assert {"k1_in_reward_grpo.overrides", "k1_in_reward_rloo.overrides", "grid.yaml"} <= names


def test_grid_runs_compose() -> None:
    import yaml

    grid = yaml.safe_load((RECIPES / "grid.yaml").read_text())
    assert len(grid["runs"]) >= 6
    for name, run in grid["runs"].items():
        config = KLConfig.parse(run["kl"], coef=grid["coef"], **run.get("set", {}))
        overrides = launch.build(config, grid["base"])
        patched = any(o.endswith(f"={versions.MARKER}") for o in overrides)
        assert patched == run.get("patch", False), name
        read = kv.from_config(overlay(overrides))
        assert read == (config if patched else with_verl_clamps(config)), name


def test_launcher_print_and_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        [
            "verl",
            "--kl",
            "k3-in-both",
            "--coef",
            "0.01",
            "--print",
            "--",
            "algorithm.adv_estimator=grpo",
        ]
    )
    assert code == 0
    out, err = capsys.readouterr()
    assert "verl.trainer.main_ppo" in out and "algorithm.kl_penalty=k3" in out
    assert "verl.std_scaled_kl" in err and "warning" in err


def test_launcher_refuses_clashing_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code = launch.main(["--kl", "k1-in-reward", "--", "algorithm.kl_ctrl.kl_coef=0.5"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert (
        "algorithm.kl_ctrl.kl_coef=0.5 (your overrides) vs algorithm.kl_ctrl.kl_coef=0.001 (--kl)"
    ) in err[0]
    assert launch.main(["--kl", "k9-in-loss", "--print"]) == 2
    assert launch.main(["--kl-outside-std", "--print"]) == 2


def test_launcher_strict_fails_on_error_findings() -> None:
    argv = ["--kl", "k1-in-reward", "--strict", "--print", "--", "algorithm.adv_estimator=gdpo"]
    assert launch.main(argv) == 1


MICRO_BATCHES = [
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4",
]
"""What verl 0.9.1's validate_config needs besides its defaults (no micro-batch size is set)."""


def test_the_same_key_set_to_the_same_value_both_ways_is_accepted() -> None:
    """Issue 38: the README's quickstart (--kl k1-in-reward plus the recipe, which sets the
    same five keys to the same values) was refused as a clash."""
    recipe = recipe_overrides(RECIPES / "k1_in_reward_grpo.overrides")
    overrides = launch.overrides_of(["--kl", "k1-in-reward", "--", *recipe])
    assert overrides == recipe  # nothing added twice: the user's spelling is kept
    with_own = launch.overrides_of(["--kl", "k1-in-reward", "--", "algorithm.kl_ctrl.kl_coef=1e-3"])
    assert with_own.count("algorithm.kl_ctrl.kl_coef=1e-3") == 1
    assert not any(o.startswith("algorithm.kl_ctrl.kl_coef=0.001") for o in with_own)
    with pytest.raises(ValueError, match=r"kl_penalty=k3 \(your overrides\) vs .*kl_penalty=k1"):
        launch.overrides_of(["--kl", "k1-in-reward", "--", "algorithm.kl_penalty=k3"])


def test_launcher_check_runs_main_ppos_validation(capsys: pytest.CaptureFixture[str]) -> None:
    """--check runs the checks verl's main_ppo runs before it starts workers (validate_config),
    not only Hydra's composition: the recipe alone lacks the micro-batch sizes verl needs."""
    recipe = recipe_overrides(RECIPES / "k1_in_reward_grpo.overrides")
    assert launch.main(["--kl", "k1-in-reward", "--check", "--", *recipe]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("kl-patches verl: verl's validation (main_ppo's validate_config)")
    assert "ppo_micro_batch_size" in last
    argv = ["--kl", "k2-in-loss", "--kl.granularity", "sequence", "--check", "--"]
    assert launch.main([*argv, "algorithm.adv_estimator=grpo", *MICRO_BATCHES]) == 0  # patched
    err = capsys.readouterr().err
    assert "[validate_config] All configuration checks passed successfully!" in err  # verl's own
    assert (
        err.strip()
        .splitlines()[-1]
        .endswith(
            "passes main_ppo's validate_config (the checks verl runs before it starts workers)"
        )
    )


def test_the_report_says_whether_this_run_is_off_policy_and_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ["--kl", "k1-in-reward", "--print", "--", "algorithm.adv_estimator=grpo"]
    assert launch.main([*base, "actor_rollout_ref.actor.ppo_mini_batch_size=256"]) == 0
    err = capsys.readouterr().err
    assert (
        "updates:      off-policy: ppo_mini_batch_size=256 < data.train_batch_size=1024 "
        "(verl's default): 4 updates per batch"
    ) in err
    assert "for these off-policy updates" in err and "On-policy:" not in err
    assert "Or make the run on-policy (actor_rollout_ref.actor.ppo_mini_batch_size=1024 " in err
    assert launch.main([*base, "data.train_batch_size=null"]) == 0
    err = capsys.readouterr().err
    assert "updates:      unknown: data.train_batch_size=null: not a number" in err
    assert "< 0" not in err and "< None" not in err
    assert (
        "verdict:      on-policy unbiased for the reverse KL (reverse_kl); off-policy biased" in err
    )
    recipe = recipe_overrides(RECIPES / "k1_in_reward_grpo.overrides")
    assert launch.main(["--kl", "k1-in-reward", "--print", "--", *recipe]) == 0
    err = capsys.readouterr().err
    assert "updates:      on-policy: ppo_mini_batch_size=256 = data.train_batch_size=256" in err
    assert "unbiased for the reverse KL (reverse_kl), for these on-policy updates" in err
    assert "advice" not in err and "also changes: nothing beyond the KL" in err


def test_the_coefficient_defaults_to_verls_own() -> None:
    assert launch.DEFAULTS_OF_FLAGS["coef"].value == versions.DEFAULTS["algorithm.kl_ctrl.kl_coef"]
    assert "algorithm.kl_ctrl.kl_coef=0.001" in launch.overrides_of(["--kl", "k1-in-reward"])
    assert "algorithm.kl_ctrl.kl_coef=0.02" in launch.overrides_of(
        ["--kl", "k1-in-reward", "--kl.coef", "0.02"]
    )
    text = " ".join(launch.parser().format_help().split())
    assert "(default 0.001: verl's own default (algorithm.kl_ctrl.kl_coef" in text
    assert "--kl-outside-std" not in text and "--kl.outside_std" in text


def test_old_spellings_warn_and_mean_the_same() -> None:
    new = ["--kl", "k1-in-reward", "--kl.outside_std", "--", "algorithm.adv_estimator=grpo"]
    with pytest.warns(FutureWarning, match="--kl-outside-std is deprecated; use --kl.outside_std"):
        old = launch.overrides_of(["--kl-outside-std", *new[:2], *new[3:]])
    assert old == launch.overrides_of(new)
    with pytest.warns(FutureWarning, match="--coef is deprecated; use --kl.coef") as seen:
        launch.overrides_of(["--kl", "k1-in-reward", "--coef", "0.1"])
    assert seen[0].filename == "<command line>"


def test_launcher_runs_entry_with_overrides_and_patch_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stand-in entry module records what the trainer process would receive; the KL block
    is on stderr before it starts."""
    record = tmp_path / "record.json"
    (tmp_path / "fake_main_ppo.py").write_text(
        "import json, os, sys\n"
        f"json.dump({{'argv': sys.argv[1:], 'env': os.environ.get({versions.ENV_VAR!r}), "
        f"'hook': os.environ.get({delivery.RAY_HOOK_VAR!r})}}, "
        f"open({str(record)!r}, 'w'))\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.delenv(versions.ENV_VAR, raising=False)
    monkeypatch.delenv(delivery.RAY_HOOK_VAR, raising=False)
    code = launch.main(
        [
            "--kl",
            "k3-in-loss",
            "--set",
            "importance_weighting=token",
            "--entry",
            "fake_main_ppo",
            "--",
            "algorithm.adv_estimator=grpo",
        ]
    )
    assert code == 0
    seen = json.loads(record.read_text())
    config = KLConfig(estimator="k3", placement="loss", importance_weighting="token", coef=0.001)
    assert capsys.readouterr().err.startswith("kl-patches verl: KL regulariser for verl\n")
    assert seen["argv"] == ["algorithm.adv_estimator=grpo", *kv.to_overrides(config)]
    assert seen["env"] == delivery.PatchSpec(config).to_json()
    assert seen["hook"] == delivery.RUNTIME_ENV_HOOK  # the workers' route on verl < 0.9
    monkeypatch.setenv(delivery.RAY_HOOK_VAR, "my_cluster.hook")  # refused: one line, exit 2
    argv = ["--kl", "k3-in-loss", "--kl.importance_weighting", "token", "--entry", "x"]
    assert launch.main(argv) == 2


def test_launcher_check_refusing_an_override_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Hydra's composition error for a bad override ends the launcher with one line, exit 2."""
    code = launch.main(["--kl", "k1-in-reward", "--check", "--", "algorithm.no_such_key=1"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "kl-patches verl: verl's config refuses the overrides: Could not override "
        "'algorithm.no_such_key'. To append to your config use +algorithm.no_such_key=1"
    )


AGG = "actor_rollout_ref.actor.loss_agg_mode"


def test_launcher_says_when_it_changes_the_policy_aggregation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Placement both: loss_agg_mode set to the KL's aggregation, and the launch output says so
    and why; loss only: loss_agg_mode left as it is, the patch aggregates the KL."""
    assert launch.main(["--kl", "k2-in-both", "--print", "--", "algorithm.adv_estimator=grpo"]) == 0
    out, err = capsys.readouterr()
    assert f"{AGG}=seq-mean-token-sum" in out
    assert f"also changes: {AGG}=seq-mean-token-sum (was token-mean, verl's default)" in err
    assert "verl aggregates the policy-gradient loss with this same key" in err
    assert "placement 'both'" in err
    assert f"{versions.ENV_VAR} in every Ray worker's environment" not in err  # native: no patch
    assert launch.main(["--kl", "k3-in-loss", "--print", "--", "algorithm.adv_estimator=grpo"]) == 0
    out, err = capsys.readouterr()
    assert AGG not in out and f"kl_loss_type={versions.MARKER}" in out
    assert f"{AGG} stays token-mean" in err and "aggregates the KL loss itself (sum)" in err
    user = [f"{AGG}=seq-mean-token-sum"]
    assert launch.main(["--kl", "k3-in-loss", "--print", "--", *user]) == 0
    out, err = capsys.readouterr()  # the user's policy aggregation is the KL's: verl's own KL
    assert "kl_loss_type=k3" in out and AGG not in err


def test_launcher_missing_entry_point_says_how_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """kl_patches importable (PYTHONPATH) but not installed: verl would find no plugin."""
    import importlib.metadata as metadata

    def no_distribution(name: str) -> None:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "entry_points", lambda **_: [])
    monkeypatch.setattr(metadata, "distribution", no_distribution)
    monkeypatch.delenv("VERL_USE_EXTERNAL_MODULES", raising=False)
    argv = ["--kl", "k2-in-loss", "--kl.granularity", "sequence", "--entry", "no_such_module"]
    assert launch.main(argv) == 2
    err = capsys.readouterr().err
    assert "not installed as a package" in err and "pip install -e" in err
    assert "VERL_USE_EXTERNAL_MODULES=kl_patches.adapters.verl.plugin" in err
