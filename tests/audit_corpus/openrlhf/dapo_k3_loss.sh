#!/bin/bash
# DAPO-style group_norm with k3 in the loss (the GRPO convention), on-policy.
python3 -m openrlhf.cli.train_ppo_ray \
   --algo.advantage.estimator group_norm \
   --rollout.n_samples_per_prompt 16 --rollout.batch_size 64 --train.batch_size 1024 \
   --algo.kl.use_loss --algo.kl.estimator k3 --algo.kl.init_coef 1e-3 \
   --actor.loss_agg_mode token-mean
