#!/bin/bash
# KL-Cov: a penalty on high-covariance tokens against the old policy, named "kl" but not the
# reference KL. The reference KL here is k1 in the reward.
python3 -m verl.trainer.main_ppo algorithm.adv_estimator=rloo \
    algorithm.use_kl_in_reward=True algorithm.kl_penalty=k1 \
    actor_rollout_ref.actor.policy_loss.loss_mode=kl_cov \
    actor_rollout_ref.actor.policy_loss.kl_cov_ratio=0.002 \
    actor_rollout_ref.actor.policy_loss.ppo_kl_coef=1.0
