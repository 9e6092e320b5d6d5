"""``python -m kl_patches.openrlhf``: the ``--kl`` flags, the native flags it adds, its refusals,
the runtime_env for ``ray job submit`` and the hand-off to OpenRLHF's own entry point."""

from __future__ import annotations

import runpy
from typing import Any

import pytest
from openrlhf_support.harness import REPO, activate

activate()

from kl_patches import KLConfig  # noqa: E402
from kl_patches.adapters.openrlhf import to_args  # noqa: E402
from kl_patches.openrlhf import build_argv, main, parse_kl_args, split_argv  # noqa: E402

RECIPES = REPO / "recipes" / "openrlhf"


# ----------------------------------------------------------------------------- launcher argv
def test_split_and_parse_kl_flags() -> None:
    ours, rest = split_argv(
        ["--a", "1", "--kl", "k3-in-both", "--kl.coef=0.1", "--kl.clamp", "none", "--b"]
    )
    assert rest == ["--a", "1", "--b"]
    assert parse_kl_args(ours) == KLConfig.parse("k3-in-both", coef=0.1, kl_clamp=None)
    assert parse_kl_args([]) is None
    with pytest.raises(ValueError, match=r"unknown flag --kl\.beta"):
        parse_kl_args(["--kl.beta", "0.1"])
    with pytest.raises(ValueError, match="placement"):
        parse_kl_args(["--kl.placement", "sideways"])


def test_build_argv_adds_native_flags_and_refuses_conflicts() -> None:
    config = KLConfig.parse("k3-in-both", coef=0.1)
    argv = build_argv(config, ["--rollout.batch_size", "8"], "0.11.2")
    assert argv == ["--rollout.batch_size", "8", *to_args(config)]
    assert build_argv(config, ["--algo.kl.use_loss"], "0.11.2")  # same value: fine
    with pytest.raises(ValueError, match="conflicts"):
        build_argv(config, ["--algo.kl.estimator", "k1"], "0.11.2")


def test_main_runs_openrlhf_entry_with_hooked_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openrlhf")
    import kl_patches.adapters.openrlhf.launch as launcher

    calls: dict[str, Any] = {}
    monkeypatch.setattr(launcher, "ray_init", lambda config, **kw: calls.setdefault("ray", config))
    monkeypatch.setattr(
        runpy,
        "run_module",
        lambda name, **kw: calls.setdefault("run", (name, list(launcher.sys.argv))),
    )
    monkeypatch.setattr(launcher.sys, "argv", ["x"])
    assert main(["--rollout.batch_size", "8", "--kl", "k1-in-reward", "--kl.coef", "0.02"]) == 0
    assert calls["ray"] == KLConfig(coef=0.02)
    name, argv = calls["run"]
    assert name == "openrlhf.cli.train_ppo_ray"
    assert argv[1:] == [
        "--rollout.batch_size",
        "8",
        "--algo.kl.init_coef",
        "0.02",
        "--algo.kl.estimator",
        "k1",
    ]
    assert main(["--rollout.batch_size", "8"]) == 2  # no --kl flag
    assert main(["--kl.placement", "sideways"]) == 2


def test_cli_has_openrlhf_command() -> None:
    from kl_patches.cli import COMMANDS

    assert COMMANDS["openrlhf"] == "kl_patches.openrlhf:main"


def test_print_runtime_env_for_ray_job_submit(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    config = KLConfig.parse("k3-in-both", coef=0.1)
    assert main(["--print-runtime-env", "--kl", "k3-in-both", "--kl.coef", "0.1"]) == 0
    env_line, flags_line = capsys.readouterr().out.strip().splitlines()
    env = json.loads(env_line)
    assert env["worker_process_setup_hook"] == "kl_patches.openrlhf.ray_setup_hook"
    assert KLConfig.from_dict(json.loads(env["env_vars"]["KL_PATCHES_OPENRLHF"])) == config
    assert flags_line.split() == to_args(config)


def test_launcher_warns_from_openrlhf_findings() -> None:
    """The notes are OpenRLHF's findings; theory's verdict is the report's own line."""
    from kl_patches.openrlhf import warnings_for

    on_policy = ["--rollout.batch_size", "16", "--rollout.n_samples_per_prompt", "8"]
    k3_loss = KLConfig.parse("k3-in-loss", coef=0.01)
    assert warnings_for(k3_loss, build_argv(k3_loss, on_policy, "0.11.2")) == []
    k1 = KLConfig(coef=0.01)
    assert warnings_for(k1, build_argv(k1, on_policy, "0.11.2")) == []
    adaptive = warnings_for(k1, build_argv(k1, [*on_policy, "--algo.kl.target", "6"], "0.11.2"))
    assert len(adaptive) == 1 and "adaptive KL controller" in adaptive[0]


def test_the_coefficient_defaults_to_openrlhfs_own_and_help_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kl_patches.adapters.openrlhf import launch
    from kl_patches.adapters.openrlhf.translate import FLAGS

    own = next(f for f in FLAGS if f.dotted == "algo.kl.init_coef").default
    assert launch.DEFAULTS_OF_FLAGS["coef"].value == own
    assert parse_kl_args(["--kl", "k1-in-reward"]) == KLConfig(coef=own)
    assert main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert text.startswith("usage: python -m kl_patches.openrlhf")
    assert f"(default {own}: OpenRLHF's own default (--algo.kl.init_coef" in text
    assert "--print-runtime-env" in text and "``" not in text


def test_print_shows_the_command_and_the_kl_block_without_openrlhf(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--kl", "k3-in-loss", "--print", "--advantage_estimator", "group_norm"]) == 0
    out, err = capsys.readouterr()
    assert "-m openrlhf.cli.train_ppo_ray --advantage_estimator group_norm" in out
    assert "--algo.kl.estimator k3" in out and "--algo.kl.use_loss" in out
    assert err.startswith("kl_patches.openrlhf: KL regulariser for OpenRLHF\n")
    assert "coef:         0.01 (the default: OpenRLHF's own default" in err
    # OpenRLHF's defaults: 1024 prompts x 1 sample per rollout, train.batch_size 128
    assert "updates:      off-policy: 8 optimiser steps per rollout batch" in err
    assert "verdict:      biased for the reverse KL" in err and "these off-policy updates" in err


def test_the_report_says_whether_this_run_is_off_policy_and_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 38: an off-policy launch is told so with the flags behind it, and is not told
    "On-policy: Keep it"; an on-policy one with the same KL gets no advice."""
    base = ["--kl", "k1-in-reward", "--print", "--rollout.batch_size", "16"]
    argv = [*base, "--rollout.n_samples_per_prompt", "8", "--train.batch_size", "32"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert (
        "updates:      off-policy: 4 optimiser steps per rollout batch (rollout.batch_size" in err
    )
    assert "for these off-policy updates" in err and "On-policy:" not in err
    assert "Or make the run on-policy (--train.batch_size 128 --train.max_epochs 1)" in err
    assert main([*base, "--rollout.n_samples_per_prompt", "8"]) == 0
    err = capsys.readouterr().err
    assert "updates:      on-policy: rollout.batch_size 16 x n_samples_per_prompt 8" in err
    assert "for these on-policy updates" in err and "advice" not in err
    assert "also changes: Ray is started by the launcher" in err


def test_check_runs_train_ppo_rays_own_checks(capsys: pytest.CaptureFixture[str]) -> None:
    """--check: train_ppo_ray's parser and the checks after it, stopped before train(args);
    a refusal is OpenRLHF's own message, one line, exit 2."""
    pytest.importorskip("openrlhf")
    import kl_patches.adapters.openrlhf.launch as launcher

    started: list[object] = []
    monkey = pytest.MonkeyPatch()
    monkey.setattr(launcher, "ray_init", lambda *a, **k: started.append(a))
    try:
        argv = ["--kl", "k1-in-reward", "--check", "--algo.advantage.estimator", "group_norm"]
        assert main([*argv, "--rollout.n_samples_per_prompt", "1"]) == 2
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert last == (
            "kl_patches.openrlhf: OpenRLHF's train_ppo_ray refuses the arguments: group_norm "
            "requires n_samples_per_prompt > 1"
        )
        assert main([*argv, "--rollout.n_samples_per_prompt", "8"]) == 0
        err = capsys.readouterr().err
        assert err.startswith("kl_patches.openrlhf: KL regulariser for OpenRLHF\n")
        assert err.strip().endswith(
            "parser and the checks it runs after parsing accept the command"
        )
        assert main([*argv, "--no_such_flag"]) == 2  # train_ppo_ray's argparse
        assert started == []  # nothing was started
    finally:
        monkey.undo()


def test_the_audit_reads_a_launch_without_the_launchers_own_switches() -> None:
    from kl_patches.adapters.openrlhf.launch import launcher_payload

    argv = ["--kl", "k1-in-reward", "--rollout.batch_size", "16"]
    for switch in ("--check", "--print"):
        payload = launcher_payload("x", [*argv, switch]).payload
        assert payload == launcher_payload("x", argv).payload and switch not in payload
