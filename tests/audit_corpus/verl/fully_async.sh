#!/bin/bash
# verl's fully asynchronous trainer with the KL in the loss: stale rollouts, no IS weight on it.
python3 -m verl.experimental.fully_async_policy.fully_async_main \
    algorithm.adv_estimator=grpo \
    actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_type=low_var_kl \
    data.train_batch_size=128 actor_rollout_ref.actor.ppo_mini_batch_size=128
