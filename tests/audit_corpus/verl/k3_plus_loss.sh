#!/bin/bash
# "k3+" straight-through in the loss: k3's value, k2's per-token gradient (partial gradient).
python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo \
    actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_type=k3+ \
    actor_rollout_ref.actor.kl_loss_coef=0.001 \
    data.train_batch_size=64 actor_rollout_ref.actor.ppo_mini_batch_size=64
