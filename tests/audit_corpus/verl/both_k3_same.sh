#!/bin/bash
# Both switches on, same estimator (k3), same coefficient, per-sequence token sum in the loss:
# the reward side's score term plus the loss side's path-wise term is the reverse-KL gradient.
COEF=0.005
python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=rloo \
    algorithm.use_kl_in_reward=True algorithm.kl_penalty=k3 algorithm.kl_ctrl.kl_coef=$COEF \
    actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_type=k3 \
    actor_rollout_ref.actor.kl_loss_coef=$COEF \
    actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum \
    data.train_batch_size=128 actor_rollout_ref.actor.ppo_mini_batch_size=128
