"""Nothing in an audited file is ever executed: each test plants a marker-file command where a
shell, YAML or Python runner would execute it, audits the file, and checks the marker is absent.

Every input also holds a real launch, so the audit reads the file (exit 0) rather than stopping
early: the marker's absence then proves the reader went past the dangerous construct without
running it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kl_patches.cli.audit import main

LAUNCH = "python3 -m verl.trainer.main_ppo algorithm.use_kl_in_reward=True"


def _audit(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, dict[str, object]]:
    code = main(["--json", str(path)])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip().startswith("{") else {}


@pytest.mark.parametrize(
    "template",
    [
        "X=$(touch {m})\n{launch} trainer.experiment_name=$X\n",
        "X=`touch {m}`\n{launch}\n",
        'eval "touch {m}"\n{launch}\n',
        "bash -c 'touch {m}'\n{launch}\n",
        "bash <<'EOF'\ntouch {m}\nEOF\n{launch}\n",
        'if [ "$(touch {m})" = x ]; then :; fi\n{launch}\n',
        "N=$(( $(touch {m}; echo 1) + 1 ))\n{launch}\n",
        "{launch} data.train_files=<(touch {m})\n",
        "cat > {m}.sh <<EOF\ntouch {m}\nEOF\nbash {m}.sh\n{launch}\n",
        "f() {{ touch {m}; }}\nf\n{launch}\n",
        'python3 -c \'open("{m}", "w")\'\n{launch}\n',
    ],
)
def test_shell_constructs_are_never_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], template: str
) -> None:
    marker = tmp_path / "ran"
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/bash\n" + template.format(m=marker, launch=LAUNCH))
    code, doc = _audit(capsys, script)
    assert code == 0, doc
    assert not marker.exists()
    assert not (tmp_path / "ran.sh").exists()  # the here-document file is not written either


def test_a_sourced_file_is_read_not_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "ran"
    (tmp_path / "env.sh").write_text(f"touch {marker}\nKL=algorithm.kl_penalty=k1\n")
    script = tmp_path / "run.sh"
    script.write_text(f"source ./env.sh\n{LAUNCH} $KL\n")
    code, doc = _audit(capsys, script)
    assert code == 0 and not marker.exists()
    (trainer,) = doc["trainers"]  # type: ignore[misc]
    assert trainer["config"]["estimator"] == "k1"  # the variable came from the sourced file


def test_yaml_tags_construct_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "ran"
    config = tmp_path / "cfg.yaml"
    config.write_text(f"beta: !!python/object/apply:os.system ['touch {marker}']\n")
    code = main(["--json", "--library", "trl", str(config)])
    capsys.readouterr()
    assert code == 2 and not marker.exists()
    # the same tag in a TRL --config file named by a launch
    script = tmp_path / "run.sh"
    script.write_text(f"trl grpo --config {config} --beta 0.1\n")
    assert main(["--json", str(script)]) == 2
    capsys.readouterr()
    assert not marker.exists()


def test_hydra_configs_are_composed_not_instantiated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "ran"
    (tmp_path / "cfg.yaml").write_text(
        "defaults:\n  - ppo_trainer\n  - _self_\n"
        f"evil:\n  _target_: os.system\n  command: touch {marker}\n"
        "algorithm:\n  use_kl_in_reward: true\n"
    )
    script = tmp_path / "run.sh"
    script.write_text(
        f"python3 -m verl.trainer.main_ppo --config-path={tmp_path} --config-name=cfg\n"
    )
    code, doc = _audit(capsys, script)
    assert code == 0 and not marker.exists()
    (trainer,) = doc["trainers"]  # type: ignore[misc]
    assert trainer["config"]["placement"] == "reward"


@pytest.mark.parametrize(
    "code_line",
    [
        "open('{m}', 'w').write('x')",
        "import os; os.system('touch {m}')",
        "__import__('os').system('touch {m}')",
        "exec(\"open('{m}', 'w')\")",
    ],
)
def test_python_top_level_code_is_never_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], code_line: str
) -> None:
    marker = tmp_path / "ran"
    script = tmp_path / "train.py"
    script.write_text(
        code_line.format(m=marker)
        + "\nfrom trl import RLOOConfig, RLOOTrainer\n"
        + "RLOOTrainer(model='m', reward_funcs=[], args=RLOOConfig(output_dir='o'))\n"
    )
    code, doc = _audit(capsys, script)
    assert code == 0, doc
    assert not marker.exists()
    # and when a launch script runs it
    launch = tmp_path / "run.sh"
    launch.write_text(f"accelerate launch {script} --beta 0.1\n")
    code, _ = _audit(capsys, launch)
    assert code == 0 and not marker.exists()
