"""The issue-12 misses the real-file evaluation showed, each fixed in the reader (issue 13).

A test on a variable a cluster scheduler sets is read both ways (branch-dependent); a TRL
config with one nested ``*_kwargs`` value is still TRL's; a Hydra file with a ``defaults`` list
and a ``trainer:`` section is verl's; a ``while``/``case`` loop over ``"$@"`` does not run in a
clean environment (no arguments), so the defaults it would change stay; ``"${@:2}"`` slices the
arguments as bash does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches.audit import audit
from kl_patches.audit.shell import scheduler_variable


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("SKYPILOT_NODE_RANK", True),
        ("SLURM_PROCID", True),
        ("NODE_RANK", True),
        ("RANK", True),
        ("PMI_RANK", True),
        ("MY_RANK", False),
        ("BETA", False),
    ],
)
def test_scheduler_variables(name: str, expected: bool) -> None:
    assert scheduler_variable(name) is expected


def test_a_node_rank_test_reads_every_branch(tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text(
        'if [ "$SKYPILOT_NODE_RANK" == "0" ]; then\n'
        "  python3 -m verl.trainer.main_ppo algorithm.use_kl_in_reward=True\n"
        "else\n"
        "  ray start --address $HEAD\n"
        "fi\n"
    )
    (entry,) = audit(path)  # a clean environment would take the else branch: no launch
    assert entry.reading.config.placement == "reward"
    assert "branch_dependent" in {f.code for f in entry.findings}


def test_an_unset_ordinary_variable_is_still_decided_as_unset(tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text(
        'if [ "$USE_KL" == "1" ]; then\n'
        "  python3 -m verl.trainer.main_ppo algorithm.use_kl_in_reward=True\n"
        "else\n"
        "  python3 -m verl.trainer.main_ppo algorithm.use_kl_in_reward=False\n"
        "fi\n"
    )
    (entry,) = audit(path)
    assert entry.reading.config.placement == "none"


def test_trl_yaml_with_a_nested_kwargs_value(tmp_path: Path) -> None:
    path = tmp_path / "grpo.yaml"
    path.write_text(
        "beta: 0.02\ngradient_checkpointing: true\n"
        "gradient_checkpointing_kwargs:\n  use_reentrant: false\n"
    )
    (entry,) = audit(path, version="trl=1.16.0")
    assert entry.reading.library == "trl" and entry.reading.config.coef == pytest.approx(0.02)


def test_hydra_yaml_with_defaults_and_a_trainer_section_is_verl(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text("defaults:\n  - _self_\ntrainer:\n  total_epochs: 3\n")
    (entry,) = audit(path, version="verl=0.9.1")
    assert entry.reading.library == "verl"


def test_an_argument_loop_keeps_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text(
        "KL_COEF=0.005\n"
        "while [[ $# -gt 0 ]]; do\n  case $1 in\n    --kl) KL_COEF=$2; shift 2;;\n"
        '    *) echo "unknown $1"; exit 1;;\n  esac\ndone\n'
        "python3 -m verl.trainer.main_ppo algorithm.use_kl_in_reward=True "
        "algorithm.kl_ctrl.kl_coef=$KL_COEF\n"
    )
    # bash: no arguments, the loop never runs; reading its body once took the exit branch
    (entry,) = audit(path, version="verl=0.9.1")
    assert entry.reading.config.coef == pytest.approx(0.005)


def test_argument_slices(tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text(
        'launch() { python3 -m verl.trainer.main_ppo "${@:2}"; }\n'
        "launch ignored algorithm.use_kl_in_reward=True algorithm.kl_ctrl.kl_coef=0.003\n"
    )
    (entry,) = audit(path, version="verl=0.9.1")
    assert entry.reading.config.placement == "reward"
    assert entry.reading.config.coef == pytest.approx(0.003)
