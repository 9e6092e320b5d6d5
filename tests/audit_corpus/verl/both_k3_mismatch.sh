#!/bin/bash
# Both switches on with k3 and two different coefficients.
python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=rloo \
    algorithm.use_kl_in_reward=True algorithm.kl_penalty=low_var_kl algorithm.kl_ctrl.kl_coef=0.001 \
    actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_type=low_var_kl \
    actor_rollout_ref.actor.kl_loss_coef=0.01 \
    actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum \
    data.train_batch_size=128 actor_rollout_ref.actor.ppo_mini_batch_size=128
