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
        assert kv.needs_patch(config) == run.get("patch", False), name
        read = kv.from_config(overlay(overrides))
        assert read == (config if kv.needs_patch(config) else with_verl_clamps(config)), name


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
    assert code == 2 and "algorithm.kl_ctrl.kl_coef" in capsys.readouterr().err
    assert launch.main(["--kl", "k9-in-loss", "--print"]) == 2
    assert launch.main(["--kl-outside-std", "--print"]) == 2


def test_launcher_strict_fails_on_error_findings() -> None:
    argv = ["--kl", "k1-in-reward", "--strict", "--print", "--", "algorithm.adv_estimator=gdpo"]
    assert launch.main(argv) == 1


def test_launcher_check_composes_verl_config() -> None:
    assert launch.main(["--kl", "k2-in-loss", "--set", "granularity=sequence", "--check"]) == 0


def test_launcher_runs_entry_with_overrides_and_patch_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in entry module records what the trainer process would receive."""
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
    config = KLConfig(estimator="k3", placement="loss", importance_weighting="token")
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
