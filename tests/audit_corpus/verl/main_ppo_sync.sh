#!/bin/bash
# verl 0.8's synchronous entry point (replaced by main_ppo's v1 trainer in 0.9).
python3 -m verl.trainer.main_ppo_sync algorithm.adv_estimator=grpo \
    actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_type=k2 \
    actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum \
    data.train_batch_size=64 actor_rollout_ref.actor.ppo_mini_batch_size=64
