#!/bin/bash
# The KL switch comes from a variable the script never sets: in a clean environment bash passes
# "actor_rollout_ref.actor.use_kl_loss=" and Hydra reads the empty value as false, so this GRPO
# run has no KL at all (not k3 in the loss).
kl_loss_type=low_var_kl
python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    algorithm.use_kl_in_reward=False \
    actor_rollout_ref.actor.use_kl_loss=${use_kl_loss} \
    actor_rollout_ref.actor.kl_loss_type=$kl_loss_type \
    actor_rollout_ref.actor.kl_loss_coef=0.001
