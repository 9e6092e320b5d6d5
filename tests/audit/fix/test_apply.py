"""Fix, write and re-audit synthetic launches of each library and format; the CLI."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from kl_patches.audit.fix.apply import diff, fix_file, summary, write_fix
from kl_patches.audit.run import audit
from kl_patches.cli.audit import main
from tests.audit.fix.conftest import CASES


@pytest.mark.parametrize("case", sorted(CASES))
def test_round_trip_fix_write_reaudit_clean(tmp_path: Path, case: str) -> None:
    name, text = CASES[case]
    path = tmp_path / name
    path.write_text(text)
    before = audit(str(path))
    assert any(e.status in ("biased", "error") for e in before)
    fix = fix_file(path)
    assert fix.problems == [] and fix.changed
    write_fix(fix, backup=True)
    assert (tmp_path / (name + ".orig")).read_text() == text
    after = audit(str(path))
    assert after and all(e.status not in ("biased", "error") for e in after)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_written_file_differs_only_in_the_changed_lines(tmp_path: Path, case: str) -> None:
    name, text = CASES[case]
    path = tmp_path / name
    path.write_text(text)
    fix = fix_file(path)
    old, new = text.splitlines(), fix.new_text.splitlines()
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    kept = sum(b.size for b in matcher.get_matching_blocks())
    changed = sum(
        1 for ln in diff(fix).splitlines() if ln.startswith("-") and not ln.startswith("---")
    )
    assert kept == len(old) - changed  # every other line is byte-identical and in order


def test_cli_fix_prints_a_diff_and_write_keeps_a_backup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, text = CASES["verl-shell"]
    path = tmp_path / name
    path.write_text(text)
    assert main([str(path), "--fix"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("--- a/") and "+    algorithm.norm_adv_by_std_in_grpo=False \\" in out
    assert path.read_text() == text
    assert main([str(path), "--fix", "--write", "--no-backup"]) == 0
    assert not (tmp_path / (name + ".orig")).exists()
    assert path.read_text() != text
    assert main([str(path), "--fix"]) == 0
    assert "nothing to change" in capsys.readouterr().out


def test_cli_write_without_fix_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.sh"
    path.write_text(CASES["verl-shell"][1])
    assert main([str(path), "--write"]) == 2
    assert "--fix" in capsys.readouterr().err


_GRPO_SCRIPT = (
    "from trl import GRPOConfig, GRPOTrainer\n"
    "args = GRPOConfig(output_dir='o', beta=0.04)\n"
    "GRPOTrainer(model='m', args=args, reward_funcs=[], train_dataset=[]).train()\n"
)


def test_a_python_file_goes_through_the_python_writer_and_the_re_audit(tmp_path: Path) -> None:
    """GRPO's fix needs the kl-patches launcher: in a script, its patch (``apply``) is written
    with the config edits, and the re-audit reads the patched trainer as clean."""
    path = tmp_path / "train.py"
    path.write_text(_GRPO_SCRIPT)
    fix = fix_file(path)
    assert fix.problems == [] and fix.changed, fix.problems
    assert "kl_patches.trl.apply(" in fix.new_text and "beta=0.0" in fix.new_text
    assert [e.status for e in fix.after] == ["unbiased"]


def test_without_libcst_a_python_fix_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kl_patches.audit.fix import python_edit

    def missing() -> None:
        raise ImportError(
            f"editing a Python launch needs libcst: pip install 'kl-patches[{python_edit.EXTRA}]'"
        )

    monkeypatch.setattr(python_edit, "libcst_module", missing)
    path = tmp_path / "train.py"
    path.write_text(_GRPO_SCRIPT)
    fix = fix_file(path)
    assert not fix.changed
    assert any(f"kl-patches[{python_edit.EXTRA}]" in p for p in fix.problems), fix.problems


def test_a_command_shared_with_a_launch_needing_no_change_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "grid.sh"
    path.write_text(
        "launch() {\n"
        "    local beta=$1\n"
        '    trl grpo --model_name_or_path m --beta "$beta" --output_dir o\n'
        "}\n"
        "launch 0.04\n"
        "launch 0\n"
    )
    fix = fix_file(path)
    assert not fix.changed
    assert any("also changes this launch's KL" in p for p in fix.problems)


def test_an_override_list_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "k3.overrides"
    path.write_text(
        "algorithm.adv_estimator=rloo\n"
        "algorithm.use_kl_in_reward=True algorithm.kl_penalty=low_var_kl\n"
        "algorithm.kl_ctrl.kl_coef=0.001\n"
    )
    fix = fix_file(path)
    assert fix.problems == [] and fix.changed
    assert "algorithm.use_kl_in_reward=True algorithm.kl_penalty=kl\n" in fix.new_text
    write_fix(fix, backup=False)
    assert all(e.status not in ("biased", "error") for e in audit(str(path)))


def test_a_refused_launch_is_written_with_its_kl_fix_and_renames(tmp_path: Path) -> None:
    """OpenRLHF 0.11.2 refuses the flat flags (renamed) and a fork's own flag (left to the
    user): the edit renames, writes k1 in the reward, and keeps the fork's flag as it is."""
    path = tmp_path / "run.sh"
    path.write_text(
        "python3 -m openrlhf.cli.train_ppo_ray \\\n"
        "   --init_kl_coef 0.01 --use_kl_loss --kl_estimator k3 \\\n"
        "   --my_fork_flag 3\n"
    )
    fix = fix_file(path, versions={"openrlhf": "0.11.2"})
    assert fix.problems == [] and fix.changed
    assert fix.new_text.splitlines()[1].split() == ["--algo.kl.init_coef", "0.01",
                                                    "--algo.kl.estimator", "k1", "\\"]  # fmt: skip
    assert fix.new_text.splitlines()[2] == "   --my_fork_flag 3"
    (entry,) = fix.after
    assert (entry.reading.config.estimator, entry.reading.config.placement) == ("k1", "reward")
    assert {f.code for f in entry.findings if f.severity == "error"} == {"openrlhf.flag_rejected"}
    assert any("your choice" in ln and "--my_fork_flag" in ln for ln in summary(fix))


def test_cli_fix_exits_1_while_a_refusal_is_left_to_the_user(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The KL fix is written, but the fork's own flag is still refused: the fixed file is not
    clean, so --fix says what is left and exits 1 (0 is for a clean result, 2 for no fix)."""
    path = tmp_path / "run.sh"
    path.write_text(
        "python3 -m openrlhf.cli.train_ppo_ray --init_kl_coef 0.01 --use_kl_loss --my_fork_flag 3\n"
    )
    assert main([str(path), "--fix", "--library-version", "openrlhf=0.11.2"]) == 1
    err = capsys.readouterr().err
    assert "left to you after the fix" in err and "(error)" in err
    clean = tmp_path / "clean.sh"
    clean.write_text("python3 -m openrlhf.cli.train_ppo_ray --init_kl_coef 0.01 --use_kl_loss\n")
    assert main([str(clean), "--fix", "--library-version", "openrlhf=0.11.2"]) == 0


def test_a_plus_on_a_key_the_config_has_is_dropped(tmp_path: Path) -> None:
    """verl 0.6.1's gpt-oss example appends ``+...fsdp_config.model_dtype``, which its config
    already has: Hydra refuses it ("Could not append to config"). The fix writes the override
    without the ``+`` (it then sets the key) along with the KL fix, and the re-audit is clean."""
    path = tmp_path / "run.sh"
    path.write_text(
        "python3 -m verl.trainer.main_ppo \\\n"
        "    algorithm.adv_estimator=rloo \\\n"
        "    +actor_rollout_ref.actor.fsdp_config.model_dtype=bfloat16 \\\n"
        "    algorithm.use_kl_in_reward=True algorithm.kl_penalty=low_var_kl \\\n"
        "    algorithm.kl_ctrl.kl_coef=0.001\n"
    )
    before = audit(str(path), version="verl=0.6.1")
    assert {f.code for e in before for f in e.findings} >= {"verl.key_rejected"}
    fix = fix_file(path, versions={"verl": "0.6.1"})
    assert fix.problems == [] and fix.changed
    assert fix.new_text.splitlines()[2] == (
        "    actor_rollout_ref.actor.fsdp_config.model_dtype=bfloat16 \\"
    )
    (entry,) = fix.after
    assert entry.status not in ("biased", "error")
    assert (entry.reading.config.estimator, entry.reading.config.placement) == ("k1", "reward")


def test_a_named_estimator_on_a_release_with_the_k3_switch_is_removed(tmp_path: Path) -> None:
    """OpenRLHF 0.6.0 selects k3 with --use_kl_estimator_k3 and refuses --kl_estimator
    (0.6.0.post1 on): the fix removes the refused flag with the KL loss (k1 in the reward is
    what runs without it), and the re-audit is clean."""
    path = tmp_path / "run.sh"
    path.write_text(
        "python3 -m openrlhf.cli.train_ppo_ray --pretrain m --init_kl_coef 0.01 --use_kl_loss "
        "--kl_estimator k3\n"
    )
    (before,) = audit(str(path), version="openrlhf=0.6.0")
    assert "openrlhf.flag_rejected" in {f.code for f in before.findings}
    fix = fix_file(path, versions={"openrlhf": "0.6.0"})
    assert fix.problems == [] and fix.changed
    words = fix.new_text.split()
    assert "--kl_estimator" not in words and "k3" not in words and "--use_kl_loss" not in words
    assert "--use_kl_estimator_k3" not in words and words[:7] == [
        "python3", "-m", "openrlhf.cli.train_ppo_ray", "--pretrain", "m", "--init_kl_coef", "0.01"
    ]  # fmt: skip
    (entry,) = fix.after
    assert entry.status not in ("biased", "error")


def test_a_trl_yaml_fix_says_what_a_project_script_needs(tmp_path: Path) -> None:
    """The launcher line runs TRL's own script; the summary names the patch a project's own
    script that reads the YAML needs, and that TRL before 0.19 drops the kl block silently."""
    path = tmp_path / "grpo.yaml"
    path.write_text("beta: 0.04\nlearning_rate: 1.0e-6\n")
    fix = fix_file(path, versions={"trl": "0.18.0"})
    assert fix.problems == [] and fix.changed, fix.problems
    lines = summary(fix)
    assert any("run it with the kl-patches launcher: kl-patches trl grpo" in ln for ln in lines)
    assert any("kl_patches.trl.apply(...)" in ln and "0.19" in ln for ln in lines), lines
    assert "beta: 0.04" in fix.new_text  # kept: a run without the patch keeps its own KL
