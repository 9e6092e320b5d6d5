"""Bash edits where the value is written, additions in the file's continuation style."""

from __future__ import annotations

import pytest

from kl_patches.audit.fix.change import Change
from kl_patches.audit.fix.shell_edit import EditError, apply_list, apply_shell

SCRIPT = """coef=0.002
python3 -m verl.trainer.main_ppo \\
    a.b=1 \\
    c.d=$coef \\
    e.f=x $@
"""


def test_set_on_the_command_line() -> None:
    out = apply_shell(SCRIPT, 2, [Change("set", "hydra", "a.b", "2")])
    assert out == SCRIPT.replace("a.b=1", "a.b=2")


def test_set_a_value_from_a_variable_used_once_edits_the_assignment() -> None:
    out = apply_shell(SCRIPT, 2, [Change("set", "hydra", "c.d", "0.5")])
    assert out == SCRIPT.replace("coef=0.002", "coef=0.5")


def test_a_variable_used_twice_is_replaced_on_the_command_line_only() -> None:
    text = SCRIPT.replace("e.f=x", "e.f=$coef")
    out = apply_shell(text, 2, [Change("set", "hydra", "c.d", "0.5")])
    assert "coef=0.002" in out and "c.d=0.5" in out and "e.f=$coef" in out


def test_a_new_key_goes_before_a_last_line_forwarding_arguments() -> None:
    out = apply_shell(SCRIPT, 2, [Change("set", "hydra", "g.h", "True")])
    assert out.splitlines()[-1] == "    e.f=x $@"
    assert out.splitlines()[-2] == "    g.h=True \\"


def test_a_new_key_is_appended_with_the_continuation_style() -> None:
    text = SCRIPT.replace(" $@", "")
    out = apply_shell(text, 2, [Change("set", "hydra", "g.h", "True")])
    assert out.splitlines()[-2:] == ["    e.f=x \\", "    g.h=True"]


def test_unset_removes_the_line_and_keeps_the_command_joined() -> None:
    text = SCRIPT.replace(" $@", "")
    out = apply_shell(text, 2, [Change("unset", "hydra", "e.f")])
    assert out.splitlines()[-1] == "    c.d=$coef"
    out = apply_shell(text, 2, [Change("unset", "hydra", "a.b")])
    assert "a.b" not in out and out.count("\\\n") == 2


def test_flags_value_switch_and_rename() -> None:
    text = (
        "python -m openrlhf.cli.train_ppo_ray --init_kl_coef 0.01 --use_kl_loss --kl_estimator=k3\n"
    )
    out = apply_shell(
        text,
        1,
        [
            Change("set", "argparse", "--init_kl_coef", "0.02"),
            Change("unset", "argparse", "--use_kl_loss"),
            Change("set", "argparse", "--kl_estimator", "k1"),
        ],
    )
    assert out == "python -m openrlhf.cli.train_ppo_ray --init_kl_coef 0.02 --kl_estimator=k1\n"
    out = apply_shell(
        text, 1, [Change("rename", "argparse", "--init_kl_coef", new_key="--algo.kl.init_coef")]
    )
    assert "--algo.kl.init_coef 0.01" in out


def test_an_array_element_is_edited_in_place() -> None:
    text = 'ARGS=(\n  a.b=1\n  c=2\n)\npython3 -m verl.trainer.main_ppo "${ARGS[@]}"\n'
    out = apply_shell(text, 5, [Change("set", "hydra", "a.b", "3")])
    assert out == text.replace("a.b=1", "a.b=3")


def test_entry_point_switch_and_its_error() -> None:
    out = apply_shell(
        SCRIPT,
        2,
        [
            Change(
                "entry_point",
                "hydra",
                "verl.trainer.main_ppo",
                "kl_patches.adapters.verl.launch --kl k1-in-reward --",
            )
        ],
    )
    assert "-m kl_patches.adapters.verl.launch --kl k1-in-reward -- \\" in out
    with pytest.raises(EditError, match="entry point"):
        apply_shell(
            "python3 main_split.py a=1\n",
            1,
            [Change("entry_point", "hydra", "verl.trainer.main_ppo", "x")],
        )


def test_an_override_list_file_is_edited_in_place_and_appended() -> None:
    text = "# comment\na.b=1 c.d=2\ne=3\n"
    out = apply_list(text, [Change("set", "hydra", "c.d", "5"), Change("set", "hydra", "f", "x")])
    assert out == "# comment\na.b=1 c.d=5\ne=3\nf=x\n"


def test_trl_entry_points_keep_the_trainer_word_first() -> None:
    change = Change("entry_point", "trl", "trl", "kl_patches.trl --kl k1-in-reward")
    out = apply_shell("accelerate launch -m trl.scripts.grpo --beta 0.04\n", 1, [change])
    assert out == "accelerate launch -m kl_patches.trl grpo --kl k1-in-reward --beta 0.04\n"
    out = apply_shell("trl rloo --beta 0.04\n", 1, [change])
    assert out == "kl-patches trl rloo --kl k1-in-reward --beta 0.04\n"


def test_a_variable_assigned_from_another_is_replaced_where_used() -> None:
    text = 'f() {\n  local b=$1\n  trl grpo --beta "$b"\n}\nf 0.04\n'
    out = apply_shell(text, 3, [Change("set", "trl", "beta", "0.0")])
    assert "local b=$1" in out and '--beta "0.0"' in out


RAY_JOB = """\
ray job submit --address=${HEAD} \\
  --runtime-env-json='{
        "working_dir": "'${WORKING_DIR}'",
        "env_vars": {"http_proxy": ""}
    }' \\
  -- python -m verl.trainer.main_ppo \\
  actor_rollout_ref.actor.use_kl_loss=True \\
  trainer.total_epochs=1 2>&1 | tee log
echo done
"""


def test_a_quoted_word_spanning_lines_continues_the_command() -> None:
    # simpleRL's ray job submit: the JSON argument's newlines are inside single quotes, so
    # bash reads the whole block as one command; a key is found and added in it, not inside
    # the JSON
    out = apply_shell(RAY_JOB, 1, [Change("set", "hydra", "actor_rollout_ref.actor.use_kl_loss",
                                          "False")])  # fmt: skip
    assert "actor_rollout_ref.actor.use_kl_loss=False \\" in out
    added = apply_shell(RAY_JOB, 1, [Change("set", "hydra", "algorithm.use_kl_in_reward", "True")])
    lines = added.split("\n")
    (row,) = [i for i, ln in enumerate(lines) if "algorithm.use_kl_in_reward=True" in ln]
    # after the JSON block and the entry line, before the line with the redirection
    assert lines.index("  -- python -m verl.trainer.main_ppo \\") < row
    assert row < lines.index("  trainer.total_epochs=1 2>&1 | tee log") < lines.index("echo done")
    assert lines[:5] == RAY_JOB.split("\n")[:5]
