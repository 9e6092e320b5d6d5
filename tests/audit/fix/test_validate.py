"""kl_patches.audit.fix.validate: each kind of fix goes through the parser it is written for.

kl-patches commands, Python expressions and pip commands are checked everywhere (core); the
native checks run the installed library's own parser, so each runs in that library's session
(``nox -s verl|trl|openrlhf`` run this file too); those tests are deselected where it is missing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches.audit import audit
from kl_patches.audit.fix import validate
from kl_patches.audit.fix.change import Change, ChangeSet
from kl_patches.audit.fix.validate import (
    NOT_INSTALLED,
    alternatives,
    change_set_label,
    check_changes,
    check_command,
    check_fix,
    check_native,
    check_pip,
    check_python,
    fix_label,
    kind_of,
)
from kl_patches.audit.model import AuditEntry
from kl_patches.cli import audit as cli_audit  # noqa: F401  registers the kl-patches command check
from kl_patches.cli import fix_commands

CORPUS = Path(__file__).resolve().parents[2] / "audit_corpus"


# ----------------------------------------------------------------------------- kl-patches
@pytest.mark.parametrize(
    "command",
    [
        "kl-patches verl --kl k1-in-reward --kl.coef 0.001 -- <your overrides>",
        "kl-patches verl --kl k1-in-reward --kl.coef 0.1 --kl.outside_std -- <your overrides>",
        "kl-patches openrlhf <your train_ppo_ray flags> --kl k1-in-reward --kl.coef 0.01",
        "python -m kl_patches.openrlhf --kl k3-in-both --kl.reward_shape sequence",
        "kl-patches trl grpo <your TRL flags> --scale_rewards none --kl k1-in-reward",
        "python -m kl_patches.trl rloo --config r.yaml --kl k1-in-reward",
        "kl-patches verdict k3-in-loss --kl.coef 0.1 --off-policy",
        "kl-patches audit --var X=VALUE run.sh",
    ],
)
def test_kl_patches_commands_its_parser_accepts(command: str) -> None:
    found = check_command(command)
    assert found.accepted is True, found.message
    assert kind_of(command) == "kl-patches"


@pytest.mark.parametrize(
    ("command", "why"),
    [
        # the issue's: no launcher name, no '--'
        ("kl-patches --kl k1-in-reward --kl.importance_weighting sequence", "no command"),
        ("kl-patches verl --kl k1-in-reward --kl.estimator k3 -- x=1", "--kl k1-in-reward sets"),
        ("kl-patches verl --kl k9-in-reward -- x=1", "k9"),
        ("kl-patches verl --kl k1-in-reward x=1", "unrecognized"),
        ("kl-patches openrlhf <flags> --kl.coef 0.1 --kl.nope 1", "nope"),
        ("kl-patches trl ppo --kl k1-in-reward", "trainer"),
        ("kl-patches trl grpo --kl k1-in-reward --kl.coef many", "coef"),
        ("kl-patches demo", "not a command a fix runs"),
    ],
)
def test_kl_patches_commands_its_parser_refuses(command: str, why: str) -> None:
    found = check_command(command)
    assert found.accepted is False
    assert why in found.message


def test_python_and_pip_fixes() -> None:
    assert check_python("KLConfig.parse('k1-in-reward', coef=0.04)").accepted is True
    unsloth = "kl_patches.adapters.trl.unsloth.apply(KLConfig.parse('k2-in-loss', coef=0.1))"
    assert check_python(unsloth).accepted is True
    assert check_python("KLConfig.parse('k1-in-reward', coef=-1)").accepted is False
    assert check_python("KLConfig.parse('k1-in-reward', cof=0.1)").accepted is False
    assert (
        check_python("kl_patches.adapters.trl.unsloth.nope(KLConfig.parse('none'))").accepted
        is False
    )
    assert check_python("os.system(KLConfig.parse('none'))").accepted is False
    assert check_pip("pip install trl==0.18.0").accepted is True
    assert check_pip("pip install trl=1").accepted is False
    assert [kind_of(a) for a in alternatives("a=1 or pip install x or KLConfig.parse('none')")] == [
        "native",
        "pip",
        "python",
    ]


# ----------------------------------------------------------------------------- not installed
def test_a_missing_library_is_never_claimed_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the library, the native fix is 'not checked (library not installed)', whatever
    it says; the kl-patches switch is still checked."""
    (entry,) = audit(str(CORPUS / "verl" / "grpo_k3_loss.sh"))
    monkeypatch.setitem(validate._MODULES, "verl", ("kl_patches_no_such_module",))
    found = check_native("verl", entry.fix_native)
    assert found.accepted is None and not found.checked and NOT_INSTALLED in found.message
    assert fix_label(entry) == NOT_INSTALLED
    assert [c.accepted for c in check_fix("verl", entry.fix_switch)] == [True]


def test_a_folder_named_after_the_library_is_not_an_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A vendored copy's folder in the working directory imports as a namespace package but
    is no installed release: the fix summary says "not checked", never "REFUSED by verl None"
    (what the round trip printed in simpleRL's checkout)."""
    (tmp_path / "verl" / "trainer" / "config").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(validate, "installed_version", lambda library: None)
    assert validate.installed("verl") is False
    entry, changes = _grpo_k3_plan_changes()
    assert validate.change_set_check(entry, changes) == NOT_INSTALLED


# ----------------------------------------------------------------------------- native
@pytest.mark.library("verl")
def test_verl_overrides_through_hydra_compose() -> None:
    good = check_native("verl", ["algorithm.use_kl_in_reward=True", "algorithm.kl_penalty=k1"])
    assert good.accepted is True, good.message
    assert check_native("verl", {"algorithm.kl_ctrl.kl_coef": "0.01"}).accepted is True
    bad = check_native("verl", "algorithm.no_such_key=1")
    assert bad.accepted is False and "algorithm.no_such_key" in bad.message
    assert check_fix("verl", "python -m verl.trainer.main_ppo <your overrides>")[0].accepted
    (entry,) = audit(str(CORPUS / "verl" / "grpo_k3_loss.sh"))
    assert fix_label(entry) == "native"


@pytest.mark.library("openrlhf")
def test_openrlhf_flags_through_train_ppo_rays_parser() -> None:
    good = check_native(
        "openrlhf", "--algo.kl.init_coef 0.01 --algo.kl.estimator k1 (remove --algo.kl.use_loss)"
    )
    assert good.accepted is True, good.message
    assert check_native("openrlhf", {"--algo.kl.use_loss": ""}).accepted is True
    old = check_native("openrlhf", "--init_kl_coef 0.01")  # the spelling before 0.10.2
    assert old.accepted is False and "--init_kl_coef" in old.message
    assert check_native("openrlhf", "(remove --no_such_flag)").accepted is False
    assert check_native("openrlhf", "--algo.kl.estimator k9").accepted is False


@pytest.mark.library("trl")
def test_trl_fields_through_trl_parser() -> None:
    good = check_native("trl", "beta=0.04 scale_rewards=none")
    assert good.accepted is True, good.message
    # the issue's: kl-patches keys in a TRL config exit 2 under `trl grpo`
    bad = check_native("trl", "kl_estimator=k1 kl_placement=reward kl_coef=0.04")
    assert bad.accepted is False and "kl_estimator" in bad.message
    assert check_native("trl", "beta=0.05", entry="RLOOTrainer").accepted is True
    assert check_fix("trl", "trl rloo --beta 0.05")[0].accepted is True
    refused = check_native("trl", "num_generations=1")  # GRPOConfig.__post_init__ refuses it
    assert refused.accepted is False and "generations" in refused.message
    (entry,) = audit(str(CORPUS / "trl" / "grpo_beta.yaml"))
    assert entry.fix_native == () and fix_label(entry) == "with kl-patches"


# ----------------------------------------------------------------------------- change sets
def test_a_change_set_that_needs_kl_patches_is_never_native() -> None:
    launcher = Change("entry_point", "hydra", "launcher", "kl-patches verl")
    assert change_set_label("verl", ChangeSet((launcher,), "with kl-patches")) == "with kl-patches"
    foreign = ChangeSet((Change("set", "trl", "beta", "0.1"),), "native")
    assert check_changes("verl", foreign).accepted is False


@pytest.mark.library("verl")
def test_a_change_set_through_verls_parser() -> None:
    good = ChangeSet(
        (
            Change("set", "hydra", "algorithm.use_kl_in_reward", "True"),
            Change("unset", "hydra", "actor_rollout_ref.actor.kl_loss_type"),
            Change("rename", "hydra", "algorithm.old_name", new_key="algorithm.kl_penalty"),
        ),
        "native",
    )
    assert change_set_label("verl", good) == "native"
    bad = ChangeSet((Change("set", "hydra", "algorithm.no_such_key", "1"),), "native")
    assert change_set_label("verl", bad) == "with kl-patches"


@pytest.mark.library("openrlhf")
def test_a_change_set_through_openrlhfs_parser() -> None:
    good = ChangeSet(
        (
            Change("set", "argparse", "--algo.kl.init_coef", "0.01"),
            Change("unset", "argparse", "--algo.kl.use_loss"),
        ),
        "native",
    )
    assert check_changes("openrlhf", good).accepted is True
    old = ChangeSet((Change("set", "argparse", "--init_kl_coef", "0.01"),), "native")
    assert check_changes("openrlhf", old).accepted is False


# ----------------------------------------------------------------------------- --fix summary
def _grpo_k3_plan_changes() -> tuple[AuditEntry, ChangeSet]:
    (entry,) = audit(str(CORPUS / "verl" / "grpo_k3_loss.sh"))
    changes = ChangeSet(
        (
            Change("set", "hydra", "algorithm.use_kl_in_reward", "True"),
            Change("set", "hydra", "actor_rollout_ref.actor.use_kl_loss", "False"),
        ),
        "native",
    )
    return entry, changes


def test_the_fix_summary_never_claims_a_parser_check_that_did_not_run() -> None:
    entry, changes = _grpo_k3_plan_changes()
    route = ChangeSet((Change("entry_point", "hydra", "launcher", "kl-patches verl"),),
                      "with kl-patches")  # fmt: skip
    assert validate.change_set_check(entry, route) == ""
    found = validate.change_set_check(entry, changes)
    if not validate.installed("verl"):
        assert found == NOT_INSTALLED
    else:
        assert found.startswith("accepted by verl ") or found.startswith("not checked (read as")


@pytest.mark.library("verl")
def test_the_fix_summary_reports_verls_parser() -> None:
    entry, changes = _grpo_k3_plan_changes()
    assert validate.change_set_check(entry, changes).startswith("accepted by verl ")
    bad = ChangeSet((Change("set", "hydra", "algorithm.no_such_key", "1"),), "native")
    refused = validate.change_set_check(entry, bad)
    assert refused.startswith("REFUSED by verl ") and "no_such_key" in refused


def test_without_the_cli_a_command_is_not_checked_rather_than_accepted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert fix_commands.check_command("kl-patches verdict k1-in-reward").accepted is True
    monkeypatch.setattr(validate, "_COMMAND_CHECK", [])
    found = check_command("kl-patches verdict k1-in-reward")
    assert found.accepted is None and found.message.startswith("not checked")
