#!/bin/bash
# Overrides built in bash arrays, as verl's current examples do: comments and blank lines inside
# the literal, quoted elements, an append, declare -a, and the count ${#A[@]}.
set -xeuo pipefail

DATA=(
    data.train_files="['/data/gsm8k/train.parquet']"   # a comment inside the array
    data.train_batch_size=512

    data.max_response_length=1024
)
declare -a ALGO=(
    algorithm.adv_estimator=rloo
    algorithm.use_kl_in_reward=True
    'algorithm.kl_penalty=k1'
)
ALGO+=( algorithm.kl_ctrl.kl_coef=0.005 )
ACTOR=(
    actor_rollout_ref.actor.use_kl_loss=False
    actor_rollout_ref.actor.ppo_mini_batch_size=512
)
echo "${#ALGO[@]} algorithm overrides"

python3 -m verl.trainer.main_ppo \
    "${DATA[@]}" \
    "${ALGO[@]}" \
    ${ACTOR[*]} \
    trainer.total_epochs=1
