#!/bin/bash
# GDPO with KL in the reward: gdpo rebuilds scores from gdpo_reward_keys and never sees the
# KL-shaped token rewards, so the KL is silently dropped.
ray job submit --address="http://127.0.0.1:8265" --no-wait -- \
  python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=gdpo \
    algorithm.gdpo_reward_keys='[accuracy,format]' \
    algorithm.use_kl_in_reward=True \
    algorithm.kl_ctrl.kl_coef=0.001 \
    data.train_batch_size=256 \
    actor_rollout_ref.actor.ppo_mini_batch_size=256
