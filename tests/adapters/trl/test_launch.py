"""Every shipped TRL recipe loads with the parser that its launch command uses.  ``grpo_*.yaml`` go
through the kl-patches launcher's parser (``launch.parse``: TRL's GRPO script arguments, the
``kl:`` block and the deprecated flat keys); ``*_native.yaml`` through TRL's own script parser
alone (no kl-patches keys), and the reader must say what TRL runs. ``paper_grid.sh`` is checked
for its configurations and for the overrides it passes. bf16 is switched off on the command
line, as a CPU has no bf16 GPU. The launcher's spelling rules (``--kl.*`` and ``kl:``, old
spellings warning at the user's line) and its ``--help`` are checked here too.
"""

from __future__ import annotations

import re
import shlex
import warnings
from pathlib import Path

import pytest
import yaml

pytest.importorskip("trl")

import kl_patches.trl as klt
from kl_patches import KLConfig

RECIPES = Path(__file__).resolve().parents[3] / "recipes" / "trl"
CPU = ["--bf16", "false", "--use_cpu", "true"]


def _parse(kind: str, argv: list[str], with_kl: bool) -> tuple[object, ...]:
    import importlib

    from trl import TrlParser

    script = importlib.import_module(f"trl.scripts.{kind}")
    types = tuple(script.make_parser().dataclass_types)
    parser = TrlParser((*types, klt.KLArguments) if with_kl else types)
    return tuple(parser.parse_args_and_config(argv))


def _header_command(path: Path) -> str:
    lines = [line for line in path.read_text().splitlines() if line.startswith("#")]
    commands = [line for line in lines if "--config" in line or "paper_grid.sh" in line]
    assert commands, f"{path.name}: no launch command in the header comment"
    return commands[0]


def test_recipes_exist() -> None:
    names = sorted(p.name for p in RECIPES.iterdir())
    assert {"grpo_k1_in_reward.yaml", "rloo_k1_in_reward_native.yaml", "paper_grid.sh"} <= set(
        names
    )


@pytest.mark.parametrize("path", sorted(RECIPES.glob("*.yaml")), ids=lambda p: p.name)
def test_recipe_loads(path: Path) -> None:
    kind = path.name.split("_")[0]
    native = path.stem.endswith("_native")
    command = _header_command(path)
    assert f"recipes/trl/{path.name}" in command
    assert ("kl_patches.trl" in command) != native
    if native:
        training_args = _parse(kind, ["--config", str(path), *CPU], with_kl=False)[1]
        reading = klt.read(training_args)
        assert reading.config == KLConfig(coef=training_args.beta)  # TRL's own k1-in-reward
        assert not reading.findings
    else:
        from kl_patches.adapters.trl import launch

        with warnings.catch_warnings():
            # a shipped recipe uses no old spelling
            warnings.filterwarnings("error", category=FutureWarning, module="kl_patches")
            parsed = launch.parse(kind, ["--config", str(path), *CPU])
        training_args = parsed.parsed[1]
        assert parsed.config == KLConfig.parse("k1-in-reward", coef=0.05)
        assert parsed.coef_given == (f"{path} (kl: coef)",)
        assert training_args.scale_rewards == "none" and training_args.beta == 0.0
        data = yaml.safe_load(path.read_text())
        reading = klt.read(data)  # the audit reads the kl: block as the launcher does
        assert reading.config == parsed.config and "kl-patches" in reading.trainer
        assert not [f for f in reading.findings if f.severity != "info"]


def test_paper_grid() -> None:
    text = (RECIPES / "paper_grid.sh").read_text()
    match = re.search(r'^CONFIGS="([^"]+)"', text, re.M)
    assert match is not None
    names = match.group(1).split()
    assert "k1-in-reward" in names and "k3-in-loss" in names and len(set(names)) == len(names)
    base = RECIPES / "grpo_k1_in_reward.yaml"
    from kl_patches.adapters.trl import launch

    for name in names:
        argv = ["--config", str(base), "--kl", name]
        parsed = launch.parse("grpo", [*argv, "--output_dir", f"runs/grpo-{name}", *CPU])
        assert parsed.config == KLConfig.parse(name, coef=0.05)
    assert "-m kl_patches.trl grpo" in " ".join(shlex.split(text.replace("\\\n", " "), True))


# ----------------------------------------------------------------------------- argument errors
_CPU = ["--output_dir", "out", *CPU]


def _yaml(tmp_path: Path, text: str) -> str:
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        pytest.param(
            ["--learning_rate", "abc"],
            "invalid float value: 'abc' (see python -m kl_patches.trl grpo --help)",
            id="trl-parser-bad-float",
        ),
        pytest.param(
            ["--no_such_option", "1"],
            "Some specified arguments are not used by the HfArgumentParser",
            id="trl-unknown-option",
        ),
        pytest.param(
            ["--auto_find_batch_size", "true"],
            "auto_find_batch_size is not supported by GRPO",
            id="trl-config-refuses",
        ),
        pytest.param(
            ["--kl", "k1-in-reward", "--kl.importance_weighting", "token"],
            "importance_weighting='token' weights the loss-side term",
            id="kl-combination",
        ),
        pytest.param(
            ["--config", "{tmp}/missing.yaml"], "missing.yaml: no such file", id="missing-config"
        ),
        pytest.param(
            ["--config", "{yaml:kl:\n  estimator: k9}"],
            "KLConfig.estimator='k9' is not valid",
            id="yaml-bad-kl-value",
        ),
        pytest.param(
            ["--config", "{yaml:kl:\n  beta: 1}"],
            "run.yaml:2: kl: beta is not a KL setting; valid keys under kl: ['name', 'clamp',",
            id="yaml-unknown-kl-key",
        ),
        pytest.param(
            ["--config", "{yaml:kl_typo: 3}"],
            "Unknown arguments from config file: ['--kl_typo', '3']",
            id="yaml-unknown-key",
        ),
    ],
)
def test_bad_arguments_are_one_line_before_training(
    argv: list[str], fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """TRL's own parser and config checks, the kl_* keys of a YAML and KL combinations that
    only fail together: each is one line on stderr and exit 2, with no traceback and no run."""
    from kl_patches.adapters.trl import launch, patch

    resolved = []
    for word in argv:
        if word.startswith("{yaml:"):
            word = _yaml(tmp_path, word[len("{yaml:") : -1] + "\n")
        resolved.append(word.replace("{tmp}", str(tmp_path)))
    assert launch.main(["grpo", *resolved, *_CPU]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kl_patches.trl: "), err
    assert fragment in lines[0] and "Traceback" not in out + err
    assert not patch.applied()  # refused before the patch, let alone the run


# ----------------------------------------------------------------------------- spellings, help
def test_old_spellings_still_work_and_warn_at_the_users_line(tmp_path: Path) -> None:
    from kl_patches.adapters.trl import launch

    path = _yaml(tmp_path, "output_dir: out\nkl_estimator: k3\nkl_placement: loss\nkl_coef: 0.1\n")
    with pytest.warns(FutureWarning) as seen:
        parsed = launch.parse("grpo", ["--config", path, *CPU, "--kl_clamp", "5"])
    assert parsed.config == KLConfig.parse("k3-in-loss", coef=0.1, kl_clamp=5.0)
    ours = [w for w in seen if "deprecated; use" in str(w.message) and "kl" in str(w.message)]
    where = {(w.filename, w.lineno, str(w.message)) for w in ours}
    assert (path, 4, "kl_coef: is deprecated; use kl: {coef: ...}") in where
    assert (path, 2, "kl_estimator: is deprecated; use kl: {estimator: ...}") in where
    assert ("<command line>", 0, "--kl_clamp is deprecated; use --kl.clamp") in where
    assert not any("kl_patches" in w.filename for w in ours)  # never a line of our code


def test_precedence_file_then_kl_block_then_flags(tmp_path: Path) -> None:
    from kl_patches.adapters.trl import launch

    text = "output_dir: out\nkl:\n  name: k3-in-loss\n  coef: 0.2\n  full_monitor: false\n"
    path = _yaml(tmp_path, text)
    parsed = launch.parse("grpo", ["--config", path, *CPU])
    assert parsed.config == KLConfig.parse("k3-in-loss", coef=0.2) and not parsed.monitor
    parsed = launch.parse("grpo", ["--config", path, *CPU, "--kl.coef", "0.3", "--kl.full_monitor"])
    assert parsed.config == KLConfig.parse("k3-in-loss", coef=0.3) and parsed.monitor
    assert parsed.coef_given == ("--kl.coef", f"{path} (kl: coef)")
    parsed = launch.parse("grpo", ["--output_dir", "out", *CPU])
    assert parsed.config == KLConfig() and parsed.coef_given == ()


def test_help_lists_the_kl_options_in_plain_words_and_trls_own(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kl_patches.adapters.trl import launch

    assert launch.main(["grpo", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--kl.coef" in out and "--kl.clamp" in out and "--kl.full_monitor" in out
    assert "TRL's RLOO beta default" in " ".join(out.split())
    assert "TRL's own options (trl.scripts.grpo)" in out and "--learning_rate" in out
    assert "--kl_coef" not in out and "``" not in out and ":class:" not in out


# ----------------------------------------------------------------------------- --check, report
def test_check_runs_trls_post_init_and_stops_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--check``: TRL's own config checks (``GRPOConfig.__post_init__``) refuse what the
    run would refuse, as one line and exit 2; accepted, the report is printed and nothing is
    patched or trained."""
    from kl_patches.adapters.trl import launch, patch

    recipe = str(RECIPES / "grpo_k1_in_reward.yaml")
    assert launch.main(["grpo", "--config", recipe, *CPU, "--num_generations", "3", "--check"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "must be divisible by num_generations (3)" in err[0], err
    out_dir = ["--output_dir", str(tmp_path / "out")]
    assert launch.main(["grpo", "--config", recipe, *CPU, *out_dir, "--check"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("kl_patches.trl: KL regulariser for TRL\n")
    assert "GRPOConfig.__post_init__ accept the arguments" in err
    assert not patch.applied() and not (tmp_path / "out").exists()


def test_report_says_off_policy_with_trls_settings_and_no_on_policy_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An off-policy TRL run (one generation batch for several optimiser steps) is told so,
    with the settings behind it; the advice names the way out, not "On-policy: Keep it"."""
    from kl_patches.adapters.trl import launch

    recipe = str(RECIPES / "grpo_k1_in_reward.yaml")
    argv = ["--config", recipe, *CPU, "--steps_per_generation", "8", "--check"]
    assert launch.main(["grpo", *argv]) == 0
    err = capsys.readouterr().err
    training = launch.parse("grpo", argv[:-1]).training
    ga = training.gradient_accumulation_steps
    assert (
        f"updates:      off-policy: steps_per_generation=8 > gradient_accumulation_steps={ga}"
        in err
    )
    assert "biased for the reverse KL (on samples of an older policy), for these off-policy" in err
    assert "On-policy:" not in err and "Or make the run on-policy (steps_per_generation=" in err
    coef = launch.parse("grpo", argv[:-1]).config.coef
    assert f"also changes: GRPOConfig.beta={coef:g} (was {training.beta:g}): TRL then loads" in err


def test_the_audit_reads_a_check_launch_as_the_launch_itself() -> None:
    from kl_patches.adapters.trl.launch import launcher_payload

    argv = ["--config", str(RECIPES / "grpo_k1_in_reward.yaml"), "--kl.coef", "0.1"]
    checked = launcher_payload("kl_patches.trl grpo", [*argv, "--check"], None).payload
    assert checked == launcher_payload("kl_patches.trl grpo", argv, None).payload
    assert isinstance(checked, dict) and "check" not in checked
