"""Every shipped TRL recipe loads with the parser that its launch command uses.  ``grpo_*.yaml`` go
through the kl-patches launcher's parser (TRL's GRPO script arguments plus KLArguments);
``*_native.yaml`` through TRL's own script parser alone (no kl-patches keys), and the reader
must say what TRL runs. ``paper_grid.sh`` is checked for its configurations and for the
overrides it passes. bf16 is switched off on the command line, as a CPU has no bf16 GPU.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

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
    parsed = _parse(kind, ["--config", str(path), *CPU], with_kl=not native)
    training_args = parsed[1]
    if native:
        reading = klt.read(training_args)
        assert reading.config == KLConfig(coef=training_args.beta)  # TRL's own k1-in-reward
        assert not reading.findings
    else:
        kl = parsed[-1].to_config()
        assert kl == KLConfig.parse("k1-in-reward", coef=0.05)
        assert training_args.scale_rewards == "none" and training_args.beta == 0.0
        assert not [f for f in klt.read({**vars(parsed[-1]), "scale_rewards": "none"}).findings]


def test_paper_grid() -> None:
    text = (RECIPES / "paper_grid.sh").read_text()
    match = re.search(r'^CONFIGS="([^"]+)"', text, re.M)
    assert match is not None
    names = match.group(1).split()
    assert "k1-in-reward" in names and "k3-in-loss" in names and len(set(names)) == len(names)
    base = RECIPES / "grpo_k1_in_reward.yaml"
    for name in names:
        est, place = name.split("-in-")
        argv = ["--config", str(base), "--kl_estimator", est, "--kl_placement", place]
        parsed = _parse("grpo", [*argv, "--output_dir", f"runs/grpo-{name}", *CPU], True)
        assert parsed[-1].to_config() == KLConfig.parse(name, coef=0.05)
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
            ["--config", "{tmp}/missing.yaml"], "missing.yaml: No such file", id="missing-config"
        ),
        pytest.param(
            ["--config", "{yaml:kl_estimator: k9}"],
            "kl_* settings (--config file or --kl_* flags): KLConfig.estimator='k9' is not valid",
            id="yaml-bad-kl-value",
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
