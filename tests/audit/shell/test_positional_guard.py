"""A launch guarded by a script argument (``NODE_RANK=$1``, then ``if [ "$NODE_RANK" = 0 ]``),
the shape of multi-node launch scripts started once per node with the node's rank: the audit
does not know the arguments, so the test is read both ways, like a scheduler's variable, and
the launch is reported with a note naming the argument. Before issue 33 the clean run's
reading (no arguments: the worker branch) found no launch at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches.audit import audit
from kl_patches.audit.shell import parse_script

SCRIPT = """#!/bin/bash
# Usage: bash run_qwen2_7b_grpo_2nodes.sh <node_rank>
set -x

NODE_RANK=$1
HEAD_ADDR=${HEAD_ADDR:-10.0.0.1}
export VLLM_ATTENTION_BACKEND=XFORMERS

if {test}; then
    ray start --head --port=6379 --dashboard-host=0.0.0.0
    sleep 30
    python3 -m verl.trainer.main_ppo \\
        algorithm.adv_estimator=grpo \\
        data.train_files=$HOME/data/gsm8k/train.parquet \\
        data.train_batch_size=256 \\
        actor_rollout_ref.model.path=Qwen/Qwen2-7B-Instruct \\
        actor_rollout_ref.actor.ppo_mini_batch_size=256 \\
        actor_rollout_ref.actor.use_kl_loss=True \\
        actor_rollout_ref.actor.kl_loss_coef=0.002 \\
        actor_rollout_ref.actor.kl_loss_type=low_var_kl \\
        actor_rollout_ref.rollout.n=5 \\
        algorithm.use_kl_in_reward=False \\
        trainer.nnodes=2 \\
        trainer.n_gpus_per_node=8
else
    ray start --address=${HEAD_ADDR}:6379 --block
fi
"""


@pytest.mark.parametrize(
    "test",
    [
        '[ "$NODE_RANK" = "0" ]',
        '[ "$NODE_RANK" == 0 ]',
        "[ $NODE_RANK -eq 0 ]",  # the empty word vanishes: [ -eq 0 ] fails in bash
        '[[ "$NODE_RANK" == "0" ]]',
        '[ "$1" = "0" ]',
    ],
)
def test_a_node_rank_argument_guard_reads_both_branches(tmp_path: Path, test: str) -> None:
    path = tmp_path / "run_qwen2_7b_grpo_2nodes.sh"
    path.write_text(SCRIPT.replace("{test}", test))
    (entry,) = audit(path, version="verl=0.9.1")
    assert entry.reading.config.placement == "loss"
    assert entry.reading.config.coef == pytest.approx(0.002)
    assert "branch_dependent" in {f.code for f in entry.findings}
    notes = [n for n in entry.notes if "argument $1" in n]
    assert notes and "both branches are read" in notes[0], entry.notes
    assert notes[0].startswith("line 9:")


def test_the_branches_are_labelled() -> None:
    script = parse_script(SCRIPT.replace("{test}", '[ "$NODE_RANK" = "0" ]'))
    by_head = {c.words[0] + " " + c.words[-1]: c.branch for c in script.commands if c.branch}
    assert by_head["python3 trainer.n_gpus_per_node=8"] == ("if@9=then",)
    assert by_head["ray --block"] == ("if@9=else",)


def test_a_case_on_an_argument_reads_every_arm() -> None:
    text = 'MODE=$1\ncase "$MODE" in\n  head) run head ;;\n  *) run worker ;;\nesac\n'
    script = parse_script(text)
    assert [c.words for c in script.commands] == [["run", "head"], ["run", "worker"]]
    assert any("case word depends on the script's argument $1" in n for n in script.notes)


@pytest.mark.parametrize(
    "text",
    [
        # a default: a run without arguments takes it, as bash does
        'N=${1:-0}\nif [ "$N" = 0 ]; then run head; else run worker; fi\n',
        # a usage guard: read as if the check passed (unchanged)
        'if [ -z "$1" ]; then echo "usage: $0 RANK"; exit 1; fi\nrun head\n',
        # an argument loop: no arguments, the body never runs (unchanged)
        'while [ -n "$1" ]; do case $1 in --x) X=$2; shift 2;; esac; done\nrun head\n',
    ],
)
def test_defaults_guards_and_argument_loops_keep_one_reading(text: str) -> None:
    script = parse_script(text)
    assert [c.words for c in script.commands if c.words[0] == "run"] == [["run", "head"]]
    assert not any("both branches are read" in n for n in script.notes)


def test_known_arguments_decide_the_test() -> None:
    text = 'f() { if [ "$1" = 0 ]; then run head; else run worker; fi; }\nf 0\n'
    script = parse_script(text)
    assert [c.words for c in script.commands if c.words[0] == "run"] == [["run", "head"]]


@pytest.mark.parametrize("loop", ["until", "while"])
def test_a_loop_on_an_argument_s_vanished_word_is_read_once(loop: str) -> None:
    # [ $N -eq 0 ] with N=$1 is [ -eq 0 ]: neither a clean-run decision nor a crash
    text = f"N=$1\n{loop} [ $N -eq 0 ]; do run x; break; done\nrun end\n"
    script = parse_script(text)
    runs = [c.words for c in script.commands if c.words[0] == "run"]
    assert runs == [["run", "x"], ["run", "end"]]
    assert any(f"{loop} loop body read once" in n for n in script.notes)
