#!/bin/bash
# A project's own training script (not beside this file) that forwards OpenRLHF's flags: read
# as train_ppo_ray, with a finding naming the assumption.
python3 train_rl.py --algo.kl.init_coef 0.02 --algo.kl.estimator k3 --algo.kl.use_loss \
    --rollout.batch_size 64 --rollout.n_samples_per_prompt 8 --train.batch_size 512
