#!/bin/bash
# The user asks for a k3 KL loss but sets the coefficient to 0: OpenRLHF then builds no
# reference model and there is no KL at all.
python3 -m openrlhf.cli.train_ppo_ray --algo.advantage.estimator group_norm \
   --rollout.n_samples_per_prompt 8 --rollout.batch_size 128 --train.batch_size 1024 \
   --algo.kl.use_loss --algo.kl.estimator k3 --algo.kl.init_coef 0
