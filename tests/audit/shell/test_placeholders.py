"""A SLURM template with ``VAR=<PLACEHOLDER>`` lines (the shape of cluster templates that ship
with launch recipes): bash reads ``<`` as a redirection (a syntax error at the end of the line),
so before issue 33 the audit gave up on the file. The placeholder is read as a value the audit
does not know: the launch is reported, every option carrying a placeholder is read at the
library's default and named in a ``template_placeholder`` finding with its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches.audit import audit
from kl_patches.audit.model import AuditEntry
from kl_patches.audit.shell import parse_script

TEMPLATE = """#!/bin/bash
#SBATCH --job-name=verl-grpo
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:8
#SBATCH --output=<LOG_DIR>/%x-%j.out

# ---- fill in before submitting ----
CONTAINER=<PATH_TO_SIF>
MODEL_PATH=<PATH_TO_MODEL>
DATA_DIR=<DATA_DIR>
KL_COEF={kl}

nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST")
nodes_array=($nodes)
head_node=${nodes_array[0]}
head_node_ip=$(srun --nodes=1 --ntasks=1 -w "$head_node" hostname --ip-address)

srun --nodes=1 --ntasks=1 -w "$head_node" \\
    apptainer exec --nv $CONTAINER ray start --head --node-ip-address="$head_node_ip" --block &
sleep 10

PYTHONUNBUFFERED=1 srun --overlap --nodes=1 --ntasks=1 -w "$head_node" \\
    apptainer exec --nv $CONTAINER python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_files=$DATA_DIR/gsm8k/train.parquet \\
    data.val_files=$DATA_DIR/gsm8k/test.parquet \\
    data.train_batch_size=256 \\
    actor_rollout_ref.model.path=$MODEL_PATH \\
    actor_rollout_ref.actor.ppo_mini_batch_size=256 \\
    actor_rollout_ref.actor.use_kl_loss=True \\
    actor_rollout_ref.actor.kl_loss_coef=$KL_COEF \\
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \\
    algorithm.use_kl_in_reward=False \\
    trainer.nnodes=$SLURM_NNODES \\
    trainer.n_gpus_per_node=8
"""


def findings(entry: AuditEntry, code: str) -> list[str]:
    return [f.message for f in entry.findings if f.code == code]


def test_a_slurm_template_is_read_with_its_placeholders_flagged(tmp_path: Path) -> None:
    path = tmp_path / "slurm_grpo.sbatch"
    path.write_text(TEMPLATE.replace("{kl}", "0.002"))
    (entry,) = audit(path, version="verl=0.9.1")
    assert entry.reading.config.placement == "loss"
    assert entry.reading.config.coef == pytest.approx(0.002)
    (message,) = findings(entry, "template_placeholder")
    assert "actor_rollout_ref.model.path comes from <PATH_TO_MODEL>" in message
    assert "line 10" in message
    assert "data.train_files comes from <DATA_DIR>" in message and "line 11" in message


def test_a_kl_placeholder_is_read_at_the_default_and_flagged(tmp_path: Path) -> None:
    path = tmp_path / "slurm_grpo.sbatch"
    path.write_text(TEMPLATE.replace("{kl}", "<KL_COEF>"))
    (entry,) = audit(path, version="verl=0.9.1")
    assert entry.reading.config.placement == "loss"
    assert entry.reading.config.coef == pytest.approx(0.001)  # verl's default kl_loss_coef
    (message,) = findings(entry, "template_placeholder")
    assert "actor_rollout_ref.actor.kl_loss_coef comes from <KL_COEF>" in message
    assert "line 12" in message
    assert not findings(entry, "unknown_value")  # said once, by the placeholder finding


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("A=<PATH>\nrun $A\n", "<PATH>"),
        ("A=<DATA_DIR>/train.parquet\nrun $A\n", "<DATA_DIR>/train.parquet"),
        ("run key=<VALUE> next\n", "key=<VALUE>"),
    ],
)
def test_a_placeholder_after_equals_is_one_unknown_word(text: str, value: str) -> None:
    script = parse_script(text)
    (cmd,) = script.commands
    assert cmd.words[1] == value and cmd.words[-1] != ""
    assert any("a template placeholder, line" in u for u in cmd.unknown[1])
    assert any("is a template placeholder" in n for n in script.notes)


@pytest.mark.parametrize(
    "text",
    [
        "run <input.txt >out.txt\n",  # redirections stay redirections
        "A=1 run <in\n",
        'A="<PATH>"\nrun $A\n',  # quoted: a literal value bash runs as is
    ],
)
def test_redirections_and_quoted_text_are_unchanged(text: str) -> None:
    script = parse_script(text)
    assert not any("template placeholder" in n for n in script.notes)
    assert all(not c.unknown for c in script.commands)


MOUNT_TEMPLATE = """#!/bin/bash
#SBATCH -p { partition }
#SBATCH --nodes=1

# project settings
OPENRLHF_PATH=<OPENRLHF_ROOT_PATH>
MOUNT="$OPENRLHF_PATH:/openrlhf,$HOME/.cache:/root/.cache"
IMAGE_NAME="nvcr.io/nvidia/pytorch:24.07-py3"

srun --overlap --nodes=1 --ntasks=1 --container-image="$IMAGE_NAME" \\
    --container-mounts="$MOUNT" \\
    python3 -m openrlhf.cli.train_ppo_ray \\
    --ref_num_nodes 1 \\
    --actor_num_nodes 1 \\
    --pretrain OpenRLHF/Llama-3-8b-sft-mixture \\
    --init_kl_coef 0.02
"""


def test_a_placeholder_outside_the_launch_still_marks_the_file(tmp_path: Path) -> None:
    path = tmp_path / "train_ppo_ray_slurm.sh"
    path.write_text(MOUNT_TEMPLATE)
    (entry,) = audit(path, version="openrlhf=0.10.1")
    assert entry.reading.config.placement == "reward"
    assert entry.reading.config.coef == pytest.approx(0.02)
    (finding,) = [f for f in entry.findings if f.code == "template_placeholder"]
    assert finding.severity == "info"
    assert "line 6: <OPENRLHF_ROOT_PATH> is a template placeholder" in finding.message
