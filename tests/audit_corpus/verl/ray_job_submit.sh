#!/bin/bash
# ray job submit: the launch after "--" runs on the cluster.
ray job submit --address="http://127.0.0.1:8265" --runtime-env-json='{"working_dir": "."}' \
    -- python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo \
    actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_type=k2 \
    actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum \
    data.train_batch_size=128 actor_rollout_ref.actor.ppo_mini_batch_size=128
