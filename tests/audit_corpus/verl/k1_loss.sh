#!/bin/bash
# k1 in the loss: its expected gradient is zero (the KL is on in name only).
python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo \
    actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_type=kl \
    actor_rollout_ref.actor.kl_loss_coef=0.01 \
    data.train_batch_size=64 actor_rollout_ref.actor.ppo_mini_batch_size=64
