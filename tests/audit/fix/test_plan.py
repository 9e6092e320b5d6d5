"""The fix model: change sets whose payload re-audit is clean, merged per launch."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kl_patches.audit.fix.change import Change
from kl_patches.audit.fix.plan import blocking, merge, plan_launch
from kl_patches.audit.inputs import inputs_from_file
from kl_patches.audit.run import audit_input
from tests.audit.fix.conftest import CASES, OPENRLHF_SHELL, VERL_SHELL


def _plans(tmp_path: Path, name: str, text: str, versions: dict[str, str] | None = None):
    path = tmp_path / name
    path.write_text(text)
    out = []
    for inp in inputs_from_file(path):
        entry = audit_input(inp, versions=versions)
        out.append(plan_launch(inp, entry, versions))
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_biased_launch_gets_a_change_set_with_a_clean_reaudit(
    tmp_path: Path, case: str
) -> None:
    name, text = CASES[case]
    (plan,) = _plans(tmp_path, name, text)
    assert blocking(plan.entry), "the synthetic launch should need a fix"
    assert plan.changes is not None, plan.why
    assert plan.after is not None
    assert not blocking(plan.after, plan.allowed)
    assert plan.after.status not in ("biased", "error")


def test_verl_grpo_fix_converges_on_the_std_switch(tmp_path: Path) -> None:
    (plan,) = _plans(tmp_path, "run.sh", VERL_SHELL)
    assert plan.changes is not None and plan.changes.label == "native"
    keys = {c.key: c.value for c in plan.changes.changes}
    assert keys["algorithm.norm_adv_by_std_in_grpo"] == "False"
    assert keys["algorithm.use_kl_in_reward"] == "True"
    assert keys["actor_rollout_ref.actor.use_kl_loss"] == "False"
    assert keys["algorithm.kl_ctrl.kl_coef"] == "0.002"  # the launch's own coefficient


def test_trl_grpo_is_labelled_with_kl_patches(tmp_path: Path) -> None:
    (plan,) = _plans(tmp_path, *CASES["trl-shell"])
    assert plan.changes is not None and plan.changes.label == "with kl-patches"
    assert any(c.action == "entry_point" for c in plan.changes.changes)


@pytest.mark.parametrize(
    ("version", "unscaled"),
    [("0.18.0", "false"), ("0.21.0", "false"), ("0.22.0", "none"), ("1.16.0", "none")],
)
def test_trl_grpo_route_writes_scale_rewards_as_the_release_types_it(
    tmp_path: Path, version: str, unscaled: str
) -> None:
    """0.18 included (the patch runs the KL as a reward function there too), with
    ``scale_rewards`` off in the release's own type: a bool up to 0.21, a string from 0.22."""
    (plan,) = _plans(tmp_path, *CASES["trl-shell"], versions={"trl": version})
    assert plan.changes is not None, plan.why
    assert any(c.action == "entry_point" for c in plan.changes.changes)
    keys = {c.key: c.value for c in plan.changes.changes}
    assert keys["scale_rewards"] == unscaled
    assert plan.after is not None and plan.after.status not in ("biased", "error")


@pytest.mark.parametrize(("version", "beta"), [("0.18.0", None), ("0.19.0", "0.0")])
def test_a_trl_yaml_keeps_its_beta_where_trl_drops_the_kl_block_silently(
    tmp_path: Path, version: str, beta: str | None
) -> None:
    """Before 0.19 TrlParser drops unknown config keys: a run of the fixed YAML without
    kl-patches loses the ``kl`` block silently, so ``beta`` stays (that run keeps the file's own
    KL); from 0.19 it refuses the key, so ``beta: 0.0`` is safe. Re-audit clean in both."""
    text = "beta: 0.04\nlearning_rate: 1.0e-6\n"
    (plan,) = _plans(tmp_path, "grpo.yaml", text, versions={"trl": version})
    assert plan.changes is not None, plan.why
    keys = {c.key: c.value for c in plan.changes.changes}
    assert keys["kl.name"] == "k1-in-reward" and keys.get("beta") == beta
    assert plan.after is not None and plan.after.status not in ("biased", "error")


def test_a_launch_without_kl_keeps_none(tmp_path: Path) -> None:
    text = VERL_SHELL.replace("use_kl_loss=True", "use_kl_loss=False").replace(
        "    actor_rollout_ref.actor.kl_loss_coef=$kl_coef \\\n", ""
    )
    (plan,) = _plans(tmp_path, "run.sh", text)
    assert plan.changes is None
    assert "no KL" in plan.why or "nothing" in plan.why


def test_a_coefficient_under_switched_off_placements_turns_k1_in_reward_on(tmp_path: Path) -> None:
    text = VERL_SHELL.replace("use_kl_loss=True", "use_kl_loss=False")
    (plan,) = _plans(tmp_path, "run.sh", text)
    assert plan.changes is not None, plan.why
    keys = {c.key: c.value for c in plan.changes.changes}
    assert keys["algorithm.use_kl_in_reward"] == "True"
    assert keys["algorithm.kl_ctrl.kl_coef"] == "0.002"
    assert plan.after is not None and plan.after.kl_on


def test_merge_keeps_one_change_per_key_the_later_wins() -> None:
    a = [Change("set", "hydra", "x", "1"), Change("set", "hydra", "y", "1")]
    b = [Change("set", "hydra", "x", "2")]
    out = merge(a, b)
    assert [(c.key, c.value) for c in out] == [("y", "1"), ("x", "2")]


REFUSED_VERL = VERL_SHELL.replace(
    "    trainer.total_epochs", "    my_project.reward_style=fancy \\\n    trainer.total_epochs"
)
"""The synthetic verl GRPO launch with a project key the release's config lacks."""


def test_a_refused_launch_still_gets_its_kl_fix_and_the_refusal_as_a_choice(
    tmp_path: Path,
) -> None:
    (plan,) = _plans(tmp_path, "run.sh", REFUSED_VERL)
    assert "verl.key_rejected" in {f.code for f in plan.entry.findings}
    assert plan.changes is not None and plan.changes.label == "native", plan.why
    keys = {c.key: c.value for c in plan.changes.changes}
    assert keys["algorithm.use_kl_in_reward"] == "True"
    assert keys["actor_rollout_ref.actor.use_kl_loss"] == "False"
    assert "my_project.reward_style" not in keys  # the user's key is not touched
    (choice,) = [u for u in plan.changes.user_choices if "my_project.reward_style" in u]
    assert "rename or delete" in choice
    assert plan.after is not None
    assert (plan.after.reading.config.estimator, plan.after.reading.config.placement) == (
        "k1",
        "reward",
    )
    assert "verl.key_rejected" in {f.code for f in plan.after.findings}  # still the user's
    assert not blocking(plan.after, plan.allowed)
    assert blocking(plan.after)  # not clean until the user settles the refusal


def test_a_refused_launch_whose_kl_is_clean_gets_no_kl_change(tmp_path: Path) -> None:
    clean = REFUSED_VERL.replace("use_kl_loss=True", "use_kl_loss=False").replace(
        "    algorithm.adv_estimator=grpo \\\n",
        "    algorithm.adv_estimator=grpo \\\n    algorithm.use_kl_in_reward=True \\\n"
        "    algorithm.norm_adv_by_std_in_grpo=False \\\n    algorithm.kl_ctrl.kl_coef=0.002 \\\n",
    )
    (plan,) = _plans(tmp_path, "run.sh", clean)
    assert plan.entry.reading.config.placement == "reward"
    assert plan.changes is None  # no KL change, and no switch of launcher to dodge the refusal
    assert plan.why.startswith("the KL needs no change") and "my_project.reward_style" in plan.why


def test_a_biased_verdict_under_a_refusal_still_blocks(tmp_path: Path) -> None:
    (plan,) = _plans(tmp_path, "run.sh", REFUSED_VERL)
    entry = plan.entry
    assert entry.status == "error" and not entry.verdict.unbiased
    codes = [f.code for f in blocking(entry, frozenset({"verl.key_rejected"}))]
    assert codes and "verl.key_rejected" not in codes


def test_openrlhf_flags_of_an_older_release_are_renamed_before_the_kl_fix(
    tmp_path: Path,
) -> None:
    text = OPENRLHF_SHELL.replace(
        "   --advantage_estimator group_norm", "   --advantage_estimator group_norm \\\n"
        "   --my_fork_flag 3"
    )  # fmt: skip
    (plan,) = _plans(tmp_path, "run.sh", text, versions={"openrlhf": "0.11.2"})
    assert plan.changes is not None, plan.why
    renames = {c.key: c.new_key for c in plan.changes.changes if c.action == "rename"}
    assert renames["--kl_estimator"] == "--algo.kl.estimator"
    assert renames["--init_kl_coef"] == "--algo.kl.init_coef"
    sets = {c.key: c.value for c in plan.changes.changes if c.action == "set"}
    assert sets.get("--algo.kl.estimator") == "k1"  # the fix wins over the renamed k3
    assert any("--my_fork_flag" in u for u in plan.changes.user_choices)
    assert plan.after is not None and plan.after.reading.config.placement == "reward"


_UNSLOTH_DAPO = (
    "import unsloth\n"
    "from trl import GRPOConfig, GRPOTrainer\n"
    "n = len(open('f').read())\n"
    "args = GRPOConfig(output_dir='o', loss_type={loss}, max_completion_length=n)\n"
    "GRPOTrainer(model='m', args=args, reward_funcs=[])\n"
)


def test_an_unsloth_launch_without_kl_needs_no_fix(tmp_path: Path) -> None:
    """unsloth's beta is 0.0 under loss_type dapo: no KL runs, so unsloth's own loss and a
    run-time max_completion_length do not concern a KL fix."""
    (plan,) = _plans(tmp_path, "train.py", _UNSLOTH_DAPO.format(loss="'dapo'"))
    assert not plan.entry.kl_on
    assert {"trl.unsloth_loss", "trl.unresolved_settings"} <= {f.code for f in plan.entry.findings}
    assert plan.changes is None and plan.why.startswith("no KL, and none meant"), plan.why


def test_an_unsloth_launch_whose_kl_switch_is_computed_is_not_called_kl_free(
    tmp_path: Path,
) -> None:
    """A loss_type the audit cannot compute may turn unsloth's default beta on."""
    (plan,) = _plans(tmp_path, "train.py", _UNSLOTH_DAPO.format(loss="n and 'dapo'"))
    assert not plan.why.startswith("no KL"), plan.why


def test_an_unsloth_grpo_script_with_kl_gets_unsloths_own_patch(tmp_path: Path) -> None:
    """Not the kl_patches.trl route (it refuses unsloth's generated trainer): unsloth's own
    loss-side patch, k2 on the sequence log-ratio, with beta set to what it runs."""
    text = _UNSLOTH_DAPO.format(loss="'bnpo'").replace("n = len(open('f').read())\n", "n = 64\n")
    (plan,) = _plans(tmp_path, "train.py", text)
    assert plan.entry.kl_on and plan.changes is not None, plan.why
    assert plan.changes.label == "with kl-patches"
    (entry_point,) = [c for c in plan.changes.changes if c.action == "entry_point"]
    assert entry_point.value is not None
    assert entry_point.value.startswith("kl_patches.adapters.trl.unsloth --kl k2-in-loss")
    assert not any("kl_patches.trl " in (c.value or "") for c in plan.changes.changes)
    sets = {c.key: c.value for c in plan.changes.changes if c.action == "set"}
    assert sets["beta"] == f"{plan.entry.reading.config.loss_coef_value:g}"


def test_an_unsloth_grpo_shell_launch_keeps_no_kl_patches_route(tmp_path: Path) -> None:
    """From a shell launch the patch cannot be written into the script: no route."""
    from kl_patches.adapters.trl import fix as trl_fix

    text = _UNSLOTH_DAPO.format(loss="'bnpo'").replace("n = len(open('f').read())\n", "n = 64\n")
    path = tmp_path / "train.py"
    path.write_text(text)
    (inp,) = inputs_from_file(path)
    entry = audit_input(inp)
    shell = dataclasses.replace(inp, kind="shell")
    assert trl_fix.route_refusal(entry, shell) is not None
    assert trl_fix.patched(entry, shell, 0.001) == ([], None)


def test_a_field_transformers_dropped_is_renamed_to_its_successor(tmp_path: Path) -> None:
    """transformers 5 dropped warmup_ratio (warmup_steps below 1 is a ratio): renamed, value
    kept; a launch that sets both keeps the refusal for the user."""
    text = (
        "from trl import GRPOConfig, GRPOTrainer\n"
        "args = GRPOConfig(output_dir='o', beta=0.0, warmup_ratio=0.05{extra})\n"
        "GRPOTrainer(model='m', args=args, reward_funcs=[])\n"
    )
    versions = {"trl": "1.16.0"}
    (plan,) = _plans(tmp_path, "a.py", text.format(extra=""), versions)
    (refused,) = [f for f in plan.entry.findings if f.code == "trl.field_rejected"]
    assert "Rename warmup_ratio -> warmup_steps" in refused.message
    assert plan.changes is not None, plan.why
    (rename,) = [c for c in plan.changes.changes if c.action == "rename"]
    assert (rename.key, rename.new_key) == ("warmup_ratio", "warmup_steps")
    (plan,) = _plans(tmp_path, "b.py", text.format(extra=", warmup_steps=10"), versions)
    changes = plan.changes.changes if plan.changes is not None else ()
    assert not any(c.action == "rename" for c in changes)


@pytest.mark.parametrize(
    ("version", "flag"), [("0.18.0", "use_liger_loss"), ("1.10.0", "use_liger_kernel")]
)
def test_trl_route_switches_the_fused_liger_loss_off(
    tmp_path: Path, version: str, flag: str
) -> None:
    """The fused Liger loss holds its own k3 from construction, so the patch refuses it on
    every route (legacy.check, hooks.validate): the kl-patches change set switches it off
    rather than writing a file the launcher then stops on."""
    text = f"beta: 0.04\n{flag}: true\nlearning_rate: 1.0e-6\n"
    (plan,) = _plans(tmp_path, "grpo.yaml", text, versions={"trl": version})
    assert plan.changes is not None, plan.why
    keys = {c.key: c.value for c in plan.changes.changes}
    assert keys[flag] == "false" and keys["kl.name"] == "k1-in-reward"
    assert plan.after is not None and plan.after.status not in ("biased", "error")
