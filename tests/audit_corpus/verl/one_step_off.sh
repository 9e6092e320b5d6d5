#!/bin/bash
# verl's one-step-off-policy trainer: each batch comes from the policy one update behind, and
# its config switches rollout_correction.bypass_mode on.
python3 -m verl.experimental.one_step_off_policy.main_ppo \
    algorithm.adv_estimator=grpo \
    algorithm.use_kl_in_reward=True algorithm.kl_penalty=k1 \
    algorithm.norm_adv_by_std_in_grpo=False \
    data.train_batch_size=128 actor_rollout_ref.actor.ppo_mini_batch_size=128
