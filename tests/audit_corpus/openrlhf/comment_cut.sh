#!/bin/bash
# A commented-out flag inside a continued command: bash ends the command at the comment, so
# --algo.kl.use_loss below it never reaches OpenRLHF and the k3 estimator lands in the reward.
python3 -m openrlhf.cli.train_ppo_ray \
   --algo.advantage.estimator rloo \
   --rollout.n_samples_per_prompt 4 --rollout.batch_size 256 --train.batch_size 1024 \
   --algo.kl.estimator k3 \
   --algo.kl.init_coef 1e-3 \
   # --algo.advantage.no_std_norm \
   --algo.kl.use_loss
