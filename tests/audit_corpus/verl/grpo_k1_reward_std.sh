#!/bin/bash
# k1 in the reward with GRPO's default std normalisation: the KL is divided by each group's
# reward std (verl.std_scaled_kl), on-policy.
python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo algorithm.use_kl_in_reward=True \
    algorithm.kl_penalty=k1 algorithm.kl_ctrl.kl_coef=0.002 \
    data.train_batch_size=256 actor_rollout_ref.actor.ppo_mini_batch_size=256
