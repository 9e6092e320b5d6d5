#!/bin/bash
# The paper's recommendation in verl, natively: k1 in the reward (summed per sequence by GRPO),
# no std normalisation, one update per batch (on-policy).
set -euo pipefail
KL_COEF=${KL_COEF:-0.001}
BATCH=512

python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    algorithm.use_kl_in_reward=True \
    algorithm.kl_penalty=kl \
    algorithm.kl_ctrl.type=fixed \
    algorithm.kl_ctrl.kl_coef=$KL_COEF \
    algorithm.norm_adv_by_std_in_grpo=False \
    data.train_batch_size=$BATCH \
    actor_rollout_ref.actor.ppo_mini_batch_size=$BATCH \
    actor_rollout_ref.actor.use_kl_loss=False \
    actor_rollout_ref.rollout.n=8 \
    trainer.experiment_name="k1_reward_$(date +%Y%m%d)" 2>&1 | tee verl_k1.log
