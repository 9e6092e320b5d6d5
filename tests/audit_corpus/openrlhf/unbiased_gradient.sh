#!/bin/bash
# --algo.kl.unbiased_gradient (0.11.2): importance-weighted k3 in the loss.
python3 -m openrlhf.cli.train_ppo_ray --algo.advantage.estimator rloo \
   --rollout.n_samples_per_prompt 4 --rollout.batch_size 256 --train.batch_size 1024 \
   --algo.kl.use_loss --algo.kl.estimator k3 --algo.kl.unbiased_gradient \
   --algo.kl.init_coef 0.001
