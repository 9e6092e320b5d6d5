"""The release a launch is read as when only its names say it (issue 33, ``version_source:
names``), and how a refused launch looks in the report.

The launches have the shapes of real files that lost their pin: an OpenRLHF Ray launch with
the flat flags of 0.10.1 and before (``--init_kl_coef``, ``--use_kl_loss``, ``--kl_estimator``,
``--use_kl_estimator_k3``), a verl launch with a key later releases removed
(``actor.fsdp_config.grad_offload``, verl 0.2's examples), an open-r1 style TRL recipe with a
field TRL 1.x removed (``max_prompt_length``). Each is read by the real adapters at every
recorded release; the expected ranges are computed from the recorded name sets
(:func:`releases_accepting`), not written down.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kl_patches.adapters.openrlhf import flagsets
from kl_patches.adapters.trl import fieldsets
from kl_patches.adapters.verl import keysets
from kl_patches.audit import AuditEntry, audit
from kl_patches.audit import versions as audit_versions
from kl_patches.audit.findings import VERSION_FROM_NAMES
from kl_patches.audit.names import release_ranges
from kl_patches.audit.report import render_plain
from kl_patches.cli.audit import main
from tests.audit.repo_files import make_repo as _repo

OPENRLHF_FLAT = """\
#!/bin/bash
set -x
ray job submit --address="http://127.0.0.1:8265" \\
   --runtime-env-json='{"working_dir": "/openrlhf"}' \\
   -- python3 -m openrlhf.cli.train_ppo_ray \\
   --ref_num_nodes 1 \\
   --actor_num_nodes 1 \\
   --advantage_estimator group_norm \\
   --n_samples_per_prompt 8 \\
   --rollout_batch_size 128 \\
   --train_batch_size 1024 \\
   --max_epochs 1 \\
   --init_kl_coef 1e-3 \\
   --use_kl_loss \\
   --kl_estimator k3
"""
"""OpenRLHF's GRPO example of 0.7-0.10 (k3 in the loss at 0.001), no pin near it."""

OPENRLHF_K3_SWITCH = """\
deepspeed --module openrlhf.cli.train_ppo_ray --init_kl_coef 0.01 --use_kl_loss \\
   --use_kl_estimator_k3 --advantage_estimator group_norm --n_samples_per_prompt 4
"""
"""The switch of 0.5.x-0.6.1 (``--use_kl_estimator_k3``): k3 in the loss at 0.01."""

VERL_V02 = """\
set -x
python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    actor_rollout_ref.actor.use_kl_loss=True \\
    actor_rollout_ref.actor.kl_loss_coef=0.001 \\
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \\
    actor_rollout_ref.actor.fsdp_config.grad_offload=False \\
    trainer.total_epochs=15 $@
"""
"""verl 0.2's GRPO example: ``grad_offload`` left the config after 0.3."""

TRL_OLD_RECIPE = """\
model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct
dataset_name: open-r1/OpenR1-Math-220k
beta: 0.04
max_prompt_length: 512
max_completion_length: 1024
num_generations: 8
"""
"""An open-r1 GRPO recipe with ``max_prompt_length`` (not a GRPOConfig field in TRL 1.16)."""


pytestmark = pytest.mark.usefixtures("nothing_installed")


def _one(path: Path, version: str | None = None) -> AuditEntry:
    (entry,) = audit(path, version=version)
    return entry


def _finding(entry: AuditEntry, code: str) -> tuple[str, str, str]:
    (found,) = [f for f in entry.findings if f.code == code]
    return found.severity, found.message, found.fix


def _kl(entry: AuditEntry) -> tuple[str | None, str, float]:
    c = entry.reading.config
    coef = c.coef if c.has_reward else c.loss_coef_value
    return (c.estimator if c.placement != "none" else None, c.placement, coef)


def test_flat_openrlhf_flags_are_read_as_the_newest_release_that_has_them(tmp_path: Path) -> None:
    entry = _one(_repo(tmp_path, {"run.sh": OPENRLHF_FLAT}) / "run.sh")
    flags = {"ref_num_nodes", "actor_num_nodes", "advantage_estimator", "n_samples_per_prompt",
             "rollout_batch_size", "train_batch_size", "max_epochs", "init_kl_coef",
             "use_kl_loss", "kl_estimator"}  # fmt: skip
    accepting = flagsets.releases_accepting(flags)
    assert accepting and "0.11.2" not in accepting
    assert (entry.library_version, entry.version_source) == (accepting[-1], "names")
    assert entry.version_where == f"{accepting[0]}-{accepting[-1]} accept every name"
    assert _kl(entry) == ("k3", "loss", pytest.approx(1e-3))
    severity, message, fix = _finding(entry, VERSION_FROM_NAMES)
    assert severity == "warning" and entry.status != "error" and not entry.refused
    assert "refused by openrlhf 0.11.2 (the newest tested release)" in message
    assert "--init_kl_coef -> --algo.kl.init_coef" in fix
    assert "--use_kl_loss -> --algo.kl.use_loss" in fix
    assert f"openrlhf=={accepting[-1]}" in fix


def test_the_old_k3_switch_selects_the_releases_before_its_removal(tmp_path: Path) -> None:
    entry = _one(_repo(tmp_path, {"run.sh": OPENRLHF_K3_SWITCH}) / "run.sh")
    accepting = flagsets.releases_accepting(
        {
            "init_kl_coef",
            "use_kl_loss",
            "use_kl_estimator_k3",
            "advantage_estimator",
            "n_samples_per_prompt",
        }
    )
    assert entry.library_version == accepting[-1] and entry.version_source == "names"
    assert _kl(entry) == ("k3", "loss", pytest.approx(0.01))
    assert (
        "--use_kl_estimator_k3 -> --algo.kl.estimator k3" in _finding(entry, VERSION_FROM_NAMES)[2]
    )


def test_the_installed_release_refusing_the_launch_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit_versions.metadata, "version", lambda name: "0.11.2")
    entry = _one(_repo(tmp_path, {"run.sh": OPENRLHF_FLAT}) / "run.sh")
    assert entry.version_source == "names" and _kl(entry) == ("k3", "loss", pytest.approx(1e-3))
    severity, message, _ = _finding(entry, VERSION_FROM_NAMES)
    assert severity == "error" and "refused by the installed openrlhf 0.11.2" in message
    assert entry.status == "error" and entry.refused


def test_a_pin_still_wins_over_the_names(tmp_path: Path) -> None:
    root = _repo(tmp_path, {"requirements.txt": "openrlhf==0.11.2\n", "run.sh": OPENRLHF_FLAT})
    entry = _one(root / "run.sh")
    assert (entry.library_version, entry.version_source) == ("0.11.2", "pin")
    assert VERSION_FROM_NAMES not in {f.code for f in entry.findings}
    assert entry.refused and entry.status == "error"


def test_a_name_no_release_has_selects_nothing(tmp_path: Path) -> None:
    text = "python3 -m openrlhf.cli.train_ppo_ray --init_kl_coef 0.01 --no_such_flag_anywhere\n"
    entry = _one(_repo(tmp_path, {"run.sh": text}) / "run.sh")
    assert flagsets.releases_accepting({"init_kl_coef", "no_such_flag_anywhere"}) == ()
    assert (entry.library_version, entry.version_source) == ("0.11.2", "newest")
    assert entry.refused


def test_a_removed_verl_key_selects_the_releases_that_had_it(tmp_path: Path) -> None:
    entry = _one(_repo(tmp_path, {"run.sh": VERL_V02}) / "run.sh")
    keys = {"algorithm.adv_estimator", "actor_rollout_ref.actor.use_kl_loss",
            "actor_rollout_ref.actor.kl_loss_coef", "actor_rollout_ref.actor.kl_loss_type",
            "actor_rollout_ref.actor.fsdp_config.grad_offload", "trainer.total_epochs"}  # fmt: skip
    accepting = keysets.releases_accepting(keys)
    assert accepting and "0.9.1" not in accepting
    assert (entry.library_version, entry.version_source) == (accepting[-1], "names")
    assert _kl(entry) == ("k3", "loss", pytest.approx(1e-3))
    assert "grad_offload" in _finding(entry, VERSION_FROM_NAMES)[1]


def test_a_removed_trl_field_selects_the_releases_that_had_it(tmp_path: Path) -> None:
    entry = _one(_repo(tmp_path, {"grpo.yaml": TRL_OLD_RECIPE}) / "grpo.yaml")
    # the reader refuses a key no TRL dataclass of the release declares (any class)
    names = {"model_name_or_path", "dataset_name", "beta", "max_prompt_length",
             "max_completion_length", "num_generations"} - fieldsets.TRAINING_ARGUMENTS  # fmt: skip
    accepting = fieldsets.data().releases_accepting(names)
    assert accepting and "1.16.0" not in accepting
    assert (entry.library_version, entry.version_source) == (accepting[-1], "names")
    assert _kl(entry) == ("k3", "loss", pytest.approx(0.04))


def test_release_ranges_name_each_run() -> None:
    releases = ("0.1", "0.2", "0.3", "0.4", "0.5")
    assert release_ranges(releases, ("0.1", "0.2", "0.4")) == "0.1-0.2, 0.4"
    assert release_ranges(releases, ("0.5",)) == "0.5"


# ----------------------------------------------------------------------------- the report
def test_a_refused_launch_looks_refused_in_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repo(tmp_path, {"run.sh": OPENRLHF_FLAT})
    entry = _one(root / "run.sh", version="openrlhf=0.11.2")
    assert entry.refused
    text = render_plain([entry])
    row = text.splitlines()[2]
    assert row.rstrip().endswith("REFUSED") and "not run (refused)" in row
    assert "REFUSED by the library" in text.splitlines()[-1]
    assert main(["--json", "--library-version", "openrlhf=0.11.2", str(root / "run.sh")]) == 0
    (t,) = json.loads(capsys.readouterr().out)["trainers"]
    assert t["refused"] is True and t["status"] == "error"
    healthy = _one(root / "run.sh", version="openrlhf=0.10.1")
    assert not healthy.refused and "REFUSED" not in render_plain([healthy])
