#!/bin/bash
# Both KL switches with different estimators and coefficients: k1 in the reward at 0.001 and k3
# in the loss at 0.01. The JSON config carries both sides and the verdict combines them.
python3 -m verl.trainer.main_ppo algorithm.adv_estimator=rloo \
    algorithm.use_kl_in_reward=True algorithm.kl_penalty=k1 algorithm.kl_ctrl.kl_coef=0.001 \
    actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_type=k3 \
    actor_rollout_ref.actor.kl_loss_coef=0.01 \
    actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum \
    data.train_batch_size=256 actor_rollout_ref.actor.ppo_mini_batch_size=256
