#!/bin/bash
# Multi-turn GRPO (v1 trainer, the default) with KL in the reward: only the final output of each
# trajectory gets an advantage, the KL of the earlier outputs is dropped.
PROJECT_DIR="$(pwd)"
CONFIG_PATH="$PROJECT_DIR/examples/sglang_multiturn/config"
python3 -m verl.trainer.main_ppo \
    --config-path="$CONFIG_PATH" \
    --config-name='gsm8k_multiturn_grpo' \
    algorithm.adv_estimator=grpo \
    algorithm.use_kl_in_reward=True \
    algorithm.kl_penalty=kl \
    actor_rollout_ref.rollout.multi_turn.enable=True \
    actor_rollout_ref.rollout.name=sglang \
    data.train_batch_size=256 \
    actor_rollout_ref.actor.ppo_mini_batch_size=256
